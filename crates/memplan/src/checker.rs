//! The independent checker: is a plan valid for a problem?
//!
//! It recomputes everything from the [`Problem`] and the offsets (or, in a fragmented
//! plan, the extents) of the [`Plan`], trusts no planner, and reports *all* violations,
//! each naming the buffers involved:
//! - two buffers live at a common step whose address ranges intersect;
//! - an explicit conflict pair whose address ranges intersect (at any time);
//! - an offset that is not a multiple of its buffer's alignment;
//! - a fixed offset that was moved;
//! - a claimed arena size that differs from `max(offset + size)`;
//! - an `offset + size` that overflows 64 bits, or a plan of the wrong length;
//! - fragmented plans: extents whose lengths do not add up to the buffer's size, two
//!   extents of one buffer that overlap, a first extent that does not start at the
//!   buffer's offset, or a list of extents per buffer of the wrong length.
//!
//! A buffer's address range is the union of its extents (one piece `[offset, offset +
//! size)` in a contiguous plan): the checks expand the plan into pieces that carry their
//! buffer's id and run on those, so contiguous and fragmented plans share every check.
//!
//! A zero-size buffer (or an empty extent) covers no address, so no overlap or conflict
//! pair ever involves it; its alignment and fixed offset are checked like any other's,
//! and its offset counts in `max(offset + size)`.
//!
//! [`check_naive`] compares every pair (O(n²)) and is the reference; [`check`] sweeps over
//! time and is the one to use on large inputs. Tests hold them to the same answers.

use std::fmt;

use crate::plan::Plan;
use crate::problem::{BufferId, Lifetime, Problem};

/// One way in which a plan breaks the problem's rules.
///
/// Pairs are reported with `a < b` (by id); names are copied for messages.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Violation {
    /// The plan has a different number of offsets than the problem has buffers.
    WrongLength { buffers: usize, offsets: usize },
    /// A fragmented plan has a different number of extent lists than the problem has
    /// buffers.
    WrongExtentsLength { buffers: usize, lists: usize },
    /// `offset + size` does not fit in 64 bits.
    AddressOverflow {
        buffer: BufferId,
        name: String,
        offset: u64,
        size: u64,
    },
    /// The offset is not a multiple of the buffer's alignment.
    Misaligned {
        buffer: BufferId,
        name: String,
        offset: u64,
        alignment: u64,
    },
    /// The buffer has a fixed offset and the plan put it elsewhere.
    FixedOffsetMoved {
        buffer: BufferId,
        name: String,
        fixed: u64,
        offset: u64,
    },
    /// The lengths of a buffer's extents do not add up to its size (`sum` is `None` when
    /// they overflow 64 bits).
    ExtentsSum {
        buffer: BufferId,
        name: String,
        sum: Option<u64>,
        size: u64,
    },
    /// A buffer's first extent does not start at its offset (or it has no extent while
    /// its offset is not 0).
    FirstExtentNotAtOffset {
        buffer: BufferId,
        name: String,
        offset: u64,
        first: Option<u64>,
    },
    /// Two extents of one buffer share addresses.
    ExtentsOverlap {
        buffer: BufferId,
        name: String,
        /// The first address range the extents share `[start, end)`.
        addresses: (u64, u64),
    },
    /// Two buffers live at a common step share addresses.
    Overlap {
        a: BufferId,
        b: BufferId,
        a_name: String,
        b_name: String,
        /// The first common step interval of their live segments.
        steps: Lifetime,
        /// The shared address range `[start, end)`.
        addresses: (u64, u64),
    },
    /// Two buffers of an explicit conflict pair share addresses.
    ConflictShared {
        a: BufferId,
        b: BufferId,
        a_name: String,
        b_name: String,
        /// The shared address range `[start, end)`.
        addresses: (u64, u64),
    },
    /// The plan claims an arena size that is not `max(offset + size)`.
    ArenaMismatch { claimed: u64, actual: u64 },
}

impl Violation {
    /// The kind of violation, one word for programs to branch on (the Python package's
    /// `Violation.kind`): `wrong-length`, `overflow`, `misaligned`, `fixed-offset-moved`,
    /// `extents`, `overlap`, `conflict` or `arena-mismatch`.
    pub fn kind(&self) -> &'static str {
        match self {
            Violation::WrongLength { .. } | Violation::WrongExtentsLength { .. } => "wrong-length",
            Violation::AddressOverflow { .. } => "overflow",
            Violation::Misaligned { .. } => "misaligned",
            Violation::FixedOffsetMoved { .. } => "fixed-offset-moved",
            Violation::ExtentsSum { .. }
            | Violation::FirstExtentNotAtOffset { .. }
            | Violation::ExtentsOverlap { .. } => "extents",
            Violation::Overlap { .. } => "overlap",
            Violation::ConflictShared { .. } => "conflict",
            Violation::ArenaMismatch { .. } => "arena-mismatch",
        }
    }

    /// The names of the buffers involved (none for a plan-wide violation).
    pub fn buffers(&self) -> Vec<&str> {
        match self {
            Violation::AddressOverflow { name, .. }
            | Violation::Misaligned { name, .. }
            | Violation::FixedOffsetMoved { name, .. }
            | Violation::ExtentsSum { name, .. }
            | Violation::FirstExtentNotAtOffset { name, .. }
            | Violation::ExtentsOverlap { name, .. } => vec![name],
            Violation::Overlap { a_name, b_name, .. }
            | Violation::ConflictShared { a_name, b_name, .. } => vec![a_name, b_name],
            Violation::WrongLength { .. }
            | Violation::WrongExtentsLength { .. }
            | Violation::ArenaMismatch { .. } => vec![],
        }
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Violation::WrongLength { buffers, offsets } => write!(
                f,
                "the plan has {offsets} offsets but the problem has {buffers} buffers"
            ),
            Violation::WrongExtentsLength { buffers, lists } => write!(
                f,
                "the plan has {lists} lists of extents but the problem has {buffers} buffers"
            ),
            Violation::ExtentsSum {
                name, sum, size, ..
            } => match sum {
                Some(sum) => write!(
                    f,
                    "buffer '{name}': its extents hold {sum} bytes but its size is {size}"
                ),
                None => write!(
                    f,
                    "buffer '{name}': the lengths of its extents overflow 64 bits (size {size})"
                ),
            },
            Violation::FirstExtentNotAtOffset {
                name,
                offset,
                first,
                ..
            } => match first {
                Some(first) => write!(
                    f,
                    "buffer '{name}': its first extent starts at {first} but its offset is {offset}"
                ),
                None => write!(f, "buffer '{name}': it has no extents but offset {offset}"),
            },
            Violation::ExtentsOverlap {
                name, addresses, ..
            } => write!(
                f,
                "buffer '{name}': two of its extents share addresses [{}, {})",
                addresses.0, addresses.1
            ),
            Violation::AddressOverflow {
                name, offset, size, ..
            } => write!(
                f,
                "buffer '{name}': offset {offset} + size {size} overflows 64 bits"
            ),
            Violation::Misaligned {
                name,
                offset,
                alignment,
                ..
            } => write!(
                f,
                "buffer '{name}': offset {offset} is not a multiple of its alignment {alignment}"
            ),
            Violation::FixedOffsetMoved {
                name, fixed, offset, ..
            } => write!(
                f,
                "buffer '{name}': fixed at offset {fixed} but placed at {offset}"
            ),
            Violation::Overlap {
                a_name,
                b_name,
                steps,
                addresses,
                ..
            } => write!(
                f,
                "buffers '{a_name}' and '{b_name}' are both live during steps {steps} and share addresses [{}, {})",
                addresses.0, addresses.1
            ),
            Violation::ConflictShared {
                a_name,
                b_name,
                addresses,
                ..
            } => write!(
                f,
                "buffers '{a_name}' and '{b_name}' must never share bytes (conflict pair) but share addresses [{}, {})",
                addresses.0, addresses.1
            ),
            Violation::ArenaMismatch { claimed, actual } => write!(
                f,
                "the plan claims an arena of {claimed} bytes but max(offset + size) is {actual}"
            ),
        }
    }
}

/// The checker's verdict.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    /// `max(offset + size)` recomputed from the offsets; `None` when it cannot be computed
    /// (wrong length or overflow, both also reported as violations).
    pub arena_bytes: Option<u64>,
    /// Every violation found, sorted.
    pub violations: Vec<Violation>,
}

impl Report {
    /// True when there is no violation.
    pub fn is_valid(&self) -> bool {
        self.violations.is_empty()
    }
}

/// The all-orders check (the `exclusive` method, corrected): see [`crate::orders`].
pub use crate::orders::{check_all_orders, Dataflow, Unordered};

/// Checks a plan with a sweep over time; returns exactly the [`Report`] of
/// [`check_naive`].
///
/// A first, lighter sweep answers only "does any pair live together share addresses?"
/// (`pieces_are_disjoint`): when none does, it is the whole overlap check (conflict pairs
/// are still checked one by one). Otherwise the general sweep below finds every pair.
///
/// Every live segment ([`Buffer::live_segments`](crate::Buffer::live_segments)) gives a
/// start and an end event; at equal steps ends come before starts (lifetimes are
/// half-open). When a segment starts, every *active* buffer whose address range
/// intersects the new one is found, however many there are, with a max-segment tree over
/// the buffers ordered by `(offset, id)`: each node holds the largest end address among
/// the active buffers below it, so the search descends only into subtrees holding a
/// buffer that starts below the new buffer's end and ends above its offset. Pairs found
/// in several segments are reported once, with the first common step interval computed
/// from the two buffers' segments.
///
/// Complexity, for `n` buffers with `s` live segments in all (`s = n` without gaps),
/// `h` hits (a segment start meeting an active buffer that shares addresses with it:
/// at least the number of overlapping pairs, at most that times the segments of a pair)
/// and `p` reported pairs of `g` segments each (`g = 1` without gaps):
/// - time O((s + h) log(s + h) + p·g); a valid plan has `h = 0`, so it is checked in
///   O(s log s) whatever its sizes, offsets and lifetimes;
/// - memory O(s + h).
///
/// In a fragmented plan the sweep runs over the extents (pieces that carry their
/// buffer's id) instead of one range per buffer: read `s` as live segments times extents;
/// two intersecting extents of one buffer are reported as [`Violation::ExtentsOverlap`].
///
/// A plan full of overlaps is inherently quadratic: with every offset 0, all `n(n-1)/2`
/// live-together pairs are violations and all are reported.
///
/// `offset + size` overflows are reported as [`Violation::AddressOverflow`] (and make
/// `arena_bytes` `None`); for the overlap and conflict checks such a buffer extends to
/// `u64::MAX`. Never panics.
pub fn check(problem: &Problem, plan: &Plan) -> Report {
    let mut violations = Vec::new();
    if let Some(report) = wrong_length(problem, plan) {
        return report;
    }
    let arena = per_buffer_checks(problem, plan, &mut violations);
    let disjoint = pieces_are_disjoint(problem, plan);
    if disjoint && problem.conflicts().is_empty() {
        return finish(plan, arena, violations);
    }
    let pieces = Pieces::new(problem, plan);
    if !disjoint {
        let segments = Segments::new(problem);
        for (i, j) in sweep_overlapping_pairs(&pieces, &segments) {
            let (i, j) = (i as usize, j as usize);
            if i == j {
                extents_overlap(problem, &pieces, i, &mut violations);
                continue;
            }
            let addresses = shared_addresses(&pieces, i, j);
            let steps = first_common_steps(segments.of(i), segments.of(j));
            if let (Some(addresses), Some(steps)) = (addresses, steps) {
                violations.push(overlap(problem, i, j, steps, addresses));
            }
        }
    }
    conflict_checks(problem, &pieces, &mut violations);
    finish(plan, arena, violations)
}

/// Checks a plan by comparing every pair of buffers: O(n²). The reference for [`check`].
///
/// Like [`check`], it treats a buffer whose `offset + size` overflows as extending to
/// `u64::MAX` (and reports the overflow, with `arena_bytes` `None`).
pub fn check_naive(problem: &Problem, plan: &Plan) -> Report {
    let mut violations = Vec::new();
    if let Some(report) = wrong_length(problem, plan) {
        return report;
    }
    let arena = per_buffer_checks(problem, plan, &mut violations);
    let pieces = Pieces::new(problem, plan);
    let buffers = problem.buffers();
    let segments: Vec<Vec<Lifetime>> = buffers.iter().map(|b| b.live_segments()).collect();
    for i in 0..buffers.len() {
        extents_overlap(problem, &pieces, i, &mut violations);
        for j in i + 1..buffers.len() {
            let Some(addresses) = shared_addresses(&pieces, i, j) else {
                continue;
            };
            let steps = segments[i]
                .iter()
                .flat_map(|x| segments[j].iter().filter_map(|y| x.intersection(*y)))
                .min();
            if let Some(steps) = steps {
                violations.push(overlap(problem, i, j, steps, addresses));
            }
        }
    }
    conflict_checks(problem, &pieces, &mut violations);
    finish(plan, arena, violations)
}

/// The report for a plan of the wrong length (nothing else can be checked), if it is one.
fn wrong_length(problem: &Problem, plan: &Plan) -> Option<Report> {
    let mut violations = Vec::new();
    if plan.offsets.len() != problem.len() {
        violations.push(Violation::WrongLength {
            buffers: problem.len(),
            offsets: plan.offsets.len(),
        });
    }
    if let Some(lists) = &plan.extents {
        if lists.len() != problem.len() {
            violations.push(Violation::WrongExtentsLength {
                buffers: problem.len(),
                lists: lists.len(),
            });
        }
    }
    (!violations.is_empty()).then_some(Report {
        arena_bytes: None,
        violations,
    })
}

/// The plan as address pieces that carry their buffer: buffer `i` owns
/// `ranges[bounds[i]..bounds[i + 1]]`, each `[start, end)` (an end that overflows is
/// `u64::MAX`). A contiguous plan has one piece per buffer, `[offset, offset + size)`; a
/// fragmented plan one per extent. The plan must have one offset (and list) per buffer.
struct Pieces {
    bounds: Vec<usize>,
    ranges: Vec<(u64, u64)>,
}

impl Pieces {
    fn new(problem: &Problem, plan: &Plan) -> Pieces {
        let mut bounds = Vec::with_capacity(problem.len() + 1);
        let mut ranges = Vec::with_capacity(problem.len());
        bounds.push(0);
        Pieces::for_each(problem, plan, |buffer, range| {
            while bounds.len() <= buffer {
                bounds.push(ranges.len());
            }
            ranges.push(range);
        });
        while bounds.len() <= problem.len() {
            bounds.push(ranges.len());
        }
        Pieces { bounds, ranges }
    }

    /// Calls `f(buffer, [start, end))` for every piece, by buffer, without building them.
    fn for_each(problem: &Problem, plan: &Plan, mut f: impl FnMut(usize, (u64, u64))) {
        for (i, buffer) in problem.buffers().iter().enumerate() {
            match &plan.extents {
                None => {
                    let offset = plan.offsets[i];
                    f(i, (offset, offset.saturating_add(buffer.size)));
                }
                Some(lists) => {
                    for e in &lists[i] {
                        f(i, (e.offset, e.offset.saturating_add(e.len)));
                    }
                }
            }
        }
    }

    fn of(&self, i: usize) -> &[(u64, u64)] {
        &self.ranges[self.bounds[i]..self.bounds[i + 1]]
    }
}

/// Adds the claimed-arena check (when the arena could be recomputed) and sorts.
fn finish(plan: &Plan, arena: Option<u64>, mut violations: Vec<Violation>) -> Report {
    if let Some(arena) = arena {
        claimed_arena_check(plan, arena, &mut violations);
    }
    violations.sort();
    Report {
        arena_bytes: arena,
        violations,
    }
}

/// The live segments of every buffer, flattened: buffer `i` owns
/// `segments[bounds[i]..bounds[i + 1]]`, sorted and disjoint.
struct Segments {
    bounds: Vec<usize>,
    segments: Vec<Lifetime>,
}

impl Segments {
    fn new(problem: &Problem) -> Segments {
        let mut bounds = Vec::with_capacity(problem.len() + 1);
        let mut segments = Vec::with_capacity(problem.len());
        bounds.push(0);
        for buffer in problem.buffers() {
            buffer.for_each_live_segment(|segment| segments.push(segment));
            bounds.push(segments.len());
        }
        Segments { bounds, segments }
    }

    fn of(&self, i: usize) -> &[Lifetime] {
        &self.segments[self.bounds[i]..self.bounds[i + 1]]
    }
}

/// The first interval of steps at which both buffers are live, merging their sorted,
/// disjoint segments.
fn first_common_steps(a: &[Lifetime], b: &[Lifetime]) -> Option<Lifetime> {
    let (mut i, mut j) = (0, 0);
    while let (Some(x), Some(y)) = (a.get(i), b.get(j)) {
        if let Some(common) = x.intersection(*y) {
            return Some(common);
        }
        if x.end <= y.start {
            i += 1;
        } else {
            j += 1;
        }
    }
    None
}

/// True when no two pieces live at a common step share an address (then
/// [`sweep_overlapping_pairs`] would find no pair): the check of a valid plan, in
/// `O(s log s)` time with a small constant and `O(s)` memory.
///
/// The segments are sorted by start (a radix sort) and swept; the *active* pieces, those
/// live at the current step, are kept by offset in an ordered map and are pairwise
/// disjoint until the sweep meets the first overlap. A new piece `[o, e)` intersects some
/// active piece exactly when the active piece with the greatest offset `<= o` ends above
/// `o` or the one with the least offset `> o` starts below `e`: any active `[a, b)` with
/// `a <= o < b` *is* the first of these (another active offset in `[a, o]` would lie
/// inside `[a, b)`), and any with `o < a < e` makes the second start below `e`. So the
/// sweep answers exactly, and stops at the first overlap. Ends at a step come before
/// starts at it (lifetimes are half-open): every active piece ending at or before a start
/// leaves first, from a queue of ends ([`crate::radix::MonotoneQueue`]).
///
/// It reads the problem and plan directly ([`Pieces::for_each`]): most plans checked are
/// valid, and at 10^7 buffers the pieces and segments of the general sweep are 480 MB
/// that need not be built for them.
fn pieces_are_disjoint(problem: &Problem, plan: &Plan) -> bool {
    // (segment start, segment end, piece's address range) for every non-empty piece: the
    // range travels with the segment, a lookup by piece in the sweep would be a cache miss
    // per segment (most of the check's time at 10^7 buffers).
    let mut starts: Vec<(u64, u64, (u64, u64))> = Vec::with_capacity(problem.len());
    Pieces::for_each(problem, plan, |buffer, range| {
        if range.0 != range.1 {
            problem.buffers()[buffer].for_each_live_segment(|segment| {
                starts.push((segment.start, segment.end, range));
            });
        }
    });
    crate::radix::sort_by_u64_key(&mut starts, |&(start, _, _)| start);
    let threads = if starts.len() >= PARALLEL_SWEEP_FROM {
        std::thread::available_parallelism().map_or(1, |n| n.get().min(MAX_SWEEPS))
    } else {
        1
    };
    shares_are_disjoint(&starts, threads)
}

/// The sweep of [`pieces_are_disjoint`] over `starts` (sorted by start) on `threads`
/// threads.
fn shares_are_disjoint(starts: &[(u64, u64, (u64, u64))], threads: usize) -> bool {
    if threads <= 1 {
        return sweep_is_disjoint(starts, 0);
    }
    // Each thread sweeps its share of the segments (by start), beginning with the
    // segments before it that are still live at its first start: each segment is then
    // tested against every earlier one live at its start, as in one sweep.
    let share = starts.len().div_ceil(threads);
    let disjoint = std::sync::atomic::AtomicBool::new(true);
    std::thread::scope(|scope| {
        for k in 1..threads {
            let disjoint = &disjoint;
            scope.spawn(move || {
                let (from, to) = (k * share, (k + 1) * share);
                let to = to.min(starts.len());
                if !sweep_is_disjoint(&starts[..to], from.min(to)) {
                    disjoint.store(false, std::sync::atomic::Ordering::Relaxed);
                }
            });
        }
        if !sweep_is_disjoint(&starts[..share], 0) {
            disjoint.store(false, std::sync::atomic::Ordering::Relaxed);
        }
    });
    disjoint.into_inner()
}

/// At least this many segments for [`pieces_are_disjoint`] to sweep on several threads
/// (issue #18: at 10^6 buffers with ~20,000 live, 0.33 s on one, 0.21 s on two; it was
/// 2^20).
const PARALLEL_SWEEP_FROM: usize = 1 << 17;

/// At most this many threads sweep (the sweep is bound by memory traffic).
const MAX_SWEEPS: usize = 4;

/// The sweep of [`pieces_are_disjoint`] over `starts[from..]` (sorted by start), the
/// active pieces at `starts[from]` being those of `starts[..from]` that are still live
/// then.
fn sweep_is_disjoint(starts: &[(u64, u64, (u64, u64))], from: usize) -> bool {
    use std::collections::BTreeMap;

    // offset -> end of the active pieces; the offset of each by segment end.
    let mut active: BTreeMap<u64, u64> = BTreeMap::new();
    let mut ends = crate::radix::MonotoneQueue::new();
    if let Some(&(first, _, _)) = starts.get(from) {
        for &(_, end, (offset, top)) in &starts[..from] {
            if end > first {
                // Two pieces live together at one offset overlap (the sweep of their
                // share finds them too).
                if active.insert(offset, top).is_some() {
                    return false;
                }
                ends.push(end, offset);
            }
        }
    }
    for &(start, end, (offset, top)) in &starts[from..] {
        ends.pop_until(start, |offset| {
            active.remove(&offset);
        });
        if active
            .range(..=offset)
            .next_back()
            .is_some_and(|(_, &below_top)| below_top > offset)
            || active
                .range(offset..)
                .next()
                .is_some_and(|(&above, _)| above < top)
        {
            return false;
        }
        active.insert(offset, top);
        ends.push(end, offset);
    }
    true
}

/// Every pair `(a, b)`, `a <= b`, of buffers live at a common step with pieces whose
/// address ranges intersect; sorted, without duplicates. `(a, a)` means that two pieces
/// of buffer `a` intersect (a buffer is always live together with itself).
fn sweep_overlapping_pairs(pieces: &Pieces, segments: &Segments) -> Vec<(u32, u32)> {
    let n = pieces.ranges.len();
    let mut owner = vec![0u32; n];
    for (buffer, range) in pieces.bounds.windows(2).enumerate() {
        owner[range[0]..range[1]].fill(buffer as u32);
    }
    let start = |p: usize| pieces.ranges[p].0;

    // Pieces ordered by (start, index); `rank[p]` is a piece's position in that order.
    let mut by_offset: Vec<u32> = (0..n as u32).collect();
    by_offset.sort_unstable_by_key(|&p| (start(p as usize), p));
    let sorted_offsets: Vec<u64> = by_offset.iter().map(|&p| start(p as usize)).collect();
    let mut rank = vec![0usize; n];
    for (position, &p) in by_offset.iter().enumerate() {
        rank[p as usize] = position;
    }
    // `below_end[p]`: how many pieces start below piece `p`'s end (a prefix of the order).
    // Found by walking the pieces in order of end alongside the starts, rather than by one
    // binary search per segment start, whose cache misses dominated at 10^6 buffers.
    let mut by_end: Vec<(u64, u32)> = (0..n as u32)
        .map(|p| (pieces.ranges[p as usize].1, p))
        .collect();
    by_end.sort_unstable();
    let mut below_end = vec![0u32; n];
    let mut count = 0usize;
    for &(end, p) in &by_end {
        while count < n && sorted_offsets[count] < end {
            count += 1;
        }
        below_end[p as usize] = count as u32;
    }
    drop(by_end);

    // (step, is_start, piece): at equal steps `false` (an end) sorts before `true`.
    let mut events: Vec<(u64, bool, u32)> = Vec::with_capacity(2 * segments.segments.len());
    for (p, &buffer) in owner.iter().enumerate() {
        for segment in segments.of(buffer as usize) {
            events.push((segment.start, true, p as u32));
            events.push((segment.end, false, p as u32));
        }
    }
    events.sort_unstable();

    let mut active = MaxTree::new(n);
    let mut pairs = Vec::new();
    for (_, is_start, p) in events {
        let p = p as usize;
        if !is_start {
            active.set(rank[p], 0);
            continue;
        }
        let (offset, end) = pieces.ranges[p];
        if offset == end {
            // An empty piece (a zero-size buffer) shares no address: never active.
            continue;
        }
        // Active pieces starting below `end` (a prefix of the order) and ending above
        // `offset` share addresses with this one.
        let id = owner[p];
        active.for_each_above(below_end[p] as usize, offset, |position| {
            let other = owner[by_offset[position] as usize];
            pairs.push((other.min(id), other.max(id)));
        });
        active.set(rank[p], end);
    }
    pairs.sort_unstable();
    pairs.dedup();
    pairs
}

/// A segment tree of `u64` values (all 0 at first) over positions `0..len`, answering
/// "which positions below `limit` hold a value above `threshold`" in
/// O((1 + answers) log len).
struct MaxTree {
    /// Number of leaves: a power of two, at least `len`.
    leaves: usize,
    /// `max[1]` is the root, `max[k]` the larger of `max[2k]` and `max[2k + 1]`, and
    /// leaf `p` is `max[leaves + p]`.
    max: Vec<u64>,
}

impl MaxTree {
    fn new(len: usize) -> MaxTree {
        // `len` counts buffers, at most `u32::MAX`: no overflow on 64-bit targets.
        let leaves = len.next_power_of_two();
        MaxTree {
            leaves,
            max: vec![0; 2 * leaves],
        }
    }

    /// Sets the value at `position < len`.
    fn set(&mut self, position: usize, value: u64) {
        let mut node = self.leaves + position;
        self.max[node] = value;
        while node > 1 {
            node /= 2;
            self.max[node] = self.max[2 * node].max(self.max[2 * node + 1]);
        }
    }

    /// Calls `found(position)` for every position `< limit` whose value is `> threshold`.
    fn for_each_above(&self, limit: usize, threshold: u64, mut found: impl FnMut(usize)) {
        // (node, first position it covers, number of positions it covers)
        let mut stack = vec![(1usize, 0usize, self.leaves)];
        while let Some((node, first, width)) = stack.pop() {
            if first >= limit || self.max[node] <= threshold {
                continue;
            }
            if width == 1 {
                found(first);
            } else {
                let half = width / 2;
                stack.push((2 * node + 1, first + half, half));
                stack.push((2 * node, first, half));
            }
        }
    }
}

/// Overflow, alignment, fixed-offset and (fragmented plans) extent-sum and first-extent
/// checks; the plan has one offset (and list) per buffer. Returns the recomputed arena
/// when every end fits.
fn per_buffer_checks(
    problem: &Problem,
    plan: &Plan,
    violations: &mut Vec<Violation>,
) -> Option<u64> {
    let mut arena = Some(0u64);
    for (i, (buffer, &offset)) in problem.buffers().iter().zip(&plan.offsets).enumerate() {
        let id = BufferId(i as u32);
        let mut ends = |start: u64, len: u64| match start.checked_add(len) {
            Some(end) => arena = arena.map(|a| a.max(end)),
            None => {
                arena = None;
                violations.push(Violation::AddressOverflow {
                    buffer: id,
                    name: buffer.name.clone(),
                    offset: start,
                    size: len,
                });
            }
        };
        match &plan.extents {
            None => ends(offset, buffer.size),
            Some(lists) => {
                let extents = &lists[i];
                for extent in extents {
                    ends(extent.offset, extent.len);
                }
                let sum = extents
                    .iter()
                    .try_fold(0u64, |sum, e| sum.checked_add(e.len));
                if sum != Some(buffer.size) {
                    violations.push(Violation::ExtentsSum {
                        buffer: id,
                        name: buffer.name.clone(),
                        sum,
                        size: buffer.size,
                    });
                }
                let first = extents.first().map(|e| e.offset);
                if first.is_some_and(|first| first != offset) || first.is_none() && offset != 0 {
                    violations.push(Violation::FirstExtentNotAtOffset {
                        buffer: id,
                        name: buffer.name.clone(),
                        offset,
                        first,
                    });
                }
            }
        }
        if offset % buffer.alignment != 0 {
            violations.push(Violation::Misaligned {
                buffer: id,
                name: buffer.name.clone(),
                offset,
                alignment: buffer.alignment,
            });
        }
        if let Some(fixed) = buffer.fixed_offset {
            if fixed != offset {
                violations.push(Violation::FixedOffsetMoved {
                    buffer: id,
                    name: buffer.name.clone(),
                    fixed,
                    offset,
                });
            }
        }
    }
    arena
}

/// The lowest address range that pieces of buffers `i` and `j` share, if any.
fn shared_addresses(pieces: &Pieces, i: usize, j: usize) -> Option<(u64, u64)> {
    pieces
        .of(i)
        .iter()
        .flat_map(|&(a, b)| pieces.of(j).iter().map(move |&(c, d)| (a.max(c), b.min(d))))
        .filter(|&(lo, hi)| lo < hi)
        .min()
}

/// Reports two pieces of buffer `i` that share addresses (the lowest shared range).
fn extents_overlap(problem: &Problem, pieces: &Pieces, i: usize, violations: &mut Vec<Violation>) {
    let own = pieces.of(i);
    let shared = own
        .iter()
        .enumerate()
        .flat_map(|(k, &(a, b))| own[k + 1..].iter().map(move |&(c, d)| (a.max(c), b.min(d))))
        .filter(|&(lo, hi)| lo < hi)
        .min();
    if let Some(addresses) = shared {
        violations.push(Violation::ExtentsOverlap {
            buffer: BufferId(i as u32),
            name: problem.buffers()[i].name.clone(),
            addresses,
        });
    }
}

fn overlap(
    problem: &Problem,
    i: usize,
    j: usize,
    steps: Lifetime,
    addresses: (u64, u64),
) -> Violation {
    let (i, j) = (i.min(j), i.max(j));
    Violation::Overlap {
        a: BufferId(i as u32),
        b: BufferId(j as u32),
        a_name: problem.buffers()[i].name.clone(),
        b_name: problem.buffers()[j].name.clone(),
        steps,
        addresses,
    }
}

fn conflict_checks(problem: &Problem, pieces: &Pieces, violations: &mut Vec<Violation>) {
    for &(a, b) in problem.conflicts() {
        if let Some(addresses) = shared_addresses(pieces, a.index(), b.index()) {
            violations.push(Violation::ConflictShared {
                a,
                b,
                a_name: problem.buffer(a).name.clone(),
                b_name: problem.buffer(b).name.clone(),
                addresses,
            });
        }
    }
}

fn claimed_arena_check(plan: &Plan, arena: u64, violations: &mut Vec<Violation>) {
    if let Some(claimed) = plan.arena_bytes {
        if claimed != arena {
            violations.push(Violation::ArenaMismatch {
                claimed,
                actual: arena,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::problem::Buffer;

    /// Runs both checkers, asserts they agree, and returns the report.
    fn both(problem: &Problem, plan: &Plan) -> Report {
        let report = check(problem, plan);
        assert_eq!(report, check_naive(problem, plan));
        report
    }

    fn plan(offsets: Vec<u64>) -> Plan {
        Plan {
            offsets,
            arena_bytes: None,
            extents: None,
        }
    }

    fn gapped(name: &str, size: u64, start: u64, end: u64, gaps: &[(u64, u64)]) -> Buffer {
        let mut buffer = Buffer::new(name, size, start, end);
        buffer.gaps = gaps
            .iter()
            .map(|&(start, end)| Lifetime { start, end })
            .collect();
        buffer
    }

    fn only(report: &Report) -> &Violation {
        assert_eq!(report.violations.len(), 1, "{:?}", report.violations);
        &report.violations[0]
    }

    proptest::proptest! {
        #[test]
        fn shared_sweeps_agree_with_one(
            pieces in proptest::collection::vec((0u64..30, 1u64..8, 0u64..40, 1u64..6), 0..30),
            threads in 2usize..5,
        ) {
            let mut starts: Vec<(u64, u64, (u64, u64))> = pieces
                .into_iter()
                .map(|(start, len, offset, size)| (start, start + len, (offset, offset + size)))
                .collect();
            starts.sort_by_key(|&(start, _, _)| start);
            proptest::prop_assert_eq!(
                shares_are_disjoint(&starts, threads),
                sweep_is_disjoint(&starts, 0)
            );
        }
    }

    #[test]
    fn an_overlap_across_the_shares_is_found() {
        // Piece 0 is live in every share; the last piece, in the last share, meets it.
        let mut starts = vec![(0, 100, (0, 10))];
        starts.extend((1..40).map(|t| (t, t + 1, (10 + t, 11 + t))));
        starts.push((50, 51, (5, 6)));
        assert!(!sweep_is_disjoint(&starts, 0));
        for threads in 2..5 {
            assert!(!shares_are_disjoint(&starts, threads));
        }
        starts.pop();
        for threads in 1..5 {
            assert!(shares_are_disjoint(&starts, threads));
        }
    }

    #[test]
    fn wrong_length_is_reported_alone() {
        let p = Problem::from_buffers(vec![Buffer::new("a", 4, 0, 1)]).unwrap();
        let report = both(&p, &plan(vec![0, 0]));
        assert_eq!(report.arena_bytes, None);
        let v = only(&report);
        assert_eq!(
            *v,
            Violation::WrongLength {
                buffers: 1,
                offsets: 2
            }
        );
        assert!(v.to_string().contains("2 offsets"), "{v}");
    }

    #[test]
    fn address_overflow_is_reported_by_name() {
        let p = Problem::from_buffers(vec![Buffer::new("big", 8, 0, 1)]).unwrap();
        let report = both(&p, &plan(vec![u64::MAX - 3]));
        assert_eq!(report.arena_bytes, None);
        let v = only(&report);
        assert!(matches!(
            v,
            Violation::AddressOverflow {
                buffer: BufferId(0),
                ..
            }
        ));
        assert!(v.to_string().contains("'big'"), "{v}");
    }

    #[test]
    fn overflowing_buffers_extend_to_the_end_of_the_address_space() {
        let p = Problem::from_buffers(vec![
            Buffer::new("wraps", 8, 0, 2),
            Buffer::new("below", 3, 1, 3),
            Buffer::new("at_max", 1, 0, 3),
        ])
        .unwrap();
        let max = u64::MAX;
        let report = both(&p, &plan(vec![max - 2, max - 4, max]));
        assert_eq!(report.arena_bytes, None);
        assert!(report.violations.contains(&Violation::Overlap {
            a: BufferId(0),
            b: BufferId(1),
            a_name: "wraps".into(),
            b_name: "below".into(),
            steps: Lifetime { start: 1, end: 2 },
            addresses: (max - 2, max - 1),
        }));
        // Two overflows, one overlap; the buffer at u64::MAX covers no address.
        assert_eq!(report.violations.len(), 3, "{:?}", report.violations);
    }

    #[test]
    fn misaligned_offset_is_reported_by_name() {
        let mut b = Buffer::new("vec", 8, 0, 1);
        b.alignment = 16;
        let p = Problem::from_buffers(vec![b]).unwrap();
        let report = both(&p, &plan(vec![8]));
        let v = only(&report);
        assert_eq!(
            *v,
            Violation::Misaligned {
                buffer: BufferId(0),
                name: "vec".into(),
                offset: 8,
                alignment: 16
            }
        );
        assert!(v.to_string().contains("'vec'"), "{v}");
    }

    #[test]
    fn moved_fixed_offset_is_reported_by_name() {
        let mut b = Buffer::new("pinned", 8, 0, 1);
        b.fixed_offset = Some(32);
        let p = Problem::from_buffers(vec![b]).unwrap();
        assert!(both(&p, &plan(vec![32])).is_valid());
        let report = both(&p, &plan(vec![0]));
        let v = only(&report);
        assert_eq!(
            *v,
            Violation::FixedOffsetMoved {
                buffer: BufferId(0),
                name: "pinned".into(),
                fixed: 32,
                offset: 0
            }
        );
        assert!(v.to_string().contains("'pinned'"), "{v}");
    }

    #[test]
    fn overlap_is_reported_by_name_with_steps_and_addresses() {
        let p = Problem::from_buffers(vec![Buffer::new("x", 8, 0, 5), Buffer::new("y", 8, 3, 9)])
            .unwrap();
        let report = both(&p, &plan(vec![4, 0]));
        assert_eq!(report.arena_bytes, Some(12));
        let v = only(&report);
        assert_eq!(
            *v,
            Violation::Overlap {
                a: BufferId(0),
                b: BufferId(1),
                a_name: "x".into(),
                b_name: "y".into(),
                steps: Lifetime { start: 3, end: 5 },
                addresses: (4, 8),
            }
        );
        let message = v.to_string();
        assert!(
            message.contains("'x'") && message.contains("'y'"),
            "{message}"
        );
    }

    #[test]
    fn conflict_pair_sharing_bytes_is_reported_by_name() {
        let buffers = vec![Buffer::new("p", 8, 0, 2), Buffer::new("q", 8, 5, 9)];
        let p = Problem::new(buffers, [(BufferId(1), BufferId(0))]).unwrap();
        assert!(both(&p, &plan(vec![0, 8])).is_valid());
        let report = both(&p, &plan(vec![0, 6]));
        let v = only(&report);
        assert_eq!(
            *v,
            Violation::ConflictShared {
                a: BufferId(0),
                b: BufferId(1),
                a_name: "p".into(),
                b_name: "q".into(),
                addresses: (6, 8),
            }
        );
        let message = v.to_string();
        assert!(
            message.contains("'p'") && message.contains("'q'"),
            "{message}"
        );
    }

    #[test]
    fn wrong_arena_claim_is_reported() {
        let p = Problem::from_buffers(vec![Buffer::new("a", 8, 0, 1)]).unwrap();
        let mut wrong = plan(vec![4]);
        wrong.arena_bytes = Some(8);
        let report = both(&p, &wrong);
        let v = only(&report);
        assert_eq!(
            *v,
            Violation::ArenaMismatch {
                claimed: 8,
                actual: 12
            }
        );
        assert!(v.to_string().contains("12"), "{v}");
        wrong.arena_bytes = Some(12);
        assert!(both(&p, &wrong).is_valid());
    }

    #[test]
    fn several_violations_are_all_reported_sorted() {
        let mut aligned = Buffer::new("aligned", 4, 0, 10);
        aligned.alignment = 8;
        let mut fixed = Buffer::new("fixed", 4, 0, 10);
        fixed.fixed_offset = Some(100);
        let buffers = vec![
            aligned,
            fixed,
            Buffer::new("c", 4, 5, 6),
            Buffer::new("d", 4, 20, 30),
        ];
        let p = Problem::new(buffers, [(BufferId(2), BufferId(3))]).unwrap();
        let mut bad = plan(vec![2, 0, 1, 3]);
        bad.arena_bytes = Some(1);
        let report = both(&p, &bad);
        let kinds: Vec<String> = report
            .violations
            .iter()
            .map(|v| {
                format!("{v:?}")
                    .split([' ', '{'])
                    .next()
                    .unwrap()
                    .to_string()
            })
            .collect();
        assert_eq!(
            kinds,
            [
                "Misaligned",
                "FixedOffsetMoved",
                "Overlap",
                "Overlap",
                "Overlap",
                "ConflictShared",
                "ArenaMismatch"
            ]
        );
        let mut sorted = report.violations.clone();
        sorted.sort();
        assert_eq!(sorted, report.violations);
    }

    #[test]
    fn lifetimes_are_half_open() {
        let p = Problem::from_buffers(vec![
            Buffer::new("first", 8, 0, 3),
            Buffer::new("second", 8, 3, 9),
            Buffer::new("third", 8, 9, 10),
        ])
        .unwrap();
        assert!(both(&p, &plan(vec![0, 0, 0])).is_valid());
    }

    #[test]
    fn address_ranges_are_half_open() {
        let p = Problem::from_buffers(vec![
            Buffer::new("low", 4, 0, 9),
            Buffer::new("high", 4, 0, 9),
        ])
        .unwrap();
        assert!(both(&p, &plan(vec![0, 4])).is_valid());
        assert!(both(&p, &plan(vec![4, 0])).is_valid());
        assert!(!both(&p, &plan(vec![3, 0])).is_valid());
    }

    #[test]
    fn a_buffer_inside_a_gap_may_share_addresses() {
        let p = Problem::from_buffers(vec![
            gapped("gappy", 8, 0, 10, &[(2, 5)]),
            Buffer::new("inside", 8, 2, 5),
        ])
        .unwrap();
        assert!(both(&p, &plan(vec![0, 0])).is_valid());
    }

    #[test]
    fn a_pair_meeting_in_several_segments_is_reported_once_with_its_first_steps() {
        let p = Problem::from_buffers(vec![
            gapped("a", 8, 0, 20, &[(2, 5), (8, 12)]),
            gapped("b", 8, 3, 20, &[(10, 15)]),
        ])
        .unwrap();
        let report = both(&p, &plan(vec![0, 4]));
        match only(&report) {
            Violation::Overlap {
                steps, addresses, ..
            } => {
                assert_eq!(*steps, Lifetime { start: 5, end: 8 });
                assert_eq!(*addresses, (4, 8));
            }
            v => panic!("expected an overlap, got {v:?}"),
        }
    }

    #[test]
    fn every_overlapping_pair_is_reported_when_all_offsets_are_zero() {
        let buffers: Vec<Buffer> = (0..30)
            .map(|i| Buffer::new(format!("b{i}"), 1 + i % 7, i % 5, 10 + i % 3))
            .collect();
        let p = Problem::from_buffers(buffers).unwrap();
        let report = both(&p, &plan(vec![0; 30]));
        assert_eq!(report.violations.len(), 30 * 29 / 2);
    }

    #[test]
    fn a_huge_buffer_overlaps_exactly_the_small_ones_under_it() {
        // Small buffers stacked at 0, 1, 2, …; a huge one placed over the last ten.
        let n = 200u64;
        let mut buffers: Vec<Buffer> = (0..n)
            .map(|i| Buffer::new(format!("s{i}"), 1, 0, 10))
            .collect();
        buffers.push(Buffer::new("huge", 1 << 40, 5, 6));
        let p = Problem::from_buffers(buffers).unwrap();
        let mut offsets: Vec<u64> = (0..n).collect();
        offsets.push(n - 10);
        let report = both(&p, &plan(offsets));
        assert_eq!(report.violations.len(), 10);
    }

    /// The sweep's own pairs, before `check` recomputes their steps and addresses, must
    /// be exactly the overlapping pairs: no pair that only touches in time or address.
    #[test]
    fn sweep_finds_exactly_the_overlapping_pairs() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = |bound: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % bound
        };
        for _ in 0..300 {
            let n = 1 + next(25) as usize;
            let buffers: Vec<Buffer> = (0..n)
                .map(|i| {
                    let start = next(10);
                    let end = start + 1 + next(6);
                    let mut b = Buffer::new(format!("b{i}"), 1 + next(4), start, end);
                    if end - start > 2 && next(3) == 0 {
                        b.gaps = vec![Lifetime {
                            start: start + 1,
                            end: start + 2,
                        }];
                    }
                    b
                })
                .collect();
            let p = Problem::from_buffers(buffers).unwrap();
            let offsets: Vec<u64> = (0..n).map(|_| next(12)).collect();
            let plan = plan(offsets);
            let expected: Vec<(u32, u32)> = check_naive(&p, &plan)
                .violations
                .iter()
                .filter_map(|v| match v {
                    Violation::Overlap { a, b, .. } => Some((a.0, b.0)),
                    _ => None,
                })
                .collect();
            let found = sweep_overlapping_pairs(&Pieces::new(&p, &plan), &Segments::new(&p));
            assert_eq!(found, expected, "{p:?} {plan:?}");
        }
    }

    #[test]
    fn empty_problem_is_valid() {
        let p = Problem::default();
        let report = both(&p, &plan(vec![]));
        assert!(report.is_valid());
        assert_eq!(report.arena_bytes, Some(0));
    }

    fn fragmented(lists: &[&[(u64, u64)]]) -> Plan {
        let extents: Vec<Vec<crate::plan::Extent>> = lists
            .iter()
            .map(|l| {
                l.iter()
                    .map(|&(offset, len)| crate::plan::Extent { offset, len })
                    .collect()
            })
            .collect();
        Plan {
            offsets: extents
                .iter()
                .map(|l| l.first().map_or(0, |e| e.offset))
                .collect(),
            arena_bytes: None,
            extents: Some(extents),
        }
    }

    #[test]
    fn a_valid_fragmented_plan_passes_and_claims_its_highest_extent() {
        let p = Problem::from_buffers(vec![Buffer::new("a", 4, 0, 2), Buffer::new("b", 6, 1, 3)])
            .unwrap();
        // b wraps around a: [0, 2) and [6, 10).
        let report = both(&p, &fragmented(&[&[(2, 4)], &[(0, 2), (6, 4)]]));
        assert!(report.is_valid(), "{:?}", report.violations);
        assert_eq!(report.arena_bytes, Some(10));
    }

    #[test]
    fn extents_that_do_not_sum_to_the_size_are_reported_by_name() {
        let p = Problem::from_buffers(vec![Buffer::new("short", 6, 0, 1)]).unwrap();
        let report = both(&p, &fragmented(&[&[(0, 2), (4, 3)]]));
        let v = only(&report);
        assert_eq!(
            *v,
            Violation::ExtentsSum {
                buffer: BufferId(0),
                name: "short".into(),
                sum: Some(5),
                size: 6
            }
        );
        assert!(v.to_string().contains("'short'"), "{v}");
        let report = both(&p, &fragmented(&[&[(0, u64::MAX), (0, 7)]]));
        assert!(report
            .violations
            .iter()
            .any(|v| matches!(v, Violation::ExtentsSum { sum: None, .. })));
    }

    #[test]
    fn overlapping_extents_of_one_buffer_are_reported_by_name() {
        let p = Problem::from_buffers(vec![Buffer::new("twice", 6, 0, 1)]).unwrap();
        let report = both(&p, &fragmented(&[&[(0, 3), (2, 3)]]));
        let v = only(&report);
        assert_eq!(
            *v,
            Violation::ExtentsOverlap {
                buffer: BufferId(0),
                name: "twice".into(),
                addresses: (2, 3)
            }
        );
        assert!(v.to_string().contains("'twice'"), "{v}");
    }

    #[test]
    fn extents_of_two_buffers_that_overlap_are_reported_with_both_names() {
        let buffers = vec![
            Buffer::new("x", 4, 0, 2),
            Buffer::new("y", 4, 1, 3),
            Buffer::new("z", 2, 5, 6),
        ];
        let p = Problem::new(buffers, [(BufferId(0), BufferId(2))]).unwrap();
        // y's second extent lies over x's; z shares x's first bytes (a conflict pair).
        let report = both(&p, &fragmented(&[&[(0, 4)], &[(8, 2), (3, 2)], &[(0, 2)]]));
        assert_eq!(report.violations.len(), 2, "{:?}", report.violations);
        assert_eq!(
            report.violations[0],
            Violation::Overlap {
                a: BufferId(0),
                b: BufferId(1),
                a_name: "x".into(),
                b_name: "y".into(),
                steps: Lifetime { start: 1, end: 2 },
                addresses: (3, 4),
            }
        );
        assert!(matches!(
            &report.violations[1],
            Violation::ConflictShared { a_name, b_name, addresses: (0, 2), .. }
                if a_name == "x" && b_name == "z"
        ));
    }

    #[test]
    fn a_first_extent_away_from_the_offset_is_reported_by_name() {
        let p = Problem::from_buffers(vec![Buffer::new("moved", 4, 0, 1)]).unwrap();
        let mut plan = fragmented(&[&[(8, 4)]]);
        plan.offsets[0] = 0;
        let report = both(&p, &plan);
        let v = only(&report);
        assert_eq!(
            *v,
            Violation::FirstExtentNotAtOffset {
                buffer: BufferId(0),
                name: "moved".into(),
                offset: 0,
                first: Some(8)
            }
        );
        assert!(v.to_string().contains("'moved'"), "{v}");
    }

    #[test]
    fn the_first_extent_is_held_to_the_alignment_and_the_others_are_not() {
        let mut b = Buffer::new("vec", 8, 0, 1);
        b.alignment = 8;
        let p = Problem::from_buffers(vec![b]).unwrap();
        assert!(both(&p, &fragmented(&[&[(16, 5), (3, 3)]])).is_valid());
        let report = both(&p, &fragmented(&[&[(3, 5), (16, 3)]]));
        assert!(matches!(
            only(&report),
            Violation::Misaligned { offset: 3, .. }
        ));
    }

    #[test]
    fn a_wrong_number_of_extent_lists_is_reported_alone() {
        let p = Problem::from_buffers(vec![Buffer::new("a", 4, 0, 1)]).unwrap();
        let mut plan = fragmented(&[&[(0, 4)]]);
        plan.extents.as_mut().unwrap().push(Vec::new());
        let report = both(&p, &plan);
        assert_eq!(
            *only(&report),
            Violation::WrongExtentsLength {
                buffers: 1,
                lists: 2
            }
        );
        assert!(only(&report).to_string().contains("2 lists"));
    }
}
