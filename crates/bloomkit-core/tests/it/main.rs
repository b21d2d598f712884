//! The core crate's integration tests, one program (ripgrep's layout):
//! each file here is a module, run as `cargo test -p bloomkit-core --test it [filter]`.

mod apbf;
mod bitmap_layouts;
mod cms_cell_size;
mod codecs;
mod cuckoo;
mod cuckoo_false_positive_rate;
mod false_positive_rate;
mod guava_vectors;
mod layout;
mod redisbloom_vectors;
mod round_trip;
mod valkey_bloom;
mod xf;
