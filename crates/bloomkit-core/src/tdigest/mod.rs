//! RedisBloom's t-digest, the merging digest of t-digest-c (`TDIGEST.*`, `TDIS-TYPE`).
