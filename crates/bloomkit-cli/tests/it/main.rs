//! The cli crate's integration tests, one program (ripgrep's layout):
//! each file here is a module, run as `cargo test -p <crate> --test it [filter]`.
//! Support modules shared by several files are declared once, here.

mod cli;
mod cluster;
mod credentials;
mod frictions;
mod interrupt;
mod memory;
mod migration;
mod second_round;
mod sizing;
mod ttl;

/// What a run of the CLI wrote to its error stream, as text.
fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}
