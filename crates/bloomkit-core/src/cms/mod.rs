//! RedisBloom's Count-Min Sketch (`CMS.*`, `CMSk-TYPE`).
