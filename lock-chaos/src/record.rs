//! One line of a worker's log per acquisition, tab-separated.

use std::fmt;
use std::str::FromStr;

/// Nanoseconds on `CLOCK_MONOTONIC`, comparable across processes on one host
/// (unlike `Instant`, whose value a process cannot share).
pub fn monotonic_ns() -> u64 {
    match nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC) {
        Ok(now) => {
            let seconds = u64::try_from(now.tv_sec()).unwrap_or(0);
            let nanos = u64::try_from(now.tv_nsec()).unwrap_or(0);
            seconds.saturating_mul(1_000_000_000).saturating_add(nanos)
        }
        // CLOCK_MONOTONIC exists on every Linux; zero would only make the
        // checker see no overlap, so say it loudly instead.
        Err(err) => panic!("CLOCK_MONOTONIC is unavailable: {err}"),
    }
}

/// What became of an acquisition's write to the fenced resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Write {
    /// The resource accepted it; `seq` is its place in the resource's log.
    Accepted {
        /// The place in the resource's log.
        seq: u64,
    },
    /// The resource refused it (a token no greater than one it had accepted).
    Refused {
        /// The place in the resource's log.
        seq: u64,
    },
    /// The worker did not write: its lease was reported lost first.
    Skipped,
    /// The write failed (the resource is never faulted, so this is rare).
    Failed,
    /// Not known: the job was killed before it logged its end. If it wrote,
    /// the resource's log has the write under the job's id.
    Unknown,
}

/// How an acquisition ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// `release()` returned `Ok`: the lease held until the release.
    Released,
    /// The lease ended early (lost, expired, or the release found it gone).
    Lost,
    /// The release failed with a connection error.
    ReleaseFailed,
    /// The job of a `distlock run` was killed before it logged its end; its
    /// worker logged the section for it, ending when it saw the job gone.
    Killed,
}

/// One critical section of one worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Acquisition {
    /// The worker's number.
    pub worker: u32,
    /// The acquisition's number within the worker.
    pub index: u32,
    /// When the acquire returned, on `CLOCK_MONOTONIC`.
    pub start_ns: u64,
    /// When the worker stopped working under it (just before the release);
    /// for a killed job, when its worker saw it gone, which is no earlier.
    pub end_ns: u64,
    /// The fencing token, 0 for none.
    pub token: u64,
    /// The write's fate.
    pub write: Write,
    /// When the lease ended by the holder's own clock, if that was before
    /// `end_ns` (the holder kept working, paused or not, past it); else 0.
    pub lease_end_ns: u64,
    /// How the release went.
    pub outcome: Outcome,
    /// A semaphore permit's slot (its token is that slot's); `None` for a
    /// lock or an election.
    pub slot: Option<u32>,
    /// How many permits it counted for: 1 for a lock or an election.
    pub weight: u32,
    /// A read-write lock's hold: shared (a reader, which writes nothing) or
    /// exclusive; `None` for the other primitives.
    pub access: Option<lock_core::Access>,
}

impl Acquisition {
    /// Section `index` of `worker` from `start_ns` to `end_ns`, with its
    /// token and its write's fate: a hold of a lock or an election (no slot,
    /// weight 1, no access), released with no lease end seen. What else a
    /// section has is set with struct update syntax.
    pub fn new(
        worker: u32,
        index: u32,
        start_ns: u64,
        end_ns: u64,
        token: u64,
        write: Write,
    ) -> Self {
        Acquisition {
            worker,
            index,
            start_ns,
            end_ns,
            token,
            write,
            lease_end_ns: 0,
            outcome: Outcome::Released,
            slot: None,
            weight: 1,
            access: None,
        }
    }

    /// `<worker>:<index>`, as the resource logs the writer.
    pub fn id(&self) -> String {
        format!("{}:{}", self.worker, self.index)
    }

    /// How long the holder went on working after its lease ended.
    pub fn overrun_ns(&self) -> u64 {
        if self.lease_end_ns == 0 {
            0
        } else {
            self.end_ns.saturating_sub(self.lease_end_ns)
        }
    }
}

impl fmt::Display for Acquisition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let write = match self.write {
            Write::Accepted { seq } => format!("accepted:{seq}"),
            Write::Refused { seq } => format!("refused:{seq}"),
            Write::Skipped => "skipped".to_owned(),
            Write::Failed => "failed".to_owned(),
            Write::Unknown => "unknown".to_owned(),
        };
        let outcome = match self.outcome {
            Outcome::Released => "released",
            Outcome::Lost => "lost",
            Outcome::ReleaseFailed => "release-failed",
            Outcome::Killed => "killed",
        };
        let slot = self
            .slot
            .map_or_else(|| "-".to_owned(), |slot| slot.to_string());
        let access = match self.access {
            None => "-",
            Some(lock_core::Access::Shared) => "r",
            Some(lock_core::Access::Exclusive) => "w",
        };
        write!(
            f,
            "{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}",
            self.worker,
            self.index,
            self.start_ns,
            self.end_ns,
            self.token,
            write,
            self.lease_end_ns,
            outcome,
            slot,
            self.weight,
            access
        )
    }
}

impl FromStr for Acquisition {
    type Err = String;

    fn from_str(line: &str) -> Result<Self, String> {
        let fields: Vec<&str> = line.split('\t').collect();
        // Eight fields before permits had slots and weights, ten before
        // read-write holds had a mode.
        let (slot, weight, access) = match fields[..] {
            [_, _, _, _, _, _, _, _, slot, weight, access] => (slot, weight, access),
            [_, _, _, _, _, _, _, _, slot, weight] => (slot, weight, "-"),
            _ => ("-", "1", "-"),
        };
        let [worker, index, start, end, token, write, lease_end, outcome, ..] = fields[..] else {
            return Err(format!("expected 8, 10 or 11 fields: {line:?}"));
        };
        if ![8, 10, 11].contains(&fields.len()) {
            return Err(format!("expected 8, 10 or 11 fields: {line:?}"));
        }
        let access = match access {
            "-" => None,
            "r" => Some(lock_core::Access::Shared),
            "w" => Some(lock_core::Access::Exclusive),
            other => return Err(format!("unknown mode {other:?} in {line:?}")),
        };
        let number = |text: &str| {
            text.parse::<u64>()
                .map_err(|_| format!("not a number: {text:?} in {line:?}"))
        };
        let small = |text: &str| {
            text.parse::<u32>()
                .map_err(|_| format!("not a number: {text:?} in {line:?}"))
        };
        let write = match write.split_once(':') {
            Some(("accepted", seq)) => Write::Accepted { seq: number(seq)? },
            Some(("refused", seq)) => Write::Refused { seq: number(seq)? },
            None if write == "skipped" => Write::Skipped,
            None if write == "failed" => Write::Failed,
            None if write == "unknown" => Write::Unknown,
            _ => return Err(format!("unknown write {write:?} in {line:?}")),
        };
        let outcome = match outcome {
            "released" => Outcome::Released,
            "lost" => Outcome::Lost,
            "release-failed" => Outcome::ReleaseFailed,
            "killed" => Outcome::Killed,
            other => return Err(format!("unknown outcome {other:?} in {line:?}")),
        };
        Ok(Acquisition {
            worker: small(worker)?,
            index: small(index)?,
            start_ns: number(start)?,
            end_ns: number(end)?,
            token: number(token)?,
            write,
            lease_end_ns: number(lease_end)?,
            outcome,
            slot: match slot {
                "-" => None,
                slot => Some(small(slot)?),
            },
            weight: small(weight)?,
            access,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_round_trip() {
        let acquisition = Acquisition {
            worker: 3,
            index: 17,
            start_ns: 1_000,
            end_ns: 2_000,
            token: 42,
            write: Write::Refused { seq: 9 },
            lease_end_ns: 1_500,
            outcome: Outcome::Lost,
            slot: None,
            weight: 1,
            access: None,
        };
        let line = acquisition.to_string();
        assert_eq!(line.parse::<Acquisition>(), Ok(acquisition.clone()));
        assert_eq!(acquisition.overrun_ns(), 500);
        let killed = Acquisition {
            write: Write::Unknown,
            lease_end_ns: 0,
            outcome: Outcome::Killed,
            ..acquisition
        };
        assert_eq!(
            killed.to_string().parse::<Acquisition>(),
            Ok(killed.clone())
        );
        let permit = Acquisition {
            slot: Some(2),
            weight: 3,
            ..killed
        };
        assert_eq!(
            permit.to_string().parse::<Acquisition>(),
            Ok(permit.clone())
        );
        let read = Acquisition {
            access: Some(lock_core::Access::Shared),
            ..permit
        };
        assert_eq!(read.to_string().parse::<Acquisition>(), Ok(read));
        // A line of the eight fields before slots and weights.
        let old = "3\t17\t1000\t2000\t42\trefused:9\t1500\tlost";
        let parsed = old.parse::<Acquisition>().expect("an old line");
        assert_eq!((parsed.slot, parsed.weight), (None, 1));
        assert!("1\t2\t3".parse::<Acquisition>().is_err());
    }

    #[test]
    fn the_clock_moves_forward() {
        let before = monotonic_ns();
        let after = monotonic_ns();
        assert!(after >= before && before > 0);
    }
}
