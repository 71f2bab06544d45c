//! Lower bounds on the arena of any valid plan.

use crate::problem::{BufferId, Problem};

/// The max-live bound: the largest total size of buffers live at one step, found by a
/// sweep over lifetime endpoints (gaps taken into account). No valid plan has a smaller
/// arena. `None` when the total overflows 64 bits.
pub fn max_live(problem: &Problem) -> Option<u64> {
    if let Some(bound) = max_live_by_steps(problem) {
        return Some(bound);
    }
    Some(
        live_profile(problem)?
            .iter()
            .map(|&(_, live)| live)
            .max()
            .unwrap_or(0),
    )
}

/// At most this many steps per live segment for [`max_live_by_steps`]: its array of
/// per-step changes then takes no more memory than the sweep's sorted events (32 bytes a
/// segment, before the radix sort's scratch copies).
const STEPS_PER_SEGMENT: u64 = 4;

/// [`max_live`] by an array of per-step changes, `O(n + T)` for `T` steps between the
/// first start and the last end: `None` (use the sweep) when `T` exceeds
/// [`STEPS_PER_SEGMENT`] steps per live segment (plus 4,096), or when the sizes add up to
/// more than 64 bits (the sweep then finds whether a step overflows). At 10^7 buffers it
/// replaces two radix sorts by one pass of scattered additions (issue #18).
///
/// The additions wrap: each prefix sum is then the bytes live at that step modulo 2^64,
/// which is exact because no step holds more than the sum of all sizes.
fn max_live_by_steps(problem: &Problem) -> Option<u64> {
    let (mut first, mut last, mut segments, mut total) = (u64::MAX, 0u64, 0u64, 0u64);
    for buffer in problem.buffers() {
        total = total.checked_add(buffer.size)?;
        first = first.min(buffer.lifetime.start);
        last = last.max(buffer.lifetime.end);
        segments += 1 + buffer.gaps.len() as u64;
    }
    if segments == 0 {
        return Some(0);
    }
    let steps = last - first;
    if steps
        > segments
            .saturating_mul(STEPS_PER_SEGMENT)
            .saturating_add(4096)
    {
        return None;
    }
    // One entry per step and one past the last end.
    let mut change = vec![0u64; usize::try_from(steps).ok()?.checked_add(1)?];
    for buffer in problem.buffers() {
        buffer.for_each_live_segment(|segment| {
            let (start, end) = (
                (segment.start - first) as usize,
                (segment.end - first) as usize,
            );
            change[start] = change[start].wrapping_add(buffer.size);
            change[end] = change[end].wrapping_sub(buffer.size);
        });
    }
    let mut live = 0u64;
    let mut max = 0u64;
    for delta in change {
        live = live.wrapping_add(delta);
        max = max.max(live);
    }
    Some(max)
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

    proptest::proptest! {
        #[test]
        fn the_array_of_steps_agrees_with_the_sweep(
            buffers in proptest::collection::vec(
                (0u64..1 << 40, 0u64..60, 1u64..40, proptest::option::of((1u64..20, 1u64..20))),
                1..60,
            ),
            spread in proptest::bool::ANY,
        ) {
            let buffers: Vec<Buffer> = buffers
                .into_iter()
                .enumerate()
                .map(|(i, (size, start, len, gap))| {
                    // `spread`: steps far apart, so that the sweep is used.
                    let scale = if spread { 1 << 20 } else { 1 };
                    let (from, to) = (start * scale, (start + len) * scale);
                    let mut b = Buffer::new(i.to_string(), size, from, to);
                    if let Some((from, to)) = gap {
                        let (from, to) = (start + from.min(len - 1), start + to.min(len));
                        if from + 1 < to && from > start {
                            b.gaps = vec![Lifetime { start: from * scale, end: to * scale }];
                        }
                    }
                    b
                })
                .collect();
            let p = problem(buffers);
            let swept = sweep(&p).unwrap().iter().map(|&(_, live)| live).max();
            proptest::prop_assert_eq!(max_live_by_steps(&p).is_none(), spread);
            proptest::prop_assert_eq!(max_live(&p), swept);
        }
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
