//! Dump, restore and copy of every filter kind through the library, as a
//! program using bloomkit-client (not only the CLI) does them, with the
//! progress it reports.

use std::cell::Cell;

use bloomkit_client::transfer::{self, BitmapParams, Progress, Server};
use bloomkit_client::{Filter, Layout, Options, RedisFilter};
use bloomkit_testkit::{Module, Server as Kind, TestServer};

use crate::common;
use common::{connect, items, slices};

/// Counts what a transfer reports.
#[derive(Default)]
struct Counted {
    length: Cell<u64>,
    done: Cell<u64>,
}

impl Progress for Counted {
    fn set_length(&self, bytes: u64) {
        self.length.set(bytes);
    }
    fn inc(&self, bytes: u64) {
        self.done.set(self.done.get() + bytes);
    }
}

#[test]
fn every_kind_dumps_restores_and_copies_through_the_library() {
    let a = TestServer::start(Kind::Redis, &[Module::bloomkit()], &[]);
    let b = TestServer::start(Kind::Valkey, &[Module::bloomkit()], &[]);
    let url = |s: &TestServer| format!("redis://127.0.0.1:{}/", s.port);
    let mut c = a.conn();
    c.ok("BF.RESERVE bf 0.01 1000");
    c.ok("APBF.RESERVE window 0.01 1000 TIME 600");
    let added = items("item", 1500);
    c.call(
        &[&["BF.MADD", "bf"][..], &added.iter().map(|i| std::str::from_utf8(i).unwrap()).collect::<Vec<_>>()]
            .concat(),
    );
    c.call(
        &[
            &["APBF.MADD", "window"][..],
            &added.iter().map(|i| std::str::from_utf8(i).unwrap()).collect::<Vec<_>>(),
        ]
        .concat(),
    );
    let params = BitmapParams::guava(5000, 0.001);
    let mut bitmap =
        RedisFilter::new(connect(&a), Layout::bitmap("bitmap", Options::new(5000, 0.001)).unwrap());
    bitmap.add_many(&slices(&added)).unwrap();

    let mut from = Server::connect(&url(&a)).unwrap();
    let mut to = Server::connect(&url(&b)).unwrap();
    let mut d = b.conn();
    for (key, expected) in
        [("bf", "Bloom filter"), ("window", "sliding-window filter"), ("bitmap", "bitmap filter")]
    {
        // Dump to bytes, restore under another name on the same server.
        let progress = Counted::default();
        let mut file = Vec::new();
        let kind = transfer::dump_key(&mut from, key, Some(params), &mut file, &progress).unwrap();
        assert_eq!(kind, expected);
        assert!(progress.length.get() > 0 && progress.done.get() == progress.length.get(), "{key}: progress");
        let restored = format!("{key}-restored");
        let progress = Counted::default();
        assert_eq!(
            transfer::restore_file(&mut from, &restored, &file[..], false, &progress).unwrap(),
            expected
        );
        assert_eq!(progress.done.get(), progress.length.get(), "{key}: restore progress");
        if key == "bitmap" {
            assert_eq!(c.call(&["GET", key]), c.call(&["GET", &restored]));
        } else {
            assert_eq!(
                c.call(&["DEBUG", "DIGEST-VALUE", key]),
                c.call(&["DEBUG", "DIGEST-VALUE", &restored])
            );
        }
        // A second restore without replace is refused and changes nothing.
        let refused = transfer::restore_file(&mut from, &restored, &file[..], false, &()).unwrap_err();
        assert!(refused.to_string().contains("already exists"), "{refused}");
        // Copy to the other server.
        assert_eq!(transfer::copy_key(&mut from, &mut to, key, Some(params), false, &()).unwrap(), expected);
        if key == "bitmap" {
            assert_eq!(c.call(&["GET", key]), d.call(&["GET", key]));
        } else {
            assert_eq!(c.call(&["DEBUG", "DIGEST-VALUE", key]), d.call(&["DEBUG", "DIGEST-VALUE", key]));
        }
    }
    // No staging key is left behind, on success or refusal.
    assert!(c.cmd("KEYS *bloomkit-staging*").as_array().is_empty());
    assert!(d.cmd("KEYS *bloomkit-staging*").as_array().is_empty());
    // Errors are the library's typed errors.
    c.ok("HSET h f v");
    let e = transfer::dump_key(&mut from, "h", None, Vec::new(), &()).unwrap_err();
    assert!(e.to_string().contains("holds a hash"), "{e}");
    let e = transfer::dump_key(&mut from, "missing", None, Vec::new(), &()).unwrap_err();
    assert!(e.to_string().contains("does not exist"), "{e}");
    assert!(matches!(Server::connect("redis://127.0.0.1:1/"), Err(bloomkit_client::Error::Connection(_))));
}

/// Every bitmap layout copies between servers with its parameters in the
/// file: a Redisson filter arrives with its config hash (as its Java side
/// wrote it), a PHP one with its bits and hashes, and each answers as before.
#[test]
fn bitmaps_of_every_layout_copy_with_their_parameters() {
    use bloomkit_client::BitmapLayout;
    let a = TestServer::start(Kind::Redis, &[], &[]);
    let b = TestServer::start(Kind::Valkey, &[], &[]);
    let url = |s: &TestServer| format!("redis://127.0.0.1:{}/", s.port);
    let (mut from, mut to) = (Server::connect(&url(&a)).unwrap(), Server::connect(&url(&b)).unwrap());
    let added = items("layout", 800);
    let probes = items("absent", 5000);
    for layout in BitmapLayout::ALL {
        let key = format!("bm:{}", layout.name());
        let params = BitmapParams {
            layout,
            capacity: 1000,
            error_rate: 0.01,
            shape: (layout == BitmapLayout::PhpBkdr).then_some((20_000, 5)),
        };
        let mut source = RedisFilter::new(connect(&a), params.layout(&key).unwrap());
        source.add_many(&slices(&added)).unwrap();
        let before = source.contains_many(&slices(&probes)).unwrap();
        let kind = transfer::copy_key(&mut from, &mut to, &key, Some(params), false, &()).unwrap();
        assert_eq!(kind, "bitmap filter");
        let mut copied = RedisFilter::new(connect(&b), params.layout(&key).unwrap());
        assert!(copied.contains_many(&slices(&added)).unwrap().iter().all(|&x| x), "{key}");
        assert_eq!(copied.contains_many(&slices(&probes)).unwrap(), before, "{key}: the same answers");
        for k in params.layout(&key).unwrap().keys() {
            let (x, y) = (a.conn().call(&["DUMP", &k]), b.conn().call(&["DUMP", &k]));
            let (tx, ty) = (a.conn().call(&["TYPE", &k]), b.conn().call(&["TYPE", &k]));
            assert_eq!(tx.as_bytes(), ty.as_bytes(), "{k}");
            if tx.as_bytes() == b"string" {
                assert_eq!(
                    a.conn().call(&["GET", &k]).as_bytes(),
                    b.conn().call(&["GET", &k]).as_bytes(),
                    "{k}"
                );
            } else {
                assert!(!x.is_error() && !y.is_error());
                let fields = |s: &TestServer| {
                    let mut v: Vec<Vec<u8>> = s
                        .conn()
                        .call(&["HGETALL", &k])
                        .as_array()
                        .iter()
                        .map(|r| r.as_bytes().to_vec())
                        .collect();
                    v.sort();
                    v
                };
                assert_eq!(fields(&a), fields(&b), "{k}: the config hash");
            }
        }
        // Opened with other parameters, the copy says so instead of answering.
        if layout.is_redisson() {
            let other = BitmapParams { capacity: 2000, ..params };
            let err = transfer::bitmap_info(&mut to, &key, &other).unwrap_err();
            assert!(matches!(err, bloomkit_client::Error::ConfigMismatch(_)), "{err:?}");
        }
    }
}

/// A bitmap file written by the previous release (version 1: the guava
/// layout, sized by capacity and rate) still restores.
#[test]
fn version_1_bitmap_files_still_restore() {
    let server = TestServer::start(Kind::Redis, &[], &[]);
    let mut s = Server::connect(&format!("redis://127.0.0.1:{}/", server.port)).unwrap();
    let mut filter =
        RedisFilter::new(connect(&server), Layout::bitmap("v1", Options::new(1000, 0.01)).unwrap());
    let added = items("old", 500);
    filter.add_many(&slices(&added)).unwrap();
    let bits = server.conn().call(&["GET", "v1"]).as_bytes().to_vec();
    let mut file = b"BKBITMAP".to_vec();
    file.extend(1u32.to_le_bytes());
    file.extend(5u32.to_le_bytes());
    file.extend(b"guava");
    file.extend(1000u64.to_le_bytes());
    file.extend(0.01f64.to_le_bytes());
    file.extend(1u32.to_le_bytes());
    file.extend((bits.len() as u64).to_le_bytes());
    file.extend(&bits);
    let crc = crc32fast::hash(&file);
    file.extend(crc.to_le_bytes());
    assert_eq!(
        transfer::restore_file(&mut s, "v1-restored", &file[..], false, &()).unwrap(),
        "bitmap filter"
    );
    assert_eq!(server.conn().call(&["GET", "v1-restored"]).as_bytes(), bits);
    // A damaged one is refused.
    let last = file.len() - 10;
    file[last] ^= 1;
    assert!(transfer::restore_file(&mut s, "v1-damaged", &file[..], false, &()).is_err());
    assert_eq!(server.conn().call(&["EXISTS", "v1-damaged"]).as_int(), 0);
}

/// Files that claim more than any server would send (a cuckoo chunk past
/// 16 MiB, a value past 512 MB, a bitmap part past its share of the
/// filter's bits) are refused before anything is read into memory or
/// written, whatever their checksum.
#[test]
fn files_claiming_huge_sizes_are_refused() {
    let server = TestServer::start(Kind::Redis, &[Module::bloomkit()], &[]);
    let mut s = Server::connect(&format!("redis://127.0.0.1:{}/", server.port)).unwrap();
    let mut cuckoo = b"BKCUCKOO".to_vec();
    cuckoo.extend(1u32.to_le_bytes());
    cuckoo.extend(1u64.to_le_bytes());
    cuckoo.extend(u32::MAX.to_le_bytes());
    let mut value = b"BKMODVAL".to_vec();
    value.extend(1u32.to_le_bytes());
    value.extend(9u32.to_le_bytes());
    value.extend(bloomkit_core::vbloom::TYPE_NAME.as_bytes());
    value.extend(u64::MAX.to_le_bytes());
    let mut bitmap = b"BKBITMAP".to_vec();
    bitmap.extend(2u32.to_le_bytes());
    bitmap.extend(5u32.to_le_bytes());
    bitmap.extend(b"guava");
    bitmap.extend(1000u64.to_le_bytes());
    bitmap.extend(0.01f64.to_le_bytes());
    bitmap.extend(9600u64.to_le_bytes());
    bitmap.extend(7u32.to_le_bytes());
    bitmap.extend(1u32.to_le_bytes());
    bitmap.extend((1u64 << 28).to_le_bytes());
    for (what, file, reason) in [
        ("cuckoo chunk", cuckoo, "-byte chunk"),
        ("module value", value, "-byte value"),
        ("bitmap part", bitmap, "more than its 1200"),
    ] {
        let err = transfer::restore_file(&mut s, "huge", &file[..], false, &()).unwrap_err();
        assert!(err.to_string().contains(reason), "{what}: {err}");
        assert_eq!(server.conn().call(&["EXISTS", "huge"]).as_int(), 0, "{what}: nothing created");
    }
    assert!(server.conn().call(&["KEYS", "*staging*"]).as_array().is_empty());
}

/// Adds `n` items to an `XF.*` key in `XF.MADD`s of 1000 (created by the first).
fn xf_fill(c: &mut bloomkit_testkit::Conn, key: &str, prefix: &str, n: usize) {
    for batch in items(prefix, n).chunks(1000) {
        let args: Vec<Vec<u8>> =
            [b"XF.MADD".to_vec(), key.as_bytes().to_vec()].into_iter().chain(batch.iter().cloned()).collect();
        assert!(!c.call(&args).is_error());
    }
}

/// A field of `XF.INFO` (RESP2: a flat array).
fn xf_field(c: &mut bloomkit_testkit::Conn, key: &str, label: &str) -> i64 {
    let info = c.call(&["XF.INFO", key]);
    let fields = info.as_array();
    let at = (0..fields.len()).step_by(2).find(|&i| fields[i].as_bytes() == label.as_bytes());
    fields[at.unwrap_or_else(|| panic!("{label}: {info:?}")) + 1].as_int()
}

/// [`expandable_filters_dump_restore_and_copy`] for one key: dumped (the
/// progress its blocks' bytes), restored byte-identical and dumped again
/// the same, refused over itself, copied server to server and over a copy.
fn dump_restore_and_copy(
    c: &mut bloomkit_testkit::Conn,
    d: &mut bloomkit_testkit::Conn,
    from: &mut Server,
    to: &mut Server,
    key: &str,
) {
    let progress = Counted::default();
    let mut file = Vec::new();
    assert_eq!(transfer::dump_key(from, key, None, &mut file, &progress).unwrap(), "expandable filter");
    assert_eq!(&file[..8], transfer::XF_MAGIC);
    // (Progress is the blocks' bytes, as the header says.)
    let (done, length) = (progress.done.get(), progress.length.get());
    assert!(done > 0 && done == length, "{key}: {done} of {length}");
    let restored = format!("{key}-restored");
    assert_eq!(transfer::restore_file(from, &restored, &file[..], false, &()).unwrap(), "expandable filter");
    let digest = c.call(&["DEBUG", "DIGEST-VALUE", key]);
    assert_eq!(digest, c.call(&["DEBUG", "DIGEST-VALUE", &restored]), "{key}: restored");
    // The dump of the restored key is the same file.
    let mut again = Vec::new();
    transfer::dump_key(from, &restored, None, &mut again, &()).unwrap();
    assert!(again == file, "{key}: dumped again, the same bytes");
    let refused = transfer::restore_file(from, &restored, &file[..], false, &()).unwrap_err();
    assert!(refused.to_string().contains("already exists"), "{refused}");
    // Server to server, then replacing what is there.
    assert_eq!(transfer::copy_key(from, to, key, None, false, &()).unwrap(), "expandable filter");
    assert_eq!(digest, d.call(&["DEBUG", "DIGEST-VALUE", key]), "{key}: copied to Valkey");
    d.call(&["XF.ADD", key, "only on the copy"]);
    transfer::copy_key(from, to, key, None, true, &()).unwrap();
    assert_eq!(digest, d.call(&["DEBUG", "DIGEST-VALUE", key]), "{key}: replaced");
    assert_eq!(d.call(&["TTL", key]).as_int(), -1, "the staging key's TTL does not stay");
}

/// Expandable filters move by XF.SCANDUMP/XF.LOADCHUNK in several chunks,
/// a lone small block too, between Redis and Valkey: byte-identical
/// (DEBUG DIGEST-VALUE), through a file and server to server, found by
/// `copy --all`'s scan; a damaged file and a write to the source during a
/// copy are refused and leave nothing behind.
#[test]
fn expandable_filters_dump_restore_and_copy() {
    let a = TestServer::start(Kind::Redis, &[Module::bloomkit()], &[]);
    let b = TestServer::start(Kind::Valkey, &[Module::bloomkit()], &[]);
    let url = |s: &TestServer| format!("redis://127.0.0.1:{}/", s.port);
    let mut c = a.conn();
    let mut d = b.conn();
    // Grown from 1000 to a million: several MiB, so several chunks.
    c.ok("XF.RESERVE xf 0.001 CAPACITY 1000");
    xf_fill(&mut c, "xf", "big", 1_000_000);
    assert!(xf_field(&mut c, "xf", "Blocks") >= 900);
    let size = xf_field(&mut c, "xf", "Size");
    assert!(size > 2 << 20, "{size} bytes: at least three chunks of a MiB");
    // A small filter, one block.
    c.ok("XF.RESERVE mid 0.01 CAPACITY 100");
    xf_fill(&mut c, "mid", "mid", 210);
    assert_eq!(xf_field(&mut c, "mid", "Blocks"), 1);
    // Deletes leave their mark too.
    c.call(&["XF.DEL", "mid", "mid-7"]);

    let mut from = Server::connect(&url(&a)).unwrap();
    let mut to = Server::connect(&url(&b)).unwrap();
    let (keys, _) = transfer::module_keys(&mut from, "*").unwrap();
    assert!(keys.contains(&"xf".to_string()) && keys.contains(&"mid".to_string()), "{keys:?}");
    for key in ["xf", "mid"] {
        dump_restore_and_copy(&mut c, &mut d, &mut from, &mut to, key);
    }
    let copied = RedisFilter::new(connect(&b), Layout::expandable("xf", Options::new(1000, 0.01)).unwrap());
    let mut copied = copied;
    let sample: Vec<Vec<u8>> = items("big", 1_000_000).into_iter().step_by(97).collect();
    assert!(copied.contains_many(&slices(&sample)).unwrap().iter().all(|&p| p), "every item is in the copy");

    // A damaged file: refused, nothing written.
    let mut file = Vec::new();
    transfer::dump_key(&mut from, "mid", None, &mut file, &()).unwrap();
    for at in [20, 100, file.len() / 2, file.len() - 2] {
        let mut damaged = file.clone();
        damaged[at] ^= 0x04;
        let e = transfer::restore_file(&mut to, "damaged", &damaged[..], false, &()).unwrap_err();
        assert!(!e.to_string().is_empty());
    }
    let e = transfer::restore_file(&mut to, "damaged", &file[..file.len() - 9], false, &()).unwrap_err();
    assert!(e.to_string().contains("cut short"), "{e}");
    assert_eq!(d.call(&["EXISTS", "damaged"]).as_int(), 0);

    // A write to the source during the copy (here, as the first chunk
    // arrives) is refused rather than copied torn.
    struct WriteMeanwhile(std::cell::RefCell<bloomkit_testkit::Conn>);
    impl Progress for WriteMeanwhile {
        fn inc(&self, _: u64) {
            self.0.borrow_mut().call(&["XF.ADD", "xf", "meanwhile"]);
        }
    }
    let before = d.call(&["DEBUG", "DIGEST-VALUE", "xf"]);
    let meanwhile = WriteMeanwhile(std::cell::RefCell::new(a.conn()));
    let e = transfer::copy_key(&mut from, &mut to, "xf", None, true, &meanwhile).unwrap_err();
    assert!(e.to_string().contains("changed during the copy"), "{e}");
    let e = transfer::dump_key(&mut from, "xf", None, Vec::new(), &meanwhile).unwrap_err();
    assert!(e.to_string().contains("changed during the dump"), "{e}");
    // The copy made before stays as it was; the source goes on.
    assert_eq!(d.call(&["DEBUG", "DIGEST-VALUE", "xf"]), before);
    transfer::copy_key(&mut from, &mut to, "xf", None, true, &()).unwrap();
    assert_eq!(c.call(&["DEBUG", "DIGEST-VALUE", "xf"]), d.call(&["DEBUG", "DIGEST-VALUE", "xf"]));
    assert!(c.cmd("KEYS *bloomkit-staging*").as_array().is_empty());
    assert!(d.cmd("KEYS *bloomkit-staging*").as_array().is_empty());
}

/// A local expandable filter's file is a dump: it restores into a server,
/// which answers as the local filter does and dumps it back byte for byte.
#[test]
fn local_expandable_files_restore_into_a_server() {
    let a = TestServer::start(Kind::Redis, &[Module::bloomkit()], &[]);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seen.xf");
    let added = items("local", 30_000);
    let mut local = bloomkit_client::LocalFilter::expandable(Options::new(500, 0.001)).unwrap();
    // An add answered false (a false positive) stored nothing: such an
    // item is found only through another item's entry, which the delete
    // below may take, so only the items whose add stored them must stay.
    let answers = local.add_many(&slices(&added)).unwrap();
    let stored = answers.iter().filter(|&&new| new).count() as u64;
    assert!(stored > 29_900, "{stored}");
    let kept: Vec<&[u8]> =
        added.iter().zip(&answers).skip(1).filter(|(_, &new)| new).map(|(item, _)| &item[..]).collect();
    assert!(local.remove(&added[0]).unwrap());
    local.save(&path).unwrap();
    let file = std::fs::read(&path).unwrap();
    let mut server = Server::connect(&format!("redis://127.0.0.1:{}/", a.port)).unwrap();
    transfer::restore_file(&mut server, "xf", &file[..], false, &()).unwrap();
    let mut remote =
        RedisFilter::new(connect(&a), Layout::expandable("xf", Options::new(500, 0.001)).unwrap());
    let probes = items("probe", 20_000);
    assert_eq!(
        remote.contains_many(&slices(&probes)).unwrap(),
        local.contains_many(&slices(&probes)).unwrap()
    );
    assert_eq!(remote.count().unwrap(), Some(stored - 1));
    let mut dumped = Vec::new();
    transfer::dump_key(&mut server, "xf", None, &mut dumped, &()).unwrap();
    assert!(dumped == file, "the server's dump is the local file");
    // And back: the dump opens as a local filter.
    std::fs::write(&path, &dumped).unwrap();
    let mut reopened = bloomkit_client::LocalFilter::open(&path).unwrap();
    assert_eq!(reopened.count().unwrap(), Some(stored - 1));
    assert!(reopened.contains_many(&kept).unwrap().iter().all(|&p| p));
}

/// A dump file bloomkit 0.1 wrote (its 80-byte encoding-0 header, then its
/// table's slots) still restores, converted as it loads: every member in,
/// the same items, then a normal filter that dumps in encoding 1.
#[test]
fn expandable_filter_files_of_bloomkit_0_1_restore() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../bloomkit-core/tests/data/xf-v0");
    for name in ["grown", "migrating", "deleted"] {
        // The fixture's SCANDUMP records, in a BKXFFILE around them.
        let stream = std::fs::read(format!("{dir}/{name}.chunks")).unwrap();
        let mut file = transfer::XF_MAGIC.to_vec();
        file.extend_from_slice(&1u32.to_le_bytes());
        let mut at = 0;
        while at < stream.len() {
            let iter = &stream[at..at + 8];
            let len = u64::from_le_bytes(stream[at + 8..at + 16].try_into().unwrap()) as usize;
            file.extend_from_slice(iter);
            file.extend_from_slice(&(len as u32).to_le_bytes());
            file.extend_from_slice(&stream[at + 16..at + 16 + len]);
            at += 16 + len;
        }
        file.extend_from_slice(&0u64.to_le_bytes());
        let crc = crc32fast::hash(&file);
        file.extend_from_slice(&crc.to_le_bytes());
        let info = std::fs::read_to_string(format!("{dir}/{name}.info")).unwrap();
        let field = |k: &str| -> u64 {
            info.lines()
                .find_map(|l| l.strip_prefix(k).map(|v| v.trim().parse::<f64>().unwrap() as u64))
                .unwrap()
        };

        let server = TestServer::start(Kind::Redis, &[Module::bloomkit()], &[]);
        let mut s = Server::connect(&format!("redis://127.0.0.1:{}/", server.port)).unwrap();
        assert_eq!(transfer::restore_file(&mut s, name, &file[..], false, &()).unwrap(), "expandable filter");
        let mut c = server.conn();
        assert_eq!(c.call(&["XF.CARD", name]).as_int() as u64, field("items "), "{name}");
        assert_eq!(xf_field(&mut c, name, "Loaded"), 100);
        for i in 0..field("added ") {
            let gone = i % 3 == 0 && i / 3 < field("deleted ");
            if !gone {
                assert_eq!(
                    c.call(&["XF.EXISTS", name, &format!("item:{i}")]).as_int(),
                    1,
                    "{name}: item:{i}"
                );
            }
        }
        let mut again = Vec::new();
        transfer::dump_key(&mut s, name, None, &mut again, &()).unwrap();
        assert_eq!(&again[12 + 12..12 + 12 + 8], b"BKXFLT01", "{name}: dumped in encoding 1");
    }
}
