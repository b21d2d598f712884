//! Active defrag moves Count-Min Sketches (the value and its counter
//! array) on redis-server 8.2, the one test server built with Redis's own
//! jemalloc (see defrag.rs), and changes no answer and no digest.

use std::time::{Duration, Instant};

use bloomkit_testkit::{Conn, Reply, Server, TestServer};

const SKETCHES: usize = 1500;
const DEADLINE: Duration = Duration::from_secs(60);

/// Sends `commands` pipelined and checks that none failed.
fn pipeline(c: &mut Conn, commands: &[Vec<String>]) {
    for (command, reply) in commands.iter().zip(c.pipeline(commands)) {
        assert!(!reply.is_error(), "{command:?}: {reply:?}");
    }
}

fn words(line: &str) -> Vec<String> {
    line.split(' ').map(String::from).collect()
}

fn defrag_field(c: &mut Conn, name: &str) -> u64 {
    c.info_field("bf", &format!("bf_defrag_{name}")).parse().unwrap()
}

/// Every sketch's answers and digest.
fn observe(c: &mut Conn) -> (Vec<Reply>, Reply) {
    let answers = (0..SKETCHES)
        .step_by(37)
        .flat_map(|i| {
            let key = format!("cms:{i}");
            [c.call(&["CMS.QUERY", &key, "a", "b", "never"]), c.call(&["DEBUG", "DIGEST-VALUE", &key])]
        })
        .collect();
    (answers, c.digest())
}

#[test]
fn active_defrag_moves_sketches_and_changes_nothing() {
    let s = TestServer::with_bloomkit(Server::Redis8);
    let mut c = s.conn();
    // Sketches interleaved with sketches and strings of the same sizes,
    // those then deleted: the kept sketches' slabs are left sparse.
    let mut fill = Vec::new();
    for i in 0..SKETCHES {
        let width = 40 + i % 20;
        fill.push(words(&format!("CMS.INITBYDIM cms:{i} {width} 3")));
        fill.push(words(&format!("CMS.INCRBY cms:{i} a {i} b 1")));
        for j in 0..7 {
            if j % 2 == 0 {
                fill.push(words(&format!("CMS.INITBYDIM pad:{i}:{j} {width} 3")));
            } else {
                fill.push(words(&format!("SET pad:{i}:{j} {}", "x".repeat(4 * width * 3 - 20))));
            }
        }
    }
    pipeline(&mut c, &fill);
    let deletes: Vec<Vec<String>> =
        (0..SKETCHES).flat_map(|i| (0..7).map(move |j| words(&format!("DEL pad:{i}:{j}")))).collect();
    pipeline(&mut c, &deletes);
    let before = observe(&mut c);
    assert_eq!(defrag_field(&mut c, "cms_hits"), 0, "defrag is off");
    c.start_active_defrag();
    let end = Instant::now() + DEADLINE;
    while defrag_field(&mut c, "cms_hits") < 2 {
        assert!(Instant::now() < end, "no sketch moved within {DEADLINE:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
    let after = observe(&mut c);
    assert!(before.0 == after.0, "a sketch answers differently after defrag");
    assert_eq!(before.1, after.1, "DEBUG DIGEST");
    // Moved sketches keep working, and free cleanly.
    assert_eq!(c.cmd("CMS.INCRBY cms:5 a 1").as_array()[0], Reply::Int(6));
    c.ok("FLUSHALL");
    assert_eq!(c.cmd("PING"), Reply::Simple("PONG".into()));
}
