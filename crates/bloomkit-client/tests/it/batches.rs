//! Every call is split into commands of at most `batch_size` items, so one
//! call never holds the server long: watched with MONITOR, on the module
//! and bitmap backends.

use bloomkit_client::{Filter, Layout, Options, RedisFilter};
use bloomkit_testkit::{Conn, Module, Reply, Server, TestServer};

use crate::common;
use common::{connect, items, slices};

/// The arguments of each command MONITOR saw until `ECHO <marker>`.
fn monitored(monitor: &mut Conn, marker: &str) -> Vec<Vec<String>> {
    let mut commands = Vec::new();
    loop {
        let (_, line) = monitor.read_raw().unwrap();
        let Reply::Simple(line) = line else { panic!("MONITOR sent {line:?}") };
        let args: Vec<String> = line.split('"').skip(1).step_by(2).map(str::to_string).collect();
        if args.first().is_some_and(|a| a.eq_ignore_ascii_case("ECHO"))
            && args.get(1).is_some_and(|a| a == marker)
        {
            return commands;
        }
        commands.push(args);
    }
}

#[test]
fn calls_are_split_into_batches_of_at_most_batch_size_items() {
    let server = TestServer::start(Server::Redis, &[Module::bloomkit()], &[]);
    let many = items("batched", 2500);
    for (layout, name) in [
        (
            Layout::module("b:module", Options { batch_size: 100, ..Options::new(10_000, 0.001) }).unwrap(),
            "module",
        ),
        (
            Layout::bitmap("b:bitmap", Options { batch_size: 100, ..Options::new(10_000, 0.001) }).unwrap(),
            "bitmap",
        ),
    ] {
        let hashes = u64::from(bloomkit_core::bitmap::guava::GuavaShape::new(10_000, 0.001).unwrap().hashes);
        let mut monitor = server.conn();
        assert_eq!(monitor.cmd("MONITOR"), Reply::Simple("OK".into()));
        let mut f = RedisFilter::new(connect(&server), layout);
        f.add_many(&slices(&many)).unwrap();
        f.contains_many(&slices(&many)).unwrap();
        server.conn().cmd(&format!("ECHO end-{name}"));
        let commands = monitored(&mut monitor, &format!("end-{name}"));
        let mut batched = 0;
        for args in &commands {
            let verb = args[0].to_ascii_uppercase();
            let items = match verb.as_str() {
                "BF.INSERT" => {
                    args.iter().skip_while(|a| !a.eq_ignore_ascii_case("ITEMS")).count() as u64 - 1
                }
                "BF.MEXISTS" | "BF.MADD" => args.len() as u64 - 2,
                // k bit operations (GET or SET) per item.
                "BITFIELD" | "BITFIELD_RO" => {
                    args.iter().filter(|a| *a == "GET" || *a == "SET").count() as u64 / hashes
                }
                _ => continue,
            };
            batched += 1;
            assert!(items <= 100, "{name}: {verb} with {items} items: {:?}", &args[..4.min(args.len())]);
        }
        assert!(batched >= 2 * 25, "{name}: {batched} batched commands for 2 x 2500 items");
    }
}
