//! What the benchmarks share: the floor a lock is measured against.

use std::sync::Arc;
use std::time::Duration;

use lock_core::strategy::scripts::single::{ACQUIRE, RELEASE};
use lock_core::strategy::NodeClient;
use lock_core::GrantOptions;
use lock_testkit::bench::{cycles_per_second, task_keys, FLOOR_VALUE};

/// Raw `SET key val NX PX` then a raw `EVALSHA` compare-and-delete, per
/// second, over `tasks` tasks each on a key (and so a slot) of its own: two
/// round trips, the least a lock can cost. The keys and the value are as
/// long as the lock's (see `lock_testkit::bench::task_keys`), and made
/// before the measurement, as the lock's names are.
pub async fn floor(node: Arc<dyn NodeClient>, tasks: usize, length: Duration) -> f64 {
    let keys = task_keys("floor", tasks);
    cycles_per_second(tasks, length, move |task| {
        let (node, keys) = (Arc::clone(&node), Arc::clone(&keys));
        async move {
            let key = &keys[task];
            let reply = node
                .command(
                    "SET",
                    &[key.as_bytes(), FLOOR_VALUE, b"NX", b"PX", b"30000"],
                )
                .await
                .expect("SET");
            assert_eq!(
                reply.as_text(),
                Some("OK"),
                "uncontended SET NX must succeed"
            );
            let released = RELEASE
                .run(node.as_ref(), &[key], &[FLOOR_VALUE])
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
    let keys = task_keys("evals", tasks);
    cycles_per_second(tasks, length, move |task| {
        let (node, keys) = (Arc::clone(&node), Arc::clone(&keys));
        async move {
            let key = &keys[task];
            let (fence, holder) = (format!("{key}:fence"), format!("{key}:holder"));
            let grant = GrantOptions::default().script_args();
            let mut args: Vec<&[u8]> = vec![FLOOR_VALUE, b"30000"];
            args.extend(grant.iter().map(String::as_bytes));
            let acquired = ACQUIRE
                .run(node.as_ref(), &[key, &fence, &holder], &args)
                .await
                .expect("EVALSHA acquire");
            assert_eq!(
                acquired.as_array().and_then(|reply| reply[0].as_int()),
                Some(1),
                "uncontended acquire"
            );
            let released = RELEASE
                .run(node.as_ref(), &[key], &[FLOOR_VALUE])
                .await
                .expect("EVALSHA release");
            assert_eq!(released.as_int(), Some(1), "compare-and-delete must delete");
        }
    })
    .await
}
