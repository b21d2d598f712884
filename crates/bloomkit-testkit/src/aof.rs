//! Append-only files: the server arguments that write one, and its commands
//! read back.

/// Server arguments for an AOF, with or without the RDB preamble in
/// rewrites. Written with `appendfsync everysec`: a restart's SHUTDOWN
/// flushes and syncs it, which is all a test that restarts needs, and a
/// sync on every command made the persistence suites four times slower;
/// `BLOOMKIT_LONG_TESTS=1` syncs on every command (`always`), as they once
/// did. A test of what a crash loses sets its own policy (reliability.rs).
pub fn aof_args(preamble: bool) -> Vec<&'static str> {
    let preamble = if preamble { "yes" } else { "no" };
    let fsync = crate::lean_or_long("everysec", "always");
    vec!["--appendonly", "yes", "--appendfsync", fsync, "--aof-use-rdb-preamble", preamble]
}

/// The commands of a RESP command stream (an AOF file without an RDB
/// preamble), each as its arguments.
pub fn aof_commands(aof: &[u8]) -> Vec<Vec<Vec<u8>>> {
    let mut pos = 0;
    let line = |pos: &mut usize| {
        let end = aof[*pos..].windows(2).position(|w| w == b"\r\n").expect("a CRLF") + *pos;
        let l = String::from_utf8(aof[*pos..end].to_vec()).expect("a text line");
        *pos = end + 2;
        l
    };
    let mut out = Vec::new();
    while pos < aof.len() {
        let n: usize = line(&mut pos)[1..].parse().expect("an argument count");
        let mut cmd = Vec::with_capacity(n);
        for _ in 0..n {
            let len: usize = line(&mut pos)[1..].parse().expect("an argument length");
            cmd.push(aof[pos..pos + len].to_vec());
            pos += len + 2;
        }
        out.push(cmd);
    }
    out
}
