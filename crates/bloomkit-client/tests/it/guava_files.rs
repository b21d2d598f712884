//! Guava's serial form against real Guava (Debian's libguava-java and the
//! JDK, installed by scripts/test-servers.sh): a file Guava wrote restores
//! into a `guava`-layout bitmap that answers exactly as Guava does, dumps
//! back byte for byte, and a file bloomkit dumps is read by Guava with every
//! item in it. Damaged and unsupported files are refused and write nothing.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use bloomkit_client::transfer::{self, BitmapParams, Server};
use bloomkit_client::{Filter, Layout, Options, RedisFilter};
use bloomkit_testkit::{output_within, Server as Kind, TestServer};

use crate::common;
use common::connect;

const GUAVA_JAR: &str = "/usr/share/java/guava.jar";

/// The compiled harness (tests/java/GuavaFiles.java) in `dir`.
fn harness(dir: &Path) -> PathBuf {
    assert!(
        Path::new(GUAVA_JAR).exists(),
        "{GUAVA_JAR} is missing: apt-get install libguava-java default-jdk-headless (scripts/test-servers.sh does)"
    );
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/java/GuavaFiles.java");
    let out = output_within(
        Command::new("javac").args(["-encoding", "UTF-8", "-cp", GUAVA_JAR, "-d"]).arg(dir).arg(src),
        b"",
        Duration::from_secs(120),
    );
    assert!(out.status.success(), "javac: {}", String::from_utf8_lossy(&out.stderr));
    dir.to_path_buf()
}

fn java(classes: &Path, args: &[&str]) -> String {
    let out = output_within(
        Command::new("java")
            .arg("-cp")
            .arg(format!("{GUAVA_JAR}:{}", classes.display()))
            .arg("GuavaFiles")
            .args(args),
        b"",
        Duration::from_secs(120),
    );
    assert!(out.status.success(), "java {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

fn write_lines(path: &Path, items: &[String]) {
    std::fs::write(path, items.join("\n") + "\n").unwrap();
}

/// Items with non-ASCII text too: Guava's funnel hashes their UTF-8.
fn items(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| if i % 7 == 0 { format!("{prefix}-é日本-{i}") } else { format!("{prefix}-{i}") }).collect()
}

fn refs(items: &[String]) -> Vec<&[u8]> {
    items.iter().map(|s| s.as_bytes()).collect()
}

#[test]
fn guava_files_cross_both_ways() {
    let dir = tempdir();
    let classes = harness(&dir);
    let server = TestServer::start(Kind::Redis, &[], &[]);
    let mut s = Server::connect(&format!("redis://127.0.0.1:{}/", server.port)).unwrap();
    let (added, probes) = (items("added", 3000), items("probe", 20_000));
    write_lines(&dir.join("added.txt"), &added);
    write_lines(&dir.join("probes.txt"), &probes);

    // Guava writes; bloomkit restores and answers every probe as Guava does.
    let from_java = dir.join("from-java.bin");
    java(
        &classes,
        &["write", from_java.to_str().unwrap(), "5000", "0.01", dir.join("added.txt").to_str().unwrap()],
    );
    let spec =
        transfer::restore_guava(&mut s, "restored", std::fs::File::open(&from_java).unwrap(), false, &())
            .unwrap();
    let shape = spec.shape;
    let layout = Layout::bitmap(
        "restored",
        Options { shape: Some((shape.bits, shape.hashes)), ..Options::new(1, 0.5) },
    )
    .unwrap();
    let mut filter = RedisFilter::new(connect(&server), layout);
    assert!(filter.contains_many(&refs(&added)).unwrap().iter().all(|&b| b), "every item Guava added");
    let ours: String =
        filter.contains_many(&refs(&probes)).unwrap().iter().map(|&b| if b { '1' } else { '0' }).collect();
    let guavas =
        java(&classes, &["read", from_java.to_str().unwrap(), dir.join("probes.txt").to_str().unwrap()]);
    assert_eq!(ours, guavas, "the same false positives as Guava, and no others");
    assert!(ours.contains('1'), "some false positives at 1%: the comparison means something");

    // ... and dumps it back byte for byte.
    let params = BitmapParams { shape: Some((shape.bits, shape.hashes)), ..BitmapParams::guava(1, 0.5) };
    let mut dumped = Vec::new();
    transfer::dump_guava(&mut s, "restored", &params, &mut dumped, &()).unwrap();
    assert_eq!(dumped, std::fs::read(&from_java).unwrap());

    // bloomkit writes (sized as Guava sizes 5000 at 1%); Guava reads every item.
    let mut ours =
        RedisFilter::new(connect(&server), Layout::bitmap("ours", Options::new(5000, 0.01)).unwrap());
    ours.add_many(&refs(&added)).unwrap();
    let to_java = dir.join("to-java.bin");
    transfer::dump_guava(
        &mut s,
        "ours",
        &BitmapParams::guava(5000, 0.01),
        std::fs::File::create(&to_java).unwrap(),
        &(),
    )
    .unwrap();
    let seen = java(&classes, &["read", to_java.to_str().unwrap(), dir.join("added.txt").to_str().unwrap()]);
    assert_eq!(seen, "1".repeat(added.len()), "Guava sees every item bloomkit added");
    assert_eq!(
        std::fs::read(&to_java).unwrap(),
        std::fs::read(&from_java).unwrap(),
        "the same filter, the same bytes"
    );

    // Other layouts have no Guava form.
    let redisson =
        BitmapParams { layout: bloomkit_client::BitmapLayout::Redisson, ..BitmapParams::guava(5000, 0.01) };
    let err = transfer::dump_guava(&mut s, "ours", &redisson, &mut Vec::new(), &()).unwrap_err();
    assert!(err.to_string().contains("only the guava layout"), "{err}");
}

/// Every damaged or unsupported file is refused with a reason, and neither
/// creates the key nor touches one it would replace.
#[test]
fn damaged_guava_files_change_nothing() {
    let server = TestServer::start(Kind::Redis, &[], &[]);
    let mut s = Server::connect(&format!("redis://127.0.0.1:{}/", server.port)).unwrap();
    let mut c = server.conn();
    c.call(&["SET", "kept", "original"]);
    // A good file: 3 hashes, 2 longs.
    let mut good = vec![1u8, 3, 0, 0, 0, 2];
    good.extend((0..16u8).map(|b| b.wrapping_mul(37)));
    good[6 + 8] |= 0x80; // bit 63 of the last long: the bitmap's very last bit
    transfer::restore_guava(&mut s, "fine", &good[..], false, &()).unwrap();
    let mut want = good[6..].to_vec();
    bloomkit_core::bitmap::guava::swap_bit_order(&mut want);
    assert_eq!(want[15] & 1, 1);
    assert_eq!(c.call(&["GET", "fine"]).as_bytes(), want, "every bit, the last one too");

    let mut cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("empty", vec![], "shorter than"),
        ("header cut", good[..4].to_vec(), "shorter than"),
        ("body cut", good[..good.len() - 1].to_vec(), "cut short"),
        ("trailing bytes", [&good[..], &[0u8]].concat(), "goes on after"),
        ("legacy strategy", [&[0u8][..], &good[1..]].concat(), "MURMUR128_MITZ_32"),
        ("unknown strategy", [&[2u8][..], &good[1..]].concat(), "strategy byte 2"),
        ("negative strategy", [&[0xffu8][..], &good[1..]].concat(), "strategy byte -1"),
        ("no hashes", [&[1u8, 0][..], &good[2..]].concat(), "0 hash functions"),
        ("no words", vec![1, 3, 0, 0, 0, 0], "0 words"),
        ("negative words", vec![1, 3, 0xff, 0xff, 0xff, 0xff], "-1 words"),
    ];
    // A header claiming 2^31 - 1 longs (16 GiB) over a few bytes.
    cases.push(("huge claim", [&[1u8, 3, 0x7f, 0xff, 0xff, 0xff][..], &[0u8; 64][..]].concat(), "cut short"));
    for (what, bytes, reason) in cases {
        for (key, replace) in [("new", false), ("kept", true)] {
            let err = transfer::restore_guava(&mut s, key, &bytes[..], replace, &()).unwrap_err();
            assert!(err.to_string().contains(reason), "{what}: {err}");
        }
        assert_eq!(c.call(&["EXISTS", "new"]).as_int(), 0, "{what}: nothing created");
        assert_eq!(c.call(&["GET", "kept"]).as_bytes(), b"original", "{what}: nothing replaced");
    }
    let keys = c.call(&["KEYS", "*staging*"]);
    assert!(keys.as_array().is_empty(), "no staging key left behind");
}

fn tempdir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "bloomkit-guava-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
