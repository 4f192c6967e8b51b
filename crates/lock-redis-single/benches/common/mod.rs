//! What the benchmarks share: the floor a lock is measured against.

use std::sync::Arc;
use std::time::Duration;

use lock_core::client::NodeClient;
use lock_core::script::single::RELEASE;
use lock_testkit::bench::cycles_per_second;

/// Raw `SET key val NX PX` then a raw `EVALSHA` compare-and-delete, per
/// second, over `tasks` tasks each on a key (and so a slot) of its own: two
/// round trips, the least a lock can cost.
pub async fn floor(node: Arc<dyn NodeClient>, tasks: usize, length: Duration) -> f64 {
    cycles_per_second(tasks, length, move |task| {
        let node = Arc::clone(&node);
        async move {
            let key = format!("floor:{{t{task}}}");
            let reply = node
                .command(
                    "SET",
                    &[
                        key.as_bytes(),
                        b"owner-token-0123456789abcdef",
                        b"NX",
                        b"PX",
                        b"30000",
                    ],
                )
                .await
                .expect("SET");
            assert_eq!(
                reply.as_text(),
                Some("OK"),
                "uncontended SET NX must succeed"
            );
            let released = RELEASE
                .run(node.as_ref(), &[&key], &[b"owner-token-0123456789abcdef"])
                .await
                .expect("EVALSHA");
            assert_eq!(released.as_int(), Some(1), "compare-and-delete must delete");
        }
    })
    .await
}
