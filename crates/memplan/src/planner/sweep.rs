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

use super::placement::{current_deadline, fixed_top, DEADLINE_EVERY};
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
                if best.is_none_or(|b| (room, offset) < b) {
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
        if seen.is_multiple_of(DEADLINE_EVERY) && deadline.is_some_and(|d| Instant::now() >= d) {
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
/// slabs of equal slots, in `O(n)` after a radix sort by start (a radix heap of ends),
/// for any problem.
///
/// Every buffer's size is rounded up to its *class* and then to a multiple of its
/// alignment: its *stride*. Buffers of one class and alignment share a *slab* of slots of
/// that stride. Swept by lifetime start (ties by id), a buffer takes the slot its slab
/// freed last (every buffer ending at or before its start is freed first), or a new one.
/// The slabs lie one above the other, each at the next multiple of its alignment, in the
/// order they were first used, above every buffer with a fixed offset, which keeps it (a
/// zero-size buffer goes to 0). Two buffers live together never get one slot, and slots,
/// slabs and fixed buffers do not overlap, so the plan is valid by construction; besides:
/// - a buffer in a conflict pair keeps its slot for good (its partner never gets it);
/// - a lifetime with gaps counts as a whole (the gaps are not shared);
/// - fixed offsets that clash give [`PlanError::FixedOffsetsClash`], as the engine does.
///
/// A slab has as many slots as it ever has buffers live at once, so the arena is the sum
/// over slabs of that peak times the stride. Two sets of classes are tried, and the
/// smaller arena kept (ties: powers of two):
/// - **powers of two**: the next power of two. On the random problems of issue #18 (sizes
///   log-uniform from 64 B to 16 MiB) 1.8 times the bound with ~200 buffers live at once
///   and 1.4 with ~20,000, where a sweep cut short and stacking what it had not placed
///   gave 23,000 times the bound at 10^7 buffers. (Four classes per power of two waste
///   less per buffer but gave 2.5: the more slabs, the more their peaks, each at its own
///   time, add up.)
/// - **the sizes themselves**, when the buffers to place have at most [`EXACT_CLASSES`]
///   distinct sizes, as real workloads do: on idealloc's `Y_1` copied 16 times (62
///   sizes) 1.08 times the bound, against 1.69 with powers of two.
pub(crate) fn slabs(problem: &Problem) -> Result<Plan, PlanError> {
    let buffers = problem.buffers();
    let base = fixed_top(problem)?;
    let mut alone = vec![false; buffers.len()];
    for &(a, b) in problem.conflicts() {
        alone[a.index()] = true;
        alone[b.index()] = true;
    }
    let mut pow2 = Slabs::new(Classes::Pow2);
    let mut exact = distinct_sizes(problem).map(|sizes| Slabs::new(Classes::Exact(sizes)));
    // With the sizes themselves, an item keeps its exact slab, and each exact slab's
    // power-of-two slab is looked up here (`None`: the size has no power of two in 64
    // bits, then only the sizes themselves are tried). The items stay 24 bytes.
    let mut to_pow2: Vec<Option<u32>> = Vec::new();
    let mut items: Vec<SlabItem> = Vec::with_capacity(buffers.len());
    for ((id, b), &alone) in (0u32..).zip(buffers).zip(&alone) {
        if b.size > 0 && b.fixed_offset.is_none() {
            let alignment = b.alignment.max(1);
            let slab = match &mut exact {
                Some(exact) => {
                    let slab = exact.of(b.size, alignment)?;
                    if slab as usize == to_pow2.len() {
                        to_pow2.push(pow2.of(b.size, alignment).ok());
                    }
                    slab
                }
                None => pow2.of(b.size, alignment)?,
            };
            items.push(SlabItem {
                start: b.lifetime.start,
                end: b.lifetime.end,
                id,
                slab: slab | u32::from(alone) << 31,
            });
        }
    }
    drop(alone);
    crate::radix::sort_by_u64_key(&mut items, |item| item.start);
    let pow2_fits = to_pow2.iter().all(Option::is_some);
    let to_pow2: Vec<u32> = to_pow2.into_iter().flatten().collect();
    let tried_exact = exact.is_some();
    let slab_of = |exact_classes: bool, item: &SlabItem| {
        let slab = item.slab & !ALONE;
        if tried_exact && !exact_classes {
            to_pow2[slab as usize]
        } else {
            slab
        }
    };
    // (the sizes themselves?, slots, layout) of each set of classes tried; an overflow
    // drops one.
    let mut tried: Vec<(bool, Vec<u32>, Layout)> = Vec::new();
    let mut error = PlanError::ArenaOverflow;
    if pow2_fits {
        let slots = pow2.assign(&items, |item| slab_of(false, item));
        match pow2.layout(base) {
            Ok(layout) => tried.push((false, slots, layout)),
            Err(e) => error = e,
        }
    }
    if let Some(exact) = &mut exact {
        let slots = exact.assign(&items, |item| item.slab & !ALONE);
        if let Ok(layout) = exact.layout(base) {
            tried.push((true, slots, layout));
        }
    }
    // The smaller top, ties to the powers of two (tried first).
    let Some((exact_classes, slots, (bases, _))) =
        tried
            .into_iter()
            .reduce(|best, next| if next.2 .1 < best.2 .1 { next } else { best })
    else {
        return Err(error);
    };
    let mut offsets: Vec<u64> = buffers
        .iter()
        .map(|b| b.fixed_offset.unwrap_or(0))
        .collect();
    for (item, slot) in items.iter().zip(slots) {
        // Below the layout's top, which fits.
        let (base, stride) = bases[slab_of(exact_classes, item) as usize];
        offsets[item.id as usize] = base + u64::from(slot) * stride;
    }
    Plan::new(problem, offsets).ok_or(PlanError::ArenaOverflow)
}

/// Each slab's (base, stride), and the top of the highest.
type Layout = (Vec<(u64, u64)>, u64);

/// What [`slabs`] reads of a buffer to place.
#[derive(Clone, Copy)]
struct SlabItem {
    start: u64,
    end: u64,
    id: u32,
    /// Its slab (with the sizes themselves as classes when they are tried, else powers of
    /// two), [`ALONE`] set for a buffer in a conflict pair, whose slot is never freed.
    slab: u32,
}

/// [`SlabItem::slab`]'s bit for a buffer in a conflict pair.
const ALONE: u32 = 1 << 31;

/// At most this many distinct sizes are tried as [`slabs`]' classes.
const EXACT_CLASSES: usize = 256;

/// The distinct sizes of the buffers [`slabs`] places, sorted, when there are at most
/// [`EXACT_CLASSES`].
fn distinct_sizes(problem: &Problem) -> Option<Vec<u64>> {
    let mut sizes: Vec<u64> = Vec::new();
    let mut last = None;
    for b in problem.buffers() {
        if b.size == 0 || b.fixed_offset.is_some() || last == Some(b.size) {
            continue;
        }
        last = Some(b.size);
        if let Err(at) = sizes.binary_search(&b.size) {
            if sizes.len() == EXACT_CLASSES {
                return None;
            }
            sizes.insert(at, b.size);
        }
    }
    Some(sizes)
}

/// How [`slabs`] rounds sizes up to classes.
enum Classes {
    /// The next power of two.
    Pow2,
    /// The sizes themselves, sorted.
    Exact(Vec<u64>),
}

impl Classes {
    fn count(&self) -> usize {
        match self {
            Classes::Pow2 => 64,
            Classes::Exact(sizes) => sizes.len(),
        }
    }

    /// The class of a size `>= 1`: its index (below [`Classes::count`]) and its bytes;
    /// `None` when the next power of two exceeds 2^63, or for a size not in the list.
    fn of(&self, size: u64) -> Option<(usize, u64)> {
        match self {
            Classes::Pow2 => {
                let bytes = size.checked_next_power_of_two()?;
                Some((bytes.trailing_zeros() as usize, bytes))
            }
            Classes::Exact(sizes) => sizes.binary_search(&size).ok().map(|k| (k, size)),
        }
    }
}

/// The slabs of [`slabs`] under one set of classes.
struct Slabs {
    classes: Classes,
    /// For each alignment met, the slab of each class, if any.
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

impl Slabs {
    fn new(classes: Classes) -> Slabs {
        Slabs {
            classes,
            by_alignment: Vec::new(),
            slabs: Vec::new(),
        }
    }

    /// The slab of a buffer of `size >= 1` and `alignment`, made when first needed.
    fn of(&mut self, size: u64, alignment: u64) -> Result<u32, PlanError> {
        let (class, bytes) = self.classes.of(size).ok_or(PlanError::ArenaOverflow)?;
        let table = match self.by_alignment.iter().position(|(a, _)| *a == alignment) {
            Some(k) => k,
            None => {
                let count = self.classes.count();
                self.by_alignment.push((alignment, vec![None; count]));
                self.by_alignment.len() - 1
            }
        };
        if let Some(slab) = self.by_alignment[table].1[class] {
            return Ok(slab);
        }
        let stride = bytes
            .checked_next_multiple_of(alignment)
            .ok_or(PlanError::ArenaOverflow)?;
        let slab = u32::try_from(self.slabs.len())
            .ok()
            .filter(|&slab| slab < ALONE)
            .ok_or_else(|| PlanError::Internal("more than 2^31 slabs".into()))?;
        self.slabs.push(Slab {
            stride,
            alignment,
            slots: 0,
            free: Vec::new(),
        });
        self.by_alignment[table].1[class] = Some(slab);
        Ok(slab)
    }

    /// The sweep: the slot of each of `items` (sorted by start) in its slab `slab_of`.
    fn assign(&mut self, items: &[SlabItem], slab_of: impl Fn(&SlabItem) -> u32) -> Vec<u32> {
        let mut slots = Vec::with_capacity(items.len());
        // (slab, slot) of the live buffers by end.
        let mut expiry = MonotoneQueue::new();
        for item in items {
            expiry.pop_until(item.start, |(slab, slot): (u32, u32)| {
                self.slabs[slab as usize].free.push(slot);
            });
            let slab = slab_of(item);
            let s = &mut self.slabs[slab as usize];
            let slot = s.free.pop().unwrap_or_else(|| {
                s.slots += 1;
                s.slots - 1
            });
            // A slot held by a buffer of a conflict pair is never freed, so that its
            // partner, placed before or after it, cannot get it.
            if item.slab & ALONE == 0 {
                expiry.push(item.end, (slab, slot));
            }
            slots.push(slot);
        }
        slots
    }

    /// Each slab's (base, stride), the slabs one above the other from `base`, and the top.
    fn layout(&self, base: u64) -> Result<Layout, PlanError> {
        let mut bases = Vec::with_capacity(self.slabs.len());
        let mut top = base;
        for s in &self.slabs {
            let base = top
                .checked_next_multiple_of(s.alignment)
                .ok_or(PlanError::ArenaOverflow)?;
            top = u64::from(s.slots)
                .checked_mul(s.stride)
                .and_then(|bytes| base.checked_add(bytes))
                .ok_or(PlanError::ArenaOverflow)?;
            bases.push((base, s.stride));
        }
        Ok((bases, top))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::check;
    use crate::planner::placement::{plan_in_order, Engine, Fit};
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

    /// [`SlabItem`]s of `problem` under `slabs`' classes (every buffer placed).
    fn slab_items(problem: &Problem, slabs: &mut Slabs) -> Vec<SlabItem> {
        let mut items: Vec<SlabItem> = (0u32..)
            .zip(problem.buffers())
            .filter(|(_, b)| b.size > 0)
            .map(|(id, b)| SlabItem {
                start: b.lifetime.start,
                end: b.lifetime.end,
                id,
                slab: slabs.of(b.size, b.alignment).unwrap(),
            })
            .collect();
        crate::radix::sort_by_u64_key(&mut items, |item| item.start);
        items
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1000))]
        #[test]
        fn slabs_are_valid(buffers in buffers()) {
            let problem = Problem::from_buffers(buffers).unwrap();
            let plan = slabs(&problem).unwrap();
            prop_assert!(check(&problem, &plan).is_valid());
        }

        #[test]
        fn a_slab_has_as_many_slots_as_buffers_live_at_once(
            buffers in buffers(),
            exact in any::<bool>(),
        ) {
            let problem = Problem::from_buffers(buffers).unwrap();
            let classes = match distinct_sizes(&problem) {
                Some(sizes) if exact => Classes::Exact(sizes),
                _ => Classes::Pow2,
            };
            let mut slabs = Slabs::new(classes);
            let items = slab_items(&problem, &mut slabs);
            let slots = slabs.assign(&items, |item| item.slab);
            for (k, a) in items.iter().enumerate() {
                for (l, b) in items.iter().enumerate().skip(k + 1) {
                    if a.slab == b.slab && a.start < b.end && b.start < a.end {
                        prop_assert_ne!(slots[k], slots[l]);
                    }
                }
            }
            for (slab, s) in slabs.slabs.iter().enumerate() {
                let live = |t: u64| {
                    items
                        .iter()
                        .filter(|i| i.slab == slab as u32 && i.start <= t && t < i.end)
                        .count() as u32
                };
                let peak = items.iter().map(|i| live(i.start)).max().unwrap_or(0);
                prop_assert_eq!(s.slots, peak);
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(500))]
        #[test]
        fn slabs_keep_fixed_offsets_conflicts_and_gaps_valid(
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
            let plan = slabs(&problem).unwrap();
            prop_assert!(check(&problem, &plan).is_valid());
            for (b, &offset) in problem.buffers().iter().zip(&plan.offsets) {
                if let Some(fixed) = b.fixed_offset {
                    prop_assert_eq!(offset, fixed);
                }
            }
        }
    }

    #[test]
    fn slabs_refuse_clashing_fixed_offsets_like_the_engine() {
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
        assert_eq!(slabs(&problem), Err(clash.clone()));
        let mut engine = Engine::<u64>::new(&problem);
        assert_eq!(engine.place_fixed(), Err(clash));
        // Not live together: no clash; the slabs go above the highest fixed buffer.
        let mut apart = problem.buffers().to_vec();
        apart[3].lifetime = crate::problem::Lifetime::new(4, 6).unwrap();
        let apart = Problem::from_buffers(apart).unwrap();
        let plan = slabs(&apart).unwrap();
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
        let plan = slabs(&problem).unwrap();
        assert!(check(&problem, &plan).is_valid());
        assert_eq!(plan.offsets, [0, 0, 16, 32]);
    }

    #[test]
    fn classes_are_powers_of_two_or_the_sizes() {
        let pow2 = Classes::Pow2;
        assert_eq!(pow2.of(1), Some((0, 1)));
        assert_eq!(pow2.of(3), Some((2, 4)));
        assert_eq!(pow2.of(64), Some((6, 64)));
        assert_eq!(pow2.of(65), Some((7, 128)));
        assert_eq!(pow2.of(1 << 63), Some((63, 1 << 63)));
        assert_eq!(pow2.of((1 << 63) + 1), None);
        let exact = Classes::Exact(vec![3, 100, 4096]);
        assert_eq!(exact.of(100), Some((1, 100)));
        assert_eq!(exact.of(101), None);
        // Distinct sizes up to the limit, sorted; fixed and zero-size buffers do not count.
        let mut fixed = Buffer::new("fixed", 7, 0, 1);
        fixed.fixed_offset = Some(0);
        let few: Vec<Buffer> = (0..1000u64)
            .map(|i| Buffer::new(format!("b{i}"), 1 + i % 5 * 10, i, i + 1))
            .chain([fixed, Buffer::new("zero", 0, 0, 1)])
            .collect();
        let few = Problem::from_buffers(few).unwrap();
        assert_eq!(distinct_sizes(&few), Some(vec![1, 11, 21, 31, 41]));
        let many: Vec<Buffer> = (0..=EXACT_CLASSES as u64)
            .map(|i| Buffer::new(format!("b{i}"), 1 + i, 0, 1))
            .collect();
        assert_eq!(distinct_sizes(&Problem::from_buffers(many).unwrap()), None);
    }

    #[test]
    fn slabs_reuse_freed_slots_and_stack_the_slabs() {
        // Two 100-byte buffers one after the other share a slot; a 3-byte buffer live with
        // both gets a slab of its own above, aligned to 8. With the sizes themselves as
        // classes the slots are of 100 and 8 bytes (top 112), with powers of two of 128
        // and 8 (top 136): the sizes win.
        let mut small = Buffer::new("small", 3, 0, 4);
        small.alignment = 8;
        let problem = Problem::from_buffers(vec![
            Buffer::new("a", 100, 0, 2),
            Buffer::new("b", 100, 2, 4),
            small,
        ])
        .unwrap();
        let plan = slabs(&problem).unwrap();
        assert!(check(&problem, &plan).is_valid());
        assert_eq!(plan.offsets, [0, 0, 104]);
        assert_eq!(plan.arena_bytes, Some(107));
        // Three sizes one after the other: three slabs of one slot each (303 bytes) with
        // the sizes, one slot of 128 with powers of two, which win.
        let problem = Problem::from_buffers(vec![
            Buffer::new("a", 100, 0, 2),
            Buffer::new("b", 101, 2, 4),
            Buffer::new("c", 102, 4, 6),
        ])
        .unwrap();
        let plan = slabs(&problem).unwrap();
        assert!(check(&problem, &plan).is_valid());
        assert_eq!(plan.offsets, [0, 0, 0]);
        // A size without a power of two in 64 bits is its own class.
        let huge = Problem::from_buffers(vec![Buffer::new("h", (1 << 63) + 1, 0, 1)]).unwrap();
        assert_eq!(slabs(&huge).unwrap().offsets, [0]);
        // Sizes whose slabs overflow either way are an error, not a wrong plan.
        let two = Problem::from_buffers(vec![
            Buffer::new("h", (1 << 63) + 1, 0, 1),
            Buffer::new("g", (1 << 63) + 1, 0, 1),
        ])
        .unwrap();
        assert_eq!(slabs(&two), Err(PlanError::ArenaOverflow));
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
