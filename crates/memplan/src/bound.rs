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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::problem::{Buffer, Lifetime};

    fn problem(buffers: Vec<Buffer>) -> Problem {
        Problem::from_buffers(buffers).unwrap()
    }

    #[test]
    fn a_buffer_ending_at_t_and_one_starting_at_t_do_not_add_up() {
        let p = problem(vec![Buffer::new("a", 5, 0, 3), Buffer::new("b", 7, 3, 6)]);
        assert_eq!(max_live(&p), Some(7));
        let p = problem(vec![Buffer::new("a", 5, 0, 4), Buffer::new("b", 7, 3, 6)]);
        assert_eq!(max_live(&p), Some(12));
    }

    #[test]
    fn gaps_free_their_bytes() {
        let mut gappy = Buffer::new("gappy", 10, 0, 10);
        gappy.gaps = vec![Lifetime { start: 2, end: 5 }];
        let p = problem(vec![gappy.clone(), Buffer::new("inside", 4, 2, 5)]);
        assert_eq!(max_live(&p), Some(10));
        let p = problem(vec![gappy, Buffer::new("across", 4, 4, 6)]);
        assert_eq!(max_live(&p), Some(14));
    }

    #[test]
    fn empty_problem_has_bound_zero_and_overflow_gives_none() {
        assert_eq!(max_live(&Problem::default()), Some(0));
        let p = problem(vec![
            Buffer::new("a", u64::MAX, 0, 2),
            Buffer::new("b", 1, 1, 3),
        ]);
        assert_eq!(max_live(&p), None);
        let p = problem(vec![
            Buffer::new("a", u64::MAX, 0, 2),
            Buffer::new("b", 1, 2, 3),
        ]);
        assert_eq!(max_live(&p), Some(u64::MAX));
    }
}
