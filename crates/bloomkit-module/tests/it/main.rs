//! The module crate's integration tests, one program (ripgrep's layout):
//! each file here is a module, run as `cargo test -p <crate> --test it [filter]`.
//! Support modules shared by several files are declared once, here.

mod cf_support;
mod topk_support;
mod xf_support;

mod apbf_commands;
mod apbf_hostile;
mod apbf_persistence;
mod bf_commands;
mod bf_differential;
mod bf_hostile;
mod bf_persistence;
mod cf_differential;
mod cf_hostile;
mod cf_persistence;
mod cf_server;
mod claims;
mod cluster_keys;
mod cms_cell_size;
mod cms_defrag;
mod cms_differential;
mod cms_hostile;
mod cms_persistence;
mod cms_server;
mod command_docs;
mod command_info;
mod config_levels;
mod defrag;
mod families;
mod info_counts;
mod maxmemory;
mod memory;
mod readme_names;
mod redisbloom8;
mod redisbloom_flow;
mod reliability;
mod server_states;
mod servers;
mod settings;
mod strict_loading;
mod tdigest_differential;
mod tdigest_hostile;
mod tdigest_persistence;
mod tdigest_server;
mod topk_differential;
mod topk_hostile;
mod topk_persistence;
mod topk_server;
mod vbloom_compat;
mod vbloom_data;
mod vbloom_persistence;
mod xf_commands;
mod xf_hostile;
mod xf_persistence;
mod xf_secrets;
