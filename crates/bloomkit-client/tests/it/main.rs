//! The client crate's integration tests, one program (ripgrep's layout):
//! each file here is a module, run as `cargo test -p <crate> --test it [filter]`.
//! Support modules shared by several files are declared once, here.

mod common;

mod api;
mod batches;
mod bitmap;
mod bitmap_layouts;
mod cluster;
mod conformance;
mod cuckoo;
mod errors;
mod examples;
mod guava_files;
mod moving;
mod transfer;
mod window;
mod xf;
