//! Dump, restore and copy of every filter kind through the library, as a
//! program using bloomkit-client (not only the CLI) does them, with the
//! progress it reports.

use std::cell::Cell;

use bloomkit_client::transfer::{self, BitmapParams, Progress, Server};
use bloomkit_client::{Filter, Layout, Options, RedisFilter};
use bloomkit_testkit::{Module, Server as Kind, TestServer};

mod common;
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
    value.extend(b"bloomfltr");
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
