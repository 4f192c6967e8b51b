//! The checker: reads what the workers and the fenced resource logged, and
//! counts overlapping critical sections, stale writes and overruns. It knows
//! nothing of the lock: only the intervals and the order of writes.

use std::collections::HashMap;

use crate::record::{Acquisition, Write};

/// One entry of the fenced resource's log, in the order the resource saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoggedWrite {
    /// The write's place in the log.
    pub seq: u64,
    /// The token it carried (0 for none).
    pub token: u64,
    /// `<worker>:<index>` of the acquisition that wrote.
    pub writer: String,
    /// Whether the resource accepted it.
    pub accepted: bool,
}

impl LoggedWrite {
    /// Parses `<seq> <token> <writer> <0|1>`.
    pub fn parse(line: &str) -> Result<Self, String> {
        let fields: Vec<&str> = line.split(' ').collect();
        let [seq, token, writer, accepted] = fields[..] else {
            return Err(format!("expected 4 fields: {line:?}"));
        };
        let number = |text: &str| {
            text.parse::<u64>()
                .map_err(|_| format!("not a number: {text:?} in {line:?}"))
        };
        Ok(LoggedWrite {
            seq: number(seq)?,
            token: number(token)?,
            writer: writer.to_owned(),
            accepted: accepted == "1",
        })
    }
}

/// What one run showed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Findings {
    /// Critical sections entered.
    pub acquisitions: usize,
    /// Critical sections that began while another one was still going on.
    pub overlaps: usize,
    /// Writes the resource accepted although it had already accepted a write
    /// from a holder that acquired later.
    pub stale_accepted: usize,
    /// Such stale writes that the resource refused (fencing at work).
    pub stale_refused: usize,
    /// Writes of the newest holder that the resource refused anyway (tokens
    /// that went backwards, for example after the counter was lost).
    pub fresh_refused: usize,
    /// The longest a holder went on working after its lease ended, in ms.
    pub max_overrun_ms: u64,
}

/// Checks `acquisitions` (every worker's log) against `writes` (the
/// resource's log).
pub fn check(acquisitions: &[Acquisition], writes: &[LoggedWrite]) -> Findings {
    let mut findings = Findings {
        acquisitions: acquisitions.len(),
        ..Findings::default()
    };

    // Overlaps: sweep the sections by start; one overlaps if it starts before
    // an earlier one has ended.
    let mut latest_end = 0;
    for acquisition in by_start(acquisitions) {
        if acquisition.start_ns < latest_end {
            findings.overlaps += 1;
        }
        latest_end = latest_end.max(acquisition.end_ns);
    }

    // Stale writes: in the resource's order, a write is stale if the resource
    // had already accepted one from a holder that acquired later.
    let starts: HashMap<String, u64> = acquisitions
        .iter()
        .map(|acquisition| (acquisition.id(), acquisition.start_ns))
        .collect();
    let mut in_order: Vec<&LoggedWrite> = writes.iter().collect();
    in_order.sort_by_key(|write| write.seq);
    let mut newest_accepted_start = 0;
    for write in in_order {
        // A write whose section was never logged: its start is unknown, and
        // it is judged as the newest. (A killed job's section is logged by
        // its worker, with the start the job noted when it began.)
        let start = starts.get(&write.writer).copied().unwrap_or(u64::MAX);
        let stale = newest_accepted_start > start;
        match (stale, write.accepted) {
            (true, true) => findings.stale_accepted += 1,
            (true, false) => findings.stale_refused += 1,
            (false, false) => findings.fresh_refused += 1,
            (false, true) => {}
        }
        if write.accepted && start != u64::MAX {
            newest_accepted_start = newest_accepted_start.max(start);
        }
    }

    findings.max_overrun_ms = max_overrun_ms(acquisitions);
    findings
}

/// Checks the permits of a semaphore of `limit`: `acquisitions` (every
/// worker's log, each with its slot and weight) against `writes`, each
/// slot's resource log. `overlaps` counts the sections that began while
/// live sections already held more than `limit` less their own weight, and
/// those that began beside a live holder of their own slot; stale writes
/// are judged per slot, as each slot's resource fences its own tokens.
pub fn check_permits(
    acquisitions: &[Acquisition],
    writes: &[(u32, Vec<LoggedWrite>)],
    limit: u32,
) -> Findings {
    let mut findings = Findings {
        acquisitions: acquisitions.len(),
        ..Findings::default()
    };
    // Capacity: sweep by start, keeping the live sections' ends and weights.
    let mut live: Vec<(u64, u32)> = Vec::new();
    for acquisition in by_start(acquisitions) {
        live.retain(|(end, _)| *end > acquisition.start_ns);
        let used: u64 = live.iter().map(|(_, weight)| u64::from(*weight)).sum();
        if used + u64::from(acquisition.weight) > u64::from(limit) {
            findings.overlaps += 1;
        }
        live.push((acquisition.end_ns, acquisition.weight));
    }
    // Each slot is a lock of its own: overlaps, stale writes and refusals.
    for (slot, slot_writes) in writes {
        let holders = only(acquisitions, |acquisition| acquisition.slot == Some(*slot));
        let per_slot = check(&holders, slot_writes);
        findings.overlaps += per_slot.overlaps;
        findings.stale_accepted += per_slot.stale_accepted;
        findings.stale_refused += per_slot.stale_refused;
        findings.fresh_refused += per_slot.fresh_refused;
    }
    findings.max_overrun_ms = max_overrun_ms(acquisitions);
    findings
}

/// Checks a read-write lock's sections: an overlap is a write section that
/// began while any other section was going on, or any section that began
/// during a write; readers write nothing, and the writers' writes are
/// checked as a lock's are.
pub fn check_rw(acquisitions: &[Acquisition], writes: &[LoggedWrite]) -> Findings {
    let is_write =
        |acquisition: &Acquisition| acquisition.access != Some(lock_core::Access::Shared);
    // The live sections' ends, and whether each is a write.
    let mut live: Vec<(u64, bool)> = Vec::new();
    let mut overlaps = 0;
    for acquisition in by_start(acquisitions) {
        live.retain(|(end, _)| *end > acquisition.start_ns);
        let writing = is_write(acquisition);
        if (writing && !live.is_empty()) || live.iter().any(|(_, write)| *write) {
            overlaps += 1;
        }
        live.push((acquisition.end_ns, writing));
    }
    let mut findings = check(&only(acquisitions, is_write), writes);
    findings.acquisitions = acquisitions.len();
    findings.overlaps = overlaps;
    findings.max_overrun_ms = max_overrun_ms(acquisitions);
    findings
}

/// `acquisitions` in the order they began (those that began together, in
/// the order they ended): the order of every sweep.
fn by_start(acquisitions: &[Acquisition]) -> Vec<&Acquisition> {
    let mut by_start: Vec<&Acquisition> = acquisitions.iter().collect();
    by_start.sort_by_key(|acquisition| (acquisition.start_ns, acquisition.end_ns));
    by_start
}

/// The longest any holder of `acquisitions` went on working after its lease
/// ended, in ms.
fn max_overrun_ms(acquisitions: &[Acquisition]) -> u64 {
    acquisitions
        .iter()
        .map(Acquisition::overrun_ns)
        .max()
        .unwrap_or(0)
        / 1_000_000
}

/// The acquisitions that `keep` picks, as a log of their own.
fn only(acquisitions: &[Acquisition], keep: impl Fn(&Acquisition) -> bool) -> Vec<Acquisition> {
    acquisitions
        .iter()
        .filter(|acquisition| keep(acquisition))
        .cloned()
        .collect()
}

/// Whether an acquisition's write reached the resource.
pub fn wrote(acquisition: &Acquisition) -> bool {
    matches!(
        acquisition.write,
        Write::Accepted { .. } | Write::Refused { .. }
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Outcome;

    fn section(worker: u32, start: u64, end: u64, token: u64) -> Acquisition {
        Acquisition::new(worker, 0, start, end, token, Write::Skipped)
    }

    /// The overlaps `check` counts among sections of workers 1, 2... over
    /// `spans` (start, end), each with its worker's number as its token.
    fn overlaps(spans: &[(u64, u64)]) -> usize {
        let sections: Vec<Acquisition> = (1..)
            .zip(spans)
            .map(|(worker, &(start, end))| section(worker, start, end, u64::from(worker)))
            .collect();
        check(&sections, &[]).overlaps
    }

    fn permit(worker: u32, start: u64, end: u64, slot: u32, weight: u32) -> Acquisition {
        Acquisition {
            slot: Some(slot),
            weight,
            ..section(worker, start, end, 1)
        }
    }

    #[test]
    fn permits_overlap_only_beyond_the_limit_or_on_one_slot() {
        // 1 + 2 of 3 at once: fine; then a third of weight 1 beside them: over.
        let within = [permit(1, 0, 100, 0, 1), permit(2, 10, 90, 1, 2)];
        assert_eq!(check_permits(&within, &[], 3).overlaps, 0);
        let over = [
            permit(1, 0, 100, 0, 1),
            permit(2, 10, 90, 1, 2),
            permit(3, 20, 30, 2, 1),
        ];
        assert_eq!(check_permits(&over, &[], 3).overlaps, 1);
        // Two live holders of slot 0, within the limit: still a violation.
        let shared = [permit(1, 0, 100, 0, 1), permit(2, 10, 20, 0, 1)];
        let writes = [(0, Vec::new())];
        assert_eq!(check_permits(&shared, &writes, 3).overlaps, 1);
        // One after another on a slot, beside others: nothing.
        let turns = [
            permit(1, 0, 10, 0, 1),
            permit(2, 10, 20, 0, 1),
            permit(3, 5, 15, 1, 1),
        ];
        assert_eq!(check_permits(&turns, &writes, 2).overlaps, 0);
    }

    fn hold(worker: u32, start: u64, end: u64, access: lock_core::Access) -> Acquisition {
        Acquisition {
            access: Some(access),
            ..section(worker, start, end, 1)
        }
    }

    #[test]
    fn readers_overlap_each_other_and_writers_nothing() {
        use lock_core::Access::{Exclusive, Shared};
        let readers = [hold(1, 0, 100, Shared), hold(2, 10, 90, Shared)];
        assert_eq!(check_rw(&readers, &[]).overlaps, 0);
        // A write beside a read, either way round.
        let late_write = [hold(1, 0, 100, Shared), hold(2, 10, 20, Exclusive)];
        assert_eq!(check_rw(&late_write, &[]).overlaps, 1);
        let late_read = [hold(1, 0, 100, Exclusive), hold(2, 10, 20, Shared)];
        assert_eq!(check_rw(&late_read, &[]).overlaps, 1);
        // Turns: nothing.
        let turns = [
            hold(1, 0, 10, Exclusive),
            hold(2, 10, 20, Shared),
            hold(3, 12, 30, Shared),
            hold(4, 30, 40, Exclusive),
        ];
        assert_eq!(check_rw(&turns, &[]).overlaps, 0);
        // A reader's section never counts as a writer's stale write.
        let writes = [logged(1, 5, 4, true), logged(2, 4, 1, false)];
        let stale = [
            hold(1, 0, 100, Exclusive),
            hold(4, 20, 30, Exclusive),
            hold(2, 40, 50, Shared),
        ];
        let findings = check_rw(&stale, &writes);
        assert_eq!((findings.acquisitions, findings.stale_refused), (3, 1));
    }

    #[test]
    fn a_stale_permit_write_is_judged_on_its_slot() {
        // Slot 0's first holder writes after slot 0's next one: stale there.
        let sections = [permit(1, 0, 100, 0, 1), permit(2, 20, 30, 0, 1)];
        let slot_writes = vec![(0, vec![logged(1, 2, 2, true), logged(2, 1, 1, false)])];
        let findings = check_permits(&sections, &slot_writes, 2);
        assert_eq!((findings.stale_accepted, findings.stale_refused), (0, 1));
    }

    fn logged(seq: u64, token: u64, worker: u32, accepted: bool) -> LoggedWrite {
        LoggedWrite {
            seq,
            token,
            writer: format!("{worker}:0"),
            accepted,
        }
    }

    #[test]
    fn back_to_back_sections_do_not_overlap() {
        assert_eq!(overlaps(&[(0, 10), (10, 20), (25, 30)]), 0);
    }

    #[test]
    fn a_section_inside_a_long_one_overlaps() {
        // Worker 1 was paused from 5 to 100; 2 and 3 came and went meanwhile.
        assert_eq!(overlaps(&[(0, 100), (20, 30), (40, 50)]), 2);
    }

    #[test]
    fn a_late_write_of_an_older_holder_is_stale() {
        let sections = [section(1, 0, 100, 1), section(2, 20, 30, 2)];
        // Fenced: the older holder's write comes after the newer one's, refused.
        let fenced = [logged(1, 2, 2, true), logged(2, 1, 1, false)];
        let findings = check(&sections, &fenced);
        assert_eq!((findings.stale_accepted, findings.stale_refused), (0, 1));
        // Unfenced (no tokens): the same order, accepted.
        let unfenced = [logged(1, 0, 2, true), logged(2, 0, 1, true)];
        let findings = check(&sections, &unfenced);
        assert_eq!((findings.stale_accepted, findings.stale_refused), (1, 0));
    }

    #[test]
    fn tokens_that_went_backwards_refuse_the_newest_holder() {
        // The counter was lost: the newer holder got token 1, below 5.
        let sections = [section(1, 0, 10, 5), section(2, 20, 30, 1)];
        let writes = [logged(1, 5, 1, true), logged(2, 1, 2, false)];
        assert_eq!(check(&sections, &writes).fresh_refused, 1);
    }

    #[test]
    fn a_killed_job_counts_from_its_start_to_when_it_was_seen_gone() {
        // Job 1 was killed after its write; its worker logged the section,
        // ending when it saw the job gone.
        let killed = |end| Acquisition {
            write: Write::Unknown,
            outcome: Outcome::Killed,
            ..section(1, 0, end, 1)
        };
        let writes = [logged(1, 1, 1, true), logged(2, 2, 2, true)];
        let findings = check(&[killed(50), section(2, 60, 70, 2)], &writes);
        assert_eq!(
            (
                findings.overlaps,
                findings.stale_accepted,
                findings.fresh_refused
            ),
            (0, 0, 0),
            "a job gone before the next one began is a section like any other"
        );
        let findings = check(&[killed(65), section(2, 60, 70, 2)], &writes);
        assert_eq!(
            findings.overlaps, 1,
            "a job seen gone after the next one began overlaps it"
        );
    }

    #[test]
    fn overruns_are_measured_from_the_lease_end() {
        let mut paused = section(1, 0, 2_500_000_000, 1);
        paused.lease_end_ns = 500_000_000;
        assert_eq!(check(&[paused], &[]).max_overrun_ms, 2_000);
    }

    #[test]
    fn log_lines_parse() {
        assert_eq!(
            LoggedWrite::parse("7 42 3:9 0"),
            Ok(LoggedWrite {
                seq: 7,
                token: 42,
                writer: "3:9".to_owned(),
                accepted: false
            })
        );
        assert!(LoggedWrite::parse("7 42").is_err());
    }
}
