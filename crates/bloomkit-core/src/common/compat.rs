//! Whose behaviour the module answers with (`bf.compat`): the validation,
//! limits, replies and error texts of RedisBloom 2.8.2 or of RedisBloom 8,
//! or valkey-bloom 1.0's dialect of `BF.*`.
//!
//! Between the two RedisBloom levels data formats are the same; only what a
//! client reads in replies to invalid input (and a few limits) differs.
//! Under `valkey-bloom`, new Bloom filters are valkey-bloom's own type
//! (`bloomfltr`) and `BF.*` is registered, answered and replicated as
//! valkey-bloom does; keys of RedisBloom's type and the other families
//! answer at the server's default RedisBloom level (8 on Redis 8, else 2.8).

/// A compatibility level, as `bf.compat` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compat {
    /// RedisBloom 2.8.2, the release Redis Stack 7.x ships (`redisbloom-2.8`).
    RedisBloom28,
    /// RedisBloom 8, built into Redis 8 (`redisbloom-8`).
    RedisBloom8,
    /// Redis 8.12's RedisBloom (`redisbloom-8.12`): RedisBloom 8 with the
    /// Count-Min Sketch of PRs #1063/#1064/#1066 (`CELL_SIZE`, negative
    /// increments, encoding version 1). Everything else answers as
    /// `redisbloom-8`.
    RedisBloom812,
    /// valkey-bloom 1.0, the module Valkey ships (`valkey-bloom`). Chosen
    /// when the module loads: it decides how `BF.*` commands are registered.
    ValkeyBloom,
}

impl Compat {
    /// Every level, in the order `bf.compat` lists them.
    pub const ALL: [Compat; 4] =
        [Compat::RedisBloom28, Compat::RedisBloom8, Compat::RedisBloom812, Compat::ValkeyBloom];

    /// The value `bf.compat` takes for this level.
    pub fn name(self) -> &'static str {
        match self {
            Compat::RedisBloom28 => "redisbloom-2.8",
            Compat::RedisBloom8 => "redisbloom-8",
            Compat::RedisBloom812 => "redisbloom-8.12",
            Compat::ValkeyBloom => "valkey-bloom",
        }
    }

    pub fn from_name(name: &str) -> Option<Compat> {
        Compat::ALL.into_iter().find(|c| c.name().eq_ignore_ascii_case(name))
    }
}
