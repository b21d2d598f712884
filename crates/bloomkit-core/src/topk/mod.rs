//! RedisBloom's Top-K, a HeavyKeeper (`TOPK.*`, `TopK-TYPE`).
