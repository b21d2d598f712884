//! Count each click once: read click ids from stdin, print the new ones.
//!
//! Uses the bf module when the server has one and falls back to a plain
//! bitmap when it does not (managed services), with the same code after.
//!
//! ```text
//! cargo run --example click_dedup < clicks.txt                         # $BLOOMKIT_URL, or 127.0.0.1:6379
//! cargo run --example click_dedup -- redis://127.0.0.1:7000/ < clicks.txt
//! ```
//!
//! The filter (`clicks:seen`, 1M clicks at 0.1%) takes about 1.8 MB.

use std::io::{BufRead, Write};

use bloomkit_client::{Error, Filter, Layout, Options, RedisFilter};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::args().nth(1).unwrap_or_else(bloomkit_client::default_url);
    let client = redis::Client::open(url)?;
    let options = Options::new(1_000_000, 0.001);

    let mut filter =
        RedisFilter::new(client.get_connection()?, Layout::module("clicks:seen", options.clone())?);
    let backend = match filter.contains(b"probe") {
        Err(Error::ModuleMissing(_)) => {
            filter = RedisFilter::new(client.get_connection()?, Layout::bitmap("clicks:seen", options)?);
            "bitmap"
        }
        other => {
            other?;
            "module"
        }
    };

    let lines: Vec<String> = std::io::stdin().lock().lines().collect::<Result<_, _>>()?;
    let mut out = std::io::stdout().lock();
    let mut new_clicks = 0;
    for batch in lines.chunks(1000) {
        let items: Vec<&[u8]> = batch.iter().map(|l| l.as_bytes()).collect();
        for (line, new) in batch.iter().zip(filter.add_many(&items)?) {
            if new {
                writeln!(out, "{line}")?;
                new_clicks += 1;
            }
        }
    }
    let info = filter.info()?;
    eprintln!(
        "backend {backend}: {new_clicks} new of {} clicks; filter uses {} bytes",
        lines.len(),
        info.bytes
    );
    Ok(())
}
