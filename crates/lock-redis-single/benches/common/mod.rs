//! What the benchmarks share: the floor a lock is measured against.

use std::sync::Arc;
use std::time::Duration;

use lock_core::kit::scripts::single::{ACQUIRE, RELEASE};
use lock_core::kit::NodeClient;
use lock_core::GrantOptions;
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

/// Our acquire and release scripts, raw through the same connection, per
/// second: the commands the lock sends with the default options (the
/// holder key and the five grant arguments included), without the lock's
/// client-side work.
pub async fn scripts(node: Arc<dyn NodeClient>, tasks: usize, length: Duration) -> f64 {
    cycles_per_second(tasks, length, move |task| {
        let node = Arc::clone(&node);
        async move {
            let key = format!("scripts:{{t{task}}}");
            let (fence, holder) = (format!("{key}:fence"), format!("{key}:holder"));
            let grant = GrantOptions::default().script_args();
            let mut args: Vec<&[u8]> = vec![b"owner-token-0123456789abcdef", b"30000"];
            args.extend(grant.iter().map(String::as_bytes));
            let acquired = ACQUIRE
                .run(node.as_ref(), &[&key, &fence, &holder], &args)
                .await
                .expect("EVALSHA acquire");
            assert_eq!(
                acquired.as_array().and_then(|reply| reply[0].as_int()),
                Some(1),
                "uncontended acquire"
            );
            let released = RELEASE
                .run(node.as_ref(), &[&key], &[b"owner-token-0123456789abcdef"])
                .await
                .expect("EVALSHA release");
            assert_eq!(released.as_int(), Some(1), "compare-and-delete must delete");
        }
    })
    .await
}
