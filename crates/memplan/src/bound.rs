//! Lower bounds on the arena of any valid plan.

use crate::problem::Problem;

/// The max-live bound: the largest total size of buffers live at one step, found by a
/// sweep over lifetime endpoints (gaps taken into account). No valid plan has a smaller
/// arena. `None` when the total overflows 64 bits.
pub fn max_live(problem: &Problem) -> Option<u64> {
    let mut events: Vec<(u64, bool, u64)> = Vec::with_capacity(problem.len() * 2);
    for buffer in problem.buffers() {
        for segment in buffer.live_segments() {
            // At equal steps ends (false) sort before starts (true): half-open lifetimes.
            events.push((segment.start, true, buffer.size));
            events.push((segment.end, false, buffer.size));
        }
    }
    events.sort_unstable();
    let (mut live, mut peak) = (0u64, 0u64);
    for (_, starts, size) in events {
        if starts {
            live = live.checked_add(size)?;
            peak = peak.max(live);
        } else {
            live -= size;
        }
    }
    Some(peak)
}
