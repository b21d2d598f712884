//! Items that cross-implementation fixtures were made from.

/// The strings scripts/guava-vectors/GuavaVectors.java hashes and inserts,
/// in its order: the fixture tests/fixtures/guava-31.1.json is about these.
pub fn guava_items(count: usize) -> Vec<String> {
    let fixed = [
        "",
        "a",
        "hello",
        "héllo wörld",
        "日本語のテキスト",
        "emoji \u{1F600} pair",
        "https://example.com/path?q=1",
        "0123456789abcdef",
        "seventeen bytes!!",
    ];
    let mut out: Vec<String> = fixed.iter().take(count).map(|s| s.to_string()).collect();
    let mut i = 0;
    while out.len() < count {
        out.push(format!("item-{i}{}", if i % 7 == 0 { "-é" } else { "" }));
        i += 1;
    }
    out
}
