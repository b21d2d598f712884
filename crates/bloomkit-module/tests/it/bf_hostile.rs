//! Hostile input to `BF.*`: every reply is an error with its named reason
//! or the documented result, the server keeps answering, and keys of every
//! family stay unchanged. Servers run under an address-space limit
//! (`TestServer::hostile`), so a runaway allocation fails here instead of
//! taking the machine's memory. `hostile_apbf.rs` does the same for `APBF.*`.

use bloomkit_core::common::hash::HashWidth;
use bloomkit_core::common::sizing::Shape;
use bloomkit_testkit::hostile::{
    self, assert_dump_round_trips, damaged_headers, load_headers, seal, RdbValue,
};
use bloomkit_testkit::{per_server, Conn, Module, Reply, Server, TestServer};

per_server!(invalid_commands_are_errors_and_change_nothing);
fn invalid_commands_are_errors_and_change_nothing(server: Server) {
    // Each with the reason it must name (RedisBloom's texts, checked by the differential tests).
    let cases: &[(&str, &str)] = &[
        ("BF.RESERVE k nan 100", "ERR bad error rate"),
        ("BF.RESERVE k inf 100", "ERR (0 < error rate range < 1)"),
        ("BF.RESERVE k -inf 100", "ERR (0 < error rate range < 1)"),
        ("BF.RESERVE k -0.5 100", "ERR (0 < error rate range < 1)"),
        ("BF.RESERVE k 0 100", "ERR (0 < error rate range < 1)"),
        ("BF.RESERVE k 1 100", "ERR (0 < error rate range < 1)"),
        ("BF.RESERVE k 1e-400 100", "ERR bad error rate"),
        ("BF.RESERVE k 0.01 0", "ERR (capacity should be larger than 0)"),
        ("BF.RESERVE k 0.01 -1", "ERR (capacity should be larger than 0)"),
        ("BF.RESERVE k 0.01 9223372036854775807", "ERR could not create filter"),
        ("BF.RESERVE k 0.01 9223372036854775808", "ERR bad capacity"),
        ("BF.RESERVE k 4.9e-324 1000000000", "ERR could not create filter"),
        ("BF.RESERVE k 0.01 100 EXPANSION 0", "ERR expansion should be greater or equal to 1"),
        (
            "BF.RESERVE k 0.01 100 EXPANSION 9223372036854775807",
            "ERR expansion must be in the range [1, 32768]",
        ),
        (
            "BF.RESERVE k 0.01 100 EXPANSION -9223372036854775808",
            "ERR expansion should be greater or equal to 1",
        ),
        ("BF.INSERT k CAPACITY 9223372036854775807 ITEMS a", "ERR could not create filter"),
        ("BF.INSERT k ERROR 1e-320 CAPACITY 1000000000000 ITEMS a", "more than bf.max-filter-bytes"),
        ("BF.INSERT k EXPANSION 4294967297 ITEMS a", "ERR expansion must be in the range [1, 32768]"),
        ("BF.INSERT k ITEMS", "wrong number of arguments"),
        ("BF.INSERT k", "wrong number of arguments"),
        ("BF.ADD", "wrong number of arguments"),
        ("BF.ADD k", "wrong number of arguments"),
        ("BF.MADD k", "wrong number of arguments"),
        ("BF.EXISTS k", "wrong number of arguments"),
        ("BF.INFO k bogus", "ERR not found"),
        ("BF.SCANDUMP k", "wrong number of arguments"),
        ("BF.SCANDUMP bystander x", "Second argument must be numeric"),
        ("BF.SCANDUMP bystander 99999999999999999999", "Second argument must be numeric"),
        ("BF.LOADCHUNK k 1 short", "ERR received bad data"),
        ("BF.LOADCHUNK k 2 x", "ERR not found"),
        ("BF.LOADCHUNK bystander 0 x", "ERR received bad data"),
        ("BF.LOADCHUNK bystander -9223372036854775808 x", "ERR received bad data"),
        ("BF.LOADCHUNK bystander 9223372036854775807 x", "ERR invalid offset - no link found"),
        ("BF.LOADCHUNK bystander x x", "ERR Second argument must be numeric"),
        ("BF.LOADCHUNK str 1 x", "WRONGTYPE"),
        ("BF.ADD str a", "WRONGTYPE"),
        ("BF.INSERT str ITEMS a", "WRONGTYPE"),
        ("BF.RESERVE str 0.1 10", "WRONGTYPE"),
        ("BF.CARD str", "WRONGTYPE"),
        ("BF.DEBUG str", "WRONGTYPE"),
        ("BF.INFO str", "WRONGTYPE"),
    ];
    hostile::refuses_every_invalid_command(server, "BF", cases);
}

per_server!(extreme_but_valid_parameters_work);
fn extreme_but_valid_parameters_work(server: Server) {
    let (_s, mut c, watch) = hostile::start(server);
    // A tiny error rate (4.9e-324 would halve to 0) and the smallest capacity.
    c.ok("BF.RESERVE tiny 1e-300 1");
    assert_eq!(c.cmd("BF.ADD tiny a"), Reply::Int(1));
    assert_eq!(c.cmd("BF.EXISTS tiny a"), Reply::Int(1));
    assert_eq!(c.cmd("BF.EXISTS tiny b"), Reply::Int(0));
    // Error rates near 1 and expansion 1: grows a sub-filter per item.
    c.ok("BF.RESERVE loose 0.99 1 EXPANSION 1");
    for i in 0..200 {
        assert!(!c.call(&["BF.ADD", "loose", &i.to_string()]).is_error());
    }
    // Items of 0 bytes and of 100 MB.
    assert_eq!(c.call(&["BF.ADD", "items", ""]), Reply::Int(1));
    let big = vec![b'x'; 100_000_000];
    assert_eq!(c.call(&[b"BF.ADD".to_vec(), b"items".to_vec(), big.clone()]), Reply::Int(1));
    assert_eq!(c.call(&[b"BF.EXISTS".to_vec(), b"items".to_vec(), big]), Reply::Int(1));
    watch.check(&mut c, "extreme parameters");
}

per_server!(failed_allocations_are_errors);
/// An allocation larger than the address space fails; the reply says so and
/// the server lives (Redis 7.0 lacks TryCalloc, so this takes the TryAlloc path).
fn failed_allocations_are_errors(server: Server) {
    let (_s, mut c, watch) = hostile::start(server);
    c.ok("CONFIG SET bf.max-filter-bytes 1125899906842624");
    // 4e14 items at 1% need about 4.8e14 bytes: more than 47 bits of address space.
    let reply = c.cmd("BF.RESERVE huge 0.01 400000000000000");
    assert!(reply.error_text().contains("out of memory"), "{server:?}: {reply:?}");
    assert_eq!(c.cmd("EXISTS huge"), Reply::Int(0));
    watch.check(&mut c, "a failed allocation");
}

fn scandump_header(c: &mut Conn, key: &str) -> Vec<u8> {
    c.call(&["BF.SCANDUMP", key, "0"]).as_array()[1].as_bytes().to_vec()
}

/// After damaged input was accepted, the filter must be usable and
/// consistent: every command answers with its documented shape, and its
/// DUMP restores to an identical filter.
fn exercise(c: &mut Conn, key: &str, what: &str) {
    let usable = |r: &Reply| match r {
        Reply::Int(_) => true,
        Reply::Error(e) => {
            e == "ERR non scaling filter is full"
                || e.contains("bf.max-filter-bytes")
                || e.contains("cannot grow")
        }
        _ => false,
    };
    let add = c.call(&["BF.ADD", key, "probe"]);
    assert!(usable(&add), "{what}: BF.ADD answered {add:?}");
    let madd = c.call(&["BF.MADD", key, "p1", "p2", "p3"]);
    assert!(madd.as_array().iter().all(usable), "{what}: BF.MADD answered {madd:?}");
    assert!(matches!(c.call(&["BF.EXISTS", key, "probe"]), Reply::Int(_)), "{what}: BF.EXISTS");
    assert_eq!(c.call(&["BF.INFO", key]).as_array().len(), 10, "{what}: BF.INFO");
    let debug = c.call(&["BF.DEBUG", key]);
    assert!(debug.as_array()[0].as_bytes().starts_with(b"size:"), "{what}: BF.DEBUG {debug:?}");
    assert_eq!(c.call(&["BF.SCANDUMP", key, "1"]).as_array().len(), 2, "{what}: BF.SCANDUMP");
    assert!(c.call(&["MEMORY", "USAGE", key]).as_int() > 0, "{what}: MEMORY USAGE");
    assert_dump_round_trips(c, key, what);
}

per_server!(hostile_loadchunk_headers);
fn hostile_loadchunk_headers(server: Server) {
    let (_s, mut c, watch) = hostile::start(server);
    // Accepted headers allocate at most this much, so every one can be exercised.
    c.ok("CONFIG SET bf.max-filter-bytes 67108864");
    c.ok("BF.RESERVE model 0.01 10 EXPANSION 2");
    c.ok("BF.MADD model 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25");
    let header = scandump_header(&mut c, "model");
    let mut variants: Vec<(String, Vec<u8>)> = Vec::new();
    variants.extend(damaged_headers(&header));
    let crafted = |nfilters: u32, link: &dyn Fn(&mut Vec<u8>)| {
        let mut h = Vec::new();
        h.extend_from_slice(&0u64.to_le_bytes());
        h.extend_from_slice(&nfilters.to_le_bytes());
        h.extend_from_slice(&5u32.to_le_bytes());
        h.extend_from_slice(&2u32.to_le_bytes());
        link(&mut h);
        h
    };
    let link = |bytes: u64, bits: u64, error: f64, hashes: u32, capacity: u64, n2: u8| {
        move |h: &mut Vec<u8>| {
            h.extend_from_slice(&bytes.to_le_bytes());
            h.extend_from_slice(&bits.to_le_bytes());
            h.extend_from_slice(&0u64.to_le_bytes());
            h.extend_from_slice(&error.to_le_bytes());
            h.extend_from_slice(&9.585f64.to_le_bytes());
            h.extend_from_slice(&hashes.to_le_bytes());
            h.extend_from_slice(&capacity.to_le_bytes());
            h.push(n2);
        }
    };
    variants.push(("no sub-filters".into(), crafted(0, &|_| {})));
    variants.push(("4e9 sub-filters claimed".into(), crafted(u32::MAX, &link(8, 64, 0.01, 7, 10, 0))));
    variants.push(("2^60 bytes".into(), crafted(1, &link(1 << 60, 1 << 63, 0.01, 7, 10, 0))));
    variants.push(("bits beyond the array".into(), crafted(1, &link(8, 65, 0.01, 7, 10, 0))));
    variants.push(("zero bits".into(), crafted(1, &link(8, 0, 0.01, 7, 10, 0))));
    variants.push(("zero hashes".into(), crafted(1, &link(8, 64, 0.01, 0, 10, 0))));
    variants.push(("4e9 hashes".into(), crafted(1, &link(8, 64, 0.01, u32::MAX, 10, 0))));
    variants.push(("n2 = 64".into(), crafted(1, &link(8, 64, 0.01, 7, 10, 64))));
    variants.push(("2^n2 beyond the array".into(), crafted(1, &link(8, 64, 0.01, 7, 10, 7))));
    variants.push(("NaN error".into(), crafted(1, &link(8, 64, f64::NAN, 7, 10, 0))));
    variants.push(("error 2".into(), crafted(1, &link(8, 64, 2.0, 7, 10, 0))));
    variants.push(("zero capacity".into(), crafted(1, &link(8, 64, 0.01, 7, 0, 0))));
    let refused = |e: &str| e == "ERR received bad data" || e.contains("bf.max-filter-bytes");
    let (tried, accepted) = load_headers(&mut c, &watch, "BF.LOADCHUNK", "1", variants, refused, exercise);
    bloomkit_testkit::figure(&format!(
        "hostile BF, {server:?}: {tried} LOADCHUNK headers (truncations, flips, crafted), {} refused, {accepted} accepted and exercised",
        tried - accepted
    ));
}

per_server!(hostile_loadchunk_chunks);
fn hostile_loadchunk_chunks(server: Server) {
    let (_s, mut c, watch) = hostile::start(server);
    c.ok("BF.RESERVE src 0.01 1000");
    let header = scandump_header(&mut c, "src");
    let chunk = c.cmd("BF.SCANDUMP src 1");
    let (iter, data) = (chunk.as_array()[0].as_int(), chunk.as_array()[1].as_bytes().to_vec());
    c.call(&[b"BF.LOADCHUNK".to_vec(), b"dst".to_vec(), b"1".to_vec(), header]);
    let load = |c: &mut Conn, iter: i64, data: &[u8]| {
        c.call(&[b"BF.LOADCHUNK".to_vec(), b"dst".to_vec(), iter.to_string().into_bytes(), data.to_vec()])
    };
    let ok = Reply::Simple("OK".into());
    assert_eq!(load(&mut c, iter, &data), ok, "in order");
    assert_eq!(load(&mut c, iter, &data), ok, "repeated");
    assert_eq!(
        load(&mut c, iter + 1, &data),
        Reply::Error("ERR invalid chunk - Too big for current filter".into())
    );
    assert_eq!(
        load(&mut c, iter + 100_000, &data),
        Reply::Error("ERR invalid offset - no link found".into())
    );
    assert_eq!(load(&mut c, 3, &data), Reply::Error("ERR received bad data".into()));
    let mut flipped = data.clone();
    flipped[0] ^= 0xff;
    assert_eq!(load(&mut c, iter, &flipped), ok, "bit flips in data are just bits");
    assert_eq!(load(&mut c, iter - 1, &data[..data.len() - 1]), ok, "truncated chunk at its own offset");
    let missing =
        c.call(&[b"BF.LOADCHUNK".to_vec(), b"nokey".to_vec(), iter.to_string().into_bytes(), data.clone()]);
    assert_eq!(missing, Reply::Error("ERR not found".into()));
    exercise(&mut c, "dst", "chunks");
    watch.check(&mut c, "chunks");
}

per_server!(hostile_restore_payloads);
/// Damaged DUMP payloads that pass the server's CRC: each is refused with
/// the server's "Bad data format" (and no key), or loads as a consistent
/// filter.
fn hostile_restore_payloads(server: Server) {
    let (_s, mut c, watch) = hostile::start(server);
    c.ok("CONFIG SET bf.max-filter-bytes 67108864");
    c.ok("BF.RESERVE model 0.1 4 EXPANSION 2");
    c.ok("BF.MADD model a b c d e f g h i");
    let (refused, loaded) =
        hostile::restore_damaged_dumps_of(&mut c, &watch, "model", &format!("{server:?}"), exercise);
    bloomkit_testkit::figure(&format!(
        "hostile BF, {server:?}: {} damaged RESTORE payloads, {refused} refused, {loaded} loaded and round-tripped",
        refused + loaded
    ));
}

// ---- legacy encodings, built by hand and compared with RedisBloom ----

/// A legacy payload at `encver`, for a one-sub-filter chain holding `items`.
fn legacy_payload(
    encver: u64,
    options: u32,
    items: &[&[u8]],
    version_and_type: &[u8],
    rdb_version: &[u8],
) -> Vec<u8> {
    let shape = Shape::new(50, 0.01, options).unwrap();
    let mut bits = vec![0u8; shape.bytes as usize];
    let width = if options & 4 != 0 { HashWidth::Bits64 } else { HashWidth::Bits32 };
    let modulus = if shape.n2 > 0 { 1u64 << shape.n2 } else { shape.bits };
    let bits_for_v0 = (shape.capacity as f64 * shape.bpe) as u64;
    let modulus = if encver == 0 { bits_for_v0 } else { modulus };
    for item in items {
        let h = width.hash(item);
        for i in 0..u64::from(shape.hashes) {
            let bit = h.a.wrapping_add(i.wrapping_mul(h.b)) % modulus;
            bits[(bit >> 3) as usize] |= 1 << (bit & 7);
        }
    }
    // The module id: the type name's 54 bits, then 10 bits of encoding version.
    // Payload bytes: value type, 0x81 (a 64-bit length follows), the id.
    let mut id = u64::from_be_bytes(version_and_type[2..10].try_into().unwrap());
    id = (id & !0x3ff) | encver;
    let mut v = RdbValue(vec![version_and_type[0], 0x81]);
    v.0.extend_from_slice(&id.to_be_bytes());
    v.unsigned(items.len() as u64);
    v.unsigned(1);
    if encver >= 2 {
        v.unsigned(u64::from(options));
    }
    if encver >= 4 {
        v.unsigned(2);
    }
    v.unsigned(shape.capacity);
    v.double(shape.error);
    v.unsigned(u64::from(shape.hashes));
    v.double(shape.bpe);
    if encver >= 1 {
        v.unsigned(shape.bits);
        v.unsigned(u64::from(shape.n2));
    }
    v.buffer(&bits);
    v.unsigned(items.len() as u64);
    v.0.push(0); // EOF opcode
    v.0.extend_from_slice(rdb_version);
    seal(&v.0)
}

#[test]
fn legacy_encodings_load_like_redisbloom() {
    let redisbloom = TestServer::start(Server::Redis, &[Module::RedisBloom], &[]);
    let bloomkit = TestServer::start(Server::Redis, &[Module::bloomkit()], &[]);
    let (mut rb, mut bk) = (redisbloom.conn(), bloomkit.conn());
    bk.ok("BF.ADD model x");
    let dump = bk.cmd("DUMP model").as_bytes().to_vec();
    let version_and_type = dump[..10].to_vec();
    let rdb_version = dump[dump.len() - 10..dump.len() - 8].to_vec();
    let items: Vec<Vec<u8>> = (0..40).map(|i| format!("legacy-{i}").into_bytes()).collect();
    let item_refs: Vec<&[u8]> = items.iter().map(Vec::as_slice).collect();
    // encver 0 and 1: no options (32-bit hashes); 0 has no bit count or n2.
    // encver 2 and 3: options stored; power-of-two sizing (options 0) and 64-bit hashing (4).
    for (encver, options) in [(0u64, 0u32), (1, 0), (2, 0), (2, 4), (3, 4), (3, 5), (4, 5)] {
        let payload = legacy_payload(encver, options, &item_refs, &version_and_type, &rdb_version);
        let key = format!("legacy{encver}-{options}");
        for c in [&mut bk, &mut rb] {
            let reply =
                c.call(&[b"RESTORE".to_vec(), key.clone().into_bytes(), b"0".to_vec(), payload.clone()]);
            assert_eq!(
                reply,
                Reply::Simple("OK".into()),
                "encver {encver} options {options}\n{}\n{}",
                bloomkit.log(),
                redisbloom.log()
            );
        }
        let mut probe = vec![b"BF.MEXISTS".to_vec(), key.clone().into_bytes()];
        probe.extend(items.iter().cloned());
        probe.extend((0..200).map(|i| format!("absent-{i}").into_bytes()));
        let (raw_rb, reply_rb) = rb.call_raw(&probe).unwrap();
        let (raw_bk, _) = bk.call_raw(&probe).unwrap();
        assert_eq!(raw_bk, raw_rb, "encver {encver} options {options}: lookups");
        assert!(reply_rb.as_array()[..40].iter().all(|r| r.as_int() == 1), "items present");
        // Growing a legacy chain: same replies, same sub-filters.
        let mut madd = vec![b"BF.MADD".to_vec(), key.clone().into_bytes()];
        madd.extend((0..200).map(|i| format!("grow-{i}").into_bytes()));
        assert_eq!(bk.call_raw(&madd).unwrap().0, rb.call_raw(&madd).unwrap().0, "encver {encver}: growth");
        for cmd in [vec!["BF.DEBUG", &key], vec!["BF.INFO", &key], vec!["BF.SCANDUMP", &key, "0"]] {
            assert_eq!(
                bk.call_raw(&cmd).unwrap().0,
                rb.call_raw(&cmd).unwrap().0,
                "encver {encver}: {cmd:?}"
            );
        }
    }
}
