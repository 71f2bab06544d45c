//! Best-fit in allocation order by a sweep over time: `greedy-chronological` in
//! `O(n log n)`.
//!
//! When buffers are placed by lifetime start (ascending), every buffer placed before `x`
//! starts at or before `x`'s start `s`, so the placed buffers live together with `x` are
//! exactly those still live at `s` (end `> s`), provided no buffer has gaps in its lifetime
//! and there are no conflict pairs and no fixed offsets. The placement engine would gather
//! those ranges (`k` of them: with 20,000 buffers live at once, 20,000 per placement);
//! the sweep instead keeps them, and the free intervals between them, up to date as an
//! allocator does:
//!
//! - `occupied`: the live buffers' address ranges by offset (disjoint: the plan is valid);
//! - `gaps`: the maximal free intervals below the highest live end, by `(length, start)`;
//! - `expiry`: the live buffers by end, a min-heap; before placing a buffer starting at
//!   `s`, every buffer ending at or before `s` is freed and its interval merged with its
//!   free neighbours.
//!
//! Best-fit picks the gap leaving the least room above the aligned buffer, ties to the
//! lowest offset, else goes on top of the highest live end (aligned): the same choice as
//! the engine's scan over the same free intervals, so the plan is the engine's, offset for
//! offset (tests compare them). With alignment 1 the first gap of length `>= size` in
//! `(length, start)` order is the answer; with alignment, gaps are read in that order
//! while their length minus the worst padding could still beat the best room found.
//! Each placement and each free costs `O(log n)` (plus, with alignment, the gaps read).

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};

use std::time::Instant;

use super::placement::{current_deadline, DEADLINE_EVERY};
use super::PlanError;
use crate::plan::Plan;
use crate::problem::{Buffer, Problem};

/// True when the sweep gives the engine's plan for an order by lifetime start: no gaps, no
/// conflict pairs, no fixed offsets, and no arithmetic can overflow (the sum of every
/// size plus its worst alignment padding fits in 64 bits, and bounds every offset + size).
pub(crate) fn applies(problem: &Problem) -> bool {
    if !problem.conflicts().is_empty() {
        return false;
    }
    let mut total: u64 = 0;
    for b in problem.buffers() {
        if !b.gaps.is_empty() || b.fixed_offset.is_some() {
            return false;
        }
        let Some(t) = b
            .size
            .checked_add(b.alignment.saturating_sub(1))
            .and_then(|x| total.checked_add(x))
        else {
            return false;
        };
        total = t;
    }
    true
}

/// Free intervals and live buffers of the sweep; see the module documentation.
#[derive(Default)]
struct Arena {
    /// Live ranges: start -> end.
    occupied: BTreeMap<u64, u64>,
    /// Free intervals below the top, as (length, start).
    gaps: BTreeSet<(u64, u64)>,
}

impl Arena {
    fn top(&self) -> u64 {
        self.occupied.last_key_value().map_or(0, |(_, &hi)| hi)
    }

    /// The best-fit offset for `size` bytes aligned to `alignment` (size > 0).
    fn find(&self, size: u64, alignment: u64) -> u64 {
        // (room above the buffer, offset)
        let mut best: Option<(u64, u64)> = None;
        for &(len, start) in self.gaps.range((size, 0)..) {
            let slack = alignment - 1;
            if let Some((room, _)) = best {
                if len - size > room.saturating_add(slack) {
                    break;
                }
            }
            let offset = start.next_multiple_of(alignment);
            if offset + size <= start + len {
                let room = start + len - (offset + size);
                if best.map_or(true, |b| (room, offset) < b) {
                    best = Some((room, offset));
                }
            }
            if alignment == 1 {
                break;
            }
        }
        match best {
            Some((_, offset)) => offset,
            None => self.top().next_multiple_of(alignment),
        }
    }

    /// Occupies `[offset, offset + size)`, inside a gap or at or above the top.
    fn occupy(&mut self, offset: u64, size: u64) {
        let end = offset + size;
        let top = self.top();
        if offset >= top {
            if offset > top {
                self.gaps.insert((offset - top, top));
            }
        } else {
            // The gap holding it: the free interval starting at the previous live end (or
            // 0) and ending at the next live start.
            let lo = self
                .occupied
                .range(..=offset)
                .next_back()
                .map_or(0, |(_, &hi)| hi);
            let hi = self
                .occupied
                .range(offset..)
                .next()
                .map_or(u64::MAX, |(&lo, _)| lo);
            debug_assert!(lo <= offset && end <= hi && hi != u64::MAX);
            self.gaps.remove(&(hi - lo, lo));
            if offset > lo {
                self.gaps.insert((offset - lo, lo));
            }
            if hi > end {
                self.gaps.insert((hi - end, end));
            }
        }
        self.occupied.insert(offset, end);
    }

    /// Frees the live range starting at `offset`.
    fn free(&mut self, offset: u64) {
        let end = self.occupied.remove(&offset).expect("a live range");
        let lo = self
            .occupied
            .range(..offset)
            .next_back()
            .map_or(0, |(_, &hi)| hi);
        if offset > lo {
            self.gaps.remove(&(offset - lo, lo));
        }
        // Without a next live range it was the top: the freed interval and the gap below
        // it join the space above.
        if let Some(next) = self.occupied.range(end..).next().map(|(&next, _)| next) {
            if next > end {
                self.gaps.remove(&(next - end, end));
            }
            self.gaps.insert((next - lo, lo));
        }
    }
}

/// What the sweep reads of a buffer.
#[derive(Clone, Copy)]
struct Item {
    id: u32,
    start: u64,
    end: u64,
    size: u64,
    alignment: u64,
}

impl Item {
    fn of(id: u32, b: &Buffer) -> Item {
        Item {
            id,
            start: b.lifetime.start,
            end: b.lifetime.end,
            size: b.size,
            alignment: b.alignment.max(1),
        }
    }
}

/// How many offsets [`Offsets`] writes at once.
const CHUNK: usize = 4096;

/// Offsets by buffer id, written [`CHUNK`] at a time (stores to random ids, kept apart
/// from the sweep's own work).
struct Offsets {
    offsets: Vec<u64>,
    pending: Vec<(u32, u64)>,
}

impl Offsets {
    fn set(&mut self, id: u32, offset: u64) {
        self.pending.push((id, offset));
        if self.pending.len() == CHUNK {
            self.flush();
        }
    }

    fn flush(&mut self) {
        for &(id, offset) in &self.pending {
            self.offsets[id as usize] = offset;
        }
        self.pending.clear();
    }
}

/// `greedy-chronological`'s order, ties to the lower id: lifetime start, then end
/// descending, then size descending.
pub(crate) fn chronological_key(
    start: u64,
    end: u64,
    size: u64,
) -> (u64, Reverse<u64>, Reverse<u64>) {
    (start, Reverse(end), Reverse(size))
}

/// `greedy-chronological`'s plan: best-fit in the order by lifetime start, then end
/// descending, size descending and id; the caller has checked [`applies`]. The order is
/// sorted with what the sweep reads of each buffer, so the sweep never looks a buffer up
/// (looked up by id between placements, each was a cache miss the sweep waited for: half
/// of its time at 10^7 buffers, where the order visits the buffers at random).
pub(crate) fn best_fit_chronological(problem: &Problem) -> Result<Plan, PlanError> {
    let mut items: Vec<Item> = (0u32..)
        .zip(problem.buffers())
        .map(|(id, b)| Item::of(id, b))
        .collect();
    items.sort_unstable_by_key(|b| (chronological_key(b.start, b.end, b.size), b.id));
    best_fit_in_sorted(problem, items)
}

/// Places `items` (every buffer once, sorted by lifetime start ascending) best-fit.
fn best_fit_in_sorted(
    problem: &Problem,
    items: impl IntoIterator<Item = Item>,
) -> Result<Plan, PlanError> {
    let buffers = problem.buffers();
    let mut offsets = Offsets {
        offsets: vec![0u64; buffers.len()],
        pending: Vec::with_capacity(CHUNK),
    };
    let mut arena = Arena::default();
    let mut expiry: BinaryHeap<Reverse<(u64, u64)>> = BinaryHeap::new();
    let mut last_start = 0;
    // Past a deadline ([`super::placement::with_deadline`]) the rest goes on top of the
    // highest end placed so far, one above the other, as the engine's planners do.
    let deadline = current_deadline();
    let mut highest = 0u64;
    let mut items = items.into_iter();
    let mut seen = 0u32;
    for b in items.by_ref() {
        seen = seen.wrapping_add(1);
        if seen % DEADLINE_EVERY == 0 && deadline.is_some_and(|d| Instant::now() >= d) {
            if b.size > 0 {
                let offset = highest.next_multiple_of(b.alignment);
                offsets.set(b.id, offset);
                highest = offset + b.size;
            }
            break;
        }
        debug_assert!(b.start >= last_start, "order by lifetime start");
        last_start = b.start;
        if b.size == 0 {
            continue;
        }
        while let Some(&Reverse((end, offset))) = expiry.peek() {
            if end > b.start {
                break;
            }
            expiry.pop();
            arena.free(offset);
        }
        let offset = arena.find(b.size, b.alignment);
        arena.occupy(offset, b.size);
        expiry.push(Reverse((b.end, offset)));
        offsets.set(b.id, offset);
        highest = highest.max(offset + b.size);
    }
    // (`applies` guarantees that the sum of all sizes and paddings fits.)
    for b in items {
        if b.size > 0 {
            let offset = highest.next_multiple_of(b.alignment);
            offsets.set(b.id, offset);
            highest = offset + b.size;
        }
    }
    offsets.flush();
    Plan::new(problem, offsets.offsets).ok_or(PlanError::ArenaOverflow)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::check;
    use crate::planner::placement::{plan_in_order, Fit};
    use crate::problem::Buffer;
    use proptest::prelude::*;

    /// `greedy-chronological`'s order.
    fn chronological(problem: &Problem) -> Vec<u32> {
        let mut ids: Vec<u32> = (0..problem.len() as u32).collect();
        ids.sort_unstable_by_key(|&i| {
            let b = &problem.buffers()[i as usize];
            (
                b.lifetime.start,
                Reverse(b.lifetime.end),
                Reverse(b.size),
                b.lifetime.start,
                i,
            )
        });
        ids
    }

    fn buffers() -> impl Strategy<Value = Vec<Buffer>> {
        prop::collection::vec(
            (
                0u64..40,
                1u64..12,
                prop_oneof![Just(0u64), 1u64..64, 1u64..4],
                prop_oneof![Just(1u64), Just(2), Just(8), Just(16)],
            ),
            0..80,
        )
        .prop_map(|raw| {
            raw.into_iter()
                .enumerate()
                .map(|(i, (start, len, size, alignment))| {
                    let mut b = Buffer::new(format!("b{i}"), size, start, start + len);
                    b.alignment = alignment;
                    b
                })
                .collect()
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        #[test]
        fn sweep_equals_the_engine(buffers in buffers()) {
            let problem = Problem::from_buffers(buffers).unwrap();
            prop_assert!(applies(&problem));
            let order = chronological(&problem);
            let engine = plan_in_order(&problem, order.iter().copied(), Fit::Best).unwrap();
            let sweep = best_fit_chronological(&problem).unwrap();
            prop_assert!(check(&problem, &sweep).is_valid());
            prop_assert_eq!(sweep, engine);
        }
    }

    #[test]
    fn past_a_deadline_the_rest_is_stacked_validly() {
        use crate::planner::placement::with_deadline;
        let buffers: Vec<Buffer> = (0..5000u64)
            .map(|i| {
                Buffer::new(
                    format!("b{i}"),
                    1 + i * 7919 % 97,
                    i / 3,
                    i / 3 + 1 + i % 50,
                )
            })
            .collect();
        let p = Problem::from_buffers(buffers).unwrap();
        let full = best_fit_chronological(&p).unwrap();
        let cut = with_deadline(Instant::now(), || best_fit_chronological(&p)).unwrap();
        assert!(check(&p, &full).is_valid());
        assert!(check(&p, &cut).is_valid());
        assert!(cut.arena_bytes > full.arena_bytes);
        // The first DEADLINE_EVERY - 1 buffers were placed as without a deadline.
        let chrono = chronological(&p);
        for &i in &chrono[..DEADLINE_EVERY as usize - 1] {
            assert_eq!(cut.offsets[i as usize], full.offsets[i as usize]);
        }
    }

    #[test]
    fn applies_only_without_gaps_conflicts_or_fixed_offsets() {
        let plain = || vec![Buffer::new("a", 4, 0, 4), Buffer::new("b", 4, 2, 6)];
        assert!(applies(&Problem::from_buffers(plain()).unwrap()));
        let mut fixed = plain();
        fixed[0].fixed_offset = Some(0);
        assert!(!applies(&Problem::from_buffers(fixed).unwrap()));
        let mut gapped = plain();
        gapped[0].gaps = vec![crate::problem::Lifetime::new(1, 2).unwrap()];
        assert!(!applies(&Problem::from_buffers(gapped).unwrap()));
        let conflict = Problem::new(plain(), [(crate::BufferId(0), crate::BufferId(1))]).unwrap();
        assert!(!applies(&conflict));
        let huge = vec![Buffer::new("a", u64::MAX, 0, 4), Buffer::new("b", 4, 2, 6)];
        assert!(!applies(&Problem::from_buffers(huge).unwrap()));
    }
}
