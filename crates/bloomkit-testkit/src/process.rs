//! Child processes and waits with deadlines, so that no test can hang CI
//! instead of failing, and free loopback ports.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Runs a command to its end within `deadline`, feeding it `stdin`, and
/// returns its output; past the deadline it is killed and the test fails
/// saying which command hung, so no test can hang CI instead of failing.
pub fn output_within(cmd: &mut Command, stdin: &[u8], deadline: Duration) -> std::process::Output {
    use std::io::{Read, Write};
    let what = format!("{cmd:?}");
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {what}: {e}"));
    // Fed and drained by threads: the child may fill a pipe before it reads all input.
    let mut pipe = child.stdin.take().expect("piped stdin");
    let input = stdin.to_vec();
    let feeder = std::thread::spawn(move || {
        let _ = pipe.write_all(&input);
    });
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = r.read_to_end(&mut buf);
            buf
        })
    };
    let stdout = drain(Box::new(child.stdout.take().expect("piped stdout")));
    let stderr = drain(Box::new(child.stderr.take().expect("piped stderr")));
    let status = wait_within(&mut child, deadline)
        .unwrap_or_else(|| panic!("{what} still running after {deadline:?}"));
    let _ = feeder.join();
    std::process::Output { status, stdout: stdout.join().unwrap(), stderr: stderr.join().unwrap() }
}

/// Waits for a child to exit within `deadline`; kills it (and returns
/// `None`) if it has not.
pub fn wait_within(child: &mut Child, deadline: Duration) -> Option<std::process::ExitStatus> {
    let end = Instant::now() + deadline;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        if Instant::now() > end {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A port nothing listens on right now.
pub fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    listener.local_addr().expect("local addr").port()
}

/// Polls `check` until it returns true or the deadline passes.
pub fn wait_until(what: &str, deadline: Duration, mut check: impl FnMut() -> bool) {
    let end = Instant::now() + deadline;
    while !check() {
        assert!(Instant::now() < end, "timed out after {deadline:?} waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}
