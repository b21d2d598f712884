//! valkey-bloom's filters against what valkey-bloom itself wrote and
//! answered (`tests/fixtures/valkey-bloom/`): its DUMP payloads and
//! `BF.LOAD` blobs load, every added item is present, every probe answers
//! exactly as it did (the same false positives, no others), `BF.INFO`
//! figures match, saving gives back the same bytes, and replaying the
//! creation commands from the seed rebuilds the same bits.

use bloomkit_core::common::fields::{FieldError, FieldReader, FieldWriter};
use bloomkit_core::vbloom::{Object, ValkeyError, FIXED_SEED};
use bloomkit_core::{Limits, ReplyError};
use serde_json::Value;

const KEYS: [&str; 3] = ["f1", "f2", "f3"];

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(format!("{}/tests/fixtures/valkey-bloom/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

fn json(name: &str) -> Value {
    serde_json::from_slice(&fixture(name)).unwrap()
}

fn payload(key: &str) -> Vec<u8> {
    hex::decode(String::from_utf8(fixture(&format!("{key}.dump.hex"))).unwrap().trim()).unwrap()
}

/// The module-value fields of a DUMP payload, as the server hands them to
/// a module: opcodes, RDB lengths, strings (LZF-decompressed).
struct Payload<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl Payload<'_> {
    /// After the value type (0x07) and the module id (0x81 + 8 bytes).
    fn new(bytes: &[u8]) -> Payload<'_> {
        assert_eq!(bytes[..2], [0x07, 0x81]);
        Payload { bytes, pos: 10 }
    }

    fn byte(&mut self) -> Result<u8, FieldError> {
        let b = *self.bytes.get(self.pos).ok_or(FieldError)?;
        self.pos += 1;
        Ok(b)
    }

    fn take(&mut self, n: usize) -> Result<&[u8], FieldError> {
        let v = self.bytes.get(self.pos..self.pos + n).ok_or(FieldError)?;
        self.pos += n;
        Ok(v)
    }

    /// An RDB length: `(value, encoded)`.
    fn length(&mut self) -> Result<(u64, bool), FieldError> {
        let t = self.byte()?;
        Ok(match t >> 6 {
            0 => (u64::from(t & 0x3f), false),
            1 => ((u64::from(t & 0x3f) << 8) | u64::from(self.byte()?), false),
            2 if t == 0x80 => (u64::from(u32::from_be_bytes(self.take(4)?.try_into().unwrap())), false),
            2 if t == 0x81 => (u64::from_be_bytes(self.take(8)?.try_into().unwrap()), false),
            3 => (u64::from(t & 0x3f), true),
            _ => return Err(FieldError),
        })
    }

    fn opcode(&mut self, want: u64) -> Result<(), FieldError> {
        match self.length()? {
            (op, false) if op == want => Ok(()),
            _ => Err(FieldError),
        }
    }

    fn is_at_eof(&mut self) -> bool {
        self.bytes.get(self.pos) == Some(&0)
    }
}

fn lzf(data: &[u8], out_len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(out_len);
    let mut i = 0;
    while i < data.len() {
        let ctrl = usize::from(data[i]);
        i += 1;
        if ctrl < 32 {
            out.extend_from_slice(&data[i..i + ctrl + 1]);
            i += ctrl + 1;
        } else {
            let mut len = ctrl >> 5;
            let mut back = (ctrl & 0x1f) << 8;
            if len == 7 {
                len += usize::from(data[i]);
                i += 1;
            }
            back += usize::from(data[i]) + 1;
            i += 1;
            for _ in 0..len + 2 {
                out.push(out[out.len() - back]);
            }
        }
    }
    assert_eq!(out.len(), out_len);
    out
}

impl FieldReader for Payload<'_> {
    fn unsigned(&mut self) -> Result<u64, FieldError> {
        self.opcode(2)?;
        Ok(self.length()?.0)
    }
    fn double(&mut self) -> Result<f64, FieldError> {
        self.opcode(4)?;
        Ok(f64::from_le_bytes(self.take(8)?.try_into().unwrap()))
    }
    fn buffer(&mut self) -> Result<Box<[u8]>, FieldError> {
        self.opcode(5)?;
        match self.length()? {
            (len, false) => Ok(self.take(len as usize)?.into()),
            (3, true) => {
                let (clen, ulen) = (self.length()?.0 as usize, self.length()?.0 as usize);
                Ok(lzf(self.take(clen)?, ulen).into())
            }
            _ => Err(FieldError),
        }
    }
}

/// Writes fields as the server's module API does (raw strings, no compression).
#[derive(Default)]
struct Writer(Vec<u8>);

impl Writer {
    fn length(&mut self, v: u64) {
        match v {
            0..=0x3f => self.0.push(v as u8),
            0x40..=0x3fff => self.0.extend_from_slice(&[0x40 | (v >> 8) as u8, v as u8]),
            0x4000..=0xffff_ffff => {
                self.0.push(0x80);
                self.0.extend_from_slice(&(v as u32).to_be_bytes());
            }
            _ => {
                self.0.push(0x81);
                self.0.extend_from_slice(&v.to_be_bytes());
            }
        }
    }
}

impl FieldWriter for Writer {
    fn unsigned(&mut self, v: u64) {
        self.0.push(2);
        self.length(v);
    }
    fn double(&mut self, v: f64) {
        self.0.push(4);
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn buffer(&mut self, v: &[u8]) {
        self.0.push(5);
        self.length(v.len() as u64);
        self.0.extend_from_slice(v);
    }
}

fn load(payload: &[u8]) -> Object {
    let mut r = Payload::new(payload);
    let o = Object::load(&mut r, 1, Limits::NONE).unwrap();
    assert!(r.is_at_eof(), "every field read");
    o
}

fn saved(o: &Object) -> Vec<u8> {
    let mut w = Writer::default();
    o.save(&mut w);
    w.0
}

/// The `BF.LOAD key blob` commands of valkey-bloom's rewritten AOF.
fn aof_blobs() -> Vec<(String, Vec<u8>)> {
    bloomkit_testkit::aof_commands(&fixture("appendonlydir/appendonly.aof.2.base.aof"))
        .into_iter()
        .filter(|args| args[0] == b"BF.LOAD")
        .map(|args| (String::from_utf8(args[1].clone()).unwrap(), args[2].clone()))
        .collect()
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array().unwrap().iter().map(|s| s.as_str().unwrap().to_string()).collect()
}

fn false_positives(o: &Object, probes: impl Iterator<Item = String>) -> Vec<String> {
    probes.filter(|p| o.contains(p.as_bytes())).collect()
}

/// Every added item present; the 200 probes and 20,000 more answer as valkey-bloom did.
fn assert_answers_like_valkey_bloom(key: &str, o: &Object) {
    let examples = json("examples.json");
    let extended = json("extended_probes.json");
    for item in strings(&examples["items"][key]) {
        assert!(o.contains(item.as_bytes()), "{key}: {item}");
    }
    let probes = strings(&examples["probe_items"]);
    assert_eq!(false_positives(o, probes.into_iter()), strings(&examples["false_positives"][key]), "{key}");
    let xprobes = (0..20_000).map(|i| format!("xprobe-{i}"));
    let fps = false_positives(o, xprobes);
    assert_eq!(fps, strings(&extended["false_positives"][key]), "{key}: extended probes");
    assert!(!fps.is_empty(), "{key}: the extended probes include false positives to reproduce");
}

#[test]
fn dump_payloads_answer_exactly_as_valkey_bloom_did() {
    for key in KEYS {
        assert_answers_like_valkey_bloom(key, &load(&payload(key)));
    }
}

#[test]
fn saving_gives_back_the_same_payload_bytes() {
    for key in KEYS {
        let p = payload(key);
        let o = load(&p);
        // The value's fields: after the type and module id, up to the EOF opcode.
        let fields = &p[10..p.len() - 11];
        assert_eq!(saved(&o), fields, "{key}");
    }
}

#[test]
fn info_figures_match_valkey_bloom() {
    let observed = json("observed.json");
    // The module's limit for these objects: bf.bloom-memory-usage-limit
    // (valkey-bloom's default when the recordings were made) under
    // bf.max-filter-bytes.
    let limits = Limits::at_most(bloomkit_core::vbloom::MEMORY_LIMIT);
    for key in KEYS {
        let o = load(&payload(key));
        let info = observed["results"][format!("info_{key}")]["ok"].as_array().unwrap().clone();
        let field = |name: &str| info[info.iter().position(|v| v == name).unwrap() + 1].clone();
        assert_eq!(o.capacity(), field("Capacity").as_u64().unwrap(), "{key}");
        assert_eq!(o.size(), field("Size").as_u64().unwrap(), "{key}");
        assert_eq!(o.filters().len() as u64, field("Number of filters").as_u64().unwrap(), "{key}");
        assert_eq!(o.items(), field("Number of items inserted").as_u64().unwrap(), "{key}");
        assert_eq!(o.fp_rate(), field("Error rate").as_f64().unwrap(), "{key}");
        assert_eq!(o.expansion().map(u64::from), field("Expansion rate").as_u64(), "{key}");
        if o.expansion().is_some() {
            assert_eq!(o.tightening(), field("Tightening ratio").as_f64().unwrap(), "{key}");
            assert_eq!(
                o.max_scaled_capacity(limits),
                field("Max scaled capacity").as_u64().unwrap(),
                "{key}"
            );
        }
    }
}

#[test]
fn aof_blobs_decode_to_the_same_objects_and_encode_back() {
    let blobs = aof_blobs();
    assert_eq!(blobs.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(), KEYS);
    for (key, blob) in blobs {
        let o = Object::decode_blob(&blob, Limits::at_most(4 << 30)).unwrap();
        assert_eq!(saved(&o), saved(&load(&payload(&key))), "{key}: the same object as its DUMP");
        assert_eq!(o.encode_blob().unwrap(), blob, "{key}: the blob valkey-bloom wrote");
        assert_answers_like_valkey_bloom(&key, &o);
    }
}

/// valkey-bloom's creation commands replayed from the recorded seeds give the
/// same bits and counts: its sizing, hash count, scaling (expansion,
/// tightening, shared seed) and item counting, and which adds returned 0.
#[test]
fn replaying_the_creation_rebuilds_the_same_filters() {
    let examples = json("examples.json");
    let cases: [(&str, u64, f64, u32); 3] =
        [("f1", 100, 0.01, 2), ("f2", 1000, 0.001, 4), ("f3", 200, 0.01, 0)];
    for (key, capacity, fp, expansion) in cases {
        let original = load(&payload(key));
        let seed = original.filters()[0].seed();
        let mut o = Object::new(capacity, fp, 0.5, expansion, &seed, Limits::NONE).unwrap();
        let mut not_added = Vec::new();
        for item in strings(&examples["items"][key]) {
            if !o.add(item.as_bytes(), Limits::at_most(4 << 30)).unwrap() {
                not_added.push(item);
            }
        }
        assert_eq!(saved(&o), saved(&original), "{key}");
        let expected =
            if key == "f2" { strings(&examples["f2_items_reported_existing_on_add"]) } else { vec![] };
        assert_eq!(not_added, expected, "{key}");
        assert_eq!(o.size(), original.size(), "{key}");
    }
    assert_eq!(examples["f3_seed_hex"], hex::encode(load(&payload("f3")).filters()[0].seed()));
}

#[test]
fn a_fixed_seed_payload_with_an_lzf_string_loads() {
    let observed = json("observed.json");
    let text = observed["results"]["errors"]
        ["fixed seed DUMP fixed1 (bf.bloom-use-random-seed no; BF.ADD fixed1 hello)"]
        .as_str()
        .unwrap();
    let o = load(&hex::decode(text).unwrap());
    assert!(!o.seed_random());
    assert_eq!(o.filters()[0].seed(), FIXED_SEED);
    assert!(o.contains(b"hello"));
    assert_eq!(o.items(), 1);
}

#[test]
fn damaged_payloads_are_refused_or_consistent() {
    // Every cut, and every byte flipped three ways: never a panic; what
    // loads saves to fields that load again to the same object.
    for key in KEYS {
        let p = payload(key);
        let end = p.len() - 11;
        for cut in 10..end {
            let mut r = Payload::new(&p[..cut]);
            assert!(Object::load(&mut r, 1, Limits::NONE).is_err(), "{key} cut at {cut}");
        }
        let mut loaded = 0;
        for i in 10..end {
            for flip in [0x01u8, 0x40, 0xff] {
                let mut d = p.clone();
                d[i] ^= flip;
                let mut r = Payload::new(&d);
                if let Ok(o) = Object::load(&mut r, 1, Limits::at_most(1 << 30)) {
                    loaded += 1;
                    let fields = saved(&o);
                    let mut again = vec![0x07, 0x81, 0, 0, 0, 0, 0, 0, 0, 0];
                    again.extend_from_slice(&fields);
                    again.push(0);
                    assert_eq!(saved(&load(&again)), fields, "{key} byte {i} ^ {flip:#x}");
                }
            }
        }
        assert!(loaded > 0, "{key}: flipped bits still load");
    }
}

#[test]
fn damaged_blobs_are_refused_with_valkey_bloom_texts() {
    let (_, blob) = aof_blobs().into_iter().next().unwrap();
    let limits = Limits::at_most(1 << 30);
    let refuse = |b: &[u8]| Object::decode_blob(b, limits).unwrap_err();
    assert_eq!(refuse(b""), ValkeyError::DecodeFailed);
    assert_eq!(refuse(b"garbage"), ValkeyError::UnsupportedVersion);
    for len in 1..blob.len() {
        assert!(
            refuse(&blob[..len]).message().starts_with("ERR bloom object decoding failed"),
            "cut to {len}"
        );
    }
    let with = |at: usize, bytes: &[u8]| {
        let mut b = blob.clone();
        b[at..at + bytes.len()].copy_from_slice(bytes);
        b
    };
    // Header: expansion @1, fp @5, tightening @13, seed flag @21, count @22; filter length @30, filter @38.
    assert_eq!(refuse(&with(5, &2f64.to_le_bytes())), ValkeyError::ErrorRateRange);
    assert_eq!(refuse(&with(13, &0f64.to_le_bytes())), ValkeyError::ErrorRateRange);
    assert_eq!(refuse(&with(5, &f64::NAN.to_le_bytes())), ValkeyError::ErrorRateRange);
    for (what, b) in [
        ("seed flag 2", with(21, &[2])),
        ("zero filters", with(22, &0u64.to_le_bytes())),
        ("2^60 filters", with(22, &(1u64 << 60).to_le_bytes())),
        ("filter length 2^63", with(30, &(1u64 << 63).to_le_bytes())),
        ("bitmap length claims 2^60 bytes", with(39, &(1u64 << 60).to_le_bytes())),
        ("zero hashes", with(47, &0u32.to_le_bytes())),
        ("4e9 hashes", with(47, &u32::MAX.to_le_bytes())),
        ("filter version 2", with(38, &[2])),
        ("fixed-seed flag with another seed", with(21, &[0])),
    ] {
        let e = refuse(&b);
        assert!(e.message().starts_with("ERR bloom object decoding failed"), "{what}: {e}");
    }
    // Capacity and items of the (only) sub-filter.
    let end = blob.len();
    for (what, at, v) in
        [("capacity 0", end - 8, 0i64), ("capacity -1", end - 8, -1), ("items -1", end - 16, -1)]
    {
        let e = refuse(&with(at, &v.to_le_bytes()));
        assert!(e.message().starts_with("ERR bloom object decoding failed"), "{what}: {e}");
    }
    assert_eq!(Object::decode_blob(&blob, Limits::at_most(300)).unwrap_err(), ValkeyError::MemoryLimit);
}
