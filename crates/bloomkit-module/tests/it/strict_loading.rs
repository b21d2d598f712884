//! Loading is as strict as RedisBloom's newest: a Bloom header, DUMP
//! payload or RDB value whose counts lie (option bits nobody defines, a
//! total other than the sum of the sub-filters', a sub-filter over its
//! capacity, a growth of 0 on a scaling filter) is refused with RedisBloom's
//! phrase, creates nothing and leaves every other key as it was; oversized
//! headers lead with RedisBloom's words. Servers run under the hostile
//! suites' address-space limit.

use bloomkit_core::bf::scandump::parse_header;
use bloomkit_testkit::hostile::{seal, RdbValue, Watch};
use bloomkit_testkit::{per_server, Conn, Module, Reply, Server, TestServer};

/// A real filter's SCANDUMP header: two sub-filters, some items.
fn sample_header(c: &mut Conn) -> Vec<u8> {
    c.ok("BF.RESERVE src 0.01 50 EXPANSION 2");
    for i in 0..80 {
        c.call(&["BF.ADD", "src", &format!("item-{i}")]);
    }
    let chunks = c.scandump("src").unwrap();
    chunks[0].1.clone()
}

/// The header with the little-endian bytes at `at` replaced.
fn patched(header: &[u8], at: usize, bytes: &[u8]) -> Vec<u8> {
    let mut h = header.to_vec();
    h[at..at + bytes.len()].copy_from_slice(bytes);
    h
}

/// Header layout: items u64 @0, filters u32 @8, options u32 @12, growth u32
/// @16, then per sub-filter (61 bytes) bytes, bits, items @+16, error, bpe,
/// hashes, capacity @+44, n2.
const LINK: usize = 20;

fn lying_headers(header: &[u8]) -> Vec<(&'static str, Vec<u8>)> {
    let parsed = parse_header(header).expect("a real header parses");
    let first_capacity = parsed.links[0].0.capacity;
    let second_items = parsed.links[1].1;
    vec![
        ("an options bit nobody defines", patched(header, 12, &(parsed.options | 0x10).to_le_bytes())),
        ("options with every bit set", patched(header, 12, &u32::MAX.to_le_bytes())),
        ("a total one above the sum", patched(header, 0, &(parsed.items + 1).to_le_bytes())),
        ("a total of 2^32", patched(header, 0, &(1u64 << 32).to_le_bytes())),
        ("a total of 0", patched(header, 0, &0u64.to_le_bytes())),
        ("a growth of 0 on a scaling filter", patched(header, 16, &0u32.to_le_bytes())),
        ("a sub-filter over its capacity", {
            let h = patched(header, LINK + 16, &(first_capacity + 1).to_le_bytes());
            patched(&h, 0, &(first_capacity + 1 + second_items).to_le_bytes())
        }),
    ]
}

per_server!(bloom_headers_whose_counts_lie_are_refused);
fn bloom_headers_whose_counts_lie_are_refused(server: Server) {
    let s = TestServer::hostile(server);
    let mut c = s.conn();
    let watch = Watch::new(&mut c);
    let header = sample_header(&mut c);
    // The real header loads, so the refusals below are about the lies.
    assert_eq!(
        c.call(&[b"BF.LOADCHUNK".to_vec(), b"copy".to_vec(), b"1".to_vec(), header.clone()]),
        Reply::Simple("OK".into())
    );
    for (what, h) in lying_headers(&header) {
        let reply = c.call(&[b"BF.LOADCHUNK".to_vec(), b"k".to_vec(), b"1".to_vec(), h]);
        assert_eq!(reply, Reply::Error("ERR received bad data".into()), "{server:?}: {what}");
        assert_eq!(c.cmd("EXISTS k"), Reply::Int(0), "{server:?}: {what} created a key");
        watch.check(&mut c, what);
    }
    // Oversized: RedisBloom's phrase first, bloomkit's reason after it.
    c.ok("CONFIG SET bf.max-filter-bytes 64");
    let reply = c.call(&[b"BF.LOADCHUNK".to_vec(), b"k".to_vec(), b"1".to_vec(), header.clone()]);
    let text = reply.error_text().to_owned();
    assert!(text.starts_with("ERR received bad data: the filter would take"), "{server:?}: {text}");
    assert_eq!(c.cmd("EXISTS k"), Reply::Int(0));
    c.ok("CONFIG SET bf.max-filter-bytes 4294967296");
    watch.check(&mut c, "oversized header");
}

/// The DUMP payload of a one-sub-filter `MBbloom--` value (encoding 4) with
/// these counts, sealed for RESTORE. `model` is a real DUMP of the type,
/// whose first 10 bytes name it and whose last 10 are RDB version and CRC.
fn bloom_payload(model: &[u8], items: u64, options: u64, growth: u64, link_items: u64) -> Vec<u8> {
    let mut v = RdbValue(model[..10].to_vec());
    v.unsigned(items);
    v.unsigned(1); // sub-filters
    v.unsigned(options);
    v.unsigned(growth);
    v.unsigned(100); // capacity
    v.double(0.01);
    v.unsigned(7); // hashes
    v.double(9.585);
    v.unsigned(959); // bits
    v.unsigned(0); // n2
    v.buffer(&[0u8; 120]);
    v.unsigned(link_items);
    v.0.push(0); // EOF opcode
    v.0.extend_from_slice(&model[model.len() - 10..model.len() - 8]);
    seal(&v.0)
}

per_server!(bloom_payloads_whose_counts_lie_are_refused);
fn bloom_payloads_whose_counts_lie_are_refused(server: Server) {
    let s = TestServer::hostile(server);
    let mut c = s.conn();
    let watch = Watch::new(&mut c);
    c.ok("BF.ADD model x");
    let model = c.cmd("DUMP model").as_bytes().to_vec();
    // The honest payload loads: what follows is refused for its lie alone.
    let honest = bloom_payload(&model, 5, 5, 2, 5);
    assert_eq!(
        c.call(&[b"RESTORE".to_vec(), b"honest".to_vec(), b"0".to_vec(), honest]),
        Reply::Simple("OK".into()),
        "{server:?}"
    );
    assert_eq!(c.cmd("BF.CARD honest"), Reply::Int(5));
    let lies = [
        ("total above the sub-filter's count", bloom_payload(&model, 6, 5, 2, 5)),
        ("total of 2^32", bloom_payload(&model, 1 << 32, 5, 2, 5)),
        ("sub-filter over its capacity", bloom_payload(&model, 101, 5, 2, 101)),
        ("unknown options bit", bloom_payload(&model, 5, 5 | 64, 2, 5)),
        ("growth 0 on a scaling filter", bloom_payload(&model, 5, 5, 0, 5)),
    ];
    for (what, payload) in lies {
        let reply = c.call(&[b"RESTORE".to_vec(), b"k".to_vec(), b"0".to_vec(), payload]);
        assert!(reply.error_text().contains("Bad data format"), "{server:?}: {what}: {reply:?}");
        assert_eq!(c.cmd("EXISTS k"), Reply::Int(0), "{server:?}: {what}");
        watch.check(&mut c, what);
    }
    // Non-scaling with a growth of 0 is what RedisBloom 8's EXPANSION 0 writes.
    let payload = bloom_payload(&model, 5, 5 | 8, 0, 5);
    assert_eq!(
        c.call(&[b"RESTORE".to_vec(), b"n".to_vec(), b"0".to_vec(), payload]),
        Reply::Simple("OK".into())
    );
}

per_server!(cuckoo_headers_past_the_limit_are_refused_in_redisbloom_words);
fn cuckoo_headers_past_the_limit_are_refused_in_redisbloom_words(server: Server) {
    let s = TestServer::hostile(server);
    let mut c = s.conn();
    let watch = Watch::new(&mut c);
    c.ok("CF.RESERVE src 100");
    c.ok("CF.ADD src x");
    let header = c.call(&["CF.SCANDUMP", "src", "0"]).as_array()[1].as_bytes().to_vec();
    c.ok("CONFIG SET bf.max-filter-bytes 100");
    let reply = c.call(&[b"CF.LOADCHUNK".to_vec(), b"k".to_vec(), b"1".to_vec(), header.clone()]);
    let text = reply.error_text().to_owned();
    assert!(text.starts_with("Couldn't create filter! The cuckoo filter would take"), "{server:?}: {text}");
    assert_eq!(c.cmd("EXISTS k"), Reply::Int(0));
    c.ok("CONFIG SET bf.max-filter-bytes 4294967296");
    watch.check(&mut c, "cuckoo headers");
}

/// RedisBloom 2.8.2 stores `EXPANSION 4294967296` as a growth of 0 on a
/// scaling filter. RESTORE of its DUMP is refused like any lying value, but
/// an RDB file holding it still loads at startup: no file may stop a server
/// from starting. The log says what was kept.
#[test]
fn redisbloom_rdb_files_with_odd_counts_still_load_at_startup() {
    let rb = TestServer::start(Server::Redis, &[Module::RedisBloom], &[]);
    let mut r = rb.conn();
    r.ok("BF.RESERVE old 0.01 100 EXPANSION 4294967296");
    r.call(&["BF.MADD", "old", "a", "b", "c"]);
    let dump = r.cmd("DUMP old").as_bytes().to_vec();
    r.ok("SAVE");
    let mut bk = TestServer::start(Server::Redis, &[Module::bloomkit()], &[]);
    let refused = bk.conn().call(&[b"RESTORE".to_vec(), b"old".to_vec(), b"0".to_vec(), dump]);
    assert!(refused.error_text().contains("Bad data format"), "{refused:?}");
    std::fs::copy(rb.dir().join("dump.rdb"), bk.dir().join("dump.rdb")).unwrap();
    bk.restart(&[]);
    let mut c = bk.conn();
    assert_eq!(c.cmd("BF.CARD old"), Reply::Int(3));
    assert_eq!(c.cmd("BF.EXISTS old b"), Reply::Int(1));
    assert!(bk.log().contains("whose counts RESTORE would refuse"), "{}", bk.log());
}
