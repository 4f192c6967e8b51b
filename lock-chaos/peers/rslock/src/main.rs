//! rslock as a worker of the safety harness: the protocol of
//! `lock-chaos/peers/README.md`, with rslock's Redlock over `--nodes`.
//!
//! Settings, as rslock's README uses it: `LockManager::new(uris)` with its
//! defaults (3 tries, a random delay of up to 200 ms between them, a clock
//! drift of 1% + 2 ms), `lock(resource, ttl)` for one bounded attempt, and
//! `unlock`. rslock does not renew a lock by itself (its `using` renews, but
//! the README does not show it), so a careful job checks the validity that
//! `lock` returned (what is left of the lease when it returns), by its own
//! clock, before it writes. `unlock` returns
//! nothing, so every release is logged `released`.

use std::io::Write as _;
use std::time::Duration;

use rand::{Rng, SeedableRng};

struct Args {
    worker: u32,
    nodes: Vec<String>,
    resource: String,
    log: String,
    seconds: u64,
    seed: u64,
    hold_ms: Vec<(u64, u64)>,
    ttl: Duration,
    script: String,
}

fn parse_args() -> Result<Args, String> {
    let mut args = std::env::args().skip(1);
    let mut parsed = Args {
        worker: 0,
        nodes: Vec::new(),
        resource: String::new(),
        log: String::new(),
        seconds: 5,
        seed: 0,
        hold_ms: vec![(5, 40)],
        ttl: Duration::from_millis(600),
        script: String::new(),
    };
    while let Some(flag) = args.next() {
        let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let number = |text: &str| {
            text.parse::<u64>()
                .map_err(|_| format!("{flag}: not a number: {text}"))
        };
        match flag.as_str() {
            "--peer" if value == "rslock" => {}
            "--peer" => return Err(format!("this worker is rslock's, not {value}'s")),
            "--worker" => {
                parsed.worker = u32::try_from(number(&value)?).map_err(|err| err.to_string())?
            }
            "--nodes" => parsed.nodes = value.split(',').map(str::to_owned).collect(),
            "--resource" => parsed.resource = value,
            "--log" => parsed.log = value,
            "--seconds" => parsed.seconds = number(&value)?,
            "--seed" => parsed.seed = number(&value)?,
            "--ttl-ms" => parsed.ttl = Duration::from_millis(number(&value)?),
            // rslock's own tries bound each attempt.
            "--wait-ms" => {
                number(&value)?;
            }
            "--script" => {
                parsed.script =
                    std::fs::read_to_string(&value).map_err(|err| format!("{value}: {err}"))?
            }
            "--hold-ms" => {
                parsed.hold_ms = value
                    .split(',')
                    .map(|range| {
                        let (low, high) = range
                            .split_once('-')
                            .ok_or_else(|| format!("--hold-ms takes MIN-MAX, not {range}"))?;
                        Ok((number(low)?, number(high)?.max(number(low)?)))
                    })
                    .collect::<Result<_, String>>()?
            }
            "--permits" => return Err("rslock has no semaphore".to_owned()),
            other => return Err(format!("unknown flag {other}")),
        }
    }
    if parsed.nodes.is_empty()
        || parsed.resource.is_empty()
        || parsed.log.is_empty()
        || parsed.script.is_empty()
    {
        return Err("--nodes, --resource, --log and --script are required".to_owned());
    }
    Ok(parsed)
}

/// Nanoseconds on `CLOCK_MONOTONIC`, as every worker of the harness logs.
fn monotonic_ns() -> u64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid timespec for the call to fill in.
    let status = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    assert_eq!(status, 0, "CLOCK_MONOTONIC is unavailable");
    let seconds = u64::try_from(now.tv_sec).unwrap_or(0);
    let nanos = u64::try_from(now.tv_nsec).unwrap_or(0);
    seconds.saturating_mul(1_000_000_000).saturating_add(nanos)
}

/// Deletes the holder mark if it is still this worker's.
const UNMARK: &str =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0";

/// When a lock whose `lock` call returned at `returned_ns` with
/// `validity_ms` left stops being valid, on `CLOCK_MONOTONIC`. rslock's
/// validity is what is left when the call returns: the TTL from the start
/// of the try that won, less that try's time and a clock-drift allowance
/// (1% + 2 ms), whatever tries came before it.
fn valid_until(returned_ns: u64, validity_ms: usize) -> u64 {
    let validity_ms = u64::try_from(validity_ms).unwrap_or(u64::MAX);
    returned_ns.saturating_add(validity_ms.saturating_mul(1_000_000))
}

fn main() -> std::process::ExitCode {
    let args = match parse_args() {
        Ok(args) => args,
        Err(err) => {
            eprintln!("chaos-peer-rslock: {err}");
            return std::process::ExitCode::from(2);
        }
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    match runtime.block_on(work(&args)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("chaos-peer-rslock {}: {err}", args.worker);
            std::process::ExitCode::FAILURE
        }
    }
}

async fn work(args: &Args) -> Result<(), String> {
    let ends_at = tokio::time::Instant::now() + Duration::from_secs(args.seconds);
    let mut log = std::fs::File::create(&args.log).map_err(|err| format!("log: {err}"))?;
    // The resource is never faulted: the 2 s the other workers give it, so
    // a slow moment of this machine's is not a failed write.
    let resource = redis::Client::open(args.resource.as_str())
        .map_err(|err| format!("resource: {err}"))?
        .get_multiplexed_async_connection_with_config(
            &redis::AsyncConnectionConfig::new().set_response_timeout(Some(Duration::from_secs(2))),
        )
        .await
        .map_err(|err| format!("resource: {err}"))?;
    let fenced_write = redis::Script::new(&args.script);
    let unmark = redis::Script::new(UNMARK);
    let locks = rslock::LockManager::new(args.nodes.clone());
    let mut rng = rand::rngs::StdRng::seed_from_u64(args.seed);
    let mut index = 0u32;
    while tokio::time::Instant::now() < ends_at {
        let lock = match locks.lock("chaos", args.ttl).await {
            Ok(lock) => lock,
            // Every try failed: rslock has waited between them already.
            Err(rslock::LockError::Unavailable) => continue,
            Err(err) => {
                eprintln!("chaos-peer-rslock {}: lock: {err}", args.worker);
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let start_ns = monotonic_ns();
        let valid_until_ns = valid_until(start_ns, lock.validity_time);
        let mut con = resource.clone();
        let marked: redis::RedisResult<()> = redis::cmd("SET")
            .arg("chaos:holder")
            .arg(args.worker)
            .query_async(&mut con)
            .await;
        if let Err(err) = marked {
            eprintln!("chaos-peer-rslock {}: holder mark: {err}", args.worker);
        }
        let (low, high) = args.hold_ms[rng.random_range(0..args.hold_ms.len())];
        tokio::time::sleep(Duration::from_millis(rng.random_range(low..=high))).await;
        let write = if monotonic_ns() >= valid_until_ns {
            "skipped".to_owned()
        } else {
            let reply: redis::RedisResult<(i64, i64)> = fenced_write
                .key("chaos:resource")
                .key("chaos:resource:log")
                .arg(0)
                .arg(format!("{}:{index}", args.worker))
                .invoke_async(&mut con)
                .await;
            match reply {
                Ok((1, seq)) => format!("accepted:{seq}"),
                Ok((_, seq)) => format!("refused:{seq}"),
                Err(err) => {
                    eprintln!("chaos-peer-rslock {}: write: {err}", args.worker);
                    "failed".to_owned()
                }
            }
        };
        let end_ns = monotonic_ns();
        // The mark first: it names a holder.
        let unmarked: redis::RedisResult<i64> = unmark
            .key("chaos:holder")
            .arg(args.worker)
            .invoke_async(&mut con)
            .await;
        if let Err(err) = unmarked {
            eprintln!("chaos-peer-rslock {}: unmark: {err}", args.worker);
        }
        locks.unlock(&lock).await;
        let lease_end_ns = if valid_until_ns < end_ns {
            valid_until_ns
        } else {
            0
        };
        let line = format!(
            "{}\t{index}\t{start_ns}\t{end_ns}\t0\t{write}\t{lease_end_ns}\treleased\t-\t1\t-\n",
            args.worker
        );
        log.write_all(line.as_bytes())
            .map_err(|err| format!("log: {err}"))?;
        index += 1;
    }
    Ok(())
}
