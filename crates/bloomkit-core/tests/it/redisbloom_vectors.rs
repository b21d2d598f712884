//! Replies, BF.DEBUG lines and SCANDUMP streams captured from RedisBloom 2.8.2
//! (tests/fixtures/redisbloom-2.8.2.json) reproduced by the core alone.

use bloomkit_core::bf::args::{parse_reserve, Defaults};
use bloomkit_core::bf::{scandump as dump, Chain};
use bloomkit_core::common::compat::Compat;
use bloomkit_core::common::fmt::format_g;
use bloomkit_core::Limits;
use serde_json::Value;

fn cases() -> Vec<Value> {
    let text = include_str!("../fixtures/redisbloom-2.8.2.json");
    let doc: Value = serde_json::from_str(text).unwrap();
    doc["cases"].as_array().unwrap().clone()
}

fn hex_list(v: &Value) -> Vec<Vec<u8>> {
    v.as_array().unwrap().iter().map(|h| hex::decode(h.as_str().unwrap()).unwrap()).collect()
}

/// The chain a case describes, built as the module builds it.
fn build(case: &Value) -> Chain {
    let params = match &case["reserve"] {
        Value::Null => Defaults::REDISBLOOM.params(),
        r => {
            let mut argv: Vec<String> = vec!["BF.RESERVE".into(), "k".into()];
            argv.push(r["error_rate"].as_str().unwrap().into());
            argv.push(r["capacity"].to_string());
            argv.extend(r["options"].as_array().unwrap().iter().map(|o| o.as_str().unwrap().into()));
            parse_reserve(&argv, &Defaults::REDISBLOOM, Compat::RedisBloom28).unwrap()
        }
    };
    Chain::new(params, Limits::NONE).unwrap()
}

fn debug_lines(c: &Chain) -> Vec<String> {
    let mut lines = vec![format!("size:{}", c.items())];
    for f in c.filters() {
        let s = &f.shape();
        lines.push(format!(
            "bytes:{} bits:{} hashes:{} hashwidth:{} capacity:{} size:{} ratio:{}",
            s.bytes,
            s.bits,
            s.hashes,
            c.width().bits(),
            s.capacity,
            f.items,
            format_g(s.error)
        ));
    }
    lines
}

#[test]
fn every_case_matches_redisbloom() {
    let cases = cases();
    assert!(cases.len() >= 5);
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let mut chain = build(&case);
        let replies: Vec<i64> = hex_list(&case["items_hex"])
            .iter()
            .map(|item| i64::from(chain.add(item, Limits::NONE).unwrap()))
            .collect();
        let expected: Vec<i64> =
            case["madd_reply"].as_array().unwrap().iter().map(|v| v.as_i64().unwrap()).collect();
        assert_eq!(replies, expected, "{name}: BF.MADD replies");

        let info = case["info_resp2"].as_array().unwrap();
        assert_eq!(info[1].as_u64(), Some(chain.capacity()), "{name}: Capacity");
        assert_eq!(info[3].as_u64(), Some(chain.size_bytes()), "{name}: Size");
        assert_eq!(info[5].as_u64(), Some(chain.filters().len() as u64), "{name}: filters");
        assert_eq!(info[7].as_u64(), Some(chain.items()), "{name}: items");
        assert_eq!(info[9].as_u64(), chain.expansion().map(u64::from), "{name}: expansion");

        let debug: Vec<String> =
            case["debug"].as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_string()).collect();
        assert_eq!(debug_lines(&chain), debug, "{name}: BF.DEBUG");

        // SCANDUMP: header then chunks, byte for byte.
        let stream = case["scandump"].as_array().unwrap();
        let header = hex::decode(stream[0]["hex"].as_str().unwrap()).unwrap();
        assert_eq!(stream[0]["iter"].as_i64(), Some(1));
        assert_eq!(dump::encode_header(&chain), header, "{name}: SCANDUMP header");
        let ours: Vec<(i64, Vec<u8>)> = dump::chunks(&chain).map(|(i, d)| (i, d.to_vec())).collect();
        let theirs: Vec<(i64, Vec<u8>)> = stream[1..]
            .iter()
            .filter(|c| c["iter"].as_i64() != Some(0))
            .map(|c| (c["iter"].as_i64().unwrap(), hex::decode(c["hex"].as_str().unwrap()).unwrap()))
            .collect();
        assert_eq!(ours, theirs, "{name}: SCANDUMP chunks");

        // Loading their stream gives a filter that answers as theirs does.
        let mut loaded = dump::decode_header(&header, Limits::NONE).unwrap();
        for (iter, data) in &theirs {
            dump::load_chunk(&mut loaded, *iter, data).unwrap();
        }
        for item in hex_list(&case["items_hex"]) {
            assert!(loaded.contains(&item), "{name}: item lost in LOADCHUNK");
        }
        let absent = hex_list(&case["probe_absent_hex"]);
        let answers: Vec<i64> = absent.iter().map(|i| i64::from(chain.contains(i))).collect();
        let expected: Vec<i64> =
            case["probe_absent_exists"].as_array().unwrap().iter().map(|v| v.as_i64().unwrap()).collect();
        assert_eq!(answers, expected, "{name}: BF.MEXISTS of absent items");
    }
}
