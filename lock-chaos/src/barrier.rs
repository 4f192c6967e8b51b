//! The barrier's log and its check: never more parties go on in a round
//! than the barrier has, and, without faults on the parties, exactly as
//! many.
//!
//! Each worker is a party of a barrier of as many parties as workers: it
//! enters (waiting up to 2 s), and once it goes on, reads the round's id
//! and logs `party <worker> <round> <ns>`, holds for a moment, and leaves.
//! A party goes on only once its round opened, which the enter script does
//! when the live parties make the count: more parties of one round than
//! the count means a round counted a party twice, or mixed two rounds.
//! Where no fault touches the parties (no pause, no kill), every party
//! counted goes on, so a round with fewer than the count means the round
//! opened with a dead or missing party.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use crate::check::Findings;

/// One line of a barrier worker's log: a party that went on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartyEvent {
    /// The worker's number.
    pub worker: u32,
    /// The round's id, as the barrier's state names it.
    pub round: String,
    /// When its enter returned, on `CLOCK_MONOTONIC`.
    pub at_ns: u64,
}

impl fmt::Display for PartyEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "party\t{}\t{}\t{}", self.worker, self.round, self.at_ns)
    }
}

impl FromStr for PartyEvent {
    type Err = String;

    fn from_str(line: &str) -> Result<Self, String> {
        let bad = || format!("not a party event: {line:?}");
        let fields: Vec<&str> = line.split('\t').collect();
        let ["party", worker, round, at] = fields[..] else {
            return Err(bad());
        };
        if round.is_empty() || !round.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        Ok(PartyEvent {
            worker: worker.parse().map_err(|_| bad())?,
            round: round.to_owned(),
            at_ns: at.parse().map_err(|_| bad())?,
        })
    }
}

/// Checks the rounds of a barrier of `parties`: `acquisitions` counts the
/// parties that went on; `overlaps` the rounds in which more than `parties`
/// went on, or one worker twice, and with `exact` (no fault on the
/// parties) also those in which fewer did.
pub fn check_barrier(events: &[PartyEvent], parties: u32, exact: bool) -> Findings {
    let mut rounds: BTreeMap<&str, Vec<u32>> = BTreeMap::new();
    for event in events {
        rounds.entry(&event.round).or_default().push(event.worker);
    }
    let mut findings = Findings {
        acquisitions: events.len(),
        ..Findings::default()
    };
    for workers in rounds.values_mut() {
        let went_on = workers.len();
        workers.sort_unstable();
        workers.dedup();
        let twice = workers.len() < went_on;
        let wrong = went_on > parties as usize || (exact && went_on < parties as usize);
        if twice || wrong {
            findings.overlaps += 1;
        }
    }
    findings
}

#[cfg(test)]
mod tests {
    use super::*;

    fn went_on(worker: u32, round: &str) -> PartyEvent {
        PartyEvent {
            worker,
            round: round.to_owned(),
            at_ns: 1,
        }
    }

    #[test]
    fn a_line_reads_back_as_the_event() {
        let event = went_on(2, "1733400000123456");
        assert_eq!(event.to_string().parse::<PartyEvent>(), Ok(event));
        assert!("party\t1\t\t5".parse::<PartyEvent>().is_err());
        assert!("latch\t1\t2\topen\t3".parse::<PartyEvent>().is_err());
    }

    #[test]
    fn rounds_of_too_many_or_too_few_parties_are_found() {
        let events = [
            // A full round of two.
            went_on(0, "10"),
            went_on(1, "10"),
            // Three parties of a barrier of two.
            went_on(0, "20"),
            went_on(1, "20"),
            went_on(2, "20"),
            // One party alone.
            went_on(1, "30"),
            // One worker twice.
            went_on(0, "40"),
            went_on(0, "40"),
        ];
        let loose = check_barrier(&events, 2, false);
        assert_eq!((loose.acquisitions, loose.overlaps), (8, 2));
        let exact = check_barrier(&events, 2, true);
        assert_eq!(exact.overlaps, 3);
    }
}
