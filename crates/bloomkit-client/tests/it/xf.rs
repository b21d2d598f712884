//! The expandable backend (`XF.*`) beyond the conformance suite: it grows
//! far past its first size at its rate, on a server and in process alike,
//! counts copies, stops at its max capacity with the server's reason, and
//! says what to do on a server without bloomkit.

use bloomkit_client::{Error, Filter, Layout, LocalFilter, Options, RedisFilter};
use bloomkit_testkit::{Module, Server, TestServer};

use crate::common;
use common::{connect, items, slices};

/// Grown 200x from its first size: every item still in, the rate it
/// guarantees within the one asked for, and the measured rate within it.
fn grows(f: &mut dyn Filter, what: &str) {
    let added = items("grow", 100_000);
    let new = f.add_slice(&slices(&added)).unwrap();
    assert!(new.iter().filter(|&&n| n).count() > 99_000, "{what}");
    assert!(f.contains_slice(&slices(&added)).unwrap().iter().all(|&p| p), "{what}: a false negative");
    let info = f.info().unwrap();
    let bound = info.estimated_error_rate.unwrap();
    assert!(bound <= 0.01 && info.capacity >= 100_000, "{what}: {info:?}");
    let probes = items("absent", 100_000);
    let positives = f.contains_slice(&slices(&probes)).unwrap().iter().filter(|&&p| p).count();
    assert!(positives < 1000 + 4 * 32, "{what}: {positives} false positives in 100 000");
}

#[test]
fn expandable_filters_grow_count_and_stop_where_told() {
    let s = TestServer::start(Server::Redis, &[Module::bloomkit()], &[]);
    let options = Options { batch_size: 500, ..Options::new(500, 0.01) };
    let mut remote = RedisFilter::new(connect(&s), Layout::expandable("xf", options.clone()).unwrap());
    grows(&mut remote, "on the server");
    let mut local = LocalFilter::expandable(options).unwrap();
    grows(&mut local, "in process");
    // Each hashes with its own secret seed (the server's, a random one in
    // process): both hold every member; their false positives differ.
    let members = items("grow", 100_000);
    assert_eq!(
        remote.contains_slice(&slices(&members)).unwrap(),
        local.contains_slice(&slices(&members)).unwrap(),
        "the same members"
    );

    // Copies: an item an add found in is not stored again; XF.COUNT counts
    // the copies others added.
    assert_eq!(remote.count_of(b"grow-1").unwrap(), 1);
    assert!(!remote.add(b"grow-1").unwrap());
    s.conn().call(&["XF.ADD", "xf", "grow-1"]);
    assert_eq!(remote.count_of(b"grow-1").unwrap(), 2);
    assert_eq!(local.count_of(b"grow-1").unwrap(), 1);
    assert!(remote.remove(b"grow-1").unwrap() && remote.contains(b"grow-1").unwrap());

    // The options are checked before any command.
    for bad in [
        Options::new(1000, 0.6),
        Options { max_capacity: Some(10), ..Options::new(1000, 0.01) },
        Options::new(1 << 41, 0.01),
    ] {
        assert!(matches!(Layout::expandable("k", bad.clone()), Err(Error::InvalidOptions(_))), "{bad:?}");
        assert!(matches!(LocalFilter::expandable(bad), Err(Error::InvalidOptions(_))));
    }

    // At its max capacity, the server's reason.
    let small = Options { max_capacity: Some(20), ..Options::new(10, 0.01) };
    let mut full = RedisFilter::new(connect(&s), Layout::expandable("full", small.clone()).unwrap());
    let e = full.add_slice(&slices(&items("f", 30))).unwrap_err();
    assert!(e.to_string().contains("MAXCAPACITY"), "{e}");
    let mut local = LocalFilter::expandable(small).unwrap();
    let e = local.add_slice(&slices(&items("f", 30))).unwrap_err();
    assert!(e.to_string().contains("MAXCAPACITY"), "{e}");
    assert_eq!(local.count().unwrap(), Some(20));
}

#[test]
fn without_bloomkit_the_error_says_to_load_it() {
    let s = TestServer::start(Server::Redis, &[Module::RedisBloom], &[]);
    let mut f = RedisFilter::new(connect(&s), Layout::expandable("xf", Options::new(100, 0.01)).unwrap());
    for r in [f.add(b"x").map(drop), f.contains(b"x").map(drop), f.reserve()] {
        assert!(matches!(r, Err(Error::ModuleMissing(_))), "{r:?}");
    }
}

/// In process, items hashed elsewhere (`bloomkit dedup`'s reader thread)
/// answer as the items themselves do, in batches across the chunks the
/// filter hashes at once (64), and after a clear: a filter given the
/// hashes and one of the same hashing given the items end with the same
/// bytes. A filter that takes no hashes says so.
#[test]
fn hashes_made_elsewhere_answer_as_their_items() {
    let dir = tempfile::tempdir().unwrap();
    let (empty, by_items, by_hashes) =
        (dir.path().join("empty"), dir.path().join("items"), dir.path().join("hashes"));
    let mut by_hash = LocalFilter::expandable(Options::new(100, 0.001)).unwrap();
    by_hash.save(&empty).unwrap();
    // The same hashing: its file holds the seed.
    let mut by_item = LocalFilter::open(&empty).unwrap();
    for round in 0..2 {
        let hashing = by_hash.expandable_hashing().expect("an expandable filter's hashing");
        assert_eq!(by_item.expandable_hashing(), Some(hashing));
        for n in [0usize, 1, 63, 64, 65, 130, 1000] {
            // Every batch repeats its first half (lines seen twice).
            let mut batch = items(&format!("h{round}-{n}"), n);
            batch.extend_from_within(..n / 2);
            let hashes: Vec<_> = batch.iter().map(|i| hashing.hash(i)).collect();
            let answers = by_item.add_slice(&slices(&batch)).unwrap();
            assert!(answers[n..].iter().all(|&new| !new), "a repeat taken for new");
            assert_eq!(by_hash.add_hashes(&hashes).unwrap(), answers, "{n} items");
            assert!(by_hash.contains_slice(&slices(&batch)).unwrap().iter().all(|&p| p), "{n}");
        }
        by_item.save(&by_items).unwrap();
        by_hash.save(&by_hashes).unwrap();
        assert_eq!(std::fs::read(&by_items).unwrap(), std::fs::read(&by_hashes).unwrap(), "the same bytes");
        // A clear keeps the hashing, so a copy taken before stays right.
        by_hash.clear().unwrap();
        by_item.clear().unwrap();
        assert_eq!(by_hash.expandable_hashing(), Some(hashing));
        assert_eq!(by_hash.count().unwrap(), Some(0));
    }
    let mut bloom = LocalFilter::new(Options::new(100, 0.001)).unwrap();
    assert!(bloom.expandable_hashing().is_none());
    let e = bloom.add_hashes(&[]).unwrap_err();
    assert!(matches!(e, Error::Unsupported(_)) && e.to_string().contains("expandable"), "{e}");
}
