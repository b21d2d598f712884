//! valkey-bloom's filters, type `bloomfltr`: loaded from its RDB files,
//! DUMP payloads and AOF (`BF.LOAD`), answering `BF.*` as valkey-bloom
//! does, saved back in its format. bloomkit never creates one: new filters
//! are RedisBloom's (`bf`).

pub mod commands;
pub mod data_type;
