//! `chaos`: runs the safety scenarios and prints one markdown table.
//!
//! `chaos [--scenario NAME] [--seconds N] [--quick] [--seed N] [--client
//! redis|fred] [--jobs N]`. Each scenario starts its own redis-servers (lock
//! nodes and the fenced resource), four `chaos-worker` processes, and a fault
//! schedule drawn from the seed (printed as it runs, so a failing run replays
//! with `--seed`). `--jobs N` runs N scenarios side by side (1 by default);
//! each has its own servers and workers, so only the load is shared. Exits 1
//! when a scenario that must be safe was not.
//!
//! `--quick` runs each scenario for 3 s on one client, not both: the client
//! alternates down the list and the seed picks where it starts, so runs
//! with other seeds cover the other half (`--client` pins one for all).
//!
//! `--peers` runs the peers' scenarios instead: each scenario once with our
//! workers (on the `redis` client, or `--client`'s) and once with each peer
//! library's (`lock_chaos::peers`) that implements the same thing, under
//! the same fault schedule (the seed is the scenario's, not the subject's),
//! and prints the peers' table. It installs the peers first, into
//! `target/peers`, and skips those whose runtime is missing here;
//! `--install-peers` only installs them.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use lock_chaos::barrier::{check_barrier, PartyEvent};
use lock_chaos::check::{check, check_permits, check_rw, Findings, LoggedWrite};
use lock_chaos::latch::{check_latch, LatchEvent};
use lock_chaos::peers::{Algorithm, Peer, Runtime};
use lock_chaos::{procs, Acquisition, FENCED_WRITE, RESOURCE_KEY};
use lock_testkit::{AdminReply, DelayProxy, RedisServer};
use nix::sched::CpuSet;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use rand::{Rng, SeedableRng};

/// How many workers contend in every scenario.
const WORKERS: u32 = 4;

/// The lease TTL of every scenario: short, so faults longer than it are short.
const TTL: Duration = Duration::from_millis(600);

/// How long a worker holds the lock, in ms: a random time in this range
/// (`chaos-worker --hold-ms`).
const SHORT_HOLDS: &str = "5-40";

/// Jobs of two kinds, quick ones and ones that outlive a lease (renewed
/// meanwhile), for the faults that hit `distlock run` as its job starts: a
/// long job is left running past a lease that ended under it, and a quick one
/// that comes next writes before it does, so fencing has late writes to
/// refuse. (Uniform times from 50 to 1200 ms gave few of either.)
const LONG_HOLDS: &str = "50-150,700-1150";

/// What a scenario does to the system while the workers run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// Nothing: contention alone.
    None,
    /// SIGSTOP a worker for twice the TTL, then SIGCONT.
    PauseWorker,
    /// SIGSTOP a lock node for twice the TTL, then SIGCONT.
    PauseServer,
    /// kill -9 a lock node and restart it at once, without persistence.
    KillRestart,
    /// kill -9 a lock node and restart it (without persistence) after the TTL.
    KillDelayedRestart,
    /// `SCRIPT FLUSH` on every lock node.
    ScriptFlush,
    /// `DEL` the lock key behind the holders' backs.
    DeleteKey,
    /// Delete the fencing counter (what `FLUSHALL` does to it).
    DropCounter,
    /// kill -9 a minority of the nodes, for good.
    KillMinority,
    /// kill -9 a majority of the nodes and restart them at once, without persistence.
    LoseMajority,
    /// `SET` the lock key to another value behind the holders' backs.
    OverwriteKey,
    /// Cut node 0 off (its proxy accepts but forwards nothing) for twice the
    /// TTL, then heal it.
    Partition,
    /// `FLUSHALL` on a lock node: the key and the fencing counter are gone.
    FlushAll,
    /// SIGSTOP the `distlock run` that holds the lock (not its job) for twice
    /// the TTL, then SIGCONT.
    PauseCli,
    /// kill -9 the `distlock run` that holds the lock (not its job).
    KillCli,
    /// Starve the worker that holds the lock of CPU for twice the TTL: its
    /// threads in `SCHED_IDLE`, pinned to one CPU beside a busy loop.
    StarveWorker,
    /// kill -9 a worker, for good.
    KillWorker,
    /// kill -9 the worker that holds the lock, for good.
    KillHolder,
}

/// What the algorithm promises under the fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// No overlaps, no stale write accepted.
    Safe,
    /// Overlaps may happen (a holder paused past its lease, a lock deleted
    /// behind its back), but fencing refuses every stale write.
    Fenced,
    /// Nothing is promised: the violations are shown.
    Unsafe,
}

impl Expect {
    fn describe(self) -> &'static str {
        match self {
            Expect::Safe => "safe",
            Expect::Fenced => "overlaps possible; fencing refuses stale writes",
            Expect::Unsafe => "unsafe: violations shown",
        }
    }
}

/// What the workers take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Primitive {
    /// The lock `chaos`.
    Lock,
    /// Terms of leadership of the election `chaos`, the term as the token.
    Election,
    /// Permits of weight 1 or 2 of the semaphore `chaos` of this many, each
    /// slot writing to its own fenced resource.
    Semaphore(u32),
    /// Shared holds (writing nothing) and exclusive holds (writing with
    /// their token) of the read-write lock `chaos`.
    RwLock,
    /// `chaos` and `chaos-2` as one multi-key hold, or `chaos` alone: every
    /// section shares `chaos`.
    Multi,
    /// The parties of a barrier of as many parties as workers: an
    /// acquisition is a party that went on, an overlap a round in which
    /// more went on than the barrier has (or, without faults on the
    /// parties, fewer).
    Barrier,
    /// Rounds of a latch of as many parties as workers, each round the
    /// latch `chaos-r<round>`: an acquisition is a wait that found its
    /// latch open, an overlap one that went on before every party had
    /// counted down.
    Latch,
}

#[derive(Debug, Clone, Copy)]
struct Scenario {
    name: &'static str,
    primitive: Primitive,
    strategy: &'static str,
    nodes: usize,
    fault: Fault,
    fair: bool,
    nested: bool,
    /// Milliseconds of delay on node 0 through a `DelayProxy`.
    slow_node_ms: u64,
    /// Node 0 behind a `DelayProxy` that can be partitioned.
    proxied: bool,
    /// Nodes with an append-only file fsynced on every write.
    persistent: bool,
    /// How long each critical section holds the lock, in ms, as
    /// `chaos-worker --hold-ms` takes it.
    hold_ms: &'static str,
    /// Workers take the lock through `distlock run` (the binary next to this
    /// one), their jobs writing with `DISTLOCK_FENCING_TOKEN`.
    via_cli: bool,
    expect: Expect,
    /// What else to expect, for the table; empty for nothing more.
    note: &'static str,
}

const fn scenario(
    name: &'static str,
    strategy: &'static str,
    nodes: usize,
    fault: Fault,
    expect: Expect,
) -> Scenario {
    Scenario {
        name,
        primitive: Primitive::Lock,
        strategy,
        nodes,
        fault,
        fair: false,
        nested: false,
        slow_node_ms: 0,
        proxied: false,
        persistent: false,
        hold_ms: SHORT_HOLDS,
        via_cli: false,
        expect,
        note: "",
    }
}

fn scenarios() -> Vec<Scenario> {
    vec![
        scenario("baseline", "single", 1, Fault::None, Expect::Safe),
        Scenario {
            nested: true,
            ..scenario("baseline-nested", "reentrant", 1, Fault::None, Expect::Safe)
        },
        scenario("baseline", "redlock", 3, Fault::None, Expect::Safe),
        Scenario {
            fair: true,
            ..scenario("fair", "single", 1, Fault::None, Expect::Safe)
        },
        Scenario {
            via_cli: true,
            note: "jobs of `distlock run`, writing with DISTLOCK_FENCING_TOKEN",
            ..scenario("command-line", "single", 1, Fault::None, Expect::Safe)
        },
        scenario("worker-pause", "single", 1, Fault::PauseWorker, Expect::Fenced),
        Scenario {
            nested: true,
            ..scenario("worker-pause-nested", "reentrant", 1, Fault::PauseWorker, Expect::Fenced)
        },
        Scenario {
            note: "no tokens: a paused holder's late write is accepted",
            ..scenario("worker-pause", "redlock", 3, Fault::PauseWorker, Expect::Unsafe)
        },
        scenario("server-pause", "single", 1, Fault::PauseServer, Expect::Safe),
        scenario("script-flush", "single", 1, Fault::ScriptFlush, Expect::Safe),
        scenario("script-flush", "redlock", 3, Fault::ScriptFlush, Expect::Safe),
        scenario("delete-key", "single", 1, Fault::DeleteKey, Expect::Fenced),
        scenario("overwrite-key", "single", 1, Fault::OverwriteKey, Expect::Fenced),
        Scenario {
            note: "a starved process acts late, as a paused one does",
            ..scenario("cpu-starved", "single", 1, Fault::StarveWorker, Expect::Fenced)
        },
        Scenario {
            proxied: true,
            ..scenario("partition", "single", 1, Fault::Partition, Expect::Safe)
        },
        Scenario {
            persistent: true,
            note: "appendfsync always: the key, its expiry and the counter survive",
            ..scenario("restart-aof", "single", 1, Fault::KillRestart, Expect::Safe)
        },
        Scenario {
            note: "the key and the counter are gone: a second holder, and tokens restart so the fence refuses the newest",
            ..scenario("restart-no-persistence", "single", 1, Fault::KillRestart, Expect::Unsafe)
        },
        Scenario {
            note: "no overlap; the counter restarts, so the fence refuses the newest holders",
            ..scenario("delayed-restart", "single", 1, Fault::KillDelayedRestart, Expect::Safe)
        },
        Scenario {
            note: "tokens restart: the fence refuses the newest holders",
            ..scenario("counter-lost", "single", 1, Fault::DropCounter, Expect::Unsafe)
        },
        Scenario {
            slow_node_ms: 30,
            ..scenario("slow-node", "redlock", 3, Fault::None, Expect::Safe)
        },
        scenario("minority-killed", "redlock", 5, Fault::KillMinority, Expect::Safe),
        Scenario {
            proxied: true,
            ..scenario("partition", "redlock", 3, Fault::Partition, Expect::Safe)
        },
        scenario("delayed-restart", "redlock", 3, Fault::KillDelayedRestart, Expect::Safe),
        Scenario {
            note: "a restarted majority forgets the grant: a second holder until the next renewal",
            ..scenario("majority-lost", "redlock", 3, Fault::LoseMajority, Expect::Unsafe)
        },
        // Added after the scenarios above, so that their seeds (from their
        // place in this list) and the runs in docs/SAFETY.md stay as they were.
        Scenario {
            note: "the key and the counter are gone: a second holder, and tokens restart so the fence refuses the newest",
            ..scenario("flushall", "single", 1, Fault::FlushAll, Expect::Unsafe)
        },
        Scenario {
            nested: true,
            note: "the hash and the counter are gone: a second holder, and tokens restart so the fence refuses the newest",
            ..scenario("flushall-nested", "reentrant", 1, Fault::FlushAll, Expect::Unsafe)
        },
        Scenario {
            via_cli: true,
            hold_ms: LONG_HOLDS,
            note: "a stopped `distlock run` cannot stop its job, which runs on past the lease",
            ..scenario("command-line-pause", "single", 1, Fault::PauseCli, Expect::Fenced)
        },
        Scenario {
            via_cli: true,
            hold_ms: LONG_HOLDS,
            note: "distlock killed: its supervisor kills the job at once; the key expires by its TTL",
            ..scenario("command-line-kill", "single", 1, Fault::KillCli, Expect::Safe)
        },
        // Semaphores of 2 (permits of weight 1 or 2; an overlap is a section
        // beyond 2 weight, or beside a live holder of its slot; each slot
        // fences its own tokens) and elections (an overlap is two leaders).
        Scenario {
            primitive: Primitive::Semaphore(2),
            note: "a semaphore of 2, weights 1 and 2",
            ..scenario("semaphore", "single", 1, Fault::None, Expect::Safe)
        },
        Scenario {
            primitive: Primitive::Semaphore(2),
            note: "a paused permit holder overruns the limit; its slot's fence refuses its late write",
            ..scenario("semaphore-worker-pause", "single", 1, Fault::PauseWorker, Expect::Fenced)
        },
        Scenario {
            primitive: Primitive::Semaphore(2),
            note: "the permits and slot counters are gone: more than 2 at once, and slot tokens restart",
            ..scenario("semaphore-restart-no-persistence", "single", 1, Fault::KillRestart, Expect::Unsafe)
        },
        Scenario {
            primitive: Primitive::Semaphore(2),
            note: "permits end by the server's clock, after every holder's deadline",
            ..scenario("semaphore-server-pause", "single", 1, Fault::PauseServer, Expect::Safe)
        },
        Scenario {
            primitive: Primitive::Semaphore(2),
            proxied: true,
            ..scenario("semaphore-partition", "single", 1, Fault::Partition, Expect::Safe)
        },
        Scenario {
            primitive: Primitive::Election,
            note: "campaign, lead, resign; the term is the token",
            ..scenario("election", "single", 1, Fault::None, Expect::Safe)
        },
        Scenario {
            primitive: Primitive::Election,
            ..scenario("election-server-pause", "single", 1, Fault::PauseServer, Expect::Safe)
        },
        Scenario {
            primitive: Primitive::Election,
            proxied: true,
            ..scenario("election-partition", "single", 1, Fault::Partition, Expect::Safe)
        },
        Scenario {
            primitive: Primitive::Election,
            note: "a paused leader acts late; its term is refused",
            ..scenario("election-worker-pause", "single", 1, Fault::PauseWorker, Expect::Fenced)
        },
        Scenario {
            primitive: Primitive::Election,
            persistent: true,
            note: "appendfsync always: the leader's lock and the term counter survive",
            ..scenario("election-restart-aof", "single", 1, Fault::KillRestart, Expect::Safe)
        },
        Scenario {
            primitive: Primitive::Election,
            note: "the leader's lock is gone: two leaders, and terms restart so the fence refuses the newest",
            ..scenario("election-restart-no-persistence", "single", 1, Fault::KillRestart, Expect::Unsafe)
        },
        // Read-write locks (an overlap is a write beside any other hold;
        // readers write nothing, writers write with their tokens).
        Scenario {
            primitive: Primitive::RwLock,
            note: "reads two times in three, beside each other",
            ..scenario("rw", "single", 1, Fault::None, Expect::Safe)
        },
        Scenario {
            primitive: Primitive::RwLock,
            note: "a paused holder acts late: beside others; a paused writer's late write is refused",
            ..scenario("rw-worker-pause", "single", 1, Fault::PauseWorker, Expect::Fenced)
        },
        Scenario {
            primitive: Primitive::RwLock,
            note: "holds end by the server's clock, after every holder's deadline",
            ..scenario("rw-server-pause", "single", 1, Fault::PauseServer, Expect::Safe)
        },
        Scenario {
            primitive: Primitive::RwLock,
            proxied: true,
            ..scenario("rw-partition", "single", 1, Fault::Partition, Expect::Safe)
        },
        Scenario {
            primitive: Primitive::RwLock,
            note: "the holds and the counter are gone: a writer beside others, and tokens restart",
            ..scenario("rw-restart-no-persistence", "single", 1, Fault::KillRestart, Expect::Unsafe)
        },
        // Multi-key holds of two names beside plain locks of one of them
        // (an overlap is two sections at once: every one holds `chaos`).
        Scenario {
            primitive: Primitive::Multi,
            note: "both names as one hold, either order, beside plain locks of one",
            ..scenario("multi", "single", 1, Fault::None, Expect::Safe)
        },
        Scenario {
            primitive: Primitive::Multi,
            note: "a paused holder acts late; the hold's one token is refused",
            ..scenario("multi-worker-pause", "single", 1, Fault::PauseWorker, Expect::Fenced)
        },
        Scenario {
            primitive: Primitive::Multi,
            ..scenario("multi-server-pause", "single", 1, Fault::PauseServer, Expect::Safe)
        },
        Scenario {
            primitive: Primitive::Multi,
            proxied: true,
            ..scenario("multi-partition", "single", 1, Fault::Partition, Expect::Safe)
        },
        Scenario {
            primitive: Primitive::Multi,
            note: "the keys and counters are gone: a second holder, and tokens restart",
            ..scenario("multi-restart-no-persistence", "single", 1, Fault::KillRestart, Expect::Unsafe)
        },
        Scenario {
            primitive: Primitive::Multi,
            note: "every node takes both names in one script; no tokens",
            ..scenario("multi", "redlock", 3, Fault::None, Expect::Safe)
        },
        // Fair mode under faults: a release grants the next waiter on the
        // server, and the waiter takes the grant up from the message.
        Scenario {
            fair: true,
            note: "a paused holder, or a paused waiter granted the lock, acts late; the fence refuses it",
            ..scenario("fair-worker-pause", "single", 1, Fault::PauseWorker, Expect::Fenced)
        },
        Scenario {
            fair: true,
            ..scenario("fair-server-pause", "single", 1, Fault::PauseServer, Expect::Safe)
        },
        Scenario {
            fair: true,
            proxied: true,
            ..scenario("fair-partition", "single", 1, Fault::Partition, Expect::Safe)
        },
        // A fair semaphore's release grants permits to the waiters at the
        // head of the line, as a fair lock's does.
        Scenario {
            primitive: Primitive::Semaphore(2),
            fair: true,
            note: "a semaphore of 2 in fair mode: releases grant permits in line",
            ..scenario("semaphore-fair", "single", 1, Fault::None, Expect::Safe)
        },
        Scenario {
            primitive: Primitive::Semaphore(2),
            fair: true,
            note: "a paused holder, or a paused waiter granted a permit, acts late; its slot's fence refuses it",
            ..scenario("semaphore-fair-worker-pause", "single", 1, Fault::PauseWorker, Expect::Fenced)
        },
        Scenario {
            primitive: Primitive::Semaphore(2),
            fair: true,
            ..scenario("semaphore-fair-server-pause", "single", 1, Fault::PauseServer, Expect::Safe)
        },
        // Latches: rounds of a latch of four parties. An acquisition is a
        // wait that found its latch open; an overlap, one that went on
        // before every party had counted down (it opened above zero).
        Scenario {
            primitive: Primitive::Latch,
            note: "rounds of a latch of 4 parties, each counting down once by its id",
            ..scenario("latch", "single", 1, Fault::None, Expect::Safe)
        },
        Scenario {
            primitive: Primitive::Latch,
            note: "a paused party holds its round shut until it counts down",
            ..scenario("latch-worker-pause", "single", 1, Fault::PauseWorker, Expect::Safe)
        },
        Scenario {
            primitive: Primitive::Latch,
            note: "a killed party's rounds never open",
            ..scenario("latch-worker-kill", "single", 1, Fault::KillWorker, Expect::Safe)
        },
        Scenario {
            primitive: Primitive::Latch,
            ..scenario("latch-server-pause", "single", 1, Fault::PauseServer, Expect::Safe)
        },
        Scenario {
            primitive: Primitive::Latch,
            proxied: true,
            note: "count-downs whose replies were lost are retried by id and count once",
            ..scenario("latch-partition", "single", 1, Fault::Partition, Expect::Safe)
        },
        Scenario {
            primitive: Primitive::Latch,
            note: "a lost latch stalls its round; it never opens early",
            ..scenario("latch-restart-no-persistence", "single", 1, Fault::KillRestart, Expect::Safe)
        },
        // Barriers: the four workers are the parties of a barrier of four.
        // An acquisition is a party that went on; an overlap, a round in
        // which more went on than four (or, without faults on the parties,
        // fewer).
        Scenario {
            primitive: Primitive::Barrier,
            note: "rounds of a barrier of 4: every round, all four go on",
            ..scenario("barrier", "single", 1, Fault::None, Expect::Safe)
        },
        Scenario {
            primitive: Primitive::Barrier,
            note: "a paused party's place ends with its lease; no round opens without four in",
            ..scenario("barrier-worker-pause", "single", 1, Fault::PauseWorker, Expect::Safe)
        },
        Scenario {
            primitive: Primitive::Barrier,
            note: "a killed party's rounds never open again",
            ..scenario("barrier-worker-kill", "single", 1, Fault::KillWorker, Expect::Safe)
        },
        Scenario {
            primitive: Primitive::Barrier,
            ..scenario("barrier-server-pause", "single", 1, Fault::PauseServer, Expect::Safe)
        },
        Scenario {
            primitive: Primitive::Barrier,
            proxied: true,
            ..scenario("barrier-partition", "single", 1, Fault::Partition, Expect::Safe)
        },
    ]
}

/// Whose workers take the locks in a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Subject {
    /// Ours (`chaos-worker`), on this client.
    Ours(&'static str),
    /// A peer library's worker (`lock_chaos::peers`).
    Peer(Peer),
}

/// The scenarios of `--peers`: the faults of the issue that asked for them
/// (baseline, a paused worker, a paused server, a partition, a restart
/// without persistence, a killed holder; for Redlock, nodes down and slow),
/// for each thing the peers implement. `expect` is what ours promise; every
/// peer is expected safe without faults and shown as it is under them.
fn peer_scenarios() -> Vec<Scenario> {
    let families = [
        (Primitive::Lock, "single", 1),
        (Primitive::Semaphore(2), "single", 1),
        (Primitive::Lock, "redlock", 3),
    ];
    let mut scenarios = Vec::new();
    for (primitive, strategy, nodes) in families {
        let redlock = strategy == "redlock";
        let at = |name, fault, expect| Scenario {
            primitive,
            ..scenario(name, strategy, nodes, fault, expect)
        };
        scenarios.extend([
            at("baseline", Fault::None, Expect::Safe),
            Scenario {
                note: "no tokens: a paused holder's late write is accepted",
                ..at(
                    "worker-pause",
                    Fault::PauseWorker,
                    if redlock {
                        Expect::Unsafe
                    } else {
                        Expect::Fenced
                    },
                )
            },
            at("server-pause", Fault::PauseServer, Expect::Safe),
            Scenario {
                proxied: true,
                ..at("partition", Fault::Partition, Expect::Safe)
            },
            Scenario {
                note: "a restarted node forgets the holds it granted",
                ..at("restart-no-persistence", Fault::KillRestart, Expect::Unsafe)
            },
            at("holder-kill", Fault::KillHolder, Expect::Safe),
        ]);
        if redlock {
            scenarios.extend([
                Scenario {
                    nodes: 5,
                    ..at("minority-killed", Fault::KillMinority, Expect::Safe)
                },
                Scenario {
                    slow_node_ms: 30,
                    ..at("slow-node", Fault::None, Expect::Safe)
                },
            ]);
        }
    }
    scenarios
}

/// What a scenario of `--peers` is of.
fn algorithm_of(scenario: &Scenario) -> Algorithm {
    match (scenario.primitive, scenario.strategy) {
        (Primitive::Semaphore(_), _) => Algorithm::Semaphore,
        (_, "redlock") => Algorithm::Redlock,
        _ => Algorithm::Single,
    }
}

/// Where `--peers` installs the peers: `target/peers`, beside the
/// directory of this binary (`target/debug`).
fn peers_home() -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|err| format!("own path: {err}"))?;
    exe.parent()
        .and_then(Path::parent)
        .map(|target| target.join("peers"))
        .ok_or_else(|| format!("no target directory above {}", exe.display()))
}

/// Installs every runtime's peers, and returns those ready to run; says on
/// stderr which are skipped, and why.
fn install_peers() -> Result<Vec<Peer>, String> {
    let home = peers_home()?;
    let mut ready = Vec::new();
    for runtime in Runtime::ALL {
        let peers: Vec<Peer> = Peer::ALL
            .into_iter()
            .filter(|peer| peer.runtime() == runtime)
            .collect();
        let names: Vec<&str> = peers.iter().map(|peer| peer.name()).collect();
        eprintln!(
            "chaos: installing {} into {}",
            names.join(", "),
            home.display()
        );
        match lock_chaos::peers::install(runtime, &home) {
            Ok(()) => ready.extend(peers),
            Err(reason) => eprintln!("chaos: skipping {}: {reason}", names.join(", ")),
        }
    }
    Ok(Peer::ALL
        .into_iter()
        .filter(|peer| ready.contains(peer))
        .collect())
}

struct Options {
    only: Option<String>,
    /// Run the peers' scenarios (`--peers`).
    peers: bool,
    /// Only install the peers (`--install-peers`).
    install_only: bool,
    seconds: u64,
    jobs: usize,
    seed: u64,
    clients: Vec<&'static str>,
    /// `--quick` without `--client`: each scenario on one of the clients.
    one_client_each: bool,
}

fn parse_args() -> Result<Options, String> {
    let mut options = Options {
        only: None,
        peers: false,
        install_only: false,
        seconds: 20,
        jobs: 1,
        seed: seed_from_time(),
        clients: vec!["redis", "fred"],
        one_client_each: false,
    };
    let mut client_chosen = false;
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        match flag.as_str() {
            "--quick" => {
                options.seconds = 3;
                options.one_client_each = true;
            }
            "--scenario" => options.only = Some(args.next().ok_or("--scenario needs a name")?),
            "--peers" => options.peers = true,
            "--install-peers" => options.install_only = true,
            "--seconds" => {
                options.seconds = args
                    .next()
                    .and_then(|value| value.parse().ok())
                    .ok_or("--seconds needs a number")?
            }
            "--jobs" => {
                options.jobs = args
                    .next()
                    .and_then(|value| value.parse().ok())
                    .filter(|jobs| *jobs > 0)
                    .ok_or("--jobs needs a number of at least 1")?
            }
            "--seed" => {
                options.seed = args
                    .next()
                    .and_then(|value| value.parse().ok())
                    .ok_or("--seed needs a number")?
            }
            "--client" => {
                client_chosen = true;
                options.clients = match args.next().as_deref() {
                    Some("redis") => vec!["redis"],
                    Some("fred") => vec!["fred"],
                    _ => return Err("--client takes redis or fred".to_owned()),
                }
            }
            "--help" | "-h" => {
                return Err("usage: chaos [--peers | --install-peers] [--scenario NAME] [--seconds N] [--quick] [--seed N] [--client redis|fred] [--jobs N]".to_owned())
            }
            other => return Err(format!("unknown argument {other}")),
        }
    }
    options.one_client_each &= !client_chosen;
    if options.peers && !client_chosen {
        // Ours beside the peers on one client: the full runs show both.
        options.clients = vec!["redis"];
    }
    options.one_client_each &= !options.peers;
    Ok(options)
}

fn seed_from_time() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |elapsed| elapsed.as_secs())
}

fn main() -> ExitCode {
    let options = match parse_args() {
        Ok(options) => options,
        Err(err) => {
            eprintln!("chaos: {err}");
            return ExitCode::from(2);
        }
    };
    if options.install_only {
        return match install_peers() {
            Ok(peers) => {
                let names: Vec<&str> = peers.iter().map(|peer| peer.name()).collect();
                eprintln!("chaos: ready: {}", names.join(", "));
                ExitCode::SUCCESS
            }
            Err(err) => {
                eprintln!("chaos: {err}");
                ExitCode::FAILURE
            }
        };
    }
    // Each run's seed comes from the scenario's place in the full list and the
    // client, so `--scenario` and `--client` replay the same schedule.
    let list = if options.peers {
        peer_scenarios()
    } else {
        scenarios()
    };
    let chosen: Vec<(usize, Scenario)> = list
        .iter()
        .copied()
        .enumerate()
        .filter(|(_, scenario)| {
            options.only.as_deref().is_none_or(|only| {
                only == scenario.name || only == format!("{}/{}", scenario.name, scenario.strategy)
            })
        })
        .collect();
    if chosen.is_empty() {
        eprintln!("chaos: no scenario matches; the names are:");
        for scenario in &list {
            eprintln!("  {}/{}", scenario.name, scenario.strategy);
        }
        return ExitCode::from(2);
    }
    eprintln!(
        "chaos: seed {} ({} s per run; replay with --seed {})",
        options.seed, options.seconds, options.seed
    );
    let peers = if options.peers {
        match install_peers() {
            Ok(peers) => peers,
            Err(err) => {
                eprintln!("chaos: {err}");
                return ExitCode::FAILURE;
            }
        }
    } else {
        Vec::new()
    };
    // Every run, in the table's order; `--jobs` of them at a time.
    let runs: Vec<(Scenario, Subject, u64)> = if options.peers {
        // One fault schedule per scenario, whoever's workers run it.
        chosen
            .iter()
            .flat_map(|(number, scenario)| {
                let seed = options.seed.wrapping_add(*number as u64 * 2);
                let ours = options.clients.iter().map(|client| Subject::Ours(client));
                let theirs = peers
                    .iter()
                    .filter(|peer| peer.algorithm() == algorithm_of(scenario))
                    .map(|peer| Subject::Peer(*peer));
                ours.chain(theirs)
                    .map(move |subject| (*scenario, subject, seed))
                    .collect::<Vec<_>>()
            })
            .collect()
    } else {
        chosen
            .iter()
            .flat_map(|(number, scenario)| {
                // Quick: the client of this scenario's turn, from the seed.
                let turn = (options.seed as usize).wrapping_add(*number) % options.clients.len();
                let clients = match options.one_client_each {
                    true => &options.clients[turn..=turn],
                    false => &options.clients[..],
                };
                clients.iter().map(move |client| {
                    let client_number = u64::from(*client == "fred");
                    let seed = options
                        .seed
                        .wrapping_add(*number as u64 * 2)
                        .wrapping_add(client_number);
                    (*scenario, Subject::Ours(client), seed)
                })
            })
            .collect()
    };
    let seconds = options.seconds;
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results: Vec<std::sync::Mutex<Option<RunResult>>> =
        runs.iter().map(|_| std::sync::Mutex::new(None)).collect();
    std::thread::scope(|scope| {
        for _ in 0..options.jobs.min(runs.len()) {
            scope.spawn(|| {
                // Each job has its own runtime, as the one run at a time
                // always had: a run's blocking steps (starting servers,
                // admin commands, signals) hold up only its own thread,
                // never the worker threads that carry its proxy.
                let runtime = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    .build()
                    .expect("tokio runtime");
                loop {
                    let index = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    let Some((scenario, subject, seed)) = runs.get(index) else {
                        break;
                    };
                    eprintln!(
                        "chaos: {}/{} {}, seed {seed}",
                        scenario.name,
                        scenario.strategy,
                        subject_label(*subject)
                    );
                    let result =
                        runtime.block_on(run(scenario, *subject, options.peers, seconds, *seed));
                    if let Ok(mut slot) = results[index].lock() {
                        *slot = Some(result);
                    }
                }
            });
        }
    });
    let mut rows = Vec::new();
    let mut failed = false;
    for ((scenario, subject, _), result) in runs.iter().zip(results) {
        let result = result
            .into_inner()
            .ok()
            .flatten()
            .unwrap_or_else(|| Err("the run did not finish".to_owned()));
        let (findings, verdict) = match result {
            Ok((_, 0)) if scenario.fault != Fault::None => (
                None,
                Err("harness error: the fault was never injected".to_owned()),
            ),
            Ok((findings, _)) => {
                let verdict = verdict(expected_of(scenario, *subject), &findings);
                (Some(findings), verdict)
            }
            Err(err) => (None, Err(format!("harness error: {err}"))),
        };
        if verdict.is_err() {
            failed = true;
        }
        rows.push(match subject {
            Subject::Ours(client) if !options.peers => {
                row(scenario, client, findings.as_ref(), &verdict)
            }
            _ => peer_row(scenario, *subject, findings.as_ref(), &verdict),
        });
    }
    if options.peers {
        println!("| scenario | nodes | library | acquisitions | overlaps | stale writes accepted | stale writes refused | newest holder refused | longest overrun (ms) | verdict |");
        println!("|---|---:|---|---:|---:|---:|---:|---:|---:|---|");
    } else {
        println!("| scenario | strategy | client | acquisitions | overlaps | stale writes accepted | stale writes refused | newest holder refused | longest overrun (ms) | expected | verdict |");
        println!("|---|---|---|---:|---:|---:|---:|---:|---:|---|---|");
    }
    for row in rows {
        println!("{row}");
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// What `subject` is expected to do in `scenario`: ours what the scenario
/// says; a peer, to be safe without faults, and shown as it is under them.
fn expected_of(scenario: &Scenario, subject: Subject) -> Expect {
    match subject {
        Subject::Ours(_) => scenario.expect,
        Subject::Peer(_) if scenario.fault == Fault::None => Expect::Safe,
        Subject::Peer(_) => Expect::Unsafe,
    }
}

/// `on redis`, or `with rslock`, for the log lines.
fn subject_label(subject: Subject) -> String {
    match subject {
        Subject::Ours(client) => format!("on {client}"),
        Subject::Peer(peer) => format!("with {}", peer.name()),
    }
}

/// A row of the peers' table. A peer that renews does not know when its
/// lease ended, so its overrun is `n/a`; a peer's semaphore has no slots
/// to fence, so its stale writes are `n/a` (its overlaps count the
/// sections beyond the limit).
fn peer_row(
    scenario: &Scenario,
    subject: Subject,
    findings: Option<&Findings>,
    verdict: &Result<&str, String>,
) -> String {
    let verdict = verdict_cell(verdict);
    let what = match algorithm_of(scenario) {
        Algorithm::Single => "lock",
        Algorithm::Semaphore => "semaphore",
        Algorithm::Redlock => "Redlock",
    };
    let library = match subject {
        Subject::Ours(client) => format!("**distlock** {what} ({client} client)"),
        Subject::Peer(peer) => peer.package().to_owned(),
    };
    let (stale_known, overrun_known) = match subject {
        Subject::Ours(_) => (true, true),
        Subject::Peer(peer) => (
            peer.algorithm() != Algorithm::Semaphore,
            peer.knows_lease_end(),
        ),
    };
    let figures = figures(findings, stale_known, overrun_known);
    format!(
        "| {what}: {} | {} | {library} {figures}| {verdict} |",
        scenario.name, scenario.nodes
    )
}

/// The figures' cells of a row, each followed by `| `: `-` for a run that
/// did not finish, `n/a` for what the run cannot know (stale writes, or
/// the overrun, when `false`).
fn figures(findings: Option<&Findings>, stale_known: bool, overrun_known: bool) -> String {
    let Some(f) = findings else {
        return "| - | - | - | - | - | - ".to_owned();
    };
    let known = |yes: bool, figure: usize| match yes {
        true => figure.to_string(),
        false => "n/a".to_owned(),
    };
    format!(
        "| {} | {} | {} | {} | {} | {} ",
        f.acquisitions,
        f.overlaps,
        known(stale_known, f.stale_accepted),
        known(stale_known, f.stale_refused),
        known(stale_known, f.fresh_refused),
        match overrun_known {
            true => f.max_overrun_ms.to_string(),
            false => "n/a".to_owned(),
        },
    )
}

/// A verdict's cell: its text, or its failure in bold.
fn verdict_cell(verdict: &Result<&str, String>) -> String {
    match verdict {
        Ok(text) => (*text).to_owned(),
        Err(text) => format!("**{text}**"),
    }
}

fn verdict(expect: Expect, findings: &Findings) -> Result<&'static str, String> {
    if findings.acquisitions == 0 {
        return Err("no acquisitions".to_owned());
    }
    match expect {
        Expect::Safe if findings.overlaps > 0 || findings.stale_accepted > 0 => {
            Err("VIOLATED".to_owned())
        }
        Expect::Fenced if findings.stale_accepted > 0 => Err("VIOLATED".to_owned()),
        Expect::Unsafe
            if findings.overlaps + findings.stale_accepted + findings.fresh_refused > 0 =>
        {
            Ok("violations shown")
        }
        Expect::Unsafe => Ok("none seen this run"),
        _ => Ok("ok"),
    }
}

fn row(
    scenario: &Scenario,
    client: &str,
    findings: Option<&Findings>,
    verdict: &Result<&str, String>,
) -> String {
    let verdict = verdict_cell(verdict);
    let figures = figures(findings, true, true);
    let expected = if scenario.note.is_empty() {
        scenario.expect.describe().to_owned()
    } else {
        format!("{}: {}", scenario.expect.describe(), scenario.note)
    };
    format!(
        "| {} | {}{} | {} {}| {} | {} |",
        scenario.name,
        scenario.strategy,
        if scenario.nodes > 1 {
            format!(" ({})", scenario.nodes)
        } else {
            String::new()
        },
        client,
        figures,
        expected,
        verdict
    )
}

/// One scenario run by `subject`'s workers: servers, workers, faults, then
/// the check. `beside_peers` for a run of `--peers`, whose rows compare ours
/// with the peers' ([`peer_scenarios`]).
async fn run(
    scenario: &Scenario,
    subject: Subject,
    beside_peers: bool,
    seconds: u64,
    seed: u64,
) -> RunResult {
    fn io(what: &'static str) -> impl Fn(std::io::Error) -> String {
        move |err| format!("{what}: {err}")
    }
    let mut nodes: Vec<RedisServer> = (0..scenario.nodes)
        .map(|_| {
            let builder = RedisServer::builder();
            if scenario.persistent {
                builder.persistent().start()
            } else {
                builder.start()
            }
        })
        .collect::<Result<_, _>>()
        .map_err(io("start a lock node"))?;
    let resource = RedisServer::start().map_err(io("start the resource"))?;
    let proxy = if scenario.slow_node_ms > 0 || scenario.proxied {
        Some(
            DelayProxy::start(
                nodes[0].port(),
                Duration::from_millis(scenario.slow_node_ms),
            )
            .await
            .map_err(io("start the delay proxy"))?,
        )
    } else {
        None
    };
    let urls: Vec<String> = nodes
        .iter()
        .enumerate()
        .map(|(index, node)| match (&proxy, index) {
            (Some(proxy), 0) => proxy.url().expose().to_owned(),
            _ => node.url().expose().to_owned(),
        })
        .collect();
    let client = match subject {
        Subject::Ours(client) => client,
        Subject::Peer(peer) => peer.name(),
    };
    // The runs of `--peers` share their scenario's seed.
    let scratch =
        std::env::temp_dir().join(format!("lock-chaos-{}-{seed}-{client}", std::process::id()));
    std::fs::create_dir_all(&scratch).map_err(io("scratch directory"))?;
    let worker_binary = std::env::current_exe()
        .map_err(io("own path"))?
        .with_file_name("chaos-worker");
    let mut workers = Workers(Vec::new());
    let mut logs: Vec<PathBuf> = Vec::new();
    // A peer's worker reads the fenced write from a file.
    let script = scratch.join("fenced_write.lua");
    std::fs::write(&script, FENCED_WRITE.source()).map_err(io("write the fenced write"))?;
    for worker in 0..WORKERS {
        let log = scratch.join(format!("worker-{worker}.log"));
        let worker_seed = seed.wrapping_mul(31).wrapping_add(u64::from(worker));
        if let Subject::Peer(peer) = subject {
            let home = peers_home()?;
            let mut command = peer.command(&home);
            command
                .args(["--worker", &worker.to_string()])
                .args(["--nodes", &urls.join(",")])
                .args(["--resource", resource.url().expose()])
                .arg("--log")
                .arg(&log)
                .args(["--seconds", &seconds.to_string()])
                .args(["--seed", &worker_seed.to_string()])
                .args(["--hold-ms", scenario.hold_ms])
                .args(["--ttl-ms", &TTL.as_millis().to_string()])
                .args(["--wait-ms", "1000"])
                .arg("--script")
                .arg(&script);
            if let Primitive::Semaphore(limit) = scenario.primitive {
                command.args(["--permits", &limit.to_string()]);
            }
            workers.0.push(
                command
                    .spawn()
                    .map_err(|err| format!("start {}'s worker: {err}", peer.name()))?,
            );
            logs.push(log);
            continue;
        }
        let mut command = Command::new(&worker_binary);
        command
            .args(["--worker", &worker.to_string()])
            .args(["--key", "chaos"])
            .args(["--resource", resource.url().expose()])
            .arg("--log")
            .arg(&log)
            .args(["--seconds", &seconds.to_string()])
            .args(["--seed", &worker_seed.to_string()])
            .args(["--hold-ms", scenario.hold_ms])
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("DISTLOCK_NODES", urls.join(","))
            .env("DISTLOCK_STRATEGY", scenario.strategy)
            .env("DISTLOCK_CLIENT", client)
            .env("DISTLOCK_TTL", format!("{}ms", TTL.as_millis()))
            .env("DISTLOCK_WAIT_TIMEOUT", "1s")
            .env("DISTLOCK_COMMAND_TIMEOUT", "200ms")
            .env("DISTLOCK_CONNECT_TIMEOUT", "500ms")
            .env("DISTLOCK_NODE_TIMEOUT", "50ms")
            .env("DISTLOCK_FAIR", scenario.fair.to_string());
        if scenario.nested {
            command.arg("--nested");
        }
        if beside_peers {
            // As the peers' workers do: no write once the lease's deadline
            // has passed by the worker's own clock.
            command.arg("--deadline");
        }
        match scenario.primitive {
            Primitive::Lock => {}
            Primitive::Election => {
                command.arg("--elect");
            }
            Primitive::Semaphore(limit) => {
                command.args(["--permits", &limit.to_string()]);
            }
            Primitive::RwLock => {
                command.arg("--rw");
            }
            Primitive::Multi => {
                command.arg("--multi");
            }
            Primitive::Latch => {
                command.args(["--latch", &WORKERS.to_string()]);
            }
            Primitive::Barrier => {
                command.args(["--barrier", &WORKERS.to_string()]);
            }
        }
        if scenario.via_cli {
            let distlock = worker_binary.with_file_name("distlock");
            if !distlock.exists() {
                return Err(format!(
                    "{} is missing: build it with `cargo build -p distlock-cli --features redis,fred`",
                    distlock.display()
                ));
            }
            command.arg("--via-cli").arg(distlock);
        }
        workers.0.push(
            command
                .spawn()
                .map_err(|err| format!("start {}: {err}", worker_binary.display()))?,
        );
        logs.push(log);
    }
    let label = format!(
        "{}/{} {}",
        scenario.name,
        scenario.strategy,
        subject_label(subject)
    );
    let mut injected = 0usize;
    let started = Instant::now();
    let run_for = Duration::from_secs(seconds);
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut fault_at = started + Duration::from_millis(rng.random_range(300..800));
    let lease = match subject {
        Subject::Peer(peer) => peer.lease(TTL),
        Subject::Ours(_) => TTL,
    };
    // Twice the lease; beside the peers, twice the longest lease of any
    // subject of the scenario, so that every subject gets the same faults.
    let mut fault_length = TTL * 2;
    if beside_peers {
        // A peer's interpreter takes a moment to start on a busy machine:
        // every subject beside the peers gets that moment before the first
        // fault.
        fault_at += Duration::from_secs(1);
        fault_length = Peer::ALL
            .into_iter()
            .filter(|peer| peer.algorithm() == algorithm_of(scenario))
            .map(|peer| peer.lease(TTL))
            .fold(TTL, Duration::max)
            * 2;
    }
    if matches!(scenario.fault, Fault::KillWorker | Fault::KillHolder) {
        // Once, for good: after a third of the run, so the rows show rounds
        // opening before it and none after.
        fault_at = started + run_for / 3;
    }
    while started.elapsed() < run_for {
        tokio::time::sleep(Duration::from_millis(20)).await;
        if Instant::now() < fault_at || scenario.fault == Fault::None {
            continue;
        }
        let due = fault_at;
        let rig = Rig {
            proxy: proxy.as_ref(),
            workers: &workers.0,
            worker_binary: &worker_binary,
            label: &label,
            resource: &resource,
            holder_mark: matches!(subject, Subject::Peer(_)),
            beside_peers,
            lease,
            fault_length,
            started,
        };
        if inject(scenario, &mut nodes, &rig, &mut rng).await? {
            injected += 1;
        }
        if matches!(
            scenario.fault,
            Fault::KillMinority | Fault::KillWorker | Fault::KillHolder
        ) {
            // Once is the fault: the minority stays down.
            fault_at = started + run_for * 2;
        } else {
            let gap = Duration::from_millis(rng.random_range(600..1500));
            fault_at = match beside_peers {
                // From when the fault was due, not when it ended: a search
                // for the holder or a slow restart of one subject's does
                // not push its later faults back.
                true => due + fault_length + gap,
                false => Instant::now() + gap,
            };
        }
    }
    // Wake any paused worker or node so everyone can finish and be checked.
    for worker in &workers.0 {
        let _ = kill(pid_from(worker.id()), Signal::SIGCONT);
    }
    for node in &mut nodes {
        let _ = node.resume();
    }
    let give_up = Instant::now() + Duration::from_secs(15);
    for worker in &mut workers.0 {
        loop {
            match worker.try_wait() {
                Ok(Some(_)) => break,
                Ok(None) if Instant::now() < give_up => {
                    tokio::time::sleep(Duration::from_millis(20)).await
                }
                _ => {
                    let _ = worker.kill();
                    let _ = worker.wait();
                    break;
                }
            }
        }
    }
    let mut acquisitions = Vec::new();
    let mut latch_events = Vec::new();
    let mut party_events = Vec::new();
    for log in &logs {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        for line in text.lines() {
            match scenario.primitive {
                Primitive::Latch => latch_events.push(line.parse::<LatchEvent>()?),
                Primitive::Barrier => party_events.push(line.parse::<PartyEvent>()?),
                _ => acquisitions.push(line.parse::<Acquisition>()?),
            }
        }
    }
    let findings = match scenario.primitive {
        Primitive::Latch => {
            let counted = latch_ids_counted(&nodes[0], &latch_events)?;
            check_latch(&latch_events, WORKERS, &counted)
        }
        Primitive::Barrier => {
            // Without faults every party counted goes on; under one, a
            // party counted while live may lose its lease before it does.
            let exact = scenario.fault == Fault::None;
            check_barrier(&party_events, WORKERS, exact)
        }
        // A peer's permits have no slots, so no slot fences their writes:
        // only how many were held at once is checked.
        Primitive::Semaphore(limit) if matches!(subject, Subject::Peer(_)) => {
            check_permits(&acquisitions, &[], limit)
        }
        Primitive::Semaphore(limit) => {
            let slots = (0..limit)
                .map(|slot| {
                    let key = lock_chaos::slot_resource_key(slot);
                    Ok((slot, read_resource_log(&resource, &key)?))
                })
                .collect::<Result<Vec<_>, String>>()?;
            let mut findings = check_permits(&acquisitions, &slots, limit);
            if beside_peers {
                // Beside a peer's, whose permits have no slots: the
                // overlaps are the sections beyond the limit alone, as
                // the peer's are counted (two holders of one slot within
                // the limit are a finding of ours only).
                findings.overlaps = check_permits(&acquisitions, &[], limit).overlaps;
            }
            findings
        }
        Primitive::RwLock => check_rw(&acquisitions, &read_resource_log(&resource, RESOURCE_KEY)?),
        _ => check(&acquisitions, &read_resource_log(&resource, RESOURCE_KEY)?),
    };
    // CHAOS_KEEP_LOGS=1 keeps the workers' logs for a closer look.
    if std::env::var_os("CHAOS_KEEP_LOGS").is_some() {
        eprintln!("chaos: logs kept in {}", scratch.display());
    } else {
        let _ = std::fs::remove_dir_all(&scratch);
    }
    drop(proxy);
    Ok((findings, injected))
}

/// What a run found, and how many times its fault was injected.
type RunResult = Result<(Findings, usize), String>;

/// What a fault may act on besides the lock nodes.
struct Rig<'a> {
    /// The proxy in front of node 0, if the scenario has one.
    proxy: Option<&'a DelayProxy>,
    /// The worker processes, by number.
    workers: &'a [Child],
    /// The `chaos-worker` binary, which is also the busy loop (`--hog`).
    worker_binary: &'a Path,
    /// `<scenario>/<strategy> on <client>`, for the fault's log lines: runs
    /// side by side share scenario names.
    label: &'a str,
    /// The fenced resource, where a peer's worker marks itself the holder.
    resource: &'a RedisServer,
    /// Whether the workers are a peer's, whose holder the keys cannot name
    /// but the mark on the resource does.
    holder_mark: bool,
    /// Whether this is a run of `--peers`, whose faults look harder for
    /// the holder ([`holder_or_any`]).
    beside_peers: bool,
    /// The lease the workers take: how long to look for a holder.
    lease: Duration,
    /// How long a fault lasts.
    fault_length: Duration,
    /// When the run began, for the fault's log line.
    started: Instant,
}

/// Applies the scenario's fault once, and says so on stderr; `false` when
/// there was nothing to apply it to (no `distlock run` had a job).
async fn inject(
    scenario: &Scenario,
    nodes: &mut [RedisServer],
    rig: &Rig<'_>,
    rng: &mut rand::rngs::StdRng,
) -> Result<bool, String> {
    let at_ms = rig.started.elapsed().as_millis();
    let (proxy, workers, label) = (rig.proxy, rig.workers, rig.label);
    let io = |err: std::io::Error| err.to_string();
    let key = "lock:{chaos}";
    let long = rig.fault_length;
    let node = rng.random_range(0..nodes.len());
    match scenario.fault {
        Fault::None => {}
        Fault::PauseWorker => {
            let (worker, which) = holder_or_any(rig, nodes, key, rng).await;
            say(
                rig.started.elapsed().as_millis(),
                label,
                format_args!("SIGSTOP worker {worker} ({which}) for {long:?}"),
            );
            let stopped = Stopped::new(workers[worker].id())?;
            tokio::time::sleep(long).await;
            drop(stopped);
        }
        Fault::KillWorker => {
            let worker = rng.random_range(0..workers.len());
            say(
                at_ms,
                label,
                format_args!("kill -9 worker {worker}, for good"),
            );
            let _ = kill(pid_from(workers[worker].id()), Signal::SIGKILL);
        }
        Fault::KillHolder => {
            let (worker, which) = holder_or_any(rig, nodes, key, rng).await;
            say(
                rig.started.elapsed().as_millis(),
                label,
                format_args!("kill -9 worker {worker} ({which}), for good"),
            );
            let _ = kill(pid_from(workers[worker].id()), Signal::SIGKILL);
        }
        Fault::PauseServer => {
            say(
                at_ms,
                label,
                format_args!("SIGSTOP node {node} for {long:?}"),
            );
            nodes[node].pause().map_err(io)?;
            tokio::time::sleep(long).await;
            nodes[node].resume().map_err(io)?;
        }
        Fault::KillRestart => {
            say(
                at_ms,
                label,
                format_args!("kill -9 node {node}, restart at once"),
            );
            nodes[node].restart().map_err(io)?;
        }
        Fault::KillDelayedRestart => {
            let down = TTL + Duration::from_millis(200);
            say(
                at_ms,
                label,
                format_args!("kill -9 node {node}, restart after {down:?}"),
            );
            nodes[node].kill().map_err(io)?;
            tokio::time::sleep(down).await;
            nodes[node].restart().map_err(io)?;
        }
        Fault::ScriptFlush => {
            say(at_ms, label, format_args!("SCRIPT FLUSH on every node"));
            for node in nodes.iter() {
                node.admin(&["SCRIPT", "FLUSH"]).map_err(io)?;
            }
        }
        Fault::DeleteKey => {
            say(at_ms, label, format_args!("DEL {key} on node {node}"));
            nodes[node].admin(&["DEL", key]).map_err(io)?;
        }
        Fault::DropCounter => {
            say(at_ms, label, format_args!("DEL {key}:fence on node {node}"));
            nodes[node]
                .admin(&["DEL", &format!("{key}:fence")])
                .map_err(io)?;
        }
        Fault::KillMinority => {
            let minority = nodes.len() / 2;
            say(
                at_ms,
                label,
                format_args!("kill -9 nodes 0..{minority} for good"),
            );
            for node in nodes.iter_mut().take(minority) {
                node.kill().map_err(io)?;
            }
        }
        Fault::OverwriteKey => {
            say(
                at_ms,
                label,
                format_args!("SET {key} intruder on node {node}"),
            );
            nodes[node]
                .admin(&["SET", key, "intruder", "PX", &TTL.as_millis().to_string()])
                .map_err(io)?;
        }
        Fault::Partition => {
            let Some(proxy) = proxy else {
                return Err("a partition needs node 0 behind a proxy".to_owned());
            };
            say(at_ms, label, format_args!("partition node 0 for {long:?}"));
            proxy.set_blackhole(true);
            tokio::time::sleep(long).await;
            proxy.set_blackhole(false);
        }
        Fault::LoseMajority => {
            let majority = nodes.len() / 2 + 1;
            say(
                at_ms,
                label,
                format_args!("kill -9 nodes 0..{majority}, restart at once"),
            );
            for node in nodes.iter_mut().take(majority) {
                node.restart().map_err(io)?;
            }
        }
        Fault::FlushAll => {
            say(at_ms, label, format_args!("FLUSHALL on node {node}"));
            nodes[node].admin(&["FLUSHALL"]).map_err(io)?;
        }
        Fault::PauseCli => {
            let Some((holder, waited)) = cli_holder_as_job_starts(workers, long).await else {
                say(
                    at_ms,
                    label,
                    format_args!("no `distlock run` ran a job; nothing paused"),
                );
                return Ok(false);
            };
            say(at_ms + waited.as_millis(), label, format_args!("SIGSTOP worker {}'s distlock (pid {}) as its job starts, for {long:?}; the job runs on", holder.worker, holder.distlock));
            let stopped = Stopped::new(holder.distlock)?;
            tokio::time::sleep(long).await;
            drop(stopped);
        }
        Fault::KillCli => {
            let Some((holder, waited)) = cli_holder_as_job_starts(workers, long).await else {
                say(
                    at_ms,
                    label,
                    format_args!("no `distlock run` ran a job; nothing killed"),
                );
                return Ok(false);
            };
            let killed_at = Instant::now();
            kill(pid_from(holder.distlock), Signal::SIGKILL)
                .map_err(|err| format!("kill -9 {}: {err}", holder.distlock))?;
            // How long its job outlives it, which the lease would not cover
            // once the key expires.
            let mut below = holder.below.clone();
            while !below.is_empty() && killed_at.elapsed() < long {
                below.retain(|pid| !procs::is_gone(*pid));
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            let fate = if below.is_empty() {
                format!(
                    "its job was gone {} ms later",
                    killed_at.elapsed().as_millis()
                )
            } else {
                format!("its job still ran {long:?} later")
            };
            say(
                at_ms + waited.as_millis(),
                label,
                format_args!(
                    "kill -9 worker {}'s distlock (pid {}) as its job starts: {fate}",
                    holder.worker, holder.distlock
                ),
            );
        }
        Fault::StarveWorker => {
            let (worker, which) = holder_or_any(rig, nodes, key, rng).await;
            let starved = Starved::start(workers[worker].id(), rig.worker_binary, long)?;
            let at_ms = rig.started.elapsed().as_millis();
            say(at_ms, label, format_args!("worker {worker}'s threads ({which}) in SCHED_IDLE on CPU {} beside a busy loop for {long:?}", starved.cpu));
            tokio::time::sleep(long).await;
            drop(starved);
        }
    }
    Ok(true)
}

/// Says on stderr what a fault did, `at_ms` into the run `label`.
fn say(at_ms: u128, label: &str, what: std::fmt::Arguments<'_>) {
    eprintln!("chaos: t={at_ms}ms {label}: {what}");
}

/// The worker processes of one run. Dropped on the way out of the run,
/// early on an error too, it kills and reaps any still running (the run
/// waits for them to finish first when all goes well).
struct Workers(Vec<Child>);

impl Drop for Workers {
    fn drop(&mut self) {
        for worker in &mut self.0 {
            if let Ok(None) = worker.try_wait() {
                let _ = kill(pid_from(worker.id()), Signal::SIGCONT);
                let _ = worker.kill();
                let _ = worker.wait();
            }
        }
    }
}

fn pid_from(pid: u32) -> Pid {
    Pid::from_raw(i32::try_from(pid).unwrap_or(i32::MAX))
}

/// A `distlock run` of the command-line scenarios that is running its job.
struct CliHolder {
    /// The worker whose `distlock run` it is.
    worker: usize,
    /// The `distlock run` process.
    distlock: u32,
    /// Its supervisor and the supervisor's children (the job).
    below: Vec<u32>,
}

/// The `distlock run` processes that hold the lock: those running a job.
/// The lock key cannot say which they are (distlock's owner tokens are
/// random), but the process tree can: every worker runs one `distlock run`
/// at a time, and only one that holds the lock has started its supervisor,
/// whose child is the job (`worker → distlock run → supervisor → job`).
/// There are two at once only when a holder's lease ran out while its job
/// runs on.
fn cli_holders(workers: &[Child]) -> Vec<CliHolder> {
    let mut holders = Vec::new();
    for (worker, child) in workers.iter().enumerate() {
        for distlock in procs::children_of(child.id()) {
            let supervisors = procs::children_of(distlock);
            if supervisors.is_empty() {
                continue;
            }
            let mut below = supervisors.clone();
            for supervisor in &supervisors {
                below.extend(procs::children_of(*supervisor));
            }
            holders.push(CliHolder {
                worker,
                distlock,
                below,
            });
        }
    }
    holders
}

/// Waits, up to `within`, for a `distlock run` to start a job after this is
/// called, and returns it with the time waited: a fault that hits a job as it
/// starts leaves it the longest to run on, which is what the command-line
/// faults test. When no job starts in time, the one running (if any) is
/// taken.
async fn cli_holder_as_job_starts(
    workers: &[Child],
    within: Duration,
) -> Option<(CliHolder, Duration)> {
    let started = Instant::now();
    let running: Vec<u32> = cli_holders(workers)
        .iter()
        .map(|holder| holder.distlock)
        .collect();
    loop {
        let mut holders = cli_holders(workers);
        if let Some(fresh) = holders
            .iter()
            .position(|holder| !running.contains(&holder.distlock))
        {
            return Some((holders.swap_remove(fresh), started.elapsed()));
        }
        if started.elapsed() >= within {
            return holders.pop().map(|holder| (holder, started.elapsed()));
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// A process stopped with SIGSTOP until this is dropped, which sends SIGCONT,
/// on every path out of the fault.
struct Stopped(Pid);

impl Stopped {
    fn new(pid: u32) -> Result<Self, String> {
        let pid = pid_from(pid);
        kill(pid, Signal::SIGSTOP).map_err(|err| format!("SIGSTOP {pid}: {err}"))?;
        Ok(Stopped(pid))
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        let _ = kill(self.0, Signal::SIGCONT);
    }
}

/// A worker starved of CPU: every thread in `SCHED_IDLE` (it runs only when
/// nothing else wants the CPU) and pinned to one CPU, beside a busy loop
/// pinned there at normal priority, so it gets next to nothing while the rest
/// of the system keeps the other CPUs. Dropping it ends the starvation on
/// every path: the busy loop is killed and reaped, and every thread of the
/// worker (those started meanwhile too) gets its class and CPUs back.
///
/// A busy loop at nice 19 does not do it: `SCHED_IDLE`'s weight (3) against
/// nice 19's (15) still gives the worker a sixth of the CPU, and a thread that
/// sleeps between short bursts, as a lock worker does, was delayed 25 ms at
/// worst on the development machine; against nice 0 (weight 1024), it waits
/// hundreds of ms for every ms it runs.
struct Starved {
    pid: u32,
    /// The CPU it is pinned to.
    cpu: usize,
    /// The CPUs it could run on before.
    allowed: CpuSet,
    hog: Child,
}

impl Starved {
    fn start(pid: u32, worker_binary: &Path, long: Duration) -> Result<Self, String> {
        let (cpu, allowed) =
            procs::first_cpu(pid).map_err(|err| format!("the CPUs of pid {pid}: {err}"))?;
        // Bounded twice over: killed when this is dropped, and it stops by
        // itself a few seconds after the fault should have ended.
        let hog = Command::new(worker_binary)
            .args(["--hog", &(long.as_secs() + 5).to_string()])
            .stdin(Stdio::null())
            .spawn()
            .map_err(|err| format!("start the busy loop: {err}"))?;
        let starved = Starved {
            pid,
            cpu,
            allowed,
            hog,
        };
        // From here on, an error drops `starved`, which undoes what was done.
        procs::pin_to(starved.hog.id(), cpu).map_err(|err| format!("pin the busy loop: {err}"))?;
        for tid in procs::threads_of(pid) {
            let starve = procs::pin_to(tid, cpu).and_then(|()| procs::set_idle(tid, true));
            match starve {
                Ok(()) => {}
                // The thread ended meanwhile.
                Err(err) if err.raw_os_error() == Some(nix::libc::ESRCH) => {}
                Err(err) => return Err(format!("starve thread {tid} of pid {pid}: {err}")),
            }
        }
        Ok(starved)
    }
}

impl Drop for Starved {
    fn drop(&mut self) {
        let _ = self.hog.kill();
        let _ = self.hog.wait();
        for tid in procs::threads_of(self.pid) {
            let restore =
                procs::set_idle(tid, false).and_then(|()| procs::set_cpus(tid, &self.allowed));
            match restore {
                Ok(()) => {}
                Err(err) if err.raw_os_error() == Some(nix::libc::ESRCH) => {}
                Err(err) => eprintln!(
                    "chaos: could not give thread {tid} of pid {} its CPU back: {err}",
                    self.pid
                ),
            }
        }
    }
}

/// Which worker holds the lock, from its owner (`chaos-worker-N`) in the key
/// on the first node that answers: a string `<owner>:<nonce>`, or a hash whose
/// field is the owner.
fn holder(nodes: &[RedisServer], key: &str) -> Option<usize> {
    let owner = nodes
        .iter()
        .find_map(|node| match node.admin(&["GET", key]).ok()? {
            AdminReply::Bulk(Some(value)) => {
                let value = String::from_utf8(value).ok()?;
                Some(value.rsplit_once(':')?.0.to_owned())
            }
            AdminReply::Error(_) => match node.admin(&["HKEYS", key]).ok()? {
                AdminReply::Array(Some(fields)) => fields.first()?.as_text().map(str::to_owned),
                // A semaphore: the first permit's id, `<owner>:<nonce>`.
                AdminReply::Error(_) => match node.admin(&["ZRANGE", key, "0", "0"]).ok()? {
                    AdminReply::Array(Some(ids)) => {
                        Some(ids.first()?.as_text()?.rsplit_once(':')?.0.to_owned())
                    }
                    _ => None,
                },
                _ => None,
            },
            _ => None,
        })?;
    owner.strip_prefix("chaos-worker-")?.parse().ok()
}

/// The worker that holds `key`, when one can be seen, else one of the
/// workers at random: a fault on a waiting worker tests nothing. (Which one
/// holds is timing, not the seed: a replay hits at the same moments, perhaps
/// another worker.)
///
/// Beside the peers, it looks again every few ms for up to the lease's
/// time before it picks at random (a Redlock peer's waiters leave the lock
/// free most of the time), and always draws the random pick, so that the
/// schedule that follows is the same for every subject.
/// Returns the worker and `"the holder"` or `"at random"`.
async fn holder_or_any(
    rig: &Rig<'_>,
    nodes: &[RedisServer],
    key: &str,
    rng: &mut rand::rngs::StdRng,
) -> (usize, &'static str) {
    let workers = rig.workers.len();
    let seen = || {
        match rig.holder_mark {
            true => peer_holder(rig.resource),
            false => holder(nodes, key),
        }
        .filter(|worker| *worker < workers)
    };
    const HOLDER: &str = "the holder";
    const ANY: &str = "at random";
    if !rig.beside_peers {
        return match seen() {
            Some(worker) => (worker, HOLDER),
            None => (rng.random_range(0..workers), ANY),
        };
    }
    let any = rng.random_range(0..workers);
    let looking = Instant::now();
    loop {
        if let Some(worker) = seen() {
            return (worker, HOLDER);
        }
        if looking.elapsed() >= rig.lease {
            return (any, ANY);
        }
        tokio::time::sleep(Duration::from_millis(3)).await;
    }
}

/// The peer's worker that holds the lock, from the mark it leaves on the
/// resource (`SET chaos:holder N`, deleted before its release): a peer's
/// key holds a random value.
fn peer_holder(resource: &RedisServer) -> Option<usize> {
    match resource.admin(&["GET", "chaos:holder"]).ok()? {
        AdminReply::Bulk(Some(value)) => String::from_utf8(value).ok()?.parse().ok(),
        _ => None,
    }
}

/// For each round of `events` whose wait found its latch open and whose
/// latch node 0 still stores at zero: how many ids counted it down.
fn latch_ids_counted(
    node: &RedisServer,
    events: &[LatchEvent],
) -> Result<std::collections::BTreeMap<u32, usize>, String> {
    let opened: std::collections::BTreeSet<u32> = events
        .iter()
        .filter(|event| event.step == lock_chaos::latch::LatchStep::Open)
        .map(|event| event.round)
        .collect();
    // The count and its ids in one read: they expire together.
    let both = "return {redis.call('get', KEYS[1]), redis.call('hlen', KEYS[2])}";
    let mut counted = std::collections::BTreeMap::new();
    for round in opened {
        let key = format!("lock:{{chaos-r{round}}}");
        let downs = format!("{key}:downs");
        let reply = node
            .admin(&["EVAL", both, "2", &key, &downs])
            .map_err(|err| format!("read a latch: {err}"))?;
        let AdminReply::Array(Some(fields)) = reply else {
            return Err(format!("reading {key}: {reply:?}"));
        };
        let [stored, ids] = fields.as_slice() else {
            return Err(format!("reading {key}: {fields:?}"));
        };
        if !stored.as_text().is_some_and(|text| text.starts_with("L0/")) {
            // Lost with a restart, expired, or never stored: nothing to
            // judge by.
            continue;
        }
        let ids = ids
            .as_int()
            .and_then(|ids| usize::try_from(ids).ok())
            .ok_or_else(|| format!("{downs} is not a hash"))?;
        counted.insert(round, ids);
    }
    Ok(counted)
}

/// The log of the fenced resource `key`, in the order it saw the writes.
fn read_resource_log(resource: &RedisServer, key: &str) -> Result<Vec<LoggedWrite>, String> {
    let log_key = format!("{key}:log");
    let reply = resource
        .admin(&["LRANGE", &log_key, "0", "-1"])
        .map_err(|err| format!("read the resource log: {err}"))?;
    let AdminReply::Array(entries) = reply else {
        return Err(format!("the resource log is not a list: {reply:?}"));
    };
    entries
        .unwrap_or_default()
        .iter()
        .map(|entry| match entry.as_text() {
            Some(line) => LoggedWrite::parse(line),
            None => Err(format!("unreadable log entry {entry:?}")),
        })
        .collect()
}
