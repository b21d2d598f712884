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
