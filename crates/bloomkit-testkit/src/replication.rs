//! Replicas: a dropped link and the partial resync that must follow.

use std::time::Duration;

use crate::{Conn, Reply};

/// Drops a replica's link to its primary, runs `write` on the primary
/// meanwhile, and checks that the replica came back by a partial resync
/// holding the same data; returns what `write` returned.
pub fn drop_link_and_resync<T>(
    p: &mut Conn,
    r: &mut Conn,
    write: impl FnOnce(&mut Conn) -> T,
    context: &str,
) -> T {
    let partial_before = p.info_field("stats", "sync_partial_ok").parse::<i64>().unwrap();
    r.ok("CLIENT KILL TYPE master");
    let written = write(p);
    r.wait_for_sync(Duration::from_secs(30));
    assert_eq!(p.cmd("WAIT 1 10000"), Reply::Int(1), "{context}");
    assert!(
        p.info_field("stats", "sync_partial_ok").parse::<i64>().unwrap() > partial_before,
        "{context}: partial sync"
    );
    assert_eq!(r.digest(), p.digest(), "{context}: after partial sync");
    written
}
