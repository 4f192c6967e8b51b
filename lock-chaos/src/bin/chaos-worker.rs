//! One lock worker of the safety harness, run as its own process by `chaos`.
//!
//! `chaos-worker --worker N --key K --resource URL --log FILE --seconds S
//! --seed X --hold-ms RANGES [--nested] [--deadline] [--via-cli DISTLOCK] [--elect]
//! [--permits N] [--rw] [--multi] [--latch N] [--barrier N]`, with the lock
//! config in `DISTLOCK_*` variables. Loops until `S` seconds have passed:
//! acquire (waiting up to the config's `wait_timeout`), enter again as the
//! same owner if `--nested` (reentrant strategy), hold for a random time
//! (`--hold-ms 5-40`, or `50-150,700-1150` for a range drawn at random first)
//! while watching for a loss, commit one write to the fenced
//! resource carrying the fencing token (skipped if the loss was reported
//! first, as a careful job would, or with `--deadline` if the lease's
//! deadline has passed by this process's clock), release, and log the
//! acquisition (see
//! `lock_chaos::Acquisition`). With `--via-cli`, each acquisition is one
//! `distlock run` whose job is this binary with `--job I`. With `--elect`,
//! each section is a term of leadership of the election K (campaign, lead,
//! resign), its token the term; with `--permits N`, a permit of weight 1 or
//! 2 of the semaphore K of N, whose write goes to its slot's resource; with
//! `--rw`, a shared hold (two times in three, writing nothing) or the
//! exclusive hold of the read-write lock K, whose write carries its token;
//! with `--multi`, K and `K-2` as one multi-key hold (in either order) two
//! times in three, and the plain lock K otherwise, every write carrying its
//! token: every section shares K. With `--latch N`, no lock and no write:
//! rounds of a latch of N parties (`lock_chaos::latch`), each round the
//! latch `K-r<round>`, set, counted down once with the worker's id (retried
//! after errors, set again when a restart lost it) and waited for. With
//! `--barrier N`, no lock and no write: the worker is a party of the
//! barrier K of N, entering (waiting up to 2 s), logging the round it went
//! on in (`lock_chaos::barrier`), holding, and leaving.
//!
//! `chaos-worker --hog S` is the busy loop `chaos` runs beside a worker it
//! starves of CPU: it spins until killed, or for `S` seconds at most.

use std::future::Future;
use std::io::Write as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use distlock::{ClientKind, Config, LeaseStatus, LockError, LockGuard, LockManager, OwnerToken};
use lock_chaos::{monotonic_ns, procs, Acquisition, Outcome, Write, FENCED_WRITE, RESOURCE_KEY};
use lock_core::strategy::{NodeClient, Reply};
use lock_core::{ConnectOptions, NodeUrl};
use rand::{Rng, SeedableRng};

struct Args {
    worker: u32,
    key: String,
    resource: String,
    log: String,
    seconds: u64,
    seed: u64,
    /// Hold times in ms: one range is drawn, then a time in it.
    hold_ms: Vec<(u64, u64)>,
    nested: bool,
    /// Skip the write also when the lease's deadline has passed by this
    /// process's clock, reported lost or not: what the peers' workers do
    /// (`chaos --peers`).
    deadline: bool,
    /// Take the lock through this `distlock` binary (`distlock run`) instead
    /// of the library: each acquisition is one `distlock run` whose job is
    /// this binary with `--job`.
    via_cli: Option<String>,
    /// Be the job of one `distlock run`: one critical section under the lock
    /// distlock holds, with the token from `DISTLOCK_FENCING_TOKEN`.
    job: Option<u32>,
    /// Be a busy loop for at most this many seconds.
    hog: Option<u64>,
    /// Lead the election `key` instead of taking its lock.
    elect: bool,
    /// Take permits of the semaphore `key` of this many.
    permits: Option<u32>,
    /// Take shared and exclusive holds of the read-write lock `key`.
    rw: bool,
    /// Take `key` and `key-2` as one hold, or `key` alone.
    multi: bool,
    /// Count down rounds of a latch of this many parties instead.
    latch: Option<u32>,
    /// Be a party of a barrier of this many instead.
    barrier: Option<u32>,
}

fn parse_args() -> Result<Args, String> {
    let mut args = std::env::args().skip(1);
    let mut parsed = Args {
        worker: 0,
        key: "chaos".to_owned(),
        resource: String::new(),
        log: String::new(),
        seconds: 5,
        seed: 0,
        hold_ms: vec![(5, 30)],
        nested: false,
        deadline: false,
        via_cli: None,
        job: None,
        hog: None,
        elect: false,
        permits: None,
        rw: false,
        multi: false,
        latch: None,
        barrier: None,
    };
    while let Some(flag) = args.next() {
        // The flags that take no value.
        let switch = match flag.as_str() {
            "--nested" => Some(&mut parsed.nested),
            "--deadline" => Some(&mut parsed.deadline),
            "--elect" => Some(&mut parsed.elect),
            "--rw" => Some(&mut parsed.rw),
            "--multi" => Some(&mut parsed.multi),
            _ => None,
        };
        if let Some(switch) = switch {
            *switch = true;
            continue;
        }
        let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let number = |text: &str| {
            text.parse::<u64>()
                .map_err(|_| format!("{flag}: not a number: {text}"))
        };
        match flag.as_str() {
            "--worker" => {
                parsed.worker = u32::try_from(number(&value)?).map_err(|e| e.to_string())?
            }
            "--key" => parsed.key = value,
            "--resource" => parsed.resource = value,
            "--log" => parsed.log = value,
            "--seconds" => parsed.seconds = number(&value)?,
            "--seed" => parsed.seed = number(&value)?,
            "--hog" => parsed.hog = Some(number(&value)?),
            "--permits" => {
                parsed.permits = Some(u32::try_from(number(&value)?).map_err(|e| e.to_string())?)
            }
            "--latch" => {
                parsed.latch = Some(u32::try_from(number(&value)?).map_err(|e| e.to_string())?)
            }
            "--barrier" => {
                parsed.barrier = Some(u32::try_from(number(&value)?).map_err(|e| e.to_string())?)
            }
            "--via-cli" => parsed.via_cli = Some(value),
            "--job" => {
                parsed.job = Some(u32::try_from(number(&value)?).map_err(|e| e.to_string())?)
            }
            "--hold-ms" => {
                parsed.hold_ms = value
                    .split(',')
                    .map(|range| {
                        let (low, high) = range.split_once('-').ok_or_else(|| {
                            format!("--hold-ms takes MIN-MAX[,MIN-MAX...], not {value}")
                        })?;
                        Ok((number(low)?, number(high)?.max(number(low)?)))
                    })
                    .collect::<Result<_, String>>()?;
            }
            other => return Err(format!("unknown flag {other}")),
        }
    }
    let not_a_lock = parsed.elect
        || parsed.latch.is_some()
        || parsed.barrier.is_some()
        || parsed.via_cli.is_some();
    if parsed.deadline && not_a_lock {
        return Err(
            "--deadline is for the holds the library takes: not with --elect, --latch, --barrier or --via-cli"
                .to_owned(),
        );
    }
    if parsed.hog.is_none() && (parsed.resource.is_empty() || parsed.log.is_empty()) {
        return Err("--resource and --log are required".to_owned());
    }
    Ok(parsed)
}

fn main() -> std::process::ExitCode {
    let args = match parse_args() {
        Ok(args) => args,
        Err(err) => {
            eprintln!("chaos-worker: {err}");
            return std::process::ExitCode::from(2);
        }
    };
    if let Some(seconds) = args.hog {
        hog(Duration::from_secs(seconds));
        return std::process::ExitCode::SUCCESS;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    match runtime.block_on(work(args)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("chaos-worker: {err}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn work(args: Args) -> Result<(), String> {
    if let Some(index) = args.job {
        return job(&args, index).await;
    }
    if let Some(distlock) = &args.via_cli {
        return work_via_cli(&args, distlock).await;
    }
    let config = Config::from_env().map_err(|err| err.to_string())?;
    let client = config.lock.client;
    // Connecting may fail while a fault is on: keep trying until the end.
    let ends_at = Instant::now() + Duration::from_secs(args.seconds);
    let locks = loop {
        match distlock::connect(&config).await {
            Ok(locks) => break locks,
            Err(err) if Instant::now() < ends_at => {
                eprintln!("chaos-worker {}: connect: {err}", args.worker);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(err) => return Err(format!("connect: {err}")),
        }
    };
    let resource = connect_resource(client, &args.resource).await?;
    let mut log = std::fs::File::create(&args.log).map_err(|err| format!("log: {err}"))?;
    let mut rng = rand::rngs::StdRng::seed_from_u64(args.seed);
    // A fixed owner per worker, as services name theirs: it also lets the
    // harness see in Redis which worker holds the lock.
    let owner = OwnerToken::from_string(format!("chaos-worker-{}", args.worker))
        .map_err(|err| err.to_string())?;
    if let Some(parties) = args.latch {
        return latch_rounds(&locks, &args, parties, &mut log, ends_at).await;
    }
    if let Some(parties) = args.barrier {
        return barrier_rounds(&locks, &args, parties, &mut log, &mut rng, ends_at).await;
    }
    if args.elect {
        return lead_in_turns(
            &locks,
            &args,
            &owner,
            resource.as_ref(),
            &mut log,
            &mut rng,
            ends_at,
        )
        .await;
    }
    let semaphore = match args.permits {
        Some(limit) => Some(
            locks
                .semaphore(&args.key, limit)
                .map_err(|err| err.to_string())?,
        ),
        None => None,
    };
    let rw_lock = match args.rw {
        true => Some(locks.rw_lock(&args.key).map_err(|err| err.to_string())?),
        false => None,
    };
    let second = format!("{}-2", args.key);
    let pairs = match args.multi {
        true => Some([
            locks
                .multi_lock([args.key.as_str(), second.as_str()])
                .map_err(|err| err.to_string())?,
            locks
                .multi_lock([second.as_str(), args.key.as_str()])
                .map_err(|err| err.to_string())?,
        ]),
        false => None,
    };
    let mut index = 0;
    while Instant::now() < ends_at {
        let options = lock_core::AcquireOptions::new().with_owner(owner.clone());
        let choice = rng.random_range(0..3usize);
        let plain = Role::default();
        let taken = match (&semaphore, &rw_lock, &pairs) {
            // Both names as one hold, either order, two times in three.
            (None, None, Some(pairs)) if choice < 2 => pairs[choice]
                .acquire_with(&options)
                .await
                .map(|guard| (guard, plain)),
            (None, None, Some(_)) => locks
                .acquire_with(&args.key, &options)
                .await
                .map(|guard| (guard, plain)),
            _ => match (&semaphore, &rw_lock) {
                // Weights 1 and 2, so that one permit can take two slots' room.
                (Some(semaphore), _) => {
                    let weight = rng.random_range(1..=semaphore.limit().min(2));
                    semaphore
                        .acquire_many_with(weight, &options)
                        .await
                        .map(|permit| {
                            let role = Role {
                                slot: Some(permit.slot()),
                                weight: permit.weight(),
                                access: None,
                            };
                            (permit.into(), role)
                        })
                }
                // Readers two times in three, so that reads overlap.
                (None, Some(rw_lock)) if rng.random_range(0..3) < 2 => {
                    rw_lock.read_with(&options).await.map(|read| {
                        let role = Role {
                            access: Some(lock_core::Access::Shared),
                            ..plain
                        };
                        (read.into(), role)
                    })
                }
                (None, Some(rw_lock)) => rw_lock.write_with(&options).await.map(|write| {
                    let role = Role {
                        access: Some(lock_core::Access::Exclusive),
                        ..plain
                    };
                    (write.into(), role)
                }),
                (None, None) => locks
                    .acquire_with(&args.key, &options)
                    .await
                    .map(|guard| (guard, plain)),
            },
        };
        let Some((guard, role)) = granted(taken, args.worker, "acquire").await else {
            continue;
        };
        let hold = hold_time(&mut rng, &args.hold_ms);
        let acquisition =
            critical_section(&locks, guard, role, &args, index, hold, resource.as_ref()).await;
        log_acquisition(&mut log, &acquisition)?;
        index += 1;
    }
    Ok(())
}

/// What a hold is beyond its lease: a permit's slot and weight, or a
/// read-write lock's access.
#[derive(Clone, Copy)]
struct Role {
    slot: Option<u32>,
    weight: u32,
    access: Option<lock_core::Access>,
}

impl Default for Role {
    fn default() -> Self {
        Role {
            slot: None,
            weight: 1,
            access: None,
        }
    }
}

async fn critical_section(
    locks: &LockManager,
    guard: LockGuard,
    role: Role,
    args: &Args,
    index: u32,
    hold: Duration,
    resource: &dyn NodeClient,
) -> Acquisition {
    let start_ns = monotonic_ns();
    let token = guard.fencing_token().map_or(0, |token| token.get());
    let inner = if args.nested {
        let again = lock_core::AcquireOptions::new()
            .with_owner(guard.owner().clone())
            .no_wait();
        match locks.acquire_with(&args.key, &again).await {
            Ok(inner) => Some(inner),
            other => {
                eprintln!("chaos-worker {}: re-entry failed: {other:?}", args.worker);
                None
            }
        }
    } else {
        None
    };
    let lost = lost_within(hold, guard.lost()).await;
    let Role {
        slot,
        weight,
        access,
    } = role;
    // A reader writes nothing: only its section is checked.
    let late = args.deadline && !guard.is_valid();
    let write = if lost || late || access == Some(lock_core::Access::Shared) {
        Write::Skipped
    } else {
        fenced_write(resource, token, &format!("{}:{index}", args.worker), slot).await
    };
    let end_ns = monotonic_ns();
    let lease_end_ns = lease_end(&guard, end_ns);
    let mut outcome = Outcome::Released;
    if let Some(inner) = inner {
        if let Err(err) = inner.release().await {
            outcome = outcome_of(&err);
        }
    }
    if let Err(err) = guard.release().await {
        outcome = outcome_of(&err);
    }
    Acquisition {
        lease_end_ns,
        outcome,
        slot,
        weight,
        access,
        ..Acquisition::new(args.worker, index, start_ns, end_ns, token, write)
    }
}

/// The loop of a worker in an election: campaign (waiting up to the
/// config's `wait_timeout`), lead for a hold time while watching for the
/// loss, write with the term, resign; each term is logged as a section.
async fn lead_in_turns(
    locks: &LockManager,
    args: &Args,
    owner: &OwnerToken,
    resource: &dyn NodeClient,
    log: &mut std::fs::File,
    rng: &mut rand::rngs::StdRng,
    ends_at: Instant,
) -> Result<(), String> {
    let election = locks.election(&args.key).map_err(|err| err.to_string())?;
    let wait = Duration::from_secs(1);
    let mut index = 0;
    while Instant::now() < ends_at {
        let options = lock_core::AcquireOptions::new()
            .with_owner(owner.clone())
            .with_wait(wait);
        let campaign = election
            .campaign_with(&format!("worker-{}", args.worker), &options)
            .await;
        let Some(leadership) = granted(campaign, args.worker, "campaign").await else {
            continue;
        };
        let start_ns = monotonic_ns();
        let term = leadership.term().get();
        let hold = hold_time(rng, &args.hold_ms);
        let lost = lost_within(hold, leadership.lost()).await;
        let write = if lost {
            Write::Skipped
        } else {
            fenced_write(resource, term, &format!("{}:{index}", args.worker), None).await
        };
        let end_ns = monotonic_ns();
        let lease_end_ns = handle_lease_end(&leadership.handle(), end_ns);
        let outcome = match leadership.resign().await {
            Ok(()) => Outcome::Released,
            Err(err) => outcome_of(&err),
        };
        let acquisition = Acquisition {
            lease_end_ns,
            outcome,
            ..Acquisition::new(args.worker, index, start_ns, end_ns, term, write)
        };
        log_acquisition(log, &acquisition)?;
        index += 1;
    }
    Ok(())
}

/// How long a party waits for a round's latch before it gives the round
/// up (a party that was killed or lost its count holds the round shut).
const LATCH_ROUND_WAIT: Duration = Duration::from_secs(2);

/// The loop of a party of a latch of `parties`: in round after round, set
/// the round's latch (every party sets the same count), log `down`, count
/// it down with this worker's id (retried after an error: a retry counts
/// nothing more), then wait for it, logging `open` or `shut`.
async fn latch_rounds(
    locks: &LockManager,
    args: &Args,
    parties: u32,
    log: &mut std::fs::File,
    ends_at: Instant,
) -> Result<(), String> {
    use lock_chaos::latch::{LatchEvent, LatchStep};
    let id = format!("worker-{}", args.worker);
    let note = |log: &mut std::fs::File, round: u32, step: LatchStep| {
        let event = LatchEvent {
            worker: args.worker,
            round,
            step,
            at_ns: monotonic_ns(),
        };
        // One write a line: a worker killed mid-line leaves none half done.
        log.write_all(format!("{event}\n").as_bytes())
            .map_err(|err| format!("log: {err}"))
    };
    let mut round = 0;
    while Instant::now() < ends_at {
        let latch = locks
            .latch(&format!("{}-r{round}", args.key))
            .and_then(|latch| latch.with_ttl(Duration::from_secs(60)))
            .map_err(|err| err.to_string())?;
        if !retried(args.worker, "set", ends_at, || latch.set_count(parties)).await {
            break;
        }
        note(log, round, LatchStep::Down)?;
        // A latch lost with a restart is set again, so the party still
        // counts down this round (in a latch the others counted in or not).
        let counted = retried(args.worker, "count down", ends_at, || async {
            match latch.count_down_as(&id).await {
                Err(LockError::LatchNotSet { .. }) => {
                    latch.set_count(parties).await?;
                    latch.count_down_as(&id).await
                }
                other => other,
            }
        })
        .await;
        if !counted {
            break;
        }
        let step = match tokio::time::timeout(LATCH_ROUND_WAIT, latch.wait()).await {
            Ok(Ok(())) => LatchStep::Open,
            Ok(Err(err)) => {
                eprintln!("chaos-worker {}: wait: {err}", args.worker);
                LatchStep::Shut
            }
            Err(_) => LatchStep::Shut,
        };
        note(log, round, step)?;
        round += 1;
    }
    Ok(())
}

/// The loop of a party of a barrier of `parties`: enter (waiting up to
/// [`LATCH_ROUND_WAIT`]), and once in, read the round's id and log it, hold
/// for a hold time while watching for the party's loss, and leave, waiting
/// for the others (as long again at most).
async fn barrier_rounds(
    locks: &LockManager,
    args: &Args,
    parties: u32,
    log: &mut std::fs::File,
    rng: &mut rand::rngs::StdRng,
    ends_at: Instant,
) -> Result<(), String> {
    use lock_chaos::barrier::PartyEvent;
    let barrier = locks
        .barrier(&args.key, parties)
        .map_err(|err| err.to_string())?;
    let options = lock_core::AcquireOptions::new().with_wait(LATCH_ROUND_WAIT);
    while Instant::now() < ends_at {
        let party = match barrier.enter_with(&options).await {
            Ok(party) => party,
            Err(LockError::NotAcquired { .. } | LockError::BarrierFull { .. }) => {
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
            Err(err) => {
                eprintln!("chaos-worker {}: enter: {err}", args.worker);
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
        };
        let at_ns = monotonic_ns();
        // The round's id, read while this party is in (its round lasts
        // until this party has left).
        match barrier.state().await {
            Ok(state) if state.open && !state.round.is_empty() => {
                let event = PartyEvent {
                    worker: args.worker,
                    round: state.round,
                    at_ns,
                };
                log.write_all(format!("{event}\n").as_bytes())
                    .map_err(|err| format!("log: {err}"))?;
            }
            Ok(state) => eprintln!(
                "chaos-worker {}: went on in no open round: {state:?}",
                args.worker
            ),
            Err(err) => eprintln!("chaos-worker {}: state: {err}", args.worker),
        }
        let hold = hold_time(rng, &args.hold_ms);
        let _ = lost_within(hold, party.lost()).await;
        match tokio::time::timeout(LATCH_ROUND_WAIT, party.leave()).await {
            Ok(Ok(())) | Err(_) => {}
            Ok(Err(err)) => eprintln!("chaos-worker {}: leave: {err}", args.worker),
        }
    }
    Ok(())
}

/// Tries `call` until it succeeds (`true`) or `ends_at` passes (`false`),
/// saying each error on stderr.
async fn retried<T, F, Fut>(worker: u32, what: &str, ends_at: Instant, mut call: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, LockError>>,
{
    loop {
        match call().await {
            Ok(_) => return true,
            Err(err) => {
                eprintln!("chaos-worker {worker}: {what}: {err}");
                if Instant::now() >= ends_at {
                    return false;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// The hold an acquire or a campaign (`what`) returned, or `None` for the
/// loop to try again: when it was not granted within the wait, or when it
/// failed, which is said on stderr and followed by a short pause.
async fn granted<T>(result: Result<T, LockError>, worker: u32, what: &str) -> Option<T> {
    match result {
        Ok(hold) => Some(hold),
        Err(LockError::NotAcquired { .. }) => None,
        Err(err) => {
            eprintln!("chaos-worker {worker}: {what}: {err}");
            tokio::time::sleep(Duration::from_millis(20)).await;
            None
        }
    }
}

/// Holds for `hold` while watching for the loss that `lost` reports:
/// whether the loss came first.
async fn lost_within(hold: Duration, lost: impl Future) -> bool {
    tokio::select! {
        () = tokio::time::sleep(hold) => false,
        _ = lost => true,
    }
}

/// A connection to the fenced resource at `url` through `client`.
async fn connect_resource(client: ClientKind, url: &str) -> Result<Arc<dyn NodeClient>, String> {
    lock_core::strategy::connect(
        client,
        &NodeUrl::new(url.to_owned()),
        ConnectOptions::new(Duration::from_secs(2), Duration::from_secs(2)),
    )
    .await
    .map_err(|err| format!("resource: {err}"))
}

/// Writes `acquisition`'s line to the worker's `log`.
fn log_acquisition(log: &mut std::fs::File, acquisition: &Acquisition) -> Result<(), String> {
    writeln!(log, "{acquisition}").map_err(|err| format!("log: {err}"))?;
    log.flush().map_err(|err| format!("log: {err}"))
}

/// A hold time: a range drawn from `ranges`, then a time in it.
fn hold_time(rng: &mut rand::rngs::StdRng, ranges: &[(u64, u64)]) -> Duration {
    let (low, high) = ranges
        .get(rng.random_range(0..ranges.len().max(1)))
        .copied()
        .unwrap_or((0, 0));
    Duration::from_millis(rng.random_range(low..=high))
}

/// `ranges` as `--hold-ms` takes them.
fn hold_ranges(ranges: &[(u64, u64)]) -> String {
    ranges
        .iter()
        .map(|(low, high)| format!("{low}-{high}"))
        .collect::<Vec<_>>()
        .join(",")
}

fn outcome_of(err: &LockError) -> Outcome {
    match err {
        LockError::LeaseLost { .. } => Outcome::Lost,
        _ => Outcome::ReleaseFailed,
    }
}

/// When the lease ended by the holder's clock, on `CLOCK_MONOTONIC`, if it
/// ended before `end_ns`; else 0.
fn lease_end(guard: &LockGuard, end_ns: u64) -> u64 {
    handle_lease_end(&guard.handle(), end_ns)
}

/// [`lease_end`] of a lease's handle.
fn handle_lease_end(handle: &distlock::LeaseHandle, end_ns: u64) -> u64 {
    let valid_until = match handle.status() {
        LeaseStatus::Held { valid_until } | LeaseStatus::Lost { valid_until, .. } => valid_until,
        _ => return 0,
    };
    let now = Instant::now();
    let now_ns = monotonic_ns();
    let lease_end_ns = if valid_until <= now {
        now_ns.saturating_sub(u64::try_from((now - valid_until).as_nanos()).unwrap_or(u64::MAX))
    } else {
        now_ns.saturating_add(u64::try_from((valid_until - now).as_nanos()).unwrap_or(u64::MAX))
    };
    if lease_end_ns < end_ns {
        lease_end_ns
    } else {
        0
    }
}

/// One write to the fenced resource, or to the resource of a permit's
/// `slot`: each slot fences its own tokens.
async fn fenced_write(
    resource: &dyn NodeClient,
    token: u64,
    writer: &str,
    slot: Option<u32>,
) -> Write {
    let token = token.to_string();
    let key = slot.map_or_else(|| RESOURCE_KEY.to_owned(), lock_chaos::slot_resource_key);
    let log_key = format!("{key}:log");
    let reply = FENCED_WRITE
        .run(
            resource,
            &[&key, &log_key],
            &[token.as_bytes(), writer.as_bytes()],
        )
        .await;
    match reply.as_ref().ok().and_then(Reply::as_array) {
        Some([Reply::Int(1), Reply::Int(seq)]) => Write::Accepted {
            seq: seq.unsigned_abs(),
        },
        Some([Reply::Int(0), Reply::Int(seq)]) => Write::Refused {
            seq: seq.unsigned_abs(),
        },
        _ => {
            eprintln!("chaos-worker: fenced write failed: {reply:?}");
            Write::Failed
        }
    }
}

/// The loop of a worker that takes the lock with the `distlock` command, as
/// a cron job would: `distlock run --key K --wait 1s -- <this binary> --job I`.
/// The job logs its own acquisition; distlock's exit code says how the lease
/// ended.
async fn work_via_cli(args: &Args, distlock: &str) -> Result<(), String> {
    let ends_at = Instant::now() + Duration::from_secs(args.seconds);
    let me = std::env::current_exe().map_err(|err| format!("own path: {err}"))?;
    // The jobs append to the log; start it empty.
    std::fs::File::create(&args.log).map_err(|err| format!("log: {err}"))?;
    // A distlock killed with SIGKILL leaves its supervisor and job to die a
    // moment later; as their subreaper, this process inherits them instead of
    // init, and can tell when they are gone (`wait_for_orphans`).
    nix::sys::prctl::set_child_subreaper(true)
        .map_err(|err| format!("become a subreaper: {err}"))?;
    let mut index: u32 = 0;
    while Instant::now() < ends_at {
        let status = tokio::process::Command::new(distlock)
            .args([
                "run", "--key", &args.key, "--wait", "1s", "--grace", "1s", "--",
            ])
            .arg(&me)
            .args(["--worker", &args.worker.to_string()])
            .args(["--job", &index.to_string()])
            .args(["--resource", &args.resource])
            .args(["--log", &args.log])
            // Workers' seeds are consecutive numbers; spread them so that no
            // two jobs share a seed (worker 1's job 0 was worker 0's job 1).
            .args([
                "--seed",
                &args
                    .seed
                    .wrapping_mul(0x9E37_79B9_7F4A_7C15)
                    .wrapping_add(u64::from(index))
                    .to_string(),
            ])
            .args(["--hold-ms", &hold_ranges(&args.hold_ms)])
            .status()
            .await
            .map_err(|err| format!("run {distlock}: {err}"))?;
        wait_for_orphans(args.worker).await;
        log_unfinished_job(args)?;
        // 75: not acquired within the wait; anything else ran a job (or failed
        // to connect, which the next round retries).
        if status.code() != Some(75) {
            index += 1;
        }
    }
    Ok(())
}

/// Where a job of `distlock run` notes its section while it runs, next to
/// the log: `<index> <start_ns> <token>`. The job removes it once it has
/// logged its section; one left behind marks a job that never did.
fn running_marker(log: &str) -> PathBuf {
    PathBuf::from(format!("{log}.running"))
}

/// Waits until the orphans of the last `distlock run` (its supervisor and
/// job, when distlock was killed) are gone, and reaps them. Only then may the
/// job's marker be read: a job killed a moment after distlock may still
/// write it, and it would be taken for the next run's. Bounded: orphans still
/// there after 5 s (their supervisor failed) get SIGKILL.
async fn wait_for_orphans(worker: u32) {
    let me = std::process::id();
    let give_up = Instant::now() + Duration::from_secs(5);
    loop {
        // distlock itself is reaped, so every child left is an orphan.
        let orphans = procs::children_of(me);
        if orphans.is_empty() {
            break;
        }
        if Instant::now() >= give_up {
            eprintln!(
                "chaos-worker {worker}: {orphans:?} outlived their distlock by 5 s; killing them"
            );
            for orphan in orphans {
                let pid = nix::unistd::Pid::from_raw(i32::try_from(orphan).unwrap_or(i32::MAX));
                let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
            }
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    // Reap the zombies; no child of tokio's is left to take by mistake.
    while let Ok(status) = nix::sys::wait::waitpid(None, Some(nix::sys::wait::WaitPidFlag::WNOHANG))
    {
        if status == nix::sys::wait::WaitStatus::StillAlive {
            break;
        }
    }
}

/// After a `distlock run` returned and its orphans are gone: logs the
/// section of a job that was killed (by distlock stopping it when the lease
/// was lost, or by its supervisor when distlock was killed) before it logged
/// it itself. Its end is now, no earlier than the job's real end, so an
/// overlap is never hidden.
fn log_unfinished_job(args: &Args) -> Result<(), String> {
    let marker = running_marker(&args.log);
    let Ok(text) = std::fs::read_to_string(&marker) else {
        return Ok(());
    };
    let end_ns = monotonic_ns();
    let fields: Vec<u64> = text
        .split_whitespace()
        .map(str::parse)
        .collect::<Result<_, _>>()
        .map_err(|err| format!("{}: {err}: {text:?}", marker.display()))?;
    let [index, start_ns, token] = fields[..] else {
        return Err(format!(
            "{}: expected 3 numbers: {text:?}",
            marker.display()
        ));
    };
    let index = u32::try_from(index).map_err(|err| err.to_string())?;
    // Killed after it logged its section, before it removed the marker.
    let logged = std::fs::read_to_string(&args.log).map_err(|err| format!("log: {err}"))?;
    let id = format!("{}\t{index}\t", args.worker);
    if !logged.lines().any(|line| line.starts_with(&id)) {
        let acquisition = Acquisition {
            outcome: Outcome::Killed,
            ..Acquisition::new(args.worker, index, start_ns, end_ns, token, Write::Unknown)
        };
        append_to_log(&args.log, &acquisition)?;
    }
    std::fs::remove_file(&marker).map_err(|err| format!("{}: {err}", marker.display()))
}

fn append_to_log(log: &str, acquisition: &Acquisition) -> Result<(), String> {
    let mut log = std::fs::OpenOptions::new()
        .append(true)
        .open(log)
        .map_err(|err| format!("log: {err}"))?;
    log_acquisition(&mut log, acquisition)
}

/// One critical section as the job of `distlock run`: the lock is held by
/// the distlock process above, which stops this job if the lease is lost.
async fn job(args: &Args, index: u32) -> Result<(), String> {
    let start_ns = monotonic_ns();
    let token = std::env::var("DISTLOCK_FENCING_TOKEN")
        .ok()
        .and_then(|token| token.parse::<u64>().ok())
        .unwrap_or(0);
    let marker = running_marker(&args.log);
    std::fs::write(&marker, format!("{index} {start_ns} {token}"))
        .map_err(|err| format!("{}: {err}", marker.display()))?;
    let mut rng = rand::rngs::StdRng::seed_from_u64(args.seed);
    tokio::time::sleep(hold_time(&mut rng, &args.hold_ms)).await;
    let resource = connect_resource(ClientKind::Redis, &args.resource).await?;
    let write = fenced_write(
        resource.as_ref(),
        token,
        &format!("{}:{index}", args.worker),
        None,
    )
    .await;
    let acquisition = Acquisition::new(args.worker, index, start_ns, monotonic_ns(), token, write);
    append_to_log(&args.log, &acquisition)?;
    std::fs::remove_file(&marker).map_err(|err| format!("{}: {err}", marker.display()))
}

/// A busy loop on one CPU, for at most `limit`: the competition that starves
/// a worker whose threads `chaos` has put in `SCHED_IDLE`. The limit bounds
/// it even if `chaos` dies without killing it.
fn hog(limit: Duration) {
    let started = Instant::now();
    while started.elapsed() < limit {
        for _ in 0..10_000 {
            std::hint::spin_loop();
        }
    }
}
