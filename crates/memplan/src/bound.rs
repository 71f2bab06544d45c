//! Lower bounds on the arena of any valid plan.

use crate::problem::{BufferId, Problem};

/// The max-live bound: the largest total size of buffers live at one step, found by a
/// sweep over lifetime endpoints (gaps taken into account). No valid plan has a smaller
/// arena. `None` when the total overflows 64 bits.
pub fn max_live(problem: &Problem) -> Option<u64> {
    Some(
        live_profile(problem)?
            .iter()
            .map(|&(_, live)| live)
            .max()
            .unwrap_or(0),
    )
}

/// Bytes live over time, as a step function: `(t, bytes)` pairs with strictly increasing
/// `t`, `bytes` being live over `[t, next t)`; the last pair has 0 bytes (after the last
/// end). Empty for no buffers. `None` when a total overflows 64 bits.
///
/// ```text
///  bytes      ┌──┐
///    ▲  ┌─────┘  └──┐
///    │  │           └─────┐
///    └──┴─────────────────┴──▶ t     [(0, 4), (3, 6), (4, 4), (5, 2), (8, 0)]
/// ```
pub fn live_profile(problem: &Problem) -> Option<Vec<(u64, u64)>> {
    sweep(problem).ok()
}

/// Why the bytes live at one step do not fit in 64 bits: the first such step, and the
/// buffers live at it (their sizes add up to more than `u64::MAX`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LiveOverflow {
    /// The first step at which the live bytes overflow.
    pub step: u64,
    /// The buffers live at that step, in problem order.
    pub live: Vec<BufferId>,
}

/// Where [`max_live`] overflows 64 bits (for an error message that names the step and the
/// buffers); `None` when it does not.
pub fn live_overflow(problem: &Problem) -> Option<LiveOverflow> {
    let step = sweep(problem).err()?;
    let live = problem
        .ids()
        .filter(|&id| {
            let mut live = false;
            problem.buffer(id).for_each_live_segment(|segment| {
                live |= segment.start <= step && step < segment.end
            });
            live
        })
        .collect();
    Some(LiveOverflow { step, live })
}

/// The sweep behind [`live_profile`]; `Err(step)` at the first step whose live bytes
/// overflow 64 bits.
fn sweep(problem: &Problem) -> Result<Vec<(u64, u64)>, u64> {
    // (step, size) of every segment's start and of its end, each sorted by step (16 bytes
    // an event, in two arrays half the size of one: at 10^7 buffers the sweep is mostly
    // memory traffic).
    let mut starts: Vec<(u64, u64)> = Vec::with_capacity(problem.len());
    let mut ends: Vec<(u64, u64)> = Vec::with_capacity(problem.len());
    for buffer in problem.buffers() {
        buffer.for_each_live_segment(|segment| {
            starts.push((segment.start, buffer.size));
            ends.push((segment.end, buffer.size));
        });
    }
    crate::radix::sort_by_u64_key(&mut starts, |&(step, _)| step);
    crate::radix::sort_by_u64_key(&mut ends, |&(step, _)| step);
    let mut profile: Vec<(u64, u64)> = Vec::new();
    let mut live = 0u64;
    let (mut i, mut j) = (0, 0);
    loop {
        let t = match (starts.get(i), ends.get(j)) {
            (Some(s), Some(e)) => s.0.min(e.0),
            (Some(s), None) => s.0,
            (None, Some(e)) => e.0,
            (None, None) => break,
        };
        // At a step, ends come before starts: lifetimes are half-open.
        while let Some(&(_, size)) = ends.get(j).filter(|e| e.0 == t) {
            live -= size;
            j += 1;
        }
        while let Some(&(_, size)) = starts.get(i).filter(|s| s.0 == t) {
            live = live.checked_add(size).ok_or(t)?;
            i += 1;
        }
        match profile.last_mut() {
            Some(last) if last.1 == live => {}
            _ => profile.push((t, live)),
        }
    }
    Ok(profile)
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
        assert_eq!(
            live_overflow(&p),
            Some(LiveOverflow {
                step: 1,
                live: vec![BufferId(0), BufferId(1)]
            })
        );
        let p = problem(vec![
            Buffer::new("a", u64::MAX, 0, 2),
            Buffer::new("b", 1, 2, 3),
        ]);
        assert_eq!(max_live(&p), Some(u64::MAX));
        assert_eq!(live_overflow(&p), None);
    }

    #[test]
    fn profile_is_a_step_function_of_live_bytes() {
        let p = problem(vec![
            Buffer::new("a", 4, 0, 4),
            Buffer::new("b", 2, 3, 8),
            Buffer::new("c", 2, 4, 5),
        ]);
        assert_eq!(
            live_profile(&p),
            Some(vec![(0, 4), (3, 6), (4, 4), (5, 2), (8, 0)])
        );
        assert_eq!(live_profile(&Problem::default()), Some(vec![]));
    }
}
