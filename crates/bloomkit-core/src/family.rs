//! Every family bloomkit serves, in one list ([`KINDS`]): its name, the
//! data type's name `TYPE` answers, the command that describes a key, and
//! how a key moves between servers. The module's families, the client's
//! transfers, the CLI and the test suites derive from it, and tests fail
//! when one of them misses a family: a new family is its two folders and
//! one entry here.

use crate::common::value::FamilyValue;

/// How a key of a family moves between servers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Moves {
    /// In chunks of at most [`crate::common::MAX_CHUNK`] bytes with the
    /// family's `SCANDUMP` and `LOADCHUNK` (RedisBloom's way for BF and
    /// CF): any size, without the server's proto-max-bulk-len in the way.
    Chunks,
    /// Whole, with `DUMP` and `RESTORE` (small, self-contained values).
    Whole,
}

/// One family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Kind {
    /// The family's folder in every crate (`crates/bloomkit-core/src/<folder>`,
    /// `crates/bloomkit-module/src/<folder>`), the start of its test
    /// files' names, and its name in `INFO bf`'s defrag rows.
    pub folder: &'static str,
    /// The commands' prefix (`BF` for `BF.ADD`); valkey-bloom's are `BF`.
    pub prefix: &'static str,
    /// What to call a key of it in messages, after "a" or "an" ([`Kind::a`]).
    pub name: &'static str,
    /// The data type's name, as `TYPE` answers it.
    pub type_name: &'static str,
    /// The command that describes one.
    pub info_command: &'static str,
    pub moves: Moves,
}

impl Kind {
    /// "a Bloom filter", "an expandable filter (XF)".
    pub fn a(&self) -> String {
        let article = if self.name.starts_with(['a', 'e', 'i', 'o', 'u']) { "an" } else { "a" };
        format!("{article} {}", self.name)
    }
}

pub const BF: Kind = Kind {
    folder: "bf",
    prefix: "BF",
    name: "Bloom filter",
    type_name: <crate::bf::Chain as FamilyValue>::TYPE_NAME,
    info_command: "BF.INFO",
    moves: Moves::Chunks,
};
pub const CF: Kind = Kind {
    folder: "cf",
    prefix: "CF",
    name: "cuckoo filter",
    type_name: <crate::cf::CuckooFilter as FamilyValue>::TYPE_NAME,
    info_command: "CF.INFO",
    moves: Moves::Chunks,
};
pub const APBF: Kind = Kind {
    folder: "apbf",
    prefix: "APBF",
    name: "sliding-window filter (APBF)",
    type_name: <crate::apbf::Apbf as FamilyValue>::TYPE_NAME,
    info_command: "APBF.INFO",
    moves: Moves::Chunks,
};
pub const VBLOOM: Kind = Kind {
    folder: "vbloom",
    prefix: "BF",
    name: "valkey-bloom filter",
    type_name: <crate::vbloom::Object as FamilyValue>::TYPE_NAME,
    info_command: "BF.INFO",
    moves: Moves::Whole,
};
pub const CMS: Kind = Kind {
    folder: "cms",
    prefix: "CMS",
    name: "Count-Min Sketch",
    type_name: <crate::cms::CountMinSketch as FamilyValue>::TYPE_NAME,
    info_command: "CMS.INFO",
    moves: Moves::Whole,
};
pub const TOPK: Kind = Kind {
    folder: "topk",
    prefix: "TOPK",
    name: "Top-K",
    type_name: <crate::topk::TopK as FamilyValue>::TYPE_NAME,
    info_command: "TOPK.INFO",
    moves: Moves::Whole,
};
pub const TDIGEST: Kind = Kind {
    folder: "tdigest",
    prefix: "TDIGEST",
    name: "t-digest",
    type_name: <crate::tdigest::TDigest as FamilyValue>::TYPE_NAME,
    info_command: "TDIGEST.INFO",
    moves: Moves::Whole,
};
pub const XF: Kind = Kind {
    folder: "xf",
    prefix: "XF",
    name: "expandable filter (XF)",
    type_name: <crate::xf::XfFilter as FamilyValue>::TYPE_NAME,
    info_command: "XF.INFO",
    moves: Moves::Chunks,
};

/// Every family, in the order the module registers them.
pub const KINDS: [Kind; 8] = [BF, CF, APBF, VBLOOM, CMS, TOPK, TDIGEST, XF];

/// The family whose data type is `type_name`, if bloomkit serves it.
pub fn by_type_name(type_name: &str) -> Option<&'static Kind> {
    KINDS.iter().find(|k| k.type_name == type_name)
}

/// Where the family whose data type is `type_name` stands in [`KINDS`]; a
/// compile error where it is evaluated as a constant for a type that is in
/// no entry (the module's registry of data types is indexed by it).
pub const fn index_of(type_name: &str) -> usize {
    let mut i = 0;
    while i < KINDS.len() {
        if same_name(KINDS[i].type_name, type_name) {
            return i;
        }
        i += 1;
    }
    panic!("a data type that is in no entry of family::KINDS")
}

/// Whether two names are the same, where the compiler can check it
/// (`const` assertions that a family registers the type its entry names).
pub const fn same_name(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_type_name_is_nine_characters_and_names_one_family() {
        for k in KINDS {
            assert_eq!(k.type_name.len(), 9, "{k:?}: the server requires 9 characters");
            assert_eq!(by_type_name(k.type_name), Some(&k));
            assert!(k.info_command.starts_with(k.prefix), "{k:?}");
        }
        assert!(same_name(XF.type_name, "bkit-xflt") && !same_name(XF.type_name, CF.type_name));
        assert_eq!(XF.a(), "an expandable filter (XF)");
        assert_eq!(BF.a(), "a Bloom filter");
        assert_eq!(index_of(XF.type_name), KINDS.len() - 1);
        for k in KINDS {
            let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src").join(k.folder);
            assert!(src.is_dir(), "{k:?}: no folder {}", src.display());
        }
    }
}
