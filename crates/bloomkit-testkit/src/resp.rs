//! A raw RESP2/RESP3 client that keeps each reply's exact bytes.

use std::io::{self, BufRead, BufReader, Write};
use std::net::TcpStream;
use std::time::Duration;

/// A parsed reply. `raw` of [`Conn::call_raw`] keeps the exact bytes.
#[derive(Clone, PartialEq)]
pub enum Reply {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Vec<u8>),
    Nil,
    Array(Vec<Reply>),
    Map(Vec<(Reply, Reply)>),
    Bool(bool),
    Double(String),
    Other(char, Vec<u8>),
}

/// Bulk strings print as (lossy) text, so that messages and `contains` checks read well.
impl std::fmt::Debug for Reply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Reply::Simple(s) => write!(f, "+{s:?}"),
            Reply::Error(e) => write!(f, "Error({e:?})"),
            Reply::Int(v) => write!(f, "{v}"),
            Reply::Bulk(b) => write!(f, "{:?}", String::from_utf8_lossy(b)),
            Reply::Nil => write!(f, "nil"),
            Reply::Array(items) => f.debug_list().entries(items).finish(),
            Reply::Map(pairs) => f.debug_map().entries(pairs.iter().map(|(k, v)| (k, v))).finish(),
            Reply::Bool(b) => write!(f, "#{b}"),
            Reply::Double(d) => write!(f, ",{d}"),
            Reply::Other(kind, bytes) => write!(f, "{kind}{:?}", String::from_utf8_lossy(bytes)),
        }
    }
}

impl Reply {
    pub fn as_int(&self) -> i64 {
        match self {
            Reply::Int(v) => *v,
            Reply::Bool(b) => i64::from(*b),
            other => panic!("expected an integer, got {other:?}"),
        }
    }

    pub fn as_bytes(&self) -> &[u8] {
        match self {
            Reply::Bulk(b) => b,
            Reply::Simple(s) => s.as_bytes(),
            other => panic!("expected a string, got {other:?}"),
        }
    }

    pub fn as_array(&self) -> &[Reply] {
        match self {
            Reply::Array(a) => a,
            other => panic!("expected an array, got {other:?}"),
        }
    }

    pub fn is_error(&self) -> bool {
        matches!(self, Reply::Error(_))
    }

    pub fn error_text(&self) -> &str {
        match self {
            Reply::Error(e) => e,
            other => panic!("expected an error, got {other:?}"),
        }
    }
}

pub struct Conn {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

/// Anything usable as one command argument.
pub trait ToArg {
    fn to_arg(&self) -> &[u8];
}
impl ToArg for &str {
    fn to_arg(&self) -> &[u8] {
        self.as_bytes()
    }
}
impl ToArg for String {
    fn to_arg(&self) -> &[u8] {
        self.as_bytes()
    }
}
impl ToArg for Vec<u8> {
    fn to_arg(&self) -> &[u8] {
        self
    }
}
impl ToArg for &[u8] {
    fn to_arg(&self) -> &[u8] {
        self
    }
}

impl Conn {
    pub fn connect(port: u16) -> io::Result<Conn> {
        let stream = TcpStream::connect(("127.0.0.1", port))?;
        stream.set_read_timeout(Some(Duration::from_secs(120)))?;
        stream.set_nodelay(true)?;
        Ok(Conn { reader: BufReader::new(stream.try_clone()?), writer: stream })
    }

    /// Sends a command without reading the reply (for pipelining).
    pub fn send<A: ToArg>(&mut self, args: &[A]) -> io::Result<()> {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            let a = a.to_arg();
            out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            out.extend_from_slice(a);
            out.extend_from_slice(b"\r\n");
        }
        self.writer.write_all(&out)
    }

    /// Reads one reply: its exact bytes and its parsed form.
    pub fn read_raw(&mut self) -> io::Result<(Vec<u8>, Reply)> {
        let mut raw = Vec::new();
        let reply = read_reply(&mut self.reader, &mut raw)?;
        Ok((raw, reply))
    }

    pub fn call_raw<A: ToArg>(&mut self, args: &[A]) -> io::Result<(Vec<u8>, Reply)> {
        self.send(args)?;
        self.read_raw()
    }

    pub fn try_call<A: ToArg>(&mut self, args: &[A]) -> io::Result<Reply> {
        Ok(self.call_raw(args)?.1)
    }

    /// Sends a command and returns its reply (error replies included); panics on I/O errors.
    pub fn call<A: ToArg>(&mut self, args: &[A]) -> Reply {
        self.try_call(args).unwrap_or_else(|e| panic!("I/O error: {e}"))
    }

    /// Sends `commands` pipelined and returns their replies, in order (error
    /// replies included): a few hundred at a time, so that neither side
    /// blocks on a full socket. A test of many commands spends its time in
    /// round trips (system time, both sides) unless they are pipelined.
    pub fn pipeline<A: ToArg>(&mut self, commands: &[Vec<A>]) -> Vec<Reply> {
        self.pipeline_raw(commands).into_iter().map(|(_, reply)| reply).collect()
    }

    /// [`Conn::pipeline`], each reply with its bytes as they came (for a
    /// differential test, which compares bytes).
    pub fn pipeline_raw<A: ToArg>(&mut self, commands: &[Vec<A>]) -> Vec<(Vec<u8>, Reply)> {
        let mut replies = Vec::with_capacity(commands.len());
        for batch in commands.chunks(500) {
            for command in batch {
                self.send(command).unwrap_or_else(|e| panic!("I/O error: {e}"));
            }
            for _ in batch {
                replies.push(self.read_raw().unwrap_or_else(|e| panic!("I/O error: {e}")));
            }
        }
        replies
    }

    /// Like `call`, with the arguments split on spaces.
    pub fn cmd(&mut self, line: &str) -> Reply {
        let args: Vec<&str> = line.split(' ').collect();
        self.call(&args)
    }

    /// A filter's whole SCANDUMP: `(iterator, data)` pairs, the header first
    /// (under iterator 1, as `BF.LOADCHUNK` takes it); None when `key` is not a filter.
    pub fn scandump(&mut self, key: &str) -> Option<Vec<(i64, Vec<u8>)>> {
        let mut chunks = Vec::new();
        let mut iter = 0i64;
        loop {
            let reply = self.call(&["BF.SCANDUMP", key, &iter.to_string()]);
            if reply.is_error() {
                return None;
            }
            let next = reply.as_array()[0].as_int();
            if next == 0 {
                return Some(chunks);
            }
            chunks.push((next, reply.as_array()[1].as_bytes().to_vec()));
            iter = next;
        }
    }

    /// Loads `scandump` output into `key` with `BF.LOADCHUNK`, asserting each is accepted.
    pub fn loadchunks(&mut self, key: &str, chunks: &[(i64, Vec<u8>)]) {
        for (iter, data) in chunks {
            let reply = self.call(&[
                b"BF.LOADCHUNK".to_vec(),
                key.as_bytes().to_vec(),
                iter.to_string().into_bytes(),
                data.clone(),
            ]);
            assert_eq!(reply, Reply::Simple("OK".into()), "BF.LOADCHUNK {key} {iter}");
        }
    }

    /// Makes the server keep nothing about commands beside the keys, for a
    /// test that weighs keys by `used_memory`: no slow-log entries (each
    /// keeps up to 32 of its command's arguments; debug builds on a loaded
    /// machine make many: 180 KB once in a CLI test of 3,000 keys) and no
    /// latency histograms (about 12 KB each, made at a command's first call).
    pub fn quiet(&mut self) {
        self.ok("CONFIG SET slowlog-log-slower-than -1");
        self.ok("SLOWLOG RESET");
        self.ok("CONFIG SET latency-tracking no");
    }

    /// One field of `INFO section`, as text.
    pub fn info_field(&mut self, section: &str, field: &str) -> String {
        let info = String::from_utf8(self.cmd(&format!("INFO {section}")).as_bytes().to_vec()).unwrap();
        info.lines()
            .find_map(|l| l.strip_prefix(&format!("{field}:")))
            .unwrap_or_else(|| panic!("{field} in INFO {section}"))
            .trim()
            .to_string()
    }

    /// Several fields of `INFO section`, as text, in the order asked: an
    /// assertion on a list of counters names each that differs.
    pub fn info_fields(&mut self, section: &str, fields: &[&str]) -> Vec<(String, String)> {
        fields.iter().map(|f| (f.to_string(), self.info_field(section, f))).collect()
    }

    /// Asserts fields of `INFO section`: `expected` lists `(field, value)`.
    pub fn assert_info(&mut self, section: &str, expected: &[(&str, &str)], context: &str) {
        let names: Vec<&str> = expected.iter().map(|(f, _)| *f).collect();
        let got = self.info_fields(section, &names);
        let want: Vec<(String, String)> =
            expected.iter().map(|(f, v)| (f.to_string(), v.to_string())).collect();
        assert_eq!(got, want, "{context}: INFO {section}");
    }

    /// Polls, up to `deadline`, until this replica's link is up and no sync is in progress.
    pub fn wait_for_sync(&mut self, deadline: std::time::Duration) {
        crate::wait_until("the replica to sync", deadline, || {
            self.info_field("replication", "master_link_status") == "up"
                && self.info_field("replication", "master_sync_in_progress") == "0"
        });
    }

    /// Polls, up to `deadline`, until no AOF rewrite is running or scheduled.
    pub fn wait_for_aof_rewrite(&mut self, deadline: std::time::Duration) {
        crate::wait_until("the AOF rewrite to finish", deadline, || {
            self.info_field("persistence", "aof_rewrite_in_progress") == "0"
                && self.info_field("persistence", "aof_rewrite_scheduled") == "0"
        });
    }

    /// `DEBUG DIGEST`: the whole dataset's digest, equal on servers holding
    /// the same data.
    pub fn digest(&mut self) -> Reply {
        self.cmd("DEBUG DIGEST")
    }

    /// Like `cmd`, panicking on an error reply.
    pub fn ok(&mut self, line: &str) -> Reply {
        let reply = self.cmd(line);
        assert!(!reply.is_error(), "{line}: {reply:?}");
        reply
    }

    /// The names of every key (`KEYS *`), as text: for tests that look over
    /// a small keyspace.
    pub fn key_names(&mut self) -> Vec<String> {
        self.cmd("KEYS *")
            .as_array()
            .iter()
            .map(|k| String::from_utf8_lossy(k.as_bytes()).into_owned())
            .collect()
    }

    /// Turns active defragmentation on as eagerly as the server allows (any
    /// fragmentation, the least CPU share, one field per scan step), so that
    /// a test sees the defragmenter move its values within seconds.
    pub fn start_active_defrag(&mut self) {
        for setting in [
            "active-defrag-ignore-bytes 1mb",
            "active-defrag-threshold-lower 1",
            "active-defrag-cycle-min 1",
            "active-defrag-cycle-max 1",
            "active-defrag-max-scan-fields 1",
            "activedefrag yes",
        ] {
            self.ok(&format!("CONFIG SET {setting}"));
        }
    }
}

fn read_line(r: &mut impl BufRead, raw: &mut Vec<u8>) -> io::Result<Vec<u8>> {
    let mut line = Vec::new();
    r.read_until(b'\n', &mut line)?;
    if line.len() < 2 || !line.ends_with(b"\r\n") {
        return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "connection closed mid-reply"));
    }
    raw.extend_from_slice(&line);
    line.truncate(line.len() - 2);
    Ok(line)
}

fn parse_len(bytes: &[u8]) -> io::Result<i64> {
    std::str::from_utf8(bytes)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "bad length"))
}

fn read_reply(r: &mut impl BufRead, raw: &mut Vec<u8>) -> io::Result<Reply> {
    let line = read_line(r, raw)?;
    let (kind, rest) =
        line.split_first().ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "empty line"))?;
    let text = || String::from_utf8_lossy(rest).into_owned();
    Ok(match kind {
        b'+' => Reply::Simple(text()),
        b'-' => Reply::Error(text()),
        b':' => Reply::Int(parse_len(rest)?),
        b'_' => Reply::Nil,
        b'#' => Reply::Bool(rest == b"t"),
        b',' => Reply::Double(text()),
        b'$' | b'=' | b'!' => {
            let len = parse_len(rest)?;
            if len < 0 {
                Reply::Nil
            } else {
                let mut data = vec![0u8; len as usize + 2];
                std::io::Read::read_exact(r, &mut data)?;
                raw.extend_from_slice(&data);
                data.truncate(len as usize);
                Reply::Bulk(data)
            }
        }
        b'*' | b'~' | b'>' => {
            let len = parse_len(rest)?;
            if len < 0 {
                Reply::Nil
            } else {
                let mut items = Vec::with_capacity(len as usize);
                for _ in 0..len {
                    items.push(read_reply(r, raw)?);
                }
                Reply::Array(items)
            }
        }
        b'%' | b'|' => {
            let len = parse_len(rest)?;
            let mut pairs = Vec::with_capacity(len as usize);
            for _ in 0..len {
                let k = read_reply(r, raw)?;
                let v = read_reply(r, raw)?;
                pairs.push((k, v));
            }
            if *kind == b'|' {
                // An attribute precedes the real reply.
                return read_reply(r, raw);
            }
            Reply::Map(pairs)
        }
        other => Reply::Other(*other as char, rest.to_vec()),
    })
}
