//! What the benchmarks share: the floor a lock is measured against (from
//! `lock_testkit::bench`), and our scripts sent raw.

use std::sync::Arc;
use std::time::Duration;

use lock_core::strategy::scripts::single::{ACQUIRE, RELEASE};
use lock_core::strategy::NodeClient;
use lock_core::GrantOptions;
use lock_testkit::bench::{cycles_per_second, task_keys, FLOOR_VALUE};

pub use lock_testkit::bench::lock_floor as floor;

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
