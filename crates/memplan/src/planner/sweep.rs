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
//! - `expiry`: the live buffers by end, a radix heap (`radix::MonotoneQueue`); before
//!   placing a buffer starting at `s`, every buffer ending at or before `s` is freed and
//!   its interval merged with its free neighbours.
//!
//! Best-fit picks the gap leaving the least room above the aligned buffer, ties to the
//! lowest offset, else goes on top of the highest live end (aligned): the same choice as
//! the engine's scan over the same free intervals, so the plan is the engine's, offset for
//! offset (tests compare them). With alignment 1 the first gap of length `>= size` in
//! `(length, start)` order is the answer; with alignment, gaps are read in that order
//! while their length minus the worst padding could still beat the best room found.
//! Each placement and each free costs `O(log n)` (plus, with alignment, the gaps read).

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};

use std::time::Instant;

use super::placement::{current_deadline, Engine, DEADLINE_EVERY};
use super::PlanError;
use crate::plan::Plan;
use crate::problem::{Buffer, Problem};
use crate::radix::MonotoneQueue;

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
    let mut items = by_start(problem);
    // Within one start, the rest of the key; runs of equal starts are short (radix sort
    // then these sorts: 0.5 s against 1.1 s for one comparison sort at 10^7 buffers).
    for run in items.chunk_by_mut(|a, b| a.start == b.start) {
        if run.len() > 1 {
            run.sort_unstable_by_key(|b| (chronological_key(b.start, b.end, b.size), b.id));
        }
    }
    best_fit_in_sorted(problem, items)
}

/// What the sweep reads of every buffer, by lifetime start, ties by id (a stable radix
/// sort of the buffers in id order).
fn by_start(problem: &Problem) -> Vec<Item> {
    let mut items: Vec<Item> = (0u32..)
        .zip(problem.buffers())
        .map(|(id, b)| Item::of(id, b))
        .collect();
    crate::radix::sort_by_u64_key(&mut items, |b| b.start);
    items
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
    // The offsets of the live buffers by end.
    let mut expiry = MonotoneQueue::new();
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
        // (The order of the frees at one step does not change the free intervals.)
        expiry.pop_until(b.start, |offset| arena.free(offset));
        let offset = arena.find(b.size, b.alignment);
        arena.occupy(offset, b.size);
        expiry.push(b.end, offset);
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

/// A plan for [`super::best_of::run_until`] to fall back on when the greedy candidates
/// cannot finish by their deadline (issue #18: `search --time-limit 5` at 10^7 buffers):
/// power-of-two slabs, in `O(n)` after a radix sort by start (a radix heap of ends), for
/// any problem.
///
/// Every buffer's size is rounded up to its *class*, the next power of two, and then to a
/// multiple of its alignment: its *stride*. Buffers of one class and alignment share a
/// *slab* of slots of that stride. Swept by lifetime start (ties by id), a buffer takes
/// the slot its slab freed last (every buffer ending at or before its start is freed
/// first), or a new one. The slabs lie one above the other, each at the next multiple of
/// its alignment, in the order they were first used, above every buffer with a fixed
/// offset, which keeps it (a zero-size buffer goes to 0). Two buffers live together never
/// get one slot, and slots, slabs and fixed buffers do not overlap, so the plan is valid
/// by construction; besides:
/// - a buffer in a conflict pair keeps its slot for good (its partner never gets it);
/// - a lifetime with gaps counts as a whole (the gaps are not shared);
/// - fixed offsets that clash give [`PlanError::FixedOffsetsClash`], as the engine does.
///
/// Its arena is the sum over slabs of the most slots live at once times the stride. On
/// the random problems of issue #18 (sizes log-uniform from 64 B to 16 MiB) that is 1.8
/// times the bound with ~200 buffers live at once and 1.4 with ~20,000, where a sweep
/// cut short and stacking what it had not placed gave 23,000 times the bound at 10^7
/// buffers. (Four classes per power of two waste less per buffer but gave 2.5: the more
/// slabs, the more their peaks, each at its own time, add up.)
pub(crate) fn pow2_slabs(problem: &Problem) -> Result<Plan, PlanError> {
    let buffers = problem.buffers();
    let base = fixed_top(problem)?;
    let mut alone = vec![false; buffers.len()];
    for &(a, b) in problem.conflicts() {
        alone[a.index()] = true;
        alone[b.index()] = true;
    }
    let mut slabs = Slabs::default();
    // (start, end, id, slab) of the buffers to place, the slab's top bit set for a buffer
    // in a conflict pair; the slab becomes the slot.
    let mut items: Vec<(u64, u64, u32, u32)> = Vec::with_capacity(buffers.len());
    for ((id, b), &alone) in (0u32..).zip(buffers).zip(&alone) {
        if b.size > 0 && b.fixed_offset.is_none() {
            let slab = slabs.of(b.size, b.alignment.max(1))?;
            items.push((
                b.lifetime.start,
                b.lifetime.end,
                id,
                slab | u32::from(alone) << 31,
            ));
        }
    }
    drop(alone);
    crate::radix::sort_by_u64_key(&mut items, |item| item.0);
    // (slab, slot) of the live buffers by end.
    let mut expiry = MonotoneQueue::new();
    for (start, end, _, slab_or_slot) in &mut items {
        expiry.pop_until(*start, |(slab, slot): (u32, u32)| {
            slabs.slabs[slab as usize].free.push(slot);
        });
        let (slab, alone) = (*slab_or_slot & !(1 << 31), *slab_or_slot >> 31 == 1);
        let s = &mut slabs.slabs[slab as usize];
        let slot = s.free.pop().unwrap_or_else(|| {
            s.slots += 1;
            s.slots - 1
        });
        // A slot held by a buffer of a conflict pair is never freed, so that its partner,
        // placed before or after it, cannot get it.
        if !alone {
            expiry.push(*end, (slab, slot));
        }
        // The start is read no more: it keeps the slab, and the slab's place the slot.
        *slab_or_slot = slot;
        *start = u64::from(slab);
    }
    let mut bases = Vec::with_capacity(slabs.slabs.len());
    let mut top = base;
    for s in &slabs.slabs {
        let base = top
            .checked_next_multiple_of(s.alignment)
            .ok_or(PlanError::ArenaOverflow)?;
        top = u64::from(s.slots)
            .checked_mul(s.stride)
            .and_then(|bytes| base.checked_add(bytes))
            .ok_or(PlanError::ArenaOverflow)?;
        bases.push((base, s.stride));
    }
    let mut offsets: Vec<u64> = buffers
        .iter()
        .map(|b| b.fixed_offset.unwrap_or(0))
        .collect();
    for &(slab, _, id, slot) in &items {
        // Below `top`, which fits.
        let (base, stride) = bases[slab as usize];
        offsets[id as usize] = base + u64::from(slot) * stride;
    }
    Plan::new(problem, offsets).ok_or(PlanError::ArenaOverflow)
}

/// The highest end of a buffer with a fixed offset (0 when none), once it is known that
/// no two of them clash: the engine places them alone, in a problem of their own.
fn fixed_top(problem: &Problem) -> Result<u64, PlanError> {
    let buffers = problem.buffers();
    let mut index = vec![u32::MAX; buffers.len()];
    let mut fixed = Vec::new();
    let mut top = 0u64;
    for (i, b) in buffers.iter().enumerate() {
        if let Some(offset) = b.fixed_offset {
            index[i] = fixed.len() as u32;
            fixed.push(b.clone());
            if b.size > 0 {
                // `Problem::new` guarantees that it fits.
                top = top.max(offset + b.size);
            }
        }
    }
    if fixed.len() > 1 {
        let conflicts = problem.conflicts().iter().filter_map(|&(a, b)| {
            let (a, b) = (index[a.index()], index[b.index()]);
            (a != u32::MAX && b != u32::MAX).then_some((crate::BufferId(a), crate::BufferId(b)))
        });
        let alone = Problem::new(fixed, conflicts)
            .map_err(|e| PlanError::Internal(format!("the fixed buffers alone: {e}")))?;
        Engine::new(&alone).place_fixed()?;
    }
    Ok(top)
}

/// The slabs of [`pow2_slabs`].
#[derive(Default)]
struct Slabs {
    /// For each alignment met, the slab of each class ([`class_of`]'s index), if any.
    by_alignment: Vec<(u64, Vec<Option<u32>>)>,
    slabs: Vec<Slab>,
}

/// Slots of one stride.
struct Slab {
    stride: u64,
    alignment: u64,
    /// Slots made so far.
    slots: u32,
    /// Free slots, the last freed on top.
    free: Vec<u32>,
}

/// How many classes [`class_of`] numbers.
const CLASSES: usize = 64;

/// The class of a size `>= 1`: the next power of two, `2^k` (`None` when that exceeds
/// 2^63), and its index `k`.
fn class_of(size: u64) -> Option<(usize, u64)> {
    let bytes = size.checked_next_power_of_two()?;
    Some((bytes.trailing_zeros() as usize, bytes))
}

impl Slabs {
    /// The slab of a buffer of `size >= 1` and `alignment`, made when first needed.
    fn of(&mut self, size: u64, alignment: u64) -> Result<u32, PlanError> {
        let (class, bytes) = class_of(size).ok_or(PlanError::ArenaOverflow)?;
        let table = match self.by_alignment.iter().position(|(a, _)| *a == alignment) {
            Some(k) => k,
            None => {
                self.by_alignment.push((alignment, vec![None; CLASSES]));
                self.by_alignment.len() - 1
            }
        };
        if let Some(slab) = self.by_alignment[table].1[class] {
            return Ok(slab);
        }
        let stride = bytes
            .checked_next_multiple_of(alignment)
            .ok_or(PlanError::ArenaOverflow)?;
        let slab = self.slabs.len() as u32;
        self.slabs.push(Slab {
            stride,
            alignment,
            slots: 0,
            free: Vec::new(),
        });
        self.by_alignment[table].1[class] = Some(slab);
        Ok(slab)
    }
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

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1000))]
        #[test]
        fn pow2_slabs_are_valid_and_never_share_a_slot(buffers in buffers()) {
            let problem = Problem::from_buffers(buffers).unwrap();
            let plan = pow2_slabs(&problem).unwrap();
            prop_assert!(check(&problem, &plan).is_valid());
            // Each buffer sits at a whole slot of its class's stride inside its slab: the
            // offsets of one size class and alignment differ by multiples of the stride.
            let buffers = problem.buffers();
            for (i, a) in buffers.iter().enumerate() {
                for (j, b) in buffers.iter().enumerate().skip(i + 1) {
                    let (_, class) = class_of(a.size.max(1)).unwrap();
                    let same = a.size > 0
                        && b.size > 0
                        && class_of(b.size).unwrap().1 == class
                        && a.alignment == b.alignment;
                    if same {
                        let stride = class.next_multiple_of(a.alignment);
                        let (x, y) = (plan.offsets[i], plan.offsets[j]);
                        prop_assert_eq!(x.abs_diff(y) % stride, 0);
                    }
                }
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(500))]
        #[test]
        fn pow2_slabs_keep_fixed_offsets_conflicts_and_gaps_valid(
            buffers in buffers(),
            fixed in prop::collection::vec(any::<bool>(), 80),
            gapped in prop::collection::vec(any::<bool>(), 80),
            pairs in prop::collection::vec((0usize..80, 0usize..80), 0..20),
        ) {
            let n = buffers.len();
            let buffers: Vec<Buffer> = buffers
                .into_iter()
                .enumerate()
                .map(|(i, mut b)| {
                    if fixed[i] && b.size < 64 {
                        // Apart: fixed buffers never clash here.
                        b.fixed_offset = Some(64 * i as u64);
                    }
                    let (start, end) = (b.lifetime.start, b.lifetime.end);
                    if gapped[i] && end - start >= 3 {
                        b.gaps = vec![crate::problem::Lifetime::new(start + 1, end - 1).unwrap()];
                    }
                    b
                })
                .collect();
            let conflicts: Vec<_> = pairs
                .into_iter()
                .filter(|&(a, b)| a < n && b < n && a != b)
                .map(|(a, b)| (crate::BufferId(a as u32), crate::BufferId(b as u32)))
                .collect();
            let problem = Problem::new(buffers, conflicts).unwrap();
            let plan = pow2_slabs(&problem).unwrap();
            prop_assert!(check(&problem, &plan).is_valid());
            for (b, &offset) in problem.buffers().iter().zip(&plan.offsets) {
                if let Some(fixed) = b.fixed_offset {
                    prop_assert_eq!(offset, fixed);
                }
            }
        }
    }

    #[test]
    fn pow2_slabs_refuse_clashing_fixed_offsets_like_the_engine() {
        let mut a = Buffer::new("a", 8, 0, 4);
        a.fixed_offset = Some(0);
        let mut b = Buffer::new("b", 8, 2, 6);
        b.fixed_offset = Some(4);
        let mut far = Buffer::new("far", 8, 0, 6);
        far.fixed_offset = Some(64);
        let problem = Problem::from_buffers(vec![a, Buffer::new("free", 4, 0, 9), far, b]).unwrap();
        let clash = PlanError::FixedOffsetsClash {
            a: "a".into(),
            b: "b".into(),
        };
        assert_eq!(pow2_slabs(&problem), Err(clash.clone()));
        let mut engine = Engine::new(&problem);
        assert_eq!(engine.place_fixed(), Err(clash));
        // Not live together: no clash; the slabs go above the highest fixed buffer.
        let mut apart = problem.buffers().to_vec();
        apart[3].lifetime = crate::problem::Lifetime::new(4, 6).unwrap();
        let apart = Problem::from_buffers(apart).unwrap();
        let plan = pow2_slabs(&apart).unwrap();
        assert!(check(&apart, &plan).is_valid());
        assert_eq!(plan.offsets, [0, 72, 64, 4]);
    }

    #[test]
    fn a_buffer_in_a_conflict_pair_never_shares_its_slot() {
        // One after the other, `a`, `b` and `c` would share a slot, but `b` and `c` must
        // not share bytes: `b` reuses `a`'s and keeps it, `c` gets a new one and keeps
        // it, and `d` gets a third.
        let buffers = vec![
            Buffer::new("a", 16, 0, 2),
            Buffer::new("b", 16, 2, 4),
            Buffer::new("c", 16, 4, 6),
            Buffer::new("d", 16, 4, 6),
        ];
        let problem = Problem::new(buffers, [(crate::BufferId(1), crate::BufferId(2))]).unwrap();
        let plan = pow2_slabs(&problem).unwrap();
        assert!(check(&problem, &plan).is_valid());
        assert_eq!(plan.offsets, [0, 0, 16, 32]);
    }

    #[test]
    fn classes_are_powers_of_two() {
        assert_eq!(class_of(1), Some((0, 1)));
        assert_eq!(class_of(3), Some((2, 4)));
        assert_eq!(class_of(64), Some((6, 64)));
        assert_eq!(class_of(65), Some((7, 128)));
        assert_eq!(class_of(1 << 63), Some((63, 1 << 63)));
        assert_eq!(class_of((1 << 63) + 1), None);
    }

    #[test]
    fn pow2_slabs_reuse_freed_slots_and_stack_the_slabs() {
        // Two 100-byte buffers one after the other share a slot of 128; a 3-byte buffer
        // live with both gets a slab of its own above (class 4, aligned to 8).
        let mut small = Buffer::new("small", 3, 0, 4);
        small.alignment = 8;
        let problem = Problem::from_buffers(vec![
            Buffer::new("a", 100, 0, 2),
            Buffer::new("b", 100, 2, 4),
            small,
        ])
        .unwrap();
        let plan = pow2_slabs(&problem).unwrap();
        assert!(check(&problem, &plan).is_valid());
        assert_eq!(plan.offsets, [0, 0, 128]);
        assert_eq!(plan.arena_bytes, Some(131));
        // Sizes whose classes overflow are an error, not a wrong plan.
        let huge = Problem::from_buffers(vec![Buffer::new("h", (1 << 63) + 1, 0, 1)]).unwrap();
        assert_eq!(pow2_slabs(&huge), Err(PlanError::ArenaOverflow));
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
