//! `bloomkit-loadgen`: drives one server hard enough that the server, not the
//! client, is the bottleneck.
//!
//! redis-benchmark formats and randomises every request as it goes; with 100
//! random items per request that costs the client more CPU than the server.
//! Here requests are built once into a pool, and each connection replays the
//! pool from its own offset, so the client's work per request is a memcpy and
//! a scan of the reply bytes.
//!
//! ```text
//! bloomkit-loadgen --port P --clients 50 --pipeline 32 --requests 2000000 \
//!     --range 2000000000 --prefix miss: -- BF.MEXISTS key {item} {item} ...
//! ```
//! Each `{item}` becomes `<prefix><12-digit random number below range>`.
//! `--fresh` builds every request anew (for "new items"); `--seed` picks the pool;
//! `--sequence N` makes the items N, N+1, ... instead (distinct by
//! construction, each thread its own stretch: for loading exactly so many).
//! `--pool N` replays N requests (default 100 000): a pool of single items
//! that small touches only a few tens of MB of a filter, which a large L3
//! holds; a filter meant to be DRAM-bound needs a pool as large as the run.
//! Prints `<requests per second> <error replies>`.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Instant;

struct Options {
    port: u16,
    clients: usize,
    pipeline: usize,
    requests: usize,
    range: u64,
    prefix: String,
    threads: usize,
    seed: u64,
    /// Build every request anew (items never repeat) instead of replaying a pool.
    fresh: bool,
    sequence: Option<u64>,
    pool: usize,
    command: Vec<String>,
}

fn parse_args() -> Options {
    let mut o = Options {
        port: 6379,
        clients: 50,
        pipeline: 1,
        requests: 100_000,
        range: 1_000_000,
        prefix: String::new(),
        threads: 2,
        seed: 42,
        fresh: false,
        sequence: None,
        pool: 100_000,
        command: Vec::new(),
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || args.next().unwrap_or_else(|| panic!("{a} needs a value"));
        match a.as_str() {
            "--port" => o.port = value().parse().expect("--port"),
            "--clients" => o.clients = value().parse().expect("--clients"),
            "--pipeline" => o.pipeline = value().parse().expect("--pipeline"),
            "--requests" => o.requests = value().parse().expect("--requests"),
            "--range" => o.range = value().parse().expect("--range"),
            "--prefix" => o.prefix = value(),
            "--threads" => o.threads = value().parse().expect("--threads"),
            "--seed" => o.seed = value().parse().expect("--seed"),
            "--fresh" => o.fresh = true,
            "--pool" => o.pool = value().parse().expect("--pool"),
            "--sequence" => {
                o.sequence = Some(value().parse().expect("--sequence"));
                o.fresh = true;
            }
            "--" => {
                o.command = args.collect();
                break;
            }
            other => panic!("unknown argument {other}"),
        }
    }
    assert!(!o.command.is_empty(), "give the command after --");
    o
}

/// SplitMix64, deterministic per pool.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e3779b97f4a7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d049bb133111eb);
        z ^ (z >> 31)
    }
}

/// Where items come from: random below `--range`, or a counter.
enum Items {
    Random(Rng),
    Sequence(u64),
}

impl Items {
    fn next(&mut self, range: u64) -> u64 {
        match self {
            Items::Random(rng) => rng.next() % range,
            Items::Sequence(n) => {
                *n += 1;
                *n - 1
            }
        }
    }
}

/// Appends one RESP-encoded request with its `{item}`s filled in.
fn encode_request(o: &Options, items: &mut Items, out: &mut Vec<u8>) {
    use std::io::Write as _;
    write!(out, "*{}\r\n", o.command.len()).unwrap();
    for word in &o.command {
        if word == "{item}" {
            let len = o.prefix.len() + 12;
            write!(out, "${len}\r\n{}{:012}\r\n", o.prefix, items.next(o.range)).unwrap();
        } else {
            write!(out, "${}\r\n{word}\r\n", word.len()).unwrap();
        }
    }
}

/// `count` requests to replay.
fn build_pool(o: &Options, count: usize, seed: u64) -> Vec<Vec<u8>> {
    let mut items = Items::Random(Rng(seed));
    (0..count)
        .map(|_| {
            let mut out = Vec::new();
            encode_request(o, &mut items, &mut out);
            out
        })
        .collect()
}

/// Counts complete top-level replies in a byte stream, across reads.
#[derive(Default)]
struct ReplyCounter {
    /// Elements still expected at each open array level.
    pending: Vec<i64>,
    partial: Vec<u8>,
    bulk_left: usize,
    errors: u64,
}

impl ReplyCounter {
    /// Feeds bytes; returns how many top-level replies completed.
    fn feed(&mut self, mut data: &[u8]) -> usize {
        let mut done = 0;
        while !data.is_empty() {
            if self.bulk_left > 0 {
                let n = self.bulk_left.min(data.len());
                self.bulk_left -= n;
                data = &data[n..];
                if self.bulk_left == 0 {
                    done += self.element_done();
                }
                continue;
            }
            let Some(end) = data.iter().position(|&b| b == b'\n') else {
                self.partial.extend_from_slice(data);
                break;
            };
            let line_owned;
            let line: &[u8] = if self.partial.is_empty() {
                &data[..end]
            } else {
                self.partial.extend_from_slice(&data[..end]);
                line_owned = std::mem::take(&mut self.partial);
                &line_owned
            };
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            let number =
                || std::str::from_utf8(&line[1..]).ok().and_then(|s| s.parse::<i64>().ok()).unwrap_or(0);
            match line.first() {
                Some(b'*' | b'%' | b'~') => {
                    let mut n = number();
                    if line[0] == b'%' {
                        n *= 2;
                    }
                    if n <= 0 {
                        done += self.element_done();
                    } else {
                        self.pending.push(n);
                    }
                }
                Some(b'$') => {
                    let n = number();
                    if n < 0 {
                        done += self.element_done();
                    } else {
                        self.bulk_left = n as usize + 2;
                    }
                }
                Some(b'-') => {
                    self.errors += 1;
                    done += self.element_done();
                }
                _ => done += self.element_done(),
            }
            data = &data[end + 1..];
        }
        done
    }

    /// One element finished; returns 1 when that closed a top-level reply.
    fn element_done(&mut self) -> usize {
        loop {
            match self.pending.last_mut() {
                None => return 1,
                Some(left) => {
                    *left -= 1;
                    if *left > 0 {
                        return 0;
                    }
                    self.pending.pop();
                }
            }
        }
    }
}

/// One thread's connections: `clients` of them, numbered from `first_client`
/// among all threads' (for their starting places in the pool).
fn run_thread(
    o: &Options,
    (first_client, clients): (usize, usize),
    requests: usize,
    pool: &[Vec<u8>],
    seed: u64,
    first: u64,
) -> u64 {
    let mut items = match o.sequence {
        Some(_) => Items::Sequence(first),
        None => Items::Random(Rng(seed)),
    };
    let mut conns: Vec<(TcpStream, ReplyCounter, usize)> = (0..clients)
        .map(|i| {
            let s = TcpStream::connect(("127.0.0.1", o.port)).expect("connect");
            s.set_nodelay(true).unwrap();
            // Evenly spaced starts: with a pool as large as the run, the
            // connections replay disjoint stretches and every request differs.
            (s, ReplyCounter::default(), (first_client + i) * pool.len() / o.clients.max(1))
        })
        .collect();
    let mut remaining = requests;
    let mut buf = vec![0u8; 1 << 16];
    let mut batch = Vec::new();
    let mut in_flight = vec![0usize; conns.len()];
    // Each connection is refilled as soon as its replies are in, so that the
    // server always has requests queued on other connections meanwhile.
    let mut send = |i: usize, conns: &mut Vec<(TcpStream, ReplyCounter, usize)>, remaining: &mut usize| {
        let n = o.pipeline.min(*remaining);
        if n == 0 {
            return 0;
        }
        let (stream, _, offset) = &mut conns[i];
        batch.clear();
        for _ in 0..n {
            if o.fresh {
                encode_request(o, &mut items, &mut batch);
            } else {
                batch.extend_from_slice(&pool[*offset]);
                *offset = (*offset + 1) % pool.len();
            }
        }
        stream.write_all(&batch).expect("write");
        *remaining -= n;
        n
    };
    for (i, slot) in in_flight.iter_mut().enumerate() {
        *slot = send(i, &mut conns, &mut remaining);
    }
    while in_flight.iter().any(|&n| n > 0) {
        for i in 0..conns.len() {
            let mut expected = in_flight[i];
            while expected > 0 {
                let (stream, counter, _) = &mut conns[i];
                let n = stream.read(&mut buf).expect("read");
                assert!(n > 0, "the server closed the connection");
                expected -= counter.feed(&buf[..n]);
            }
            in_flight[i] = send(i, &mut conns, &mut remaining);
        }
    }
    conns.iter().map(|(_, c, _)| c.errors).sum()
}

fn main() {
    let o = parse_args();
    let pool = if o.fresh { Vec::new() } else { build_pool(&o, o.pool.min(o.requests).max(1), o.seed) };
    let threads = o.threads.max(1).min(o.clients);
    let start = Instant::now();
    let errors: u64 = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let clients = o.clients / threads + usize::from(t < o.clients % threads);
                let first_client =
                    (0..t).map(|u| o.clients / threads + usize::from(u < o.clients % threads)).sum();
                let requests = o.requests / threads;
                let (o, pool) = (&o, &pool);
                let seed = o.seed.wrapping_add(1 + t as u64);
                let per_request = o.command.iter().filter(|w| *w == "{item}").count() as u64;
                let first = o.sequence.unwrap_or(0) + t as u64 * requests as u64 * per_request;
                scope.spawn(move || run_thread(o, (first_client, clients), requests, pool, seed, first))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    });
    let elapsed = start.elapsed().as_secs_f64();
    let done = (o.requests / threads) * threads;
    println!("{:.1} {}", done as f64 / elapsed, errors);
}

#[cfg(test)]
mod tests {
    use super::ReplyCounter;

    #[test]
    fn counts_replies_across_reads() {
        let stream = b":1\r\n*3\r\n:1\r\n-ERR x\r\n$3\r\nabc\r\n+OK\r\n*2\r\n*1\r\n:1\r\n$-1\r\n#t\r\n";
        for split in 0..stream.len() {
            let mut c = ReplyCounter::default();
            let n = c.feed(&stream[..split]) + c.feed(&stream[split..]);
            assert_eq!(n, 5, "split at {split}");
            assert_eq!(c.errors, 1);
        }
    }
}
