//! The latch's log and its check: a latch's waiters must not go on before
//! every party has counted down.
//!
//! Each round `r` of a latch run is the latch `<key>-r<r>` of as many
//! parties as there are workers. Every worker logs `down` just before it
//! first asks to count round `r` down (retrying with its id after an
//! error), then `open` when its wait returns, or `shut` when the wait runs
//! out. A latch opens above zero if a waiter goes on before every party of
//! its round logged its `down`: a count-down counted twice (a retry after a
//! lost reply), or a count lost and made again. And since every party logs
//! its `down` before the server runs it, a round whose parties all logged
//! one is also judged by what the server kept: a latch that opened must
//! have been counted down by every party's id.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use crate::check::Findings;

/// What a party did in a round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LatchStep {
    /// About to count the round's latch down (logged before the first try).
    Down,
    /// The wait returned: the latch was open.
    Open,
    /// The wait ran out with the latch shut.
    Shut,
}

/// One line of a latch worker's log, tab-separated:
/// `latch <worker> <round> <down|open|shut> <ns>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LatchEvent {
    /// The worker's number.
    pub worker: u32,
    /// The round, the latch `<key>-r<round>`.
    pub round: u32,
    /// What happened.
    pub step: LatchStep,
    /// When, on `CLOCK_MONOTONIC`.
    pub at_ns: u64,
}

impl fmt::Display for LatchEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let step = match self.step {
            LatchStep::Down => "down",
            LatchStep::Open => "open",
            LatchStep::Shut => "shut",
        };
        write!(
            f,
            "latch\t{}\t{}\t{step}\t{}",
            self.worker, self.round, self.at_ns
        )
    }
}

impl FromStr for LatchEvent {
    type Err = String;

    fn from_str(line: &str) -> Result<Self, String> {
        let bad = || format!("not a latch event: {line:?}");
        let fields: Vec<&str> = line.split('\t').collect();
        let ["latch", worker, round, step, at] = fields[..] else {
            return Err(bad());
        };
        let step = match step {
            "down" => LatchStep::Down,
            "open" => LatchStep::Open,
            "shut" => LatchStep::Shut,
            _ => return Err(bad()),
        };
        Ok(LatchEvent {
            worker: worker.parse().map_err(|_| bad())?,
            round: round.parse().map_err(|_| bad())?,
            step,
            at_ns: at.parse().map_err(|_| bad())?,
        })
    }
}

/// Checks the latch rounds of `parties` parties: `acquisitions` counts the
/// waits that found their latch open, `overlaps` those that went on before
/// every party of the round had logged its count-down, or in a round whose
/// latch the server kept, open, with fewer ids than `parties` in `counted`
/// (round to the ids its latch was counted down by, for the rounds whose
/// latch is still stored at zero): either way, the latch opened above zero.
pub fn check_latch(
    events: &[LatchEvent],
    parties: u32,
    counted: &BTreeMap<u32, usize>,
) -> Findings {
    let mut rounds: BTreeMap<u32, (BTreeMap<u32, u64>, Vec<u64>)> = BTreeMap::new();
    for event in events {
        let (downs, opens) = rounds.entry(event.round).or_default();
        match event.step {
            LatchStep::Down => {
                let first = downs.entry(event.worker).or_insert(event.at_ns);
                *first = (*first).min(event.at_ns);
            }
            LatchStep::Open => opens.push(event.at_ns),
            LatchStep::Shut => {}
        }
    }
    let mut findings = Findings::default();
    for (round, (downs, opens)) in &rounds {
        findings.acquisitions += opens.len();
        // The earliest instant the count could have reached zero: when the
        // last party logged its count-down.
        let zero_from = (downs.len() >= parties as usize)
            .then(|| downs.values().max().copied())
            .flatten();
        let short = counted
            .get(round)
            .is_some_and(|ids| *ids < parties as usize);
        findings.overlaps += opens
            .iter()
            .filter(|&&open| short || zero_from.is_none_or(|zero| open < zero))
            .count();
    }
    findings
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(worker: u32, round: u32, step: LatchStep, at_ns: u64) -> LatchEvent {
        LatchEvent {
            worker,
            round,
            step,
            at_ns,
        }
    }

    #[test]
    fn a_line_reads_back_as_the_event() {
        let down = event(3, 17, LatchStep::Down, 123_456);
        assert_eq!(down.to_string().parse::<LatchEvent>(), Ok(down));
        assert!("latch\t1\t2\tmaybe\t3".parse::<LatchEvent>().is_err());
        assert!("1\t2\t3".parse::<LatchEvent>().is_err());
    }

    #[test]
    fn an_open_before_the_last_count_down_is_found() {
        use LatchStep::{Down, Open, Shut};
        // Round 0: both parties counted, both waits opened after: fine.
        // Round 1: one party's wait opened before the other counted down.
        // Round 2: a wait opened with one party missing.
        let events = [
            event(0, 0, Down, 10),
            event(1, 0, Down, 20),
            event(0, 0, Open, 25),
            event(1, 0, Open, 26),
            event(0, 1, Down, 30),
            event(0, 1, Open, 35),
            event(1, 1, Down, 40),
            event(1, 1, Open, 45),
            event(0, 2, Down, 50),
            event(0, 2, Open, 60),
            event(1, 3, Down, 70),
            event(1, 3, Shut, 80),
        ];
        let findings = check_latch(&events, 2, &BTreeMap::new());
        assert_eq!((findings.acquisitions, findings.overlaps), (5, 2));
        // Round 0 again, its latch kept open by the server with one id: a
        // party counted twice.
        let counted = BTreeMap::from([(0, 1), (1, 2)]);
        let findings = check_latch(&events, 2, &counted);
        assert_eq!((findings.acquisitions, findings.overlaps), (5, 4));
    }
}
