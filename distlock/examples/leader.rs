//! One scheduler among three: each "host" campaigns for the election
//! `scheduler`, and whoever leads runs the schedule, passing its term with
//! every write, until it steps down; the next one takes over in a greater
//! term, and an observer prints each leader as it changes. A store that
//! keeps the highest term it has seen refuses a deposed leader's writes.
//!
//! Finds Redis through `DISTLOCK_NODES`, or starts its own (see `common`).
//! `cargo run -p distlock --example leader`

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use distlock::FencingToken;

/// The protected resource: it refuses writes of an older term.
#[derive(Default)]
struct Schedule {
    highest_term: u64,
    runs: Vec<(String, u64)>,
}

impl Schedule {
    fn record(&mut self, host: &str, term: FencingToken) -> Result<(), String> {
        if term.get() < self.highest_term {
            return Err(format!("stale term {term} < {}", self.highest_term));
        }
        self.highest_term = term.get();
        self.runs.push((host.to_owned(), term.get()));
        Ok(())
    }
}

#[tokio::main]
async fn main() -> Result<(), distlock::LockError> {
    let (config, _server) = common::config_or_local_server();
    let locks = distlock::connect(&config).await?;
    let election = locks.election("scheduler")?;
    let mut observer = election.observe().await?;
    let watching = tokio::spawn(async move {
        // Until three leaders have come and gone.
        let mut leaders = 0;
        loop {
            match observer.changed().await? {
                Some(leader) => {
                    println!("observer: {} leads in term {}", leader.value, leader.term);
                    leaders += 1;
                }
                None if leaders >= 3 => return Ok::<_, distlock::LockError>(leaders),
                None => println!("observer: no leader"),
            }
        }
    });
    let schedule = Arc::new(Mutex::new(Schedule::default()));
    let mut hosts = Vec::new();
    for host in ["host-a", "host-b", "host-c"] {
        let (election, schedule) = (election.clone(), Arc::clone(&schedule));
        hosts.push(tokio::spawn(async move {
            // Runs the schedule while leading; returns (and resigns) after
            // three rounds, so the next host takes over.
            election
                .run_while_leader(host, |lease| {
                    let schedule = Arc::clone(&schedule);
                    async move {
                        let term = lease.fencing_token().expect("a term");
                        for _ in 0..3 {
                            if let Err(refused) =
                                schedule.lock().expect("schedule").record(host, term)
                            {
                                println!("{host}: refused: {refused}");
                            }
                            tokio::time::sleep(Duration::from_millis(50)).await;
                        }
                    }
                })
                .await
        }));
    }
    for host in hosts {
        host.await.expect("host task")?;
    }
    let runs = std::mem::take(&mut schedule.lock().expect("schedule").runs);
    let mut leaders: Vec<&str> = runs.iter().map(|(host, _)| host.as_str()).collect();
    leaders.dedup();
    let terms: Vec<u64> = runs.iter().map(|(_, term)| *term).collect();
    println!(
        "{} runs by {} leaders in turn, terms growing: {terms:?}",
        runs.len(),
        leaders.len(),
    );
    assert_eq!(leaders.len(), 3);
    let _ = tokio::time::timeout(Duration::from_secs(5), watching).await;
    Ok(())
}
