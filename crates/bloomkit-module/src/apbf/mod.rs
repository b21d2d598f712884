//! `APBF.*`: sliding-window filters, type `bkit-apbf`.

pub mod commands;
pub mod data_type;
