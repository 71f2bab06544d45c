//! The placement engine shared by every greedy planner.
//!
//! A greedy planner decides an *order*; the engine does the rest. It places buffers one at
//! a time, each at an offset where it shares no byte with the already-placed buffers that
//! it must not share bytes with: those live together with it (some live segment of each
//! overlaps in time) and its explicit conflict partners (at any time).
//!
//! ```text
//!  address                                    placing `x`, live over [s, e):
//!    ▲      ┌────────────┐                    gather the address ranges of the placed
//!    │      │     c      │   ┌────┐           buffers overlapping [s, e) in time
//!    │  ┌───┴──┐         │   │ d  │           (a, b, c; not d, not f), sort them by
//!    │  │  b   │─────────┘   └────┘           offset and scan for the gaps between
//!    │  └──────┘  ░░gap░░                     them; put `x` in the first (first-fit)
//!    │ ┌──────────────┐         ┌────┐        or the smallest (best-fit) gap that
//!    │ │      a       │         │ f  │        holds it, aligned, else on top.
//!    └─┴──────────────┴─────────┴────┴──▶ time
//!          s ◄──── x ────► e
//! ```
//!
//! # Finding the placed buffers live together with a segment
//!
//! Every live segment `[a, b)` of every buffer is known in advance, so the engine
//! compresses time to the sorted distinct segment *starts* `t_0 < t_1 < … < t_{T-1}` and
//! keeps two static segment trees over these `T` leaves (iterative layout: leaves at
//! `T..2T`, node `i` has children `2i`, `2i + 1`). A placed segment `[a, b)` overlaps the
//! queried segment `[s, e)` iff `a < e` and `s < b`, which splits into two disjoint cases:
//!
//! 1. `s <= a < e`: its start lies in `[s, e)`. Each placed segment is appended to the
//!    lists of all `O(log T)` *ancestors* of the leaf of its start (`inside`); the query
//!    visits the `O(log T)` canonical nodes covering the leaves `[leaf(s), leaf(e))` and
//!    reads their lists whole: every segment starting in `[s, e)` sits in exactly one.
//! 2. `a < s < b`: it stabs the point `s`. Each placed segment is appended to the lists of
//!    the `O(log T)` *canonical nodes* covering the leaves whose coordinate lies strictly
//!    inside `(a, b)` (`covering`); the query walks root → `leaf(s)` and reads every list on
//!    the way: a segment is on that path exactly when `a < s < b`, and then exactly once.
//!
//! That is [`Layout::Starts`]. From 20,000 segments, when lifetimes are long against the
//! horizon (a mean span of an eighth of the leaves or more), the engine uses
//! [`Layout::Subtrees`] instead: a segment goes to the `covering` lists of its canonical
//! nodes and to the `inside` lists of those and of all their ancestors, and a query
//! reads `inside` at its canonical nodes and `covering` above them. A large canonical
//! node's `inside` list then holds nearly every buffer live with the query. First fit
//! there searches each list on its own from a rising candidate instead of merging them
//! ([`Engine::jump`]): each list keeps the widest gap of every chunk of its ranges
//! ([`Summary`]) and skips the chunks too narrow for the buffer. From 100,000 segments
//! with many live at once (5,000 or more at a leaf on average) and moderate lifetimes,
//! the engine uses [`Layout::Blocks`]: time cut into blocks, each block (and each run of
//! four) keeping the union of every segment live in it, which is nearly the whole union a
//! placement must avoid; first fit there searches the lists on their own as in
//! `Subtrees`, without the summaries. Every layout places every buffer at the same
//! offset.
//!
//! # Node lists are unions
//!
//! Whenever a node is visited, *all* of its list is relevant, and the gap scan only needs
//! the union of the address ranges. So a node does not keep one entry per placed segment:
//! it keeps the union of their ranges as a sorted list of disjoint, non-touching
//! `(lo, hi)` ranges (inserting merges the new range with those it overlaps or touches).
//! In a tight packing neighbouring buffers touch, so the unions are short: on idealloc's
//! `Y_1` (62,185 buffers) a placement gathered 2,800 overlapping buffers on average as raw
//! ranges but only 200 union ranges, and planning went from 2.8 s to 0.2 s.
//!
//! # Memory layout
//!
//! At 10^6 buffers a placement is bound by memory latency, not by work: it visits about
//! 40 nodes spread over hundreds of MB, a cache miss or more each. Four things cut the
//! misses (issue #18), none of which changes a placement:
//!
//! - The per-buffer arrays (size and alignment, segments, conflict partners, offsets,
//!   placed flags) are indexed by *rank*, the buffer's position in the greedy order
//!   ([`Engine::ordered`]), so a greedy run reads them one after the other.
//!
//! - Both lists of a node sit side by side in one cache-line aligned [`Node`] (128
//!   bytes), with its `read` flags: the insertion writes lists of (nearly) the nodes
//!   the query just read, so it finds them in the lines the query brought in.
//! - A list of at most [`INLINE`] ranges (most lists low in the tree) sits inline in the
//!   node; a longer one in a `Vec` of its own.
//! - Addresses are counted in units of the problem's granularity (the gcd of the sizes
//!   and fixed offsets, with the alignments that neither divide it nor are multiples of it
//!   folded in: [`granularity_and_unfixed`]), in which every offset a placement can give
//!   is a whole number. The lists keep them as `u32` ([`Word`]), 8 bytes a range instead
//!   of 16, whenever the arena fits: half the lines to search and to move. A run whose
//!   arena turns out not to fit is made again with `u64` lists, and one whose max-live
//!   bound already does not fit starts with them.
//! - Before the query, [`Engine::prefetch`] reads a little of every node the placement
//!   will visit in one loop whose steps do not depend on each other, so that their misses
//!   overlap instead of coming one after the other inside the query's dependent steps.
//!
//! # Scanning the merged runs lazily
//!
//! The gathered ranges come as `r = O(log T)` sorted runs (one per visited node list, read
//! in place, plus the placed conflict partners, sorted on their own). A tournament tree of
//! the runs' next ranges ([`Tournament`]) hands them out in order of start, and the scan
//! consumes them as they
//! come, keeping the highest end seen so far: each time the next range starts above it
//! there is a gap. The candidate offset in a gap is its start rounded up to the buffer's
//! alignment (checked arithmetic: an overflowing candidate does not fit; an overflowing
//! top gives [`PlanError::ArenaOverflow`]). First-fit stops at the first gap that holds
//! the buffer, best-fit at an exact fit, and the ranges above that point are never read
//! (issue #18: with about 20,000 buffers live at once, first-fit read less than half of
//! the ranges it gathered; every run used to be copied and merged whole first). Ranges
//! may overlap or repeat (a buffer with several live segments is found once per segment;
//! a conflict partner may also be live together), and ranges with the same start may come
//! in any order: harmless, since the scan works on the union, so no de-duplication by
//! buffer is needed. A node list's ranges ending at or below the floor of
//! [`Fit::Stacked`] are skipped by a binary search: they cannot open a gap nor raise the
//! highest end past the floor.
//!
//! # Two threads
//!
//! From 200,000 buffers, a first-fit run without conflict pairs, fixed offsets or a
//! deadline is split in two at a start that leaves both halves as many buffers of their
//! own, and each half placed on its own thread by an engine of its own; the buffers live
//! across the cut are placed by both, at the offset the two agree on, which is the one
//! engine's ([`Halves`]). The plan is the same as on one thread.
//!
//! # Zero-size buffers
//!
//! A buffer of size 0 occupies nothing: [`Engine::find`] gives it offset 0 and
//! [`Engine::place`] records its offset without adding a range anywhere (an empty range
//! in a node list would split the gaps around it), so the other buffers are placed exactly
//! as without it. A fixed one is placed at its offset without a clash check. Its segments
//! are not even compressed into the leaves.
//!
//! # Complexity
//!
//! With `n` buffers, `T <= n + gaps` distinct segment starts and `k` the number of union
//! ranges read for one placement (at most the number of placed buffers overlapping it in
//! time plus its placed conflict partners, usually far fewer), one placement costs
//! `O(log T + k log log T)`: `O(log T)` nodes visited, at most `k` ranges taken from a
//! tournament of `O(log T)` runs and scanned (only those below the chosen gap for
//! first-fit).
//! Recording a placed segment costs `O(log T)` binary searches plus the `Vec` insertions
//! into `O(log T)` node lists (a `memmove` of the list's tail: `O(u)` for a list of `u`
//! union ranges in the worst case, which the unions keep small in practice). Building the
//! engine is `O(n log n)`; memory is `O(n log T)` at most, plus a fixed 128 bytes per node
//! (`2T` nodes: 256 MB at `T = 10^6`). A whole greedy run is
//! `O(n log n + K log log T)` for `K` the total ranges read, against the `Θ(n²)` of
//! scanning every placed buffer for every placement.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::time::Instant;

use super::granularity::granularity_and_unfixed;
use super::PlanError;
use crate::bound::max_live;
use crate::plan::Plan;
use crate::problem::{Buffer, Lifetime, Problem};

/// Which gap a buffer goes into when several hold it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fit {
    /// The lowest offset that holds it (TFLite Micro's greedy planner).
    First,
    /// The gap that leaves the least room above the aligned buffer, ties to the lowest
    /// offset (TFLite's arena planner, XLA's heap simulator).
    Best,
    /// *Stacked* with the source's pairing (the `strip` method, corrected again): every placed
    /// buffer is paired with its *successor*, the first buffer placed after it that
    /// overlaps it in time, and the successor sits on it. A buffer goes to the lowest
    /// offset that holds it at or above the highest top of the placed buffers it is the
    /// successor of (those overlapping it in time that no buffer placed since overlaps),
    /// or, being nobody's successor, anywhere from 0 (bottom-aligned). "At or above"
    /// rather than "at": a buffer placed earlier may sit there, and the plan must stay
    /// valid. Needs an engine made by [`Engine::stacking`]; elsewhere it reads as
    /// [`Fit::First`].
    Stacked,
    /// *Stacked* with the earlier reading of the pairing: the lowest offset that holds it
    /// at or above the top of the *previous* placed buffer overlapping it in time, the one
    /// placed last among those (0 when none does). Needs an engine made by
    /// [`Engine::stacking`]; elsewhere it reads as [`Fit::First`].
    StackedPrevious,
}

/// The unsigned integer that an engine's node lists keep addresses in, counted in units
/// of the problem's granularity ([`granularity_and_unfixed`]). A run takes `u32` when
/// [`u32_may_hold`] says the arena may fit: half the bytes per range, so half the lines
/// searched and moved (issue #18: 10^6 buffers with ~20,000 live, 6.1-6.5 → 4.7-4.9 s of
/// `strip`'s placements, the same plan). A placement whose top does not fit then fails
/// ([`Engine::word_overflow`]), and the run is made again with `u64`
/// ([`plan_in_order_reading`], `strip`'s peak suppression). Engines of either word place
/// every buffer at the same offset.
pub(crate) trait Word:
    Copy + Ord + Default + std::fmt::Debug + Into<u64> + Send + Sync
{
    /// The largest address it holds.
    const MAX: u64;
    /// `x`, which is at most [`Word::MAX`].
    fn narrow(x: u64) -> Self;
}

impl Word for u32 {
    const MAX: u64 = u32::MAX as u64;
    fn narrow(x: u64) -> u32 {
        debug_assert!(x <= <u32 as Word>::MAX);
        x as u32
    }
}

impl Word for u64 {
    const MAX: u64 = u64::MAX;
    fn narrow(x: u64) -> u64 {
        x
    }
}

/// One placed segment's address range, `(offset, offset + size)`, in units.
type Range<W> = (W, W);

/// A run as [`Engine::jump`] searches it: its ranges, and its [`Summary`] if it has one.
type Searched<'a, W> = (&'a [Range<W>], Option<&'a [u64]>);

/// One node of the segment tree: its two lists side by side, so that a placement, which
/// reads one list of a node and then writes the other (the query and the insertion
/// visit nearly the same nodes), finds the second in the cache lines it just read. What
/// each list holds depends on the engine's [`Layout`].
#[derive(Clone, Debug, Default)]
#[repr(align(64))]
struct Node<W: Word> {
    /// Read where the node is one of the query's canonical nodes: the placed segments
    /// that start below the node ([`Layout::Starts`]), or that are stored at the node or
    /// below it ([`Layout::Subtrees`]).
    inside: List<W>,
    /// Placed segments that cover every leaf below the node: those covering (strictly)
    /// every start below it, read on the query's path to its start ([`Layout::Starts`]);
    /// or those stored at the node, read above the query's canonical nodes
    /// ([`Layout::Subtrees`]).
    covering: List<W>,
    /// Some query reads the node's `inside` list. Every segment is known in advance, and
    /// the lists that no query reads are never kept: the plans are the same, and the
    /// longest lists are not paid for (issue #18: a third of `strip`'s time on 10^5 random
    /// buffers went into keeping them).
    read_inside: bool,
    /// Some query reads the node's `covering` list.
    read_covering: bool,
}

// Two cache lines, whatever the lists hold.
const _: () = assert!(std::mem::size_of::<Node<u64>>() == 128);
const _: () = assert!(std::mem::size_of::<Node<u32>>() <= 128);

/// Which placed segments the node lists hold; both find the same ones for a query (every
/// placed segment sharing a leaf with it), and so give the same placements.
///
/// - `Starts`: a segment is in the `inside` lists of the ancestors of its start leaf and
///   in the `covering` lists of the canonical nodes of the leaves strictly inside it; a
///   query reads `inside` at the canonical nodes of its leaves (the segments starting
///   among them) and `covering` on the path from its start leaf to the root (the
///   segments that started before and still run).
/// - `Subtrees`: a segment is in the `covering` lists of the canonical nodes of its
///   leaves, and in the `inside` lists of those and of all their ancestors; a query reads
///   `inside` at its canonical nodes and `covering` at their strict ancestors (two nodes
///   share a leaf exactly when one is the other or above it).
///
/// - `Blocks { shift }`: time is cut into aligned *blocks* of `2^shift` leaves, and the
///   engine's leaves are padded to a power of two so that every node below the blocks
///   lies inside one. A segment is in the *block lists* of the blocks it meets and the
///   *quad lists* of the runs of four blocks it meets (the [`Engine::extra`] lists);
///   in the *ends* lists of the ancestors of its last leaf below block size; in the
///   `inside` lists of the ancestors of its start leaf below block size; and in the
///   `covering` lists of the canonical nodes of the leaves strictly inside it, where a
///   canonical node of block size or above stands for its descendants of block size,
///   which get the range instead. A query whose leaves hold a whole block reads the
///   block (or quad) lists of its whole blocks, the ends lists of the canonical nodes
///   of its leaves before them (segments met only there end there) and the `inside`
///   lists of those after them (segments met only there start there). A query without
///   a whole block reads as in `Starts`, its path stopping at block size.
///
/// With `Starts`, a segment is stored in fewer lists; but the buffers live with a long
/// lifetime are spread over the lists of ~20 nodes that interleave, and a placement reads
/// them one by one. With `Subtrees`, the `inside` list of a large canonical node holds
/// nearly every buffer live with it, and first fit searches each list on its own with
/// the chunk summaries ([`Engine::jump`]): issue #18, 300,000 buffers all live at once
/// took 440 s to place with `Starts` and take 1.7 s with `Subtrees`; on short lifetimes
/// `Subtrees` costs 1.5-1.8×. With `Blocks`, a block or quad list holds every buffer
/// live with any of its leaves, so it has about as few ranges as the union of all the
/// ranges a placement must avoid, while `Starts` spreads that union over ~14 lists
/// whose pieces interleave: with ~20,000 buffers live at once, a placement reads a
/// third of the ranges, for 2.4 times the insertions (doc/planners.md, eleventh and
/// twelfth passes). [`Layout::of`] chooses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Layout {
    Starts,
    Subtrees,
    Blocks { shift: u32 },
}

impl Layout {
    /// `Subtrees` when there are at least [`Layout::MANY`] segments and they span, on
    /// average, at least [`Layout::LONG`] of the leaves; else `Blocks` when there are at
    /// least [`Layout::CROWDED_FROM`] segments, at least [`Layout::CROWDED`] of them
    /// live at a leaf on average, and they span [`Layout::BLOCKS_PER_SPAN`] blocks of
    /// 4 leaves or more on average (blocks as near that count as a power of two gives);
    /// else `Starts`.
    fn of(segments: &[Segment], leaves: usize) -> Layout {
        if segments.len() < Layout::MANY {
            return Layout::Starts;
        }
        let spans: u128 = segments
            .iter()
            .map(|s| u128::from(s.end_bound - s.start_leaf))
            .sum();
        let n = segments.len() as u128;
        if spans * Layout::LONG >= n * leaves as u128 {
            return Layout::Subtrees;
        }
        let per_block = spans / n / Layout::BLOCKS_PER_SPAN;
        if segments.len() >= Layout::CROWDED_FROM
            && spans >= Layout::CROWDED * leaves as u128
            && per_block >= 4
        {
            // The largest power of two at most `per_block`, and at most 2^20 leaves.
            let shift = (127 - per_block.leading_zeros()).min(20);
            return Layout::Blocks { shift };
        }
        Layout::Starts
    }

    /// The mean span, in leaves, from which [`Layout::Subtrees`] is chosen: one `LONG`-th
    /// of all the leaves.
    const LONG: u128 = 8;
    /// The fewest segments for which [`Layout::Subtrees`] is chosen. Below, the lists of
    /// `Starts` are faster: on the benchmark files with long lifetimes (at most 1,042
    /// buffers), `Subtrees` took 1.5-1.7× as long, with the same plans.
    const MANY: usize = 20_000;
    /// The fewest segments for which [`Layout::Blocks`] is chosen.
    const CROWDED_FROM: usize = 100_000;
    /// The fewest segments live at a leaf, on average, for which [`Layout::Blocks`] is
    /// chosen. Set between two measurements (issue #18, `strip`'s first placement, the
    /// same plans either way): random lifetimes with ~20,000 live at 10^6 buffers took
    /// 18.8 s with `Starts` and 9.9 s with blocks, but idealloc's `Y_1` copied 16 times
    /// (2,580 live on average, a tight packing whose unions are short) 2.0 s against
    /// 2.8 s.
    const CROWDED: u128 = 5_000;
    /// How many blocks a mean segment spans in [`Layout::Blocks`] (at least; fewer than
    /// twice as many).
    const BLOCKS_PER_SPAN: u128 = 6;
}

/// The longest node list that [`Engine::insert_into`] searches on its own rather than in
/// lockstep with the others.
const SHORT: usize = 16;

/// How many ranges a node list holds inside the node, without an allocation of its own.
const INLINE: usize = 3;

/// A node list: a sorted list of disjoint, non-touching address ranges. Short ones (most
/// lists low in the tree) sit inline, longer ones in a `Vec` with their [`Summary`]; a
/// list that shrinks back (a rollback) may stay in its `Vec`.
#[derive(Clone, Debug)]
enum List<W: Word> {
    Inline(u8, [Range<W>; INLINE]),
    Heap(Vec<Range<W>>, Summary),
}

/// How many ranges of a long node list share one entry of its summary.
const CHUNK: usize = 32;

/// Where a long node list's summary is, and how much of it is up to date.
///
/// The summary, kept in the engine's [`Widest`] (so that a [`Node`] stays two cache
/// lines), is the widest gap in each chunk of [`CHUNK`] ranges of the list, so that the
/// search for a gap that holds a buffer ([`first_fit_in`]) skips the chunks whose gaps
/// are all narrower. The gap *before* range `k` is the room between range `k - 1`'s end
/// (0 for `k = 0`) and range `k`'s start; chunk `j` has the gaps before ranges
/// `j·CHUNK..(j+1)·CHUNK`. An edit at position `p` shifts every range after it, so it
/// only marks the chunks from `p / CHUNK` on as stale; [`List::refresh`] brings them up
/// to date when the list is next searched.
#[derive(Clone, Copy, Debug)]
struct Summary {
    /// Its index in [`Widest`]; `u32::MAX` until the list is first refreshed.
    index: u32,
    /// How many leading chunks of it are up to date.
    fresh: u32,
}

impl Summary {
    const NONE: Summary = Summary {
        index: u32::MAX,
        fresh: 0,
    };

    /// Marks the chunks holding the gaps from position `at` on as stale.
    fn stale_from(&mut self, at: usize) {
        self.fresh = self.fresh.min((at / CHUNK) as u32);
    }
}

/// The summaries of the long node lists ([`Summary`]): `widest[index][j]` is chunk `j`'s
/// widest gap.
type Widest = Vec<Vec<u64>>;

impl<W: Word> Default for List<W> {
    fn default() -> List<W> {
        List::Inline(0, [(W::default(), W::default()); INLINE])
    }
}

impl<W: Word> List<W> {
    fn as_slice(&self) -> &[Range<W>] {
        match self {
            List::Inline(len, items) => &items[..*len as usize],
            List::Heap(items, _) => items,
        }
    }

    /// The widest gap of each chunk ([`Summary`]), when the list is long and was
    /// [`List::refresh`]ed since its last edit.
    fn widest<'w>(&self, widest: &'w Widest) -> Option<&'w [u64]> {
        match self {
            List::Heap(_, summary) if summary.index != u32::MAX => {
                Some(&widest[summary.index as usize])
            }
            _ => None,
        }
    }

    /// Brings the [`Summary`] of a long list up to date.
    fn refresh(&mut self, widest: &mut Widest) {
        let List::Heap(items, summary) = self else {
            return;
        };
        if summary.index == u32::MAX {
            summary.index = widest.len() as u32;
            widest.push(Vec::new());
        }
        let gaps = &mut widest[summary.index as usize];
        let chunks = items.len().div_ceil(CHUNK);
        gaps.truncate((summary.fresh as usize).min(chunks));
        for j in gaps.len()..chunks {
            let end = ((j + 1) * CHUNK).min(items.len());
            let mut gap = 0;
            for k in j * CHUNK..end {
                let below = if k == 0 { 0 } else { items[k - 1].1.into() };
                gap = gap.max(items[k].0.into() - below);
            }
            gaps.push(gap);
        }
        summary.fresh = chunks as u32;
    }

    fn is_empty(&self) -> bool {
        self.as_slice().is_empty()
    }

    /// Inserts `range` at `at`.
    fn insert(&mut self, at: usize, range: Range<W>) {
        match self {
            List::Inline(len, items) if (*len as usize) < INLINE => {
                let n = *len as usize;
                items.copy_within(at..n, at + 1);
                items[at] = range;
                *len += 1;
            }
            List::Inline(len, items) => {
                let n = *len as usize;
                let mut heap = Vec::with_capacity(2 * INLINE);
                heap.extend_from_slice(&items[..at]);
                heap.push(range);
                heap.extend_from_slice(&items[at..n]);
                *self = List::Heap(heap, Summary::NONE);
            }
            List::Heap(items, summary) => {
                items.insert(at, range);
                summary.stale_from(at);
            }
        }
    }

    /// Replaces the ranges `at..last` (at least one) by `range`.
    fn replace(&mut self, at: usize, last: usize, range: Range<W>) {
        match self {
            List::Inline(len, items) => {
                let n = *len as usize;
                items[at] = range;
                items.copy_within(last..n, at + 1);
                *len -= (last - at - 1) as u8;
            }
            List::Heap(items, summary) => {
                items[at] = range;
                items.drain(at + 1..last);
                summary.stale_from(at);
            }
        }
    }

    /// Replaces the range at `at` by `ranges` (none or more).
    fn splice(&mut self, at: usize, ranges: &[Range<W>]) {
        match self {
            List::Inline(len, items) if *len as usize - 1 + ranges.len() <= INLINE => {
                let n = *len as usize;
                items.copy_within(at + 1..n, at + ranges.len());
                items[at..at + ranges.len()].copy_from_slice(ranges);
                *len = (n - 1 + ranges.len()) as u8;
            }
            List::Inline(..) => {
                let mut heap = self.as_slice().to_vec();
                heap.splice(at..at + 1, ranges.iter().copied());
                *self = List::Heap(heap, Summary::NONE);
            }
            List::Heap(items, summary) => {
                items.splice(at..at + 1, ranges.iter().copied());
                summary.stale_from(at);
            }
        }
    }
}

/// What a placement reads of a buffer besides its segments.
#[derive(Clone, Copy, Debug)]
struct Shape {
    size: u64,
    alignment: u64,
}

/// A live segment, in compressed coordinates.
#[derive(Clone, Copy, Debug)]
struct Segment {
    /// Leaf index of the segment's start: the number of distinct segment starts below it.
    start_leaf: u32,
    /// Number of distinct segment starts `< end`: leaves `[start_leaf, end_bound)` are the
    /// starts inside the segment.
    end_bound: u32,
}

/// Places buffers one at a time; see the module documentation.
///
/// Inside, buffers are numbered by their *rank*: their position in the order given to
/// [`Engine::ordered`] (the buffers it leaves out follow, by id), which every per-buffer
/// array below is indexed by. A greedy run places them in rank order, so that these arrays
/// are read one after the other instead of at random (issue #18: at 10^6 buffers, each
/// random read of a buffer's size, segments or offset was a cache and TLB miss, and
/// together they took a third of `strip`'s placement loop).
pub(crate) struct Engine<'p, W: Word> {
    problem: &'p Problem,
    /// `ids[r]`: the buffer of rank `r`.
    ids: Vec<u32>,
    /// `ranks[i]`: buffer `i`'s rank.
    ranks: Vec<u32>,
    /// How many ranks the order given to [`Engine::ordered`] numbered.
    ordered: usize,
    /// Size and alignment by rank.
    shapes: Vec<Shape>,
    /// `segments[segment_first[r]..segment_first[r + 1]]` are rank `r`'s live segments.
    segment_first: Vec<u32>,
    segments: Vec<Segment>,
    /// Number of leaves `T` (distinct segment starts).
    leaves: usize,
    /// The tree's nodes, both lists of each together ([`Node`]).
    nodes: Vec<Node<W>>,
    /// `conflict_partners[conflict_first[r]..conflict_first[r + 1]]`: the ranks of rank
    /// `r`'s conflict partners.
    conflict_first: Vec<u32>,
    conflict_partners: Vec<u32>,
    /// Offset by rank (meaningful once placed).
    offsets: Vec<u64>,
    placed: Vec<bool>,
    /// The sorted runs gathered for the current placement (reused to avoid allocations).
    runs: Vec<Run>,
    /// The address ranges of the placed conflict partners of the current placement, sorted:
    /// the run [`Run::Partners`].
    partners: Vec<Range<W>>,
    /// The scan's tournament over the runs' next ranges.
    tree_of_runs: Tournament,
    /// `next[i]`: the position of the next range of `runs[i]` to scan.
    next: Vec<u32>,
    /// [`Engine::jump`]'s order of asking the runs.
    order: Vec<u32>,
    /// While a trial is open ([`Engine::begin_trial`]), how to undo every placement since.
    journal: Option<Journal<W>>,
    /// For [`Fit::StackedPrevious`]: which buffer was placed last over each time leaf.
    recency: Option<Recency>,
    /// For [`Fit::Stacked`]: the placed buffers whose successor is still to come.
    unclaimed: Option<Unclaimed>,
    /// Address ranges read by the placements so far ([`Engine::reads`]).
    reads: u64,
    /// What the node lists hold.
    layout: Layout,
    /// The nodes a segment visits, in [`Layout::Subtrees`].
    tree: Tree,
    /// The summaries of the long node lists, in [`Layout::Subtrees`].
    widest: Widest,
    /// The lists a placed segment goes into ([`Engine::place`]; reused).
    targets: Vec<Run>,
    /// The lockstep binary searches of [`Engine::insert_into`] (reused).
    searches: Vec<(usize, usize)>,
    /// In [`Layout::Blocks`]: the ends list of node `v` at `v` (for the nodes below
    /// block size; the others stay empty), then the block list of block `j` at
    /// `2 T + j`, then the quad list of blocks `j..j + 4` at `2 T + B + j`, for the `T`
    /// (padded) leaves and the `B` blocks ([`Grid`]). Empty in the other layouts.
    extra: Vec<List<W>>,
    /// The problem's granularity ([`granularity_and_unfixed`]): sizes, alignments,
    /// offsets and node lists are in units of it; [`Engine::place_with`] and the plan
    /// are in bytes.
    unit: u64,
    /// The highest top a placement may have, in units: what a [`Word`] holds, and what
    /// leaves the top in bytes within a `u64`.
    limit: u64,
    /// A placement was refused because its top exceeds what a `W` holds (but not a
    /// `u64`): the run must be made again with `u64` ([`Word`]).
    word_overflow: bool,
}

/// The nodes of the segment tree that the query and the insertion of a segment visit in
/// [`Layout::Subtrees`].
struct Tree {
    leaves: usize,
    /// `stamps[node] == epoch`: the node was visited by the current [`Tree::visit`].
    stamps: Vec<u32>,
    epoch: u32,
    /// The nodes of the last [`Tree::visit`].
    visited: Vec<(u32, bool)>,
}

impl Tree {
    /// A tree over `leaves` leaves; with `used` false it is never visited and takes no
    /// memory.
    fn new(leaves: usize, used: bool) -> Tree {
        Tree {
            leaves,
            stamps: if used {
                vec![0; 2 * leaves]
            } else {
                Vec::new()
            },
            epoch: 0,
            visited: Vec::new(),
        }
    }

    /// The canonical nodes covering leaves `[l, r)`, as `(node, true)`, then each of their
    /// strict ancestors once, as `(node, false)`.
    fn visit(&mut self, l: usize, r: usize) -> &[(u32, bool)] {
        self.visited.clear();
        self.epoch = self.epoch.wrapping_add(1);
        if self.epoch == 0 {
            self.stamps.fill(0);
            self.epoch = 1;
        }
        let visited = &mut self.visited;
        canonical(self.leaves, l, r, |node| visited.push((node as u32, true)));
        for k in 0..visited.len() {
            let mut p = visited[k].0 as usize >> 1;
            while p >= 1 && self.stamps[p] != self.epoch {
                self.stamps[p] = self.epoch;
                visited.push((p as u32, false));
                p >>= 1;
            }
        }
        &self.visited
    }
}

/// The most recently placed buffer over every range of time leaves: a segment tree over
/// the engine's leaves whose updates and queries are ranges `[l, r)` of leaves. A placed
/// segment covers the leaves of the starts inside it; two segments overlap in time exactly
/// when their leaf ranges share a leaf (each holds its own start). Values are placement
/// sequence numbers plus one (0: nothing), which only grow, so `max` is "latest".
/// `O(log² T)` per update and query.
struct Recency {
    /// `tag[node]`: the latest update covering all of the node's leaves.
    tag: Vec<u32>,
    /// `sub[node]`: the latest update touching some leaf below the node.
    sub: Vec<u32>,
    /// `sequence[k]`: the rank of the buffer placed `k`-th.
    sequence: Vec<u32>,
}

impl Recency {
    fn new(leaves: usize) -> Recency {
        Recency {
            tag: vec![0; 2 * leaves],
            sub: vec![0; 2 * leaves],
            sequence: Vec::new(),
        }
    }

    /// Records `value` over leaves `[l, r)`, calling `edit(is_tag, node, old)` before
    /// each change.
    fn update(&mut self, l: usize, r: usize, value: u32, mut edit: impl FnMut(bool, u32, u32)) {
        let n = self.tag.len() / 2;
        let (tag, sub) = (&mut self.tag, &mut self.sub);
        canonical(n, l, r, |node| {
            if tag[node] < value {
                edit(true, node as u32, tag[node]);
                tag[node] = value;
            }
            let mut p = node;
            while p >= 1 && sub[p] < value {
                edit(false, p as u32, sub[p]);
                sub[p] = value;
                p >>= 1;
            }
        });
    }

    /// The latest value over any leaf of `[l, r)`.
    fn query(&self, l: usize, r: usize) -> u32 {
        let n = self.tag.len() / 2;
        let mut best = 0;
        canonical(n, l, r, |node| {
            best = best.max(self.sub[node]);
            let mut p = node >> 1;
            while p >= 1 {
                best = best.max(self.tag[p]);
                p >>= 1;
            }
        });
        best
    }
}

/// For [`Fit::Stacked`]: the placed buffers that no buffer placed after them overlaps in
/// time, i.e. whose successor (the first buffer placed after them that overlaps them) is
/// still to come. Two of them never overlap in time (the later one would be the earlier
/// one's successor), so their segments are disjoint ranges of leaves, kept here by their
/// first leaf. The buffer placed next overlapping some of them is their successor: it
/// sits on all of them, takes them out and puts its own segments in. A segment goes in
/// once and out once per placement, so a run costs `O(s log s)` for `s` segments in all,
/// plus, per placement, the binary searches of its own segments; the successors are
/// found online, without looking ahead in the order (a rectangle's successor is decided
/// by the buffers placed after it, up to the first that overlaps it).
#[derive(Default)]
struct Unclaimed {
    /// First leaf → (end bound, rank) of every segment of an unclaimed buffer.
    segments: BTreeMap<u32, (u32, u32)>,
}

/// One change to [`Unclaimed`], as a rollback undoes it.
enum UnclaimedEdit {
    /// A segment with this first leaf went in.
    Added(u32),
    /// The segment (first leaf, end bound, rank) went out.
    Removed(u32, u32, u32),
}

impl Unclaimed {
    /// Calls `f` with the rank of every unclaimed segment that shares a leaf with
    /// `[l, r)`, highest first leaf first (the segments are disjoint: those with a first
    /// leaf below `r` end in that order too).
    fn overlapping(&self, l: u32, r: u32, mut f: impl FnMut(u32)) {
        for (_, &(end, rank)) in self.segments.range(..r).rev() {
            if end <= l {
                break;
            }
            f(rank);
        }
    }
}

/// Calls `f` with the canonical nodes covering leaves `[l, r)` of a tree with `n` leaves
/// (iterative layout: leaves at `n..2n`), at most two per level, bottom up.
fn canonical(n: usize, l: usize, r: usize, mut f: impl FnMut(usize)) {
    let (mut l, mut r) = (l + n, r + n);
    while l < r {
        if l & 1 == 1 {
            f(l);
            l += 1;
        }
        if r & 1 == 1 {
            r -= 1;
            f(r);
        }
        l >>= 1;
        r >>= 1;
    }
}

/// The whole blocks of `2^shift` leaves inside leaves `[l, r)` ([`Layout::Blocks`]), as
/// `(first, end, after)`: blocks `first..end` (at least one), whose leaves run from
/// `first << shift` up to `after = end << shift`; `None` when there is no whole block.
fn whole_blocks(l: usize, r: usize, shift: u32) -> Option<(usize, usize, usize)> {
    let first = l.div_ceil(1 << shift);
    let end = r >> shift;
    (first < end).then_some((first, end, end << shift))
}

/// Where the block and quad lists of [`Layout::Blocks`] sit in [`Engine::extra`], for
/// `leaves` (padded) leaves cut into blocks of `2^shift`.
#[derive(Clone, Copy)]
struct Grid {
    leaves: usize,
    shift: u32,
}

impl Grid {
    /// How many blocks there are.
    fn blocks(self) -> usize {
        self.leaves >> self.shift
    }

    /// Block `j`'s list; the block and quad lists are the ones from `block(0)` on.
    fn block(self, j: usize) -> usize {
        2 * self.leaves + j
    }

    /// The list of blocks `j..j + 4`.
    fn quad(self, j: usize) -> usize {
        2 * self.leaves + self.blocks() + j
    }

    /// Calls `f` with the lists that together hold blocks `first..end` exactly: the single
    /// blocks up to three, else quads from `first` on, the last one ending with block
    /// `end - 1` (it may overlap the one before).
    fn whole(self, first: usize, end: usize, mut f: impl FnMut(usize)) {
        if end - first < 4 {
            (first..end).for_each(|j| f(self.block(j)));
        } else {
            let mut j = first;
            while j + 4 < end {
                f(self.quad(j));
                j += 4;
            }
            f(self.quad(end - 4));
        }
    }
}

/// The undo log of a trial: enough to restore every node list and placed flag.
struct Journal<W: Word> {
    /// The ranks placed during the trial.
    placed: Vec<u32>,
    /// Node-list edits in the order they were made.
    edits: Vec<Edit>,
    /// The ranges that edits merged away: `edit.removed` indexes into this.
    removed: Vec<Range<W>>,
    /// [`Recency`] edits: (tag list?, node, old value).
    recency: Vec<(bool, u32, u32)>,
    /// [`Unclaimed`] edits, in the order they were made.
    unclaimed: Vec<UnclaimedEdit>,
}

impl<W: Word> Default for Journal<W> {
    fn default() -> Journal<W> {
        Journal {
            placed: Vec::new(),
            edits: Vec::new(),
            removed: Vec::new(),
            recency: Vec::new(),
            unclaimed: Vec::new(),
        }
    }
}

/// One [`insert_union_at`] on one node list, as its inverse needs it.
struct Edit {
    /// The list edited (never [`Run::Partners`]).
    list: Run,
    /// Where the inserted or merged range sits in the list.
    at: u32,
    /// `journal.removed[removed]`: the ranges it replaced (empty for a pure insertion).
    removed: std::ops::Range<usize>,
}

/// A sorted run of address ranges that a placement reads: a node list or the placed
/// conflict partners.
#[derive(Clone, Copy, Debug)]
enum Run {
    Inside(u32),
    Covering(u32),
    /// [`Engine::extra`]`[i]`, in [`Layout::Blocks`].
    Extra(u32),
    Partners,
}

/// The list a [`Run`] names among the engine's `nodes` and `extra` lists, to edit (`None`
/// for the conflict partners); apart from the engine so that the journal can be borrowed
/// beside it.
fn list_in<'a, W: Word>(
    nodes: &'a mut [Node<W>],
    extra: &'a mut [List<W>],
    run: Run,
) -> Option<&'a mut List<W>> {
    match run {
        Run::Inside(node) => Some(&mut nodes[node as usize].inside),
        Run::Covering(node) => Some(&mut nodes[node as usize].covering),
        Run::Extra(i) => Some(&mut extra[i as usize]),
        Run::Partners => None,
    }
}

/// Adds `list`, node `node`'s, to `runs` unless it is empty.
fn take<W: Word>(runs: &mut Vec<Run>, list: &List<W>, node: usize, run: fn(u32) -> Run) {
    if !list.is_empty() {
        runs.push(run(node as u32));
    }
}

/// The live segments of a buffer without allocating when it has no gaps.
pub(crate) fn for_each_segment(buffer: &Buffer, f: impl FnMut(Lifetime)) {
    buffer.for_each_live_segment(f);
}

impl<'p, W: Word> Engine<'p, W> {
    /// Prepares an empty arena for `problem`: nothing is placed yet. Buffers are ranked
    /// by id.
    pub(crate) fn new(problem: &'p Problem) -> Engine<'p, W> {
        Engine::ordered(problem, &[])
    }

    /// [`Engine::new`], ranking the buffers in the order they first appear in `order`
    /// (ids of `problem`), then the others by id: placing them in that order reads the
    /// engine's per-buffer arrays in sequence. Which buffer goes where does not depend
    /// on the ranks.
    pub(crate) fn ordered(problem: &'p Problem, order: &[u32]) -> Engine<'p, W> {
        Engine::of_members(problem, order, |_| true, None)
    }

    /// [`Engine::ordered`] for the buffers that `member` accepts: the others are never
    /// looked up nor recorded (they have no segments, like a zero-size buffer), and must
    /// not be placed. `layout`: the node lists' [`Layout`], or `None` for
    /// [`Layout::of`]'s.
    fn of_members(
        problem: &'p Problem,
        order: &[u32],
        member: impl Fn(usize) -> bool,
        layout: Option<Layout>,
    ) -> Engine<'p, W> {
        let buffers = problem.buffers();
        let mut ranks = vec![u32::MAX; buffers.len()];
        let mut ids = Vec::with_capacity(buffers.len());
        for &id in order {
            let rank = &mut ranks[id as usize];
            if *rank == u32::MAX {
                *rank = ids.len() as u32;
                ids.push(id);
            }
        }
        let ordered = ids.len();
        for (id, rank) in (0u32..).zip(ranks.iter_mut()) {
            if *rank == u32::MAX {
                *rank = ids.len() as u32;
                ids.push(id);
            }
        }
        let (unit, _, _) = granularity_and_unfixed(problem);
        // Every alignment of an unfixed buffer divides the unit (any multiple of it is
        // aligned) or is a multiple of it; a fixed buffer's is never used.
        let shapes: Vec<Shape> = ids
            .iter()
            .map(|&id| {
                let b = &buffers[id as usize];
                Shape {
                    size: b.size / unit,
                    alignment: if unit % b.alignment.max(1) == 0 {
                        1
                    } else {
                        b.alignment / unit
                    },
                }
            })
            .collect();
        let mut raw: Vec<Lifetime> = Vec::with_capacity(buffers.len());
        let mut segment_first = Vec::with_capacity(buffers.len() + 1);
        for &id in &ids {
            let buffer = &buffers[id as usize];
            segment_first.push(raw.len() as u32);
            // A zero-size buffer is never looked up nor recorded: it needs no segment.
            if buffer.size > 0 && member(id as usize) {
                for_each_segment(buffer, |s| raw.push(s));
            }
        }
        segment_first.push(raw.len() as u32);

        // Every segment's ends by time, its end before any start at the same time (a stable
        // sort of the ends followed by the starts); one pass then numbers the distinct
        // starts and counts, at each end, the distinct starts below it.
        let mut events: Vec<(u64, u32, bool)> = Vec::with_capacity(2 * raw.len());
        events.extend((0u32..).zip(&raw).map(|(k, s)| (s.end, k, true)));
        events.extend((0u32..).zip(&raw).map(|(k, s)| (s.start, k, false)));
        crate::radix::sort_by_u64_key(&mut events, |e| e.0);
        let mut segments = vec![
            Segment {
                start_leaf: 0,
                end_bound: 0
            };
            raw.len()
        ];
        let (mut leaves, mut last_start) = (0u32, None);
        for &(t, k, is_end) in &events {
            let segment = &mut segments[k as usize];
            if is_end {
                segment.end_bound = leaves;
            } else {
                if last_start != Some(t) {
                    leaves += 1;
                    last_start = Some(t);
                }
                segment.start_leaf = leaves - 1;
            }
        }
        drop(events);
        let leaves = leaves as usize;

        let mut degree = vec![0u32; buffers.len() + 1];
        for &(a, b) in problem.conflicts() {
            degree[ranks[a.index()] as usize] += 1;
            degree[ranks[b.index()] as usize] += 1;
        }
        let mut conflict_first = Vec::with_capacity(buffers.len() + 1);
        let mut total = 0u32;
        for d in &degree[..buffers.len()] {
            conflict_first.push(total);
            total += d;
        }
        conflict_first.push(total);
        let mut fill = conflict_first.clone();
        let mut conflict_partners = vec![0u32; total as usize];
        for &(a, b) in problem.conflicts() {
            let (a, b) = (ranks[a.index()], ranks[b.index()]);
            conflict_partners[fill[a as usize] as usize] = b;
            fill[a as usize] += 1;
            conflict_partners[fill[b as usize] as usize] = a;
            fill[b as usize] += 1;
        }

        let layout = layout.unwrap_or_else(|| Layout::of(&segments, leaves));
        let mut extra = Vec::new();
        let leaves = match layout {
            Layout::Blocks { shift } => {
                // A power of two, so that every node below block size lies in one block.
                let padded = leaves.next_power_of_two().max(1 << shift);
                let blocks = padded >> shift;
                extra.resize(2 * padded + 2 * blocks, List::default());
                padded
            }
            _ => leaves,
        };
        let mut nodes = vec![Node::default(); 2 * leaves];
        let mut tree = Tree::new(leaves, layout == Layout::Subtrees);
        for s in &segments {
            let (l, r) = (s.start_leaf as usize, s.end_bound as usize);
            match layout {
                Layout::Starts => canonical(leaves, l, r, |node| {
                    nodes[node].read_inside = true;
                    nodes[node].read_covering = true;
                }),
                Layout::Subtrees => {
                    for &(node, canonical) in tree.visit(l, r) {
                        let node = &mut nodes[node as usize];
                        if canonical {
                            node.read_inside = true;
                        } else {
                            node.read_covering = true;
                        }
                    }
                }
                Layout::Blocks { shift } => match whole_blocks(l, r, shift) {
                    Some((_, _, after)) => canonical(leaves, after, r, |node| {
                        nodes[node].read_inside = true;
                    }),
                    None => {
                        canonical(leaves, l, r, |node| nodes[node].read_inside = true);
                        let mut p = l + leaves;
                        for _ in 0..=shift {
                            nodes[p].read_covering = true;
                            p >>= 1;
                        }
                    }
                },
            }
        }
        if layout == Layout::Starts {
            // The covering lists on a query's path are all read.
            for node in &mut nodes {
                node.read_covering = true;
            }
        }

        Engine {
            problem,
            ids,
            ranks,
            ordered,
            shapes,
            segment_first,
            segments,
            leaves,
            nodes,
            conflict_first,
            conflict_partners,
            offsets: vec![0; buffers.len()],
            placed: vec![false; buffers.len()],
            runs: Vec::new(),
            partners: Vec::new(),
            tree_of_runs: Tournament::default(),
            next: Vec::new(),
            order: Vec::new(),
            journal: None,
            recency: None,
            unclaimed: None,
            reads: 0,
            layout,
            tree,
            widest: Widest::new(),
            targets: Vec::new(),
            searches: Vec::new(),
            extra,
            unit,
            limit: W::MAX.min(u64::MAX / unit),
            word_overflow: false,
        }
    }

    /// An empty arena that can also place with `fit` when it is one of the stacked rules:
    /// it keeps track of the unclaimed placed buffers ([`Fit::Stacked`], `O(log s)` per
    /// segment placed) or of the order of placement over time ([`Fit::StackedPrevious`],
    /// `O(log² T)` per placement).
    pub(crate) fn stacking(problem: &'p Problem, fit: Fit) -> Engine<'p, W> {
        Engine::new(problem).stacked(fit)
    }

    /// This (empty) engine, able to place with `fit` too (unchanged for a fit that is not
    /// stacked).
    fn stacked(mut self, fit: Fit) -> Engine<'p, W> {
        match fit {
            Fit::Stacked => self.unclaimed = Some(Unclaimed::default()),
            Fit::StackedPrevious => self.recency = Some(Recency::new(self.leaves)),
            Fit::First | Fit::Best => {}
        }
        self
    }

    /// [`Fit::Stacked`]'s floor: the highest top of the placed buffers that rank `rank`
    /// is the successor of (those overlapping it in time that no buffer placed since
    /// overlaps), or 0 when there are none.
    fn successor_floor(&self, rank: usize) -> u64 {
        let Some(unclaimed) = &self.unclaimed else {
            return 0;
        };
        let mut floor = 0;
        for index in self.segments_of(rank) {
            let s = self.segments[index];
            unclaimed.overlapping(s.start_leaf, s.end_bound, |j| {
                // `place` was given an offset whose top fits in a u64.
                floor = floor.max(self.offsets[j as usize] + self.shapes[j as usize].size);
            });
        }
        floor
    }

    /// Records that rank `rank`, just placed, is the successor of every unclaimed buffer
    /// it overlaps in time: they go out of [`Unclaimed`] (every segment of theirs), and
    /// its own segments go in.
    fn claim(&mut self, rank: usize) {
        let Some(unclaimed) = &mut self.unclaimed else {
            return;
        };
        let (first, segments) = (&self.segment_first, &self.segments);
        let mut edits = self.journal.as_mut().map(|j| &mut j.unclaimed);
        let mut record = |edit: UnclaimedEdit| {
            if let Some(edits) = edits.as_mut() {
                edits.push(edit);
            }
        };
        let mut claimed = Vec::new();
        for index in first[rank]..first[rank + 1] {
            let s = segments[index as usize];
            // The unclaimed buffers it overlaps, all found before any is taken out (one
            // with several segments overlapping this one comes once per segment; the
            // second time its segments are gone already).
            unclaimed.overlapping(s.start_leaf, s.end_bound, |j| claimed.push(j));
            for j in claimed.drain(..) {
                for other in first[j as usize]..first[j as usize + 1] {
                    let t = segments[other as usize];
                    if let Some((end, owner)) = unclaimed.segments.remove(&t.start_leaf) {
                        debug_assert_eq!(owner, j);
                        record(UnclaimedEdit::Removed(t.start_leaf, end, owner));
                    }
                }
            }
        }
        for index in first[rank]..first[rank + 1] {
            let s = segments[index as usize];
            unclaimed
                .segments
                .insert(s.start_leaf, (s.end_bound, rank as u32));
            record(UnclaimedEdit::Added(s.start_leaf));
        }
    }

    /// [`Fit::StackedPrevious`]'s floor: the top of the buffer placed last among the
    /// placed ones overlapping rank `rank` in time, or 0.
    fn stacked_floor(&self, rank: usize) -> u64 {
        let Some(recency) = &self.recency else {
            return 0;
        };
        let mut latest = 0;
        for index in self.segments_of(rank) {
            let s = self.segments[index];
            latest = latest.max(recency.query(s.start_leaf as usize, s.end_bound as usize));
        }
        match latest {
            0 => 0,
            k => {
                let j = recency.sequence[k as usize - 1] as usize;
                // `place` was given an offset whose top fits in a u64.
                self.offsets[j] + self.shapes[j].size
            }
        }
    }

    fn segments_of(&self, rank: usize) -> std::ops::Range<usize> {
        self.segment_first[rank] as usize..self.segment_first[rank + 1] as usize
    }

    fn partners_of(&self, rank: usize) -> &[u32] {
        &self.conflict_partners
            [self.conflict_first[rank] as usize..self.conflict_first[rank + 1] as usize]
    }

    /// True when the buffer has been placed.
    #[cfg(test)]
    pub(crate) fn is_placed(&self, buffer: usize) -> bool {
        self.placed[self.ranks[buffer] as usize]
    }

    /// Collects into `runs` the sorted runs whose ranges are, together, the address ranges
    /// of the placed buffers that rank `rank` must not share bytes with (possibly
    /// overlapping or repeated).
    fn gather(&mut self, rank: usize) {
        self.runs.clear();
        self.partners.clear();
        let n = self.leaves;
        for index in self.segments_of(rank) {
            let segment = self.segments[index];
            let (l, r) = (segment.start_leaf as usize, segment.end_bound as usize);
            match self.layout {
                Layout::Starts => {
                    // Placed segments starting in [s, e).
                    canonical(n, l, r, |node| {
                        take(&mut self.runs, &self.nodes[node].inside, node, Run::Inside)
                    });
                    // Placed segments with start < s < end.
                    let mut p = l + n;
                    while p >= 1 {
                        take(&mut self.runs, &self.nodes[p].covering, p, Run::Covering);
                        p >>= 1;
                    }
                }
                Layout::Subtrees => {
                    for &(node, canonical) in self.tree.visit(l, r) {
                        let lists = &self.nodes[node as usize];
                        if canonical {
                            take(&mut self.runs, &lists.inside, node as usize, Run::Inside);
                        } else {
                            take(
                                &mut self.runs,
                                &lists.covering,
                                node as usize,
                                Run::Covering,
                            );
                        }
                    }
                }
                Layout::Blocks { shift } => {
                    match whole_blocks(l, r, shift) {
                        Some((first, end, after)) => {
                            Grid { leaves: n, shift }.whole(first, end, |i| {
                                take(&mut self.runs, &self.extra[i], i, Run::Extra)
                            });
                            // The segments met only before the whole blocks end there, those
                            // met only after them start there.
                            canonical(n, l, first << shift, |node| {
                                take(&mut self.runs, &self.extra[node], node, Run::Extra)
                            });
                            canonical(n, after, r, |node| {
                                take(&mut self.runs, &self.nodes[node].inside, node, Run::Inside)
                            });
                        }
                        None => {
                            canonical(n, l, r, |node| {
                                take(&mut self.runs, &self.nodes[node].inside, node, Run::Inside)
                            });
                            let mut p = l + n;
                            for _ in 0..=shift {
                                take(&mut self.runs, &self.nodes[p].covering, p, Run::Covering);
                                p >>= 1;
                            }
                        }
                    }
                }
            }
        }
        let (first, last) = (
            self.conflict_first[rank] as usize,
            self.conflict_first[rank + 1] as usize,
        );
        for k in first..last {
            let partner = self.conflict_partners[k] as usize;
            let size = self.shapes[partner].size;
            if self.placed[partner] && size > 0 {
                let offset = self.offsets[partner];
                self.partners
                    .push((W::narrow(offset), W::narrow(offset + size)));
            }
        }
        if !self.partners.is_empty() {
            self.partners.sort_unstable();
            self.runs.push(Run::Partners);
        }
    }

    /// The node list of a gathered run (`None` for the conflict partners).
    fn list(&self, run: Run) -> Option<&List<W>> {
        match run {
            Run::Inside(node) => Some(&self.nodes[node as usize].inside),
            Run::Covering(node) => Some(&self.nodes[node as usize].covering),
            Run::Extra(i) => Some(&self.extra[i as usize]),
            Run::Partners => None,
        }
    }

    /// The node list of a gathered run, to edit (`None` for the conflict partners).
    fn list_mut(&mut self, run: Run) -> Option<&mut List<W>> {
        list_in(&mut self.nodes, &mut self.extra, run)
    }

    /// The ranges of a gathered run.
    fn run(&self, run: Run) -> &[Range<W>] {
        self.list(run).map_or(&self.partners, List::as_slice)
    }

    /// The offset `fit` chooses for rank `rank` among the gaps left by the placed buffers
    /// it must not share bytes with, or on top of them; 0 for a zero-size buffer. Does not
    /// place it.
    fn find(&mut self, rank: usize, fit: Fit) -> Result<u64, PlanError> {
        let floor = match fit {
            Fit::Stacked => self.successor_floor(rank),
            Fit::StackedPrevious => self.stacked_floor(rank),
            Fit::First | Fit::Best => 0,
        };
        self.find_from(rank, fit, floor)
    }

    /// [`Engine::find`] among the offsets at or above `floor` only.
    fn find_from(&mut self, rank: usize, fit: Fit, floor: u64) -> Result<u64, PlanError> {
        let shape = self.shapes[rank];
        if shape.size == 0 {
            return Ok(0);
        }
        self.gather(rank);
        if self.layout != Layout::Starts && fit != Fit::Best {
            return self.jump(shape, floor);
        }
        let mut gaps = Gaps::new(floor, shape.size, shape.alignment, fit);
        let mut found = None;
        self.scan_runs(floor, |range| {
            found = gaps.next(range);
            found.is_some()
        });
        match found {
            Some(offset) => Ok(offset),
            None => gaps.finish(),
        }
    }

    /// Hands the gathered runs' ranges that end above `floor` to `take` in order of start
    /// (those ending at or below it are skipped in the node lists, not necessarily in the
    /// conflict partners), until `take` returns `true`; counts the ranges handed out in
    /// [`Engine::reads`].
    fn scan_runs(&mut self, floor: u64, mut take: impl FnMut((u64, u64)) -> bool) {
        let mut next = std::mem::take(&mut self.next);
        next.clear();
        let mut tree = std::mem::take(&mut self.tree_of_runs);
        tree.reset(self.runs.len());
        // The runs' ranges, looked up once.
        let lists: Vec<&[Range<W>]> = self.runs.iter().map(|&run| self.run(run)).collect();
        for (i, (&run, &list)) in self.runs.iter().zip(&lists).enumerate() {
            // A node list's ranges are disjoint: their ends increase like their starts. Most
            // lists have nothing to skip (the floor is 0 outside `Fit::Stacked`), and a
            // binary search for nothing would cost a cache miss per probe.
            let first = match run {
                Run::Inside(_) | Run::Covering(_) | Run::Extra(_) if list[0].1.into() <= floor => {
                    list.partition_point(|r| r.1.into() <= floor)
                }
                _ => 0,
            };
            tree.set(i, list.get(first).map_or(Tournament::DONE, |r| r.0.into()));
            next.push(first as u32);
        }
        tree.build();
        let mut reads = 0u64;
        loop {
            let (start, i) = tree.winner();
            if start == Tournament::DONE {
                break;
            }
            reads += 1;
            let k = next[i] as usize;
            let list = lists[i];
            if take((list[k].0.into(), list[k].1.into())) {
                break;
            }
            next[i] += 1;
            tree.replace_winner(list.get(k + 1).map_or(Tournament::DONE, |r| r.0.into()));
        }
        self.tree_of_runs = tree;
        self.next = next;
        self.reads = self.reads.saturating_add(reads);
    }

    /// The aligned offsets at or above `floor` where rank `rank` would share no byte with
    /// the placed buffers it must not share bytes with, as the first `most` (at least 1)
    /// of the maximal runs of them: `(first, last)`, both inclusive, in increasing order,
    /// into `out` (cleared first; `first` is aligned, every aligned offset in between is
    /// free too). Returns the bound below which `out` is complete: every free aligned
    /// offset in `[floor, bound)` is in `out`; `u64::MAX` when the list runs up to the
    /// highest offset that leaves the buffer room in a `u64`. First fit of two engines
    /// that share a buffer is the least offset free in both ([`Halves`]). Not for
    /// zero-size buffers.
    fn free_from(
        &mut self,
        rank: usize,
        floor: u64,
        most: usize,
        out: &mut Vec<(u64, u64)>,
    ) -> u64 {
        let Shape { size, alignment } = self.shapes[rank];
        debug_assert!(size > 0 && most > 0);
        out.clear();
        self.gather(rank);
        // In `Blocks`, the first fit is where the free offsets start: the scan then reads
        // a few ranges above it, not every range below it.
        let floor = match self.layout {
            Layout::Blocks { .. } => self.jump(self.shapes[rank], floor).unwrap_or(floor),
            _ => floor,
        };
        let mut cursor = floor;
        let mut bound = None;
        self.scan_runs(floor, |(lo, hi)| {
            if let Some(first) = fit_in_gap(cursor, lo, size, alignment) {
                let last = lo - size;
                out.push((first, last));
                if out.len() == most {
                    bound = Some(last + 1);
                    return true;
                }
            }
            cursor = cursor.max(hi);
            false
        });
        if let Some(bound) = bound {
            return bound;
        }
        // On top of everything, as far as the engine's limit leaves room.
        if let Some(first) = cursor.checked_next_multiple_of(alignment) {
            let last = self.limit.saturating_sub(size);
            if first <= last {
                out.push((first, last));
            }
        }
        u64::MAX
    }

    /// The lowest offset at or above `floor`, aligned, where `shape` shares no byte with
    /// the gathered runs' ranges: first fit, as the scan of [`Engine::find_from`] finds
    /// it, for [`Layout::Subtrees`] and [`Layout::Blocks`].
    ///
    /// The runs are not merged: each is searched on its own for its lowest offset at or
    /// above a candidate that holds the buffer ([`first_fit_in`], which in `Subtrees`
    /// skips whole chunks of narrow gaps by the list's [`Summary`]), and the candidate
    /// rises to it; the candidate is the answer once every run in a row has let it pass.
    /// Every aligned offset skipped is in the way in some run, so the answer is the
    /// lowest free one. After a run raises the candidate, the runs are asked again
    /// starting with those that raised it most recently (move to front): a run that was in
    /// the way just below is the likeliest to be in the way again, and the candidate
    /// stops rising sooner (issue #18: at 10^6 buffers, 125 searches per placement against
    /// 257 asking them round the circle). The ranges read are counted as they are looked at, binary searches and
    /// chunk summaries included. (The block lists of `Blocks` change at nearly every
    /// placement and are searched without summaries: bringing them up to date cost more
    /// than they saved, 2.7-2.9 s against 3.3-3.5 s for first fit on 190,000 buffers.)
    fn jump(&mut self, shape: Shape, floor: u64) -> Result<u64, PlanError> {
        let summarised = self.layout == Layout::Subtrees;
        if summarised {
            let mut widest = std::mem::take(&mut self.widest);
            for k in 0..self.runs.len() {
                if let Some(list) = self.list_mut(self.runs[k]) {
                    list.refresh(&mut widest);
                }
            }
            self.widest = widest;
        }
        let mut next = std::mem::take(&mut self.next);
        next.clear();
        next.resize(self.runs.len(), 0);
        let mut order = std::mem::take(&mut self.order);
        // The conflict partners' ranges may overlap: search their union.
        let partners = match self.runs.last() {
            Some(Run::Partners) => union(&self.partners),
            _ => Vec::new(),
        };
        let lists: Vec<Searched<'_, W>> = self
            .runs
            .iter()
            .map(|&run| match self.list(run) {
                Some(list) if summarised => (list.as_slice(), list.widest(&self.widest)),
                Some(list) => (list.as_slice(), None),
                None => (&partners[..], None),
            })
            .collect();
        let mut candidate = floor
            .checked_next_multiple_of(shape.alignment)
            .ok_or(PlanError::ArenaOverflow)?;
        let mut reads = 0u64;
        // The runs in the order they are asked, the last one to raise the candidate first.
        order.clear();
        order.extend(0..lists.len() as u32);
        // How many runs in a row have let `candidate` pass, and the position in `order`
        // of the next one to ask.
        let (mut passed, mut p) = (0, 0);
        let result = loop {
            if passed == lists.len() {
                break Ok(candidate);
            }
            let i = order[p] as usize;
            let (ranges, widest) = lists[i];
            match first_fit_in(
                ranges,
                widest,
                next[i] as usize,
                candidate,
                shape,
                &mut reads,
            ) {
                Ok((offset, at)) => {
                    next[i] = at as u32;
                    if offset == candidate {
                        passed += 1;
                        p = if p + 1 == lists.len() { 0 } else { p + 1 };
                    } else {
                        // The run that raised the candidate lets the new one pass; the
                        // others are asked again, the ones that raised it last first.
                        candidate = offset;
                        passed = 1;
                        // `rotate_right(1)`, which is a call; the lists are few.
                        let raiser = order[p];
                        for k in (0..p).rev() {
                            order[k + 1] = order[k];
                        }
                        order[0] = raiser;
                        p = usize::from(lists.len() > 1);
                    }
                }
                Err(e) => break Err(e),
            }
        };
        drop(lists);
        self.order = order;
        self.next = next;
        self.reads = self.reads.saturating_add(reads);
        let offset = result?;
        offset
            .checked_add(shape.size)
            .ok_or(PlanError::ArenaOverflow)?;
        Ok(offset)
    }

    /// Records rank `rank` at `offset` (in units). Fails with
    /// [`PlanError::ArenaOverflow`], changing nothing, when its top exceeds the engine's
    /// limit; [`Engine::word_overflow`] then says whether a `u64` engine could place it.
    fn place(&mut self, rank: usize, offset: u64) -> Result<(), PlanError> {
        debug_assert!(!self.placed[rank]);
        let size = self.shapes[rank].size;
        let top = match offset.checked_add(size) {
            Some(top) if top <= self.limit => top,
            top => {
                // In bytes it would still fit: a `u64` engine can place it.
                self.word_overflow |= top.is_some_and(|top| top <= u64::MAX / self.unit);
                return Err(PlanError::ArenaOverflow);
            }
        };
        let range = (W::narrow(offset), W::narrow(top));
        self.offsets[rank] = offset;
        self.placed[rank] = true;
        if let Some(journal) = &mut self.journal {
            journal.placed.push(rank as u32);
        }
        if size == 0 {
            // It occupies nothing: no node list gets a range.
            return Ok(());
        }
        self.claim(rank);
        if let Some(recency) = &mut self.recency {
            recency.sequence.push(rank as u32);
            let value = recency.sequence.len() as u32;
            let mut edits = self.journal.as_mut().map(|j| &mut j.recency);
            for index in self.segment_first[rank]..self.segment_first[rank + 1] {
                let s = self.segments[index as usize];
                recency.update(
                    s.start_leaf as usize,
                    s.end_bound as usize,
                    value,
                    |is_tag, node, old| {
                        if let Some(edits) = edits.as_mut() {
                            edits.push((is_tag, node, old));
                        }
                    },
                );
            }
        }
        let n = self.leaves;
        let mut visited = std::mem::take(&mut self.tree.visited);
        let mut targets = std::mem::take(&mut self.targets);
        for index in self.segments_of(rank) {
            let segment = self.segments[index];
            let (l, r) = (segment.start_leaf as usize, segment.end_bound as usize);
            targets.clear();
            match self.layout {
                Layout::Starts => {
                    let mut p = l + n;
                    while p >= 1 {
                        if self.nodes[p].read_inside {
                            targets.push(Run::Inside(p as u32));
                        }
                        p >>= 1;
                    }
                    canonical(n, l + 1, r, |node| targets.push(Run::Covering(node as u32)));
                }
                Layout::Subtrees => {
                    self.tree.visit(l, r);
                    std::mem::swap(&mut visited, &mut self.tree.visited);
                    for &(node, canonical) in &visited {
                        let lists = &self.nodes[node as usize];
                        if canonical && lists.read_covering {
                            targets.push(Run::Covering(node));
                        }
                        if lists.read_inside {
                            targets.push(Run::Inside(node));
                        }
                    }
                    std::mem::swap(&mut visited, &mut self.tree.visited);
                }
                Layout::Blocks { shift } => {
                    // Below block size: `inside` above the start leaf, ends above the last.
                    let (mut p, mut q) = (l + n, r - 1 + n);
                    for _ in 0..shift {
                        if self.nodes[p].read_inside {
                            targets.push(Run::Inside(p as u32));
                        }
                        targets.push(Run::Extra(q as u32));
                        p >>= 1;
                        q >>= 1;
                    }
                    // `covering`, a canonical node of block size or above standing for its
                    // descendants of block size.
                    let height = n.trailing_zeros();
                    canonical(n, l + 1, r, |node| {
                        let level = height - node.ilog2();
                        let below = level.saturating_sub(shift);
                        for w in node << below..(node + 1) << below {
                            if self.nodes[w].read_covering {
                                targets.push(Run::Covering(w as u32));
                            }
                        }
                    });
                    let grid = Grid { leaves: n, shift };
                    let (first, last) = (l >> shift, (r - 1) >> shift);
                    targets.extend((first..=last).map(|j| Run::Extra(grid.block(j) as u32)));
                    if grid.blocks() >= 4 {
                        let quads = first.saturating_sub(3)..=last.min(grid.blocks() - 4);
                        targets.extend(quads.map(|j| Run::Extra(grid.quad(j) as u32)));
                    }
                }
            }
            self.insert_into(&targets, range);
        }
        self.targets = targets;
        self.tree.visited = visited;
        Ok(())
    }

    /// A placement was refused because its top does not fit in a `W` (though it does in
    /// a `u64`): what this engine placed since is not what a `u64` engine would, and the
    /// run must be made again with one ([`Word`]).
    pub(crate) fn word_overflow(&self) -> bool {
        self.word_overflow
    }

    /// Adds `range` to each of the node lists `targets` (no list twice), journaled while a
    /// trial is open.
    ///
    /// The binary searches for where it goes in each list run in lockstep, one step of
    /// every list at a time: the steps of different lists do not depend on each other, so
    /// their cache misses overlap. One after the other, each list's search was a chain of
    /// misses (issue #18: in [`Layout::Blocks`], nearly all of the insertion's time).
    fn insert_into(&mut self, targets: &[Run], range: Range<W>) {
        let lo = range.0;
        let mut searches = std::mem::take(&mut self.searches);
        searches.clear();
        {
            let lists: Vec<&[Range<W>]> = targets.iter().map(|&run| self.run(run)).collect();
            // `(base, size)`: the first range ending at or above `lo` is in
            // `base..=base + size`; `size == 0`: it is at `base`. A short list (in the
            // cache already, or inline) is searched at once.
            searches.extend(lists.iter().map(|ranges| {
                if ranges.len() <= SHORT {
                    (ranges.partition_point(|r| r.1 < lo), 0)
                } else {
                    (0, ranges.len())
                }
            }));
            let mut open = true;
            while open {
                open = false;
                for (ranges, (base, size)) in lists.iter().zip(searches.iter_mut()) {
                    if *size > 1 {
                        let half = *size / 2;
                        // A mask, not a branch: a mispredicted branch would throw away the
                        // loads of the other lists' steps issued after it. (`black_box`
                        // hides that `below` is 0 or 1, which the compiler would turn back
                        // into a branch.)
                        let below = std::hint::black_box(usize::from(ranges[*base + half].1 < lo));
                        *base += half & below.wrapping_neg();
                        *size -= half;
                        open |= *size > 1;
                    }
                }
            }
            for (ranges, (base, size)) in lists.iter().zip(searches.iter_mut()) {
                if *size == 1 {
                    *base += usize::from(ranges[*base].1 < lo);
                }
            }
        }
        for (&run, &(first, _)) in targets.iter().zip(searches.iter()) {
            let list = list_in(&mut self.nodes, &mut self.extra, run)
                .expect("the conflict partners are not a node list");
            match &mut self.journal {
                None => insert_union_at(list, range, first, |_| {}),
                Some(journal) => {
                    let removed = journal.removed.len();
                    insert_union_at(list, range, first, |old| {
                        journal.removed.extend_from_slice(old)
                    });
                    journal.edits.push(Edit {
                        list: run,
                        at: first as u32,
                        removed: removed..journal.removed.len(),
                    });
                }
            }
        }
        self.searches = searches;
    }

    /// Opens a trial: the placements from now on are undone by [`Engine::rollback`]. A
    /// trial already open is forgotten (its placements stay).
    pub(crate) fn begin_trial(&mut self) {
        self.journal = Some(Journal::default());
    }

    /// Undoes every placement of the open trial (if any), newest first, and closes it:
    /// the engine is exactly as it was at [`Engine::begin_trial`].
    pub(crate) fn rollback(&mut self) {
        let Some(journal) = self.journal.take() else {
            return;
        };
        for edit in journal.edits.iter().rev() {
            if let Some(list) = self.list_mut(edit.list) {
                list.splice(edit.at as usize, &journal.removed[edit.removed.clone()]);
            }
        }
        if let Some(recency) = &mut self.recency {
            for &(is_tag, node, old) in journal.recency.iter().rev() {
                let list = if is_tag {
                    &mut recency.tag
                } else {
                    &mut recency.sub
                };
                list[node as usize] = old;
            }
            let sized = journal
                .placed
                .iter()
                .filter(|&&r| self.shapes[r as usize].size > 0)
                .count();
            let kept = recency.sequence.len() - sized;
            recency.sequence.truncate(kept);
        }
        if let Some(unclaimed) = &mut self.unclaimed {
            for edit in journal.unclaimed.iter().rev() {
                match *edit {
                    UnclaimedEdit::Added(start) => {
                        unclaimed.segments.remove(&start);
                    }
                    UnclaimedEdit::Removed(start, end, rank) => {
                        unclaimed.segments.insert(start, (end, rank));
                    }
                }
            }
        }
        for &rank in &journal.placed {
            self.placed[rank as usize] = false;
        }
    }

    /// Reads a little of every node that placing rank `rank` visits (the query's and the
    /// insertion's: both lists of the nodes on the path above the leaf of each segment's
    /// start and of the canonical nodes of the segment) in one loop without dependencies
    /// between its steps, so that their cache misses overlap instead of coming one after
    /// the other inside the dependent steps of the query and the insertion.
    fn prefetch(&mut self, rank: usize) {
        let n = self.leaves;
        let touch_list = |list: &List<W>| {
            let ranges = list.as_slice();
            match (ranges.first(), ranges.get(ranges.len() / 2)) {
                (Some(first), Some(middle)) => first.0.into() ^ middle.1.into(),
                _ => 0,
            }
        };
        let touch =
            |node: &Node<W>| touch_list(&node.inside).wrapping_add(touch_list(&node.covering));
        let mut sum = 0u64;
        for index in self.segments_of(rank) {
            let segment = self.segments[index];
            let (l, r) = (segment.start_leaf as usize, segment.end_bound as usize);
            match self.layout {
                Layout::Starts => {
                    canonical(n, l, r, |node| {
                        sum = sum.wrapping_add(touch(&self.nodes[node]))
                    });
                    let mut p = l + n;
                    while p >= 1 {
                        sum = sum.wrapping_add(touch(&self.nodes[p]));
                        p >>= 1;
                    }
                }
                Layout::Subtrees => {
                    for &(node, _) in self.tree.visit(l, r) {
                        sum = sum.wrapping_add(touch(&self.nodes[node as usize]));
                    }
                }
                Layout::Blocks { shift } => {
                    // The block lists met, and the nodes above both ends up to block size.
                    let grid = Grid { leaves: n, shift };
                    for j in l >> shift..=(r - 1) >> shift {
                        sum = sum.wrapping_add(touch_list(&self.extra[grid.block(j)]));
                    }
                    let (mut p, mut q) = (l + n, r - 1 + n);
                    for _ in 0..=shift {
                        sum = sum.wrapping_add(touch(&self.nodes[p]));
                        sum = sum.wrapping_add(touch_list(&self.extra[q]));
                        p >>= 1;
                        q >>= 1;
                    }
                }
            }
        }
        std::hint::black_box(sum);
    }

    /// The address ranges (of the node lists and the placed conflict partners) that the
    /// placements so far have read, each range the gap scan took from the gathered runs:
    /// a measure of their cost that does not depend on the machine.
    pub(crate) fn reads(&self) -> u64 {
        self.reads
    }

    /// Finds `buffer`'s offset with `fit` and places it there; returns the offset in
    /// bytes.
    pub(crate) fn place_with(&mut self, buffer: usize, fit: Fit) -> Result<u64, PlanError> {
        let rank = self.ranks[buffer] as usize;
        self.place_rank_with(rank, fit)?;
        self.offset_in_bytes(rank).ok_or(PlanError::ArenaOverflow)
    }

    /// Rank `rank`'s offset in bytes; `None` when that passes a u64, which only a buffer
    /// stacked past a deadline can ([`plan_in_order`]): `place` keeps every top within
    /// the limit.
    fn offset_in_bytes(&self, rank: usize) -> Option<u64> {
        self.offsets[rank].checked_mul(self.unit)
    }

    /// [`Engine::place_with`] by rank, in units.
    fn place_rank_with(&mut self, rank: usize, fit: Fit) -> Result<u64, PlanError> {
        self.prefetch(rank);
        let offset = self.find(rank, fit)?;
        self.place(rank, offset)?;
        Ok(offset)
    }

    /// Places every buffer that has a fixed offset, in id order, at that offset.
    ///
    /// Fails with [`PlanError::FixedOffsetsClash`] naming the first clashing pair (the
    /// lower id first) when two fixed buffers that must not share bytes overlap. A
    /// zero-size buffer clashes with nothing.
    pub(crate) fn place_fixed(&mut self) -> Result<(), PlanError> {
        let problem = self.problem;
        for (index, buffer) in problem.buffers().iter().enumerate() {
            let Some(offset) = buffer.fixed_offset else {
                continue;
            };
            let rank = self.ranks[index] as usize;
            // In units: the unit divides every fixed offset and size.
            let offset = offset / self.unit;
            if buffer.size == 0 {
                self.place(rank, offset)?;
                continue;
            }
            // `Problem::new` guarantees that `offset + size` fits.
            let end = offset + self.shapes[rank].size;
            self.gather(rank);
            let clashes = self.runs.iter().any(|&run| {
                self.run(run)
                    .iter()
                    .any(|&(lo, hi)| lo.into() < end && offset < hi.into())
            });
            if clashes {
                return Err(self.clash(index));
            }
            self.place(rank, offset)?;
        }
        Ok(())
    }

    /// The error for a fixed buffer that overlaps an already placed fixed one (rare: a
    /// linear search is fine).
    fn clash(&self, index: usize) -> PlanError {
        let buffers = self.problem.buffers();
        let b = &buffers[index];
        // In units, as the engine's offsets.
        let offset = b.fixed_offset.unwrap_or(0) / self.unit;
        let end = offset + self.shapes[self.ranks[index] as usize].size;
        let partners = self.partners_of(self.ranks[index] as usize);
        let other = (0..buffers.len())
            .find(|&j| {
                let rank = self.ranks[j] as usize;
                self.placed[rank]
                    && buffers[j].size > 0
                    && self.offsets[rank] < end
                    && offset < self.offsets[rank] + self.shapes[rank].size
                    && (partners.contains(&(rank as u32)) || b.live_together(&buffers[j]))
            })
            .unwrap_or(index);
        PlanError::FixedOffsetsClash {
            a: buffers[other].name.clone(),
            b: b.name.clone(),
        }
    }

    /// The offsets in bytes by buffer id (0 for a buffer not placed); `None` when one
    /// does not fit in a u64 (a buffer stacked past a deadline, [`plan_in_order`]).
    fn offsets_by_id(&self) -> Option<Vec<u64>> {
        let mut offsets = vec![0; self.ids.len()];
        for (rank, &id) in self.ids.iter().enumerate() {
            offsets[id as usize] = self.offset_in_bytes(rank)?;
        }
        Some(offsets)
    }

    /// The finished plan. Every buffer must have been placed.
    pub(crate) fn into_plan(self) -> Result<Plan, PlanError> {
        debug_assert!(self.placed.iter().all(|&p| p));
        self.offsets_by_id()
            .and_then(|offsets| Plan::new(self.problem, offsets))
            .ok_or(PlanError::ArenaOverflow)
    }
}

/// The highest end of a buffer with a fixed offset (0 when none), once it is known that
/// no two of them clash ([`PlanError::FixedOffsetsClash`] otherwise, as
/// [`Engine::place_fixed`] names it): an engine places them alone, in a problem of their
/// own, so that the check costs the fixed buffers, not the whole problem.
pub(crate) fn fixed_top(problem: &Problem) -> Result<u64, PlanError> {
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
        Engine::<u64>::new(&alone).place_fixed()?;
    }
    Ok(top)
}

/// Appends the merge of two sorted runs to `out`.
pub(crate) fn merge<T: Copy + Ord>(a: &[(T, T)], b: &[(T, T)], out: &mut Vec<(T, T)>) {
    out.reserve(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        if b[j].0 < a[i].0 {
            out.push(b[j]);
            j += 1;
        } else {
            out.push(a[i]);
            i += 1;
        }
    }
    out.extend_from_slice(&a[i..]);
    out.extend_from_slice(&b[j..]);
}

/// Adds `range` to `list`, a sorted list of disjoint, non-touching address ranges, merging
/// it with the ranges it overlaps or touches. `first` must be the position of the first
/// range ending at or above the new range's start (where the new or merged range sits).
/// Hands the ranges it replaces (none for a pure insertion) to `replaced` before changing
/// them.
fn insert_union_at<W: Word>(
    list: &mut List<W>,
    (lo, hi): Range<W>,
    first: usize,
    replaced: impl FnOnce(&[Range<W>]),
) {
    let ranges = list.as_slice();
    debug_assert_eq!(first, ranges.partition_point(|r| r.1 < lo));
    // Usually at most one range to merge: walking to it beats a second binary search.
    let last = first + ranges[first..].iter().take_while(|r| r.0 <= hi).count();
    if first == last {
        list.insert(first, (lo, hi));
    } else {
        replaced(&ranges[first..last]);
        let merged = (ranges[first].0.min(lo), ranges[last - 1].1.max(hi));
        list.replace(first, last, merged);
    }
}

/// Chooses an offset for a buffer of `size` and `alignment` among the gaps between
/// `ranges` (sorted by start, possibly overlapping or repeated), or on top of them.
pub(crate) fn scan(
    ranges: &[(u64, u64)],
    size: u64,
    alignment: u64,
    fit: Fit,
) -> Result<u64, PlanError> {
    let mut gaps = Gaps::new(0, size, alignment, fit);
    for &range in ranges {
        if let Some(offset) = gaps.next(range) {
            return Ok(offset);
        }
    }
    gaps.finish()
}

/// A tournament (loser) tree over the runs of a scan: which run's next range starts
/// lowest. Replacing the winner's key replays one match per level, each a comparison and
/// two conditional moves, with no branch that depends on the data: the binary heap it
/// replaced mispredicted about one branch per range read (issue #18). Ties go to either
/// run; the scan works on the union, so the order among equal starts does not matter.
#[derive(Default)]
struct Tournament {
    /// Node `j` (`1 <= j < p`; node `j` has children `2j` and `2j + 1`, leaf `i` is
    /// node `p + i`) keeps the loser of its last match, as (key, run); node 0 is unused.
    losers: Vec<(u64, u32)>,
    /// The overall winner, as (key, run).
    winner: (u64, u32),
    /// The number of leaves, a power of two.
    p: usize,
    /// For the build: the winner of the subtree at each node, as (key, run); leaf `i`
    /// (node `p + i`) holds run `i`'s first key ([`Tournament::DONE`] for a spent run and
    /// for the leaves past the last run).
    winners: Vec<(u64, u32)>,
}

impl Tournament {
    /// The key of a spent run (no range starts at `u64::MAX`: every range is non-empty).
    const DONE: u64 = u64::MAX;

    fn reset(&mut self, runs: usize) {
        let p = runs.max(1).next_power_of_two();
        self.p = p;
        self.winners.clear();
        self.winners.resize(p, (0, 0));
        self.winners
            .extend((0..p as u32).map(|i| (Tournament::DONE, i)));
    }

    fn set(&mut self, run: usize, key: u64) {
        self.winners[self.p + run].0 = key;
    }

    /// Plays every match once the keys are set.
    fn build(&mut self) {
        let p = self.p;
        // Each subtree's winner, bottom up; the losers kept on the way.
        let winners = &mut self.winners;
        self.losers.clear();
        self.losers.resize(p, (Tournament::DONE, 0));
        for j in (1..p).rev() {
            let (a, b) = (winners[2 * j], winners[2 * j + 1]);
            let (w, l) = if b.0 < a.0 { (b, a) } else { (a, b) };
            winners[j] = w;
            self.losers[j] = l;
        }
        self.winner = winners[1];
    }

    /// The lowest next start and its run.
    fn winner(&self) -> (u64, usize) {
        (self.winner.0, self.winner.1 as usize)
    }

    /// Gives the winning run the new key `key` and replays its matches.
    fn replace_winner(&mut self, key: u64) {
        let mut current = (key, self.winner.1);
        let mut j = (self.p + current.1 as usize) >> 1;
        while j >= 1 {
            let stored = self.losers[j];
            let swap = stored.0 < current.0;
            let (w, l) = if swap {
                (stored, current)
            } else {
                (current, stored)
            };
            self.losers[j] = l;
            current = w;
            j >>= 1;
        }
        self.winner = current;
    }
}

/// The lowest aligned offset at or above `start` where `size` bytes end by `lo` (the gap
/// `[start, lo)` holds them), if any; `None` also when the arithmetic would overflow.
fn fit_in_gap(start: u64, lo: u64, size: u64, alignment: u64) -> Option<u64> {
    let offset = start.checked_next_multiple_of(alignment)?;
    (offset.checked_add(size)? <= lo).then_some(offset)
}

/// The gap scan: fed ranges in order of start (possibly overlapping or repeated), it
/// chooses an offset `>= floor` for a buffer of `size` and `alignment` among the gaps
/// between them, or on top of them ([`Fit::Stacked`] scans first-fit).
struct Gaps {
    floor_or_highest_end: u64,
    size: u64,
    alignment: u64,
    fit: Fit,
    /// (room left above the buffer, offset) of the best gap so far.
    best: Option<(u64, u64)>,
}

impl Gaps {
    fn new(floor: u64, size: u64, alignment: u64, fit: Fit) -> Gaps {
        Gaps {
            floor_or_highest_end: floor,
            size,
            alignment,
            fit,
            best: None,
        }
    }

    /// Takes the next range; `Some(offset)` when the choice is made (no later range can
    /// change it).
    fn next(&mut self, (lo, hi): (u64, u64)) -> Option<u64> {
        let cursor = self.floor_or_highest_end;
        if let Some(candidate) = fit_in_gap(cursor, lo, self.size, self.alignment) {
            match self.fit {
                Fit::First | Fit::Stacked | Fit::StackedPrevious => return Some(candidate),
                Fit::Best => {
                    let room = lo - (candidate + self.size);
                    if room == 0 {
                        return Some(candidate);
                    }
                    if self.best.is_none_or(|(r, _)| room < r) {
                        self.best = Some((room, candidate));
                    }
                }
            }
        }
        self.floor_or_highest_end = cursor.max(hi);
        None
    }

    /// The choice once every range was taken.
    fn finish(self) -> Result<u64, PlanError> {
        if let Some((_, offset)) = self.best {
            return Ok(offset);
        }
        let offset = self
            .floor_or_highest_end
            .checked_next_multiple_of(self.alignment)
            .ok_or(PlanError::ArenaOverflow)?;
        offset
            .checked_add(self.size)
            .ok_or(PlanError::ArenaOverflow)?;
        Ok(offset)
    }
}

/// The lowest offset at or above `from`, aligned, where `shape` shares no byte with
/// `ranges` (sorted, disjoint), and the position of the first range ending above it.
/// `widest` is the list's [`Summary`], up to date, if it has one; the ranges before `at`
/// must all end at or below `from`. Adds the ranges and chunk summaries it looks at to
/// `reads`. (Inlined into both callers: called, it cost `Layout::Subtrees` 14 %.)
#[inline(always)]
fn first_fit_in<W: Word>(
    ranges: &[Range<W>],
    widest: Option<&[u64]>,
    at: usize,
    from: u64,
    shape: Shape,
    reads: &mut u64,
) -> Result<(u64, usize), PlanError> {
    // The first range ending above `from`, by a galloping search from `at`.
    let (mut lo, mut step) = (at, 1);
    while lo + step <= ranges.len() && ranges[lo + step - 1].1.into() <= from {
        *reads += 1;
        lo += step;
        step *= 2;
    }
    let hi = (lo + step).min(ranges.len());
    *reads += 1;
    let first = lo + ranges[lo..hi].partition_point(|r| r.1.into() <= from);
    // The offset a gap starting at `start` would give.
    let fit = |start: u64| -> Result<(u64, u64), PlanError> {
        let offset = start
            .checked_next_multiple_of(shape.alignment)
            .ok_or(PlanError::ArenaOverflow)?;
        let end = offset
            .checked_add(shape.size)
            .ok_or(PlanError::ArenaOverflow)?;
        Ok((offset, end))
    };
    let mut k = first;
    while k < ranges.len() {
        if let Some(widest) = widest {
            // A chunk whose gaps are all narrower than the buffer holds no fit (the gap
            // before `first` starts at `from`, which only narrows it).
            if k % CHUNK == 0 && k > first && widest[k / CHUNK] < shape.size {
                *reads += 1;
                k += CHUNK;
                continue;
            }
        }
        *reads += 1;
        let start = if k == first {
            from
        } else {
            ranges[k - 1].1.into()
        };
        let (offset, end) = fit(start)?;
        if end <= ranges[k].0.into() {
            return Ok((offset, k));
        }
        k += 1;
    }
    let start = match ranges.last() {
        Some(&(_, top)) if k > first => top.into(),
        _ => from,
    };
    Ok((fit(start)?.0, ranges.len()))
}

/// The union of sorted `ranges` as disjoint, sorted ranges.
fn union<W: Word>(ranges: &[Range<W>]) -> Vec<Range<W>> {
    let mut out: Vec<Range<W>> = Vec::with_capacity(ranges.len());
    for &(lo, hi) in ranges {
        match out.last_mut() {
            Some(last) if lo <= last.1 => last.1 = last.1.max(hi),
            _ => out.push((lo, hi)),
        }
    }
    out
}

/// Places the fixed buffers, then every other buffer in `order` with `fit`.
///
/// `order` must list every buffer without a fixed offset exactly once (fixed ones in it
/// are skipped).
pub(crate) fn plan_in_order(
    problem: &Problem,
    order: impl IntoIterator<Item = u32>,
    fit: Fit,
) -> Result<Plan, PlanError> {
    plan_in_order_reading(problem, order, fit, None).map(|(plan, _)| plan)
}

/// [`plan_in_order`], with the address ranges its placements read ([`Engine::reads`]): a
/// deterministic measure of the run's cost, for budgets that must not depend on the clock.
/// `lower_bound`: the problem's max-live when the caller knows it ([`u32_may_hold`]).
pub(crate) fn plan_in_order_reading(
    problem: &Problem,
    order: impl IntoIterator<Item = u32>,
    fit: Fit,
    lower_bound: Option<u64>,
) -> Result<(Plan, u64), PlanError> {
    let order: Vec<u32> = order.into_iter().collect();
    if !u32_may_hold(problem, lower_bound) {
        return plan_in_word::<u64>(problem, &order, fit);
    }
    // An overflow of the `u32` lists, or a real one, which the `u64` run reports again.
    match plan_in_word::<u32>(problem, &order, fit) {
        Err(PlanError::ArenaOverflow) => plan_in_word::<u64>(problem, &order, fit),
        result => result,
    }
}

/// Whether an engine with `u32` lists ([`Word`]) may hold a plan of `problem`: `false`
/// when its lower bound (`lower_bound`, or else max-live), in units of the granularity,
/// already exceeds `u32::MAX`, so that a `u32` run could only fail (idealloc's Y_1, 497 GB
/// in bytes). `true` does not promise that the arena fits.
pub(crate) fn u32_may_hold(problem: &Problem, lower_bound: Option<u64>) -> bool {
    let Some(bound) = lower_bound.or_else(|| max_live(problem)) else {
        return false;
    };
    let (unit, _, _) = granularity_and_unfixed(problem);
    bound / unit <= <u32 as Word>::MAX
}

/// [`plan_in_order_reading`] with node lists of `W`.
fn plan_in_word<W: Word>(
    problem: &Problem,
    order: &[u32],
    fit: Fit,
) -> Result<(Plan, u64), PlanError> {
    if let Some(halves) = Halves::of(problem, fit) {
        return halves.plan::<W>(problem, order);
    }
    let mut engine = Engine::<W>::ordered(problem, order).stacked(fit);
    engine.place_fixed()?;
    let deadline = DEADLINE.with(Cell::get);
    // Ranks `0..ordered` are the order's buffers, in its order.
    let mut ranks = 0..engine.ordered;
    for rank in ranks.by_ref() {
        if !engine.placed[rank] {
            engine.place_rank_with(rank, fit)?;
        }
        if (rank as u32 + 1).is_multiple_of(DEADLINE_EVERY)
            && deadline.is_some_and(|d| Instant::now() >= d)
        {
            break;
        }
    }
    // Past the deadline ([`with_deadline`]): the rest goes on top of everything placed,
    // one above the other, which is valid whatever they must not share bytes with.
    let mut top = (0..engine.ids.len())
        .filter(|&r| engine.placed[r])
        .map(|r| engine.offsets[r] + engine.shapes[r].size)
        .max()
        .unwrap_or(0);
    for rank in ranks {
        if !engine.placed[rank] {
            let shape = engine.shapes[rank];
            let offset = top
                .checked_next_multiple_of(shape.alignment)
                .ok_or(PlanError::ArenaOverflow)?;
            top = offset
                .checked_add(shape.size)
                .ok_or(PlanError::ArenaOverflow)?;
            engine.offsets[rank] = offset;
            engine.placed[rank] = true;
        }
    }
    let reads = engine.reads;
    Ok((engine.into_plan()?, reads))
}

/// A greedy run of first fit on two threads, with the same plan as on one (issue #18).
///
/// Time is cut in two at a start `c` that gives both halves as many buffers of their own
/// ([`balanced_cut`]). A buffer whose live segments all end by `c` is *left*, one whose
/// segments all start at or after `c` is *right*, any other is *shared*; a left and a
/// right buffer are never live together. Each half builds an engine of its own, over its
/// buffers and the shared ones, and places them in the order given, both on its own
/// thread. A buffer of one half finds in its engine every earlier buffer live together
/// with it, as on one thread. A shared buffer must avoid the earlier buffers of
/// both engines: the two threads meet at it and exchange, at the same time, the first runs
/// of offsets free on their side ([`Engine::free_from`], [`Engine::agree`]); both take the
/// least offset free in both, which is the first fit over both engines, or, when the
/// runs offered have none in common, both offer again from where the shorter offer ends.
/// (Raising one candidate in turn, as this did at first, took ~20 round trips per shared
/// buffer at 10^6 buffers with ~20,000 live, and the halves waited 17 s each.) While a
/// half waits for the other's offer, it places later buffers of its own that cannot be
/// live with the shared one ([`Ahead`]). Best fit does not split this way (the best gap
/// over both is not found from each), nor does the stacked rule (its nearest-in-order
/// buffer may be in either half).
///
/// Used from [`Halves::SPLIT_FROM`] buffers of which at most a tenth are shared
/// ([`Halves::SHARED_AT_MOST`]), without conflict pairs or fixed offsets (which may tie a
/// left buffer to a right one), and not under a deadline. Whether it is
/// used depends on the problem alone, not on the machine, so that the address ranges
/// read ([`Engine::reads`]), which budgets use, are the same everywhere.
struct Halves {
    /// `side[i]`: buffer `i`'s half.
    side: Vec<Side>,
    /// The runs of free offsets in the first offer for a shared buffer
    /// ([`Halves::FIRST_OFFER`]).
    first_offer: usize,
    /// Place ahead whatever may go while waiting for an offer ([`Exchange`]); tests.
    eager: bool,
    /// The halves' engines' [`Layout`]; `None` (outside tests): [`Layout::of`]'s.
    layout: Option<Layout>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    Left,
    Right,
    Shared,
}

impl Halves {
    /// The fewest buffers for which a greedy run is split in two.
    const SPLIT_FROM: usize = 200_000;
    /// The runs of free offsets each half first offers for a shared buffer; each further
    /// offer for the same buffer doubles it.
    const FIRST_OFFER: usize = 8;
    /// A run is split only when at most one buffer in `SHARED_AT_MOST` lives across the
    /// cut: the halves meet at every shared buffer, and both engines hold them all.
    /// (Measured: 300,000 buffers all live together at the middle of their time, half of
    /// them shared, took 454 s split against 440 s on one thread, with 200 MB against
    /// 145 MB; 10^6 random buffers with ~20,000 live share 2 % and run in 20-21 s split
    /// against 36 s on one thread.)
    const SHARED_AT_MOST: usize = 10;

    /// The halves of `problem` for a run with `fit`, or `None` when it runs on one thread.
    fn of(problem: &Problem, fit: Fit) -> Option<Halves> {
        let halves = Halves::from_size(problem, fit, Halves::SPLIT_FROM)?;
        let shared = halves.side.iter().filter(|&&s| s == Side::Shared).count();
        (shared <= problem.len() / Halves::SHARED_AT_MOST).then_some(halves)
    }

    /// [`Halves::of`], splitting from `split_from` buffers however many are shared.
    fn from_size(problem: &Problem, fit: Fit, split_from: usize) -> Option<Halves> {
        let buffers = problem.buffers();
        if fit != Fit::First
            || buffers.len() < split_from
            || !problem.conflicts().is_empty()
            || current_deadline().is_some()
            || buffers.iter().any(|b| b.fixed_offset.is_some())
        {
            return None;
        }
        let cut = balanced_cut(buffers);
        // The segments of a buffer lie within its lifetime and cover both of its ends.
        let side: Vec<Side> = buffers
            .iter()
            .map(|b| {
                if b.size == 0 || b.lifetime.end <= cut {
                    Side::Left
                } else if b.lifetime.start >= cut {
                    Side::Right
                } else {
                    Side::Shared
                }
            })
            .collect();
        Some(Halves {
            side,
            first_offer: Halves::FIRST_OFFER,
            eager: false,
            layout: None,
        })
    }

    /// Places `order` as [`plan_in_order_reading`] does.
    fn plan<W: Word>(&self, problem: &Problem, order: &[u32]) -> Result<(Plan, u64), PlanError> {
        let (side, first_offer, eager) = (&self.side[..], self.first_offer, self.eager);
        let of_half = |half: Side| {
            let member = |i: usize| side[i] == half || side[i] == Side::Shared;
            let order: Vec<u32> = order
                .iter()
                .copied()
                .filter(|&i| member(i as usize))
                .collect();
            Engine::<W>::of_members(problem, &order, member, self.layout)
        };
        let (to_right, from_left) = std::sync::mpsc::channel::<Offer>();
        let (to_left, from_right) = std::sync::mpsc::channel::<Offer>();
        // One half, on the calling thread or its own: its buffers' (id, offset in bytes)
        // and the ranges it read, its engine dropped there too.
        let half = |half: Side, to_other, from_other| {
            let mut engine = of_half(half);
            let exchange = Exchange {
                shared: (0..engine.ordered)
                    .map(|rank| side[engine.ids[rank] as usize] == Side::Shared)
                    .collect(),
                first_offer,
                eager,
                to_other,
                from_other,
            };
            let done = engine.place_half(&exchange);
            // The error, if any, drops this half's channel ends, which stops the other
            // half at its next shared buffer.
            drop(exchange);
            done?;
            let placed: Option<Vec<(u32, u64)>> = (0..engine.ordered)
                .map(|rank| Some((engine.ids[rank], engine.offset_in_bytes(rank)?)))
                .collect();
            Ok((placed.ok_or(PlanError::ArenaOverflow)?, engine.reads))
        };
        let half = &half;
        let (done_left, done_right) = std::thread::scope(|scope| {
            let left_thread = scope.spawn(move || half(Side::Left, to_right, from_right));
            let done_right = half(Side::Right, to_left, from_left);
            match left_thread.join() {
                Ok(done_left) => Ok((done_left, done_right)),
                Err(_) => Err(PlanError::Internal("the left half panicked".into())),
            }
        })?;
        // A half stopped by the other's error reports the other's.
        let ((left, left_reads), (right, right_reads)) = match (done_left, done_right) {
            (Err(e), _) | (_, Err(e)) if e != Halves::gone() => return Err(e),
            (Err(e), _) | (_, Err(e)) => return Err(e),
            (Ok(left), Ok(right)) => (left, right),
        };
        let mut offsets = vec![0; problem.len()];
        for (id, offset) in left.into_iter().chain(right) {
            offsets[id as usize] = offset;
        }
        let plan = Plan::new(problem, offsets).ok_or(PlanError::ArenaOverflow)?;
        Ok((plan, left_reads.saturating_add(right_reads)))
    }

    /// The error of a half whose other half stopped first (with an error of its own).
    fn gone() -> PlanError {
        PlanError::Internal("the other half of a split run stopped".into())
    }
}

/// The cut of a split run ([`Halves`]): a start `c` of some sized buffer for which as
/// many sized buffers end by `c` (the left half's own) as start at or after it (the
/// right half's own), or as near as the starts allow (the earlier of two as near). Both
/// halves also place every shared buffer, so that gives them as many placements. (At the
/// median start, as at first, the right half had one more buffer of its own for every
/// shared one: at 10^6 buffers with ~20,000 live, ~20,000 more placements, and the left
/// half waited 0.3 s for it in all.) `0` when no buffer has a size.
fn balanced_cut(buffers: &[Buffer]) -> u64 {
    let sized = buffers.iter().filter(|b| b.size > 0);
    let mut starts: Vec<u64> = sized.clone().map(|b| b.lifetime.start).collect();
    let mut ends: Vec<u64> = sized.map(|b| b.lifetime.end).collect();
    crate::radix::sort_by_u64_key(&mut starts, |&t| t);
    crate::radix::sort_by_u64_key(&mut ends, |&t| t);
    let n = starts.len();
    let left = |c: u64| ends.partition_point(|&e| e <= c);
    let right = |c: u64| n - starts.partition_point(|&s| s < c);
    // `left` grows with the cut and `right` shrinks: the first start where `left` is no
    // longer below `right`, or the one before it.
    let k = starts.partition_point(|&c| left(c) < right(c));
    [k.checked_sub(1), (k < n).then_some(k)]
        .into_iter()
        .flatten()
        .map(|i| starts[i])
        .min_by_key(|&c| left(c).abs_diff(right(c)))
        .unwrap_or(0)
}

/// What a half of a split run tells the other about a shared buffer: the offsets free on
/// its side from the floor both are at ([`Engine::free_from`]), complete below `bound`.
struct Offer {
    free: Vec<(u64, u64)>,
    bound: u64,
}

/// The least offset below `bound` in both `a` and `b`, runs of free aligned offsets
/// (`(first, last)`, inclusive, increasing, `first` aligned, as [`Engine::free_from`]
/// gives them for one buffer, so the larger of two firsts is aligned too).
fn least_in_both(a: &[(u64, u64)], b: &[(u64, u64)], bound: u64) -> Option<u64> {
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        let first = a[i].0.max(b[j].0);
        if first >= bound {
            return None;
        }
        if first <= a[i].1.min(b[j].1) {
            return Some(first);
        }
        if a[i].1 < b[j].1 {
            i += 1;
        } else {
            j += 1;
        }
    }
    None
}

impl<W: Word> Engine<'_, W> {
    /// The offset of shared rank `rank` ([`Halves`]): both halves offer the runs of
    /// offsets free on their side from the same floor, at the same time, and both take the
    /// least offset free in both; when there is none below the offers' bounds, both offer
    /// again from there, twice as many runs. Both decide alike from the same two offers,
    /// so they agree without a further message. While the other half's offer has not
    /// come, later buffers of this half that cannot be live with `rank` are placed ahead
    /// ([`Ahead`]).
    fn agree(&mut self, rank: usize, exchange: &Exchange) -> Result<u64, PlanError> {
        let alignment = self.shapes[rank].alignment;
        let (mut floor, mut most) = (0, exchange.first_offer);
        // The runs of free offsets from `floor` on, every one below `known`: what the last
        // offers found above the new floor is not looked for again (issue #18: the other
        // half's bound was often the lower, and the next offer scanned the same ranges).
        let (mut free, mut known) = (Vec::new(), 0u64);
        let mut more = Vec::new();
        let mut ahead = Ahead::new(self, rank);
        loop {
            if free.len() < most && known != u64::MAX {
                known = self.free_from(rank, known.max(floor), most - free.len(), &mut more);
                free.extend_from_slice(&more);
            }
            // The first `most` runs, and the bound below which they are complete (the
            // last run found is the one on top when `known` is `u64::MAX`).
            let offered = &free[..free.len().min(most)];
            let bound = if free.len() > most {
                free[most - 1].1 + 1
            } else {
                known
            };
            let mine = Offer {
                free: offered.to_vec(),
                bound,
            };
            exchange.to_other.send(mine).map_err(|_| Halves::gone())?;
            if exchange.eager {
                while ahead.place_one(self, &exchange.shared)? {}
            }
            let theirs = loop {
                match exchange.from_other.try_recv() {
                    Ok(theirs) => break theirs,
                    Err(std::sync::mpsc::TryRecvError::Empty) => {
                        if !ahead.place_one(self, &exchange.shared)? {
                            break exchange.from_other.recv().map_err(|_| Halves::gone())?;
                        }
                    }
                    Err(std::sync::mpsc::TryRecvError::Disconnected) => return Err(Halves::gone()),
                }
            };
            let bound = bound.min(theirs.bound);
            match least_in_both(offered, &theirs.free, bound) {
                Some(offset) => return Ok(offset),
                None if bound == u64::MAX => return Err(PlanError::ArenaOverflow),
                None => (floor, most) = (bound, most.saturating_mul(2)),
            }
            // Keep the runs at or above the new floor, the first one cut there.
            free.retain(|run| run.1 >= floor);
            if let Some(first) = free.first_mut() {
                match floor.checked_next_multiple_of(alignment) {
                    Some(start) if start <= first.1 => first.0 = first.0.max(start),
                    _ => {
                        free.remove(0);
                    }
                }
            }
        }
    }

    /// Places the buffers of the order given to [`Engine::of_members`], in that order
    /// (but for those placed ahead, which change no placement), with first fit; a shared
    /// one ([`Halves`]) at the offset it agrees on with the other half.
    fn place_half(&mut self, exchange: &Exchange) -> Result<(), PlanError> {
        for rank in 0..self.ordered {
            if self.placed[rank] {
                continue;
            }
            // A zero-size buffer goes to 0 on both sides without asking the other.
            if exchange.shared[rank] && self.shapes[rank].size > 0 {
                self.prefetch(rank);
                let offset = self.agree(rank, exchange)?;
                self.place(rank, offset)?;
            } else {
                self.place_rank_with(rank, Fit::First)?;
            }
        }
        Ok(())
    }
}

/// One half's ends of a split run's channels ([`Halves`]).
struct Exchange {
    /// `shared[r]`: rank `r` of this half's engine is a shared buffer (by rank, so that
    /// the placement loop reads it in sequence).
    shared: Vec<bool>,
    first_offer: usize,
    /// Place ahead all that may go before looking for the other's offer (tests: what is
    /// placed ahead otherwise depends on the threads' timing).
    eager: bool,
    to_other: std::sync::mpsc::Sender<Offer>,
    from_other: std::sync::mpsc::Receiver<Offer>,
}

/// The buffers a half may place while it waits for the other's offer for a shared
/// buffer: the next ones in its order, up to [`Ahead::MOST`] ranks on, that are not
/// shared and whose lifetime does not meet the hull of the lifetimes of the shared buffer
/// and of every buffer passed over (touching counts as meeting). A buffer's placement
/// depends only on the placed buffers live with it, so one placed ahead of buffers it is
/// not live with, and before every buffer it is live with that follows it, lands where it
/// would have in order; so do those. Placing ahead changes neither a plan nor the ranges
/// read.
struct Ahead {
    /// The next rank to look at.
    next: usize,
    /// The rank past the last one to look at.
    end: usize,
    /// The hull of the lifetimes passed over, shared buffer included: `(start, end)`.
    hull: (u64, u64),
}

impl Ahead {
    /// How far past a shared buffer a half looks for buffers to place ahead.
    const MOST: usize = 64;

    fn new<W: Word>(engine: &Engine<'_, W>, rank: usize) -> Ahead {
        Ahead {
            next: rank + 1,
            end: engine.ordered.min(rank + 1 + Ahead::MOST),
            hull: engine.lifetime_of(rank),
        }
    }

    /// Places the next buffer that may go ahead; `false` when there is none.
    fn place_one<W: Word>(
        &mut self,
        engine: &mut Engine<'_, W>,
        shared: &[bool],
    ) -> Result<bool, PlanError> {
        while self.next < self.end {
            let rank = self.next;
            self.next += 1;
            if engine.placed[rank] {
                continue;
            }
            let (start, end) = engine.lifetime_of(rank);
            let meets = start <= self.hull.1 && self.hull.0 <= end;
            if meets || shared[rank] {
                self.hull = (self.hull.0.min(start), self.hull.1.max(end));
                continue;
            }
            engine.place_rank_with(rank, Fit::First)?;
            return Ok(true);
        }
        Ok(false)
    }
}

impl<W: Word> Engine<'_, W> {
    /// The lifetime of rank `rank`: `(start, end)`, the hull of its live segments.
    fn lifetime_of(&self, rank: usize) -> (u64, u64) {
        let lifetime = self.problem.buffers()[self.ids[rank] as usize].lifetime;
        (lifetime.start, lifetime.end)
    }
}

/// How many buffers [`plan_in_order`] places between two looks at the clock.
pub(crate) const DEADLINE_EVERY: u32 = 1024;

thread_local! {
    /// The deadline of [`plan_in_order`] on this thread ([`with_deadline`]).
    static DEADLINE: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// The deadline set by [`with_deadline`] on this thread, if any.
pub(crate) fn current_deadline() -> Option<Instant> {
    DEADLINE.with(Cell::get)
}

/// Runs `f` with a deadline for the greedy planners on this thread: past it,
/// [`plan_in_order`] stops placing buffers in its order and stacks the rest on top of the
/// placed ones (a valid plan, worse than the complete greedy one). It looks at the clock
/// every [`DEADLINE_EVERY`] buffers. `search` uses it for its start plan on large
/// problems, so that its time limit covers the greedy start.
pub(crate) fn with_deadline<T>(deadline: Instant, f: impl FnOnce() -> T) -> T {
    let previous = DEADLINE.with(|d| d.replace(Some(deadline)));
    let result = f();
    DEADLINE.with(|d| d.set(previous));
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every fit.
    const FITS: [Fit; 4] = [Fit::First, Fit::Best, Fit::Stacked, Fit::StackedPrevious];

    /// Every layout, `Blocks` with blocks small enough for the tests' few leaves to hold
    /// whole blocks, runs of four, and windows without one.
    const LAYOUTS: [Layout; 5] = [
        Layout::Starts,
        Layout::Subtrees,
        Layout::Blocks { shift: 0 },
        Layout::Blocks { shift: 1 },
        Layout::Blocks { shift: 2 },
    ];
    use crate::problem::BufferId;

    #[test]
    fn scan_first_and_best_fit() {
        // Gaps: [4, 10) (6 bytes), [12, 15) (3 bytes); top at 20.
        let ranges = [(0, 4), (2, 3), (10, 12), (15, 20)];
        assert_eq!(scan(&ranges, 3, 1, Fit::First), Ok(4));
        assert_eq!(scan(&ranges, 3, 1, Fit::Best), Ok(12));
        assert_eq!(scan(&ranges, 2, 1, Fit::Best), Ok(12));
        assert_eq!(scan(&ranges, 7, 1, Fit::First), Ok(20));
        // Alignment 8: [4, 10) offers 8..10 only; [12, 15) offers nothing (16 > 15).
        assert_eq!(scan(&ranges, 2, 8, Fit::First), Ok(8));
        assert_eq!(scan(&ranges, 3, 8, Fit::Best), Ok(24));
        assert_eq!(scan(&[], 5, 4, Fit::Best), Ok(0));
    }

    #[test]
    fn scan_reports_overflow() {
        let ranges = [(0, u64::MAX - 2)];
        assert_eq!(scan(&ranges, 2, 1, Fit::First), Ok(u64::MAX - 2));
        assert_eq!(
            scan(&ranges, 3, 1, Fit::First),
            Err(PlanError::ArenaOverflow)
        );
        assert_eq!(
            scan(&ranges, 1, 8, Fit::First),
            Err(PlanError::ArenaOverflow)
        );
    }

    #[test]
    fn gather_finds_exactly_the_overlapping_placed_buffers() {
        // Placed: p0 [0,5), p1 [5,9), p2 [2,12), p3 [12,20); query [5, 12).
        let mut buffers = vec![
            Buffer::new("p0", 1, 0, 5),
            Buffer::new("p1", 1, 5, 9),
            Buffer::new("p2", 1, 2, 12),
            Buffer::new("p3", 1, 12, 20),
            Buffer::new("q", 1, 5, 12),
            Buffer::new("r", 1, 30, 31),
        ];
        buffers[3].gaps = vec![Lifetime { start: 13, end: 14 }];
        let problem = Problem::new(buffers, [(BufferId(5), BufferId(0))]).unwrap();
        for layout in LAYOUTS {
            let mut engine = Engine::<u64>::of_members(&problem, &[], |_| true, Some(layout));
            for (i, offset) in [(0, 100), (1, 200), (2, 300), (3, 400)] {
                engine.place(i, offset).unwrap();
            }
            let mut gathered = |buffer: usize| {
                engine.gather(buffer);
                let mut got: Vec<Range<u64>> = engine
                    .runs
                    .iter()
                    .flat_map(|&run| engine.run(run).to_vec())
                    .collect();
                got.sort_unstable();
                got.dedup();
                got
            };
            assert_eq!(gathered(4), vec![(200, 201), (300, 301)], "{layout:?}");
            assert_eq!(gathered(5), vec![(100, 101)], "{layout:?}");
        }
    }

    #[test]
    fn long_lifetimes_against_the_horizon_get_whole_subtrees() {
        // Too few buffers for whole subtrees, however long.
        let few: Vec<Buffer> = (0..100)
            .map(|i| Buffer::new(format!("b{i}"), 1, i, 100 + i))
            .collect();
        let problem = Problem::from_buffers(few).unwrap();
        assert_eq!(Engine::<u64>::new(&problem).layout, Layout::Starts);
        // `long` segments spanning 57 of 64 leaves, the others one leaf.
        let segments = |n: usize, long: usize| -> Vec<Segment> {
            (0..n)
                .map(|k| Segment {
                    start_leaf: 0,
                    end_bound: if k < long { 57 } else { 1 },
                })
                .collect()
        };
        let n = Layout::MANY;
        // Exactly an eighth of the 64 leaves on average: (57 long + (n - long)) / n = 8.
        let long = (8 * n - n) / 56;
        assert_eq!((57 * long + (n - long)) * 8, 64 * n);
        assert_eq!(Layout::of(&segments(n, long), 64), Layout::Subtrees);
        assert_eq!(Layout::of(&segments(n, long - 1), 64), Layout::Starts);
        assert_eq!(Layout::of(&segments(n - 1, n - 1), 64), Layout::Starts);
        assert_eq!(Layout::of(&segments(n, n), 64), Layout::Subtrees);
        assert_eq!(Layout::of(&[], 0), Layout::Starts);
        // A problem of many buffers all live at once gets whole subtrees.
        let together: Vec<Buffer> = (0..n as u64)
            .map(|i| Buffer::new(format!("b{i}"), 1, i % 100, 100 + i % 100))
            .collect();
        let problem = Problem::from_buffers(together).unwrap();
        assert_eq!(Engine::<u64>::new(&problem).layout, Layout::Subtrees);
    }

    #[test]
    fn crowded_moderate_lifetimes_get_blocks() {
        // `n` segments of `span` leaves, spread over `leaves` leaves.
        let segments = |n: usize, span: u32, leaves: u32| -> Vec<Segment> {
            (0..n as u32)
                .map(|k| {
                    let start = k % (leaves - span);
                    Segment {
                        start_leaf: start,
                        end_bound: start + span,
                    }
                })
                .collect()
        };
        let n = Layout::CROWDED_FROM;
        // 5,000 live at a leaf on average, spans of 96 leaves: blocks of 16 (96 / 6).
        assert_eq!(
            Layout::of(&segments(n, 96, 1_920), 1_920),
            Layout::Blocks { shift: 4 }
        );
        // Spans of 48: blocks of 8; of 200: blocks of 32 (200 / 6 = 33).
        assert_eq!(
            Layout::of(&segments(n, 48, 960), 960),
            Layout::Blocks { shift: 3 }
        );
        assert_eq!(
            Layout::of(&segments(n, 200, 4_000), 4_000),
            Layout::Blocks { shift: 5 }
        );
        // Too few live at once, too few segments, or spans shorter than 4 blocks of 4.
        assert_eq!(Layout::of(&segments(n, 96, 1_921), 1_921), Layout::Starts);
        assert_eq!(
            Layout::of(&segments(n - 1, 96, 1_920), 1_920),
            Layout::Starts
        );
        assert_eq!(Layout::of(&segments(n, 23, 460), 460), Layout::Starts);
        assert_eq!(
            Layout::of(&segments(n, 24, 480), 480),
            Layout::Blocks { shift: 2 }
        );
        // Long against the horizon: whole subtrees first.
        assert_eq!(Layout::of(&segments(n, 96, 700), 700), Layout::Subtrees);
    }

    #[test]
    fn whole_blocks_of_a_window() {
        // Blocks of 4 leaves: [3, 17) holds blocks 1-3 (leaves 4..16).
        assert_eq!(whole_blocks(3, 17, 2), Some((1, 4, 16)));
        assert_eq!(whole_blocks(4, 8, 2), Some((1, 2, 8)));
        assert_eq!(whole_blocks(5, 12, 2), Some((2, 3, 12)));
        assert_eq!(whole_blocks(5, 11, 2), None);
        assert_eq!(whole_blocks(0, 3, 2), None);
        // Blocks of one leaf: every leaf.
        assert_eq!(whole_blocks(7, 8, 0), Some((7, 8, 8)));
    }

    #[test]
    fn greedy_runs_split_from_the_threshold_with_first_fit_only() {
        let buffers = |n: usize| -> Vec<Buffer> {
            (0..n)
                .map(|i| {
                    Buffer::new(
                        format!("b{i}"),
                        1 + i as u64 % 7,
                        i as u64 / 4,
                        i as u64 / 4 + 9,
                    )
                })
                .collect()
        };
        let at = Problem::from_buffers(buffers(Halves::SPLIT_FROM)).unwrap();
        let below = Problem::from_buffers(buffers(Halves::SPLIT_FROM - 1)).unwrap();
        assert!(Halves::of(&at, Fit::First).is_some());
        assert!(Halves::of(&below, Fit::First).is_none());
        assert!(Halves::of(&at, Fit::Best).is_none());
        assert!(Halves::of(&at, Fit::Stacked).is_none());
        assert!(Halves::of(&at, Fit::StackedPrevious).is_none());
        let mut fixed = buffers(Halves::SPLIT_FROM);
        fixed[5].fixed_offset = Some(0);
        assert!(Halves::of(&Problem::from_buffers(fixed).unwrap(), Fit::First).is_none());
        let paired =
            Problem::new(buffers(Halves::SPLIT_FROM), [(BufferId(0), BufferId(9))]).unwrap();
        assert!(Halves::of(&paired, Fit::First).is_none());
        let deadline = Instant::now() + std::time::Duration::from_secs(3600);
        assert!(with_deadline(deadline, || Halves::of(&at, Fit::First)).is_none());
        // Most buffers live across the middle: not split.
        let crossing: Vec<Buffer> = (0..Halves::SPLIT_FROM)
            .map(|i| Buffer::new(format!("b{i}"), 1, i as u64 % 100, 100 + i as u64 % 100))
            .collect();
        assert!(Halves::of(&Problem::from_buffers(crossing).unwrap(), Fit::First).is_none());
        // The cut gives both halves as many buffers of their own, within the 4 that share
        // a start (at the median start, the right half had one more per shared buffer).
        let halves = Halves::of(&at, Fit::First).unwrap();
        let count = |side| halves.side.iter().filter(|&&s| s == side).count();
        let (left, right, shared) = (count(Side::Left), count(Side::Right), count(Side::Shared));
        assert!(left.abs_diff(right) <= 4, "left {left}, right {right}");
        assert!(
            shared > 8 && left > Halves::SPLIT_FROM / 4,
            "{left} {shared}"
        );
    }

    /// Buffers from `(size, start, length, kind, log2 alignment)`: kind 5 makes a zero-size
    /// buffer, kind 0 one with a gap of one step when it is long enough.
    /// Two buffers of about 3 GiB that must not share bytes (a conflict pair: max-live,
    /// which ignores pairs, is one of them), sizes without a common factor: the second
    /// one's top is past what `u32` lists hold.
    fn past_u32() -> Problem {
        let three = 3u64 << 30;
        let buffers = vec![
            Buffer::new("a", three + 1, 0, 1),
            Buffer::new("b", three, 1, 2),
        ];
        Problem::new(buffers, [(BufferId(0), BufferId(1))]).unwrap()
    }

    /// Two earlier buffers whose successor is the same: `x` (on `a`) and `y` (bottom,
    /// nobody's successor) are both first overlapped by `z`. With the source's pairing
    /// `z` sits on both (at the higher top, `x`'s); with the previous-in-order pairing it
    /// sits on `y`, the one placed last, and fits there under `x`. A trial of `z`, rolled
    /// back, leaves `x` and `y` unclaimed.
    #[test]
    fn stacked_pairs_with_the_successor_stacked_previous_with_the_predecessor() {
        let problem = Problem::from_buffers(vec![
            Buffer::new("a", 8, 0, 1),
            Buffer::new("x", 4, 0, 2),
            Buffer::new("y", 2, 2, 4),
            Buffer::new("z", 1, 1, 3),
        ])
        .unwrap();
        let successor = plan_in_order(&problem, [0, 1, 2, 3], Fit::Stacked).unwrap();
        // a 0; x is a's successor: on a, 8; y overlaps neither: 0; z is the successor of
        // x (top 12) and y (top 2): 12.
        assert_eq!(successor.offsets, vec![0, 8, 0, 12]);
        assert!(crate::checker::check(&problem, &successor).is_valid());
        let previous = plan_in_order(&problem, [0, 1, 2, 3], Fit::StackedPrevious).unwrap();
        // z's previous overlapping buffer is y (top 2); [2, 3) is free over [1, 3).
        assert_eq!(previous.offsets, vec![0, 8, 0, 2]);
        assert!(crate::checker::check(&problem, &previous).is_valid());
        for fit in [Fit::Stacked, Fit::StackedPrevious] {
            let mut engine = Engine::<u64>::stacking(&problem, fit);
            for i in 0..3 {
                engine.place_with(i, fit).unwrap();
            }
            engine.begin_trial();
            let z = engine.place_with(3, fit).unwrap();
            engine.rollback();
            assert_eq!(engine.place_with(3, fit), Ok(z));
        }
        // After z, a buffer over [2, 4) is the successor of z only (y was claimed by z).
        let mut more = problem.buffers().to_vec();
        more.push(Buffer::new("w", 1, 2, 4));
        let more = Problem::from_buffers(more).unwrap();
        let plan = plan_in_order(&more, [0, 1, 2, 3, 4], Fit::Stacked).unwrap();
        assert_eq!(plan.offsets, vec![0, 8, 0, 12, 13]);
        assert!(crate::checker::check(&more, &plan).is_valid());
    }

    #[test]
    fn a_u32_engine_refuses_what_it_cannot_hold_and_a_u64_run_places_it() {
        let problem = past_u32();
        assert!(u32_may_hold(&problem, None));
        let mut narrow = Engine::<u32>::new(&problem);
        assert_eq!(narrow.place_with(0, Fit::First), Ok(0));
        assert!(!narrow.word_overflow());
        assert_eq!(
            narrow.place_with(1, Fit::First),
            Err(PlanError::ArenaOverflow)
        );
        assert!(narrow.word_overflow());
        let mut wide = Engine::<u64>::new(&problem);
        assert_eq!(wide.place_with(0, Fit::First), Ok(0));
        assert_eq!(wide.place_with(1, Fit::First), Ok((3 << 30) + 1));
        assert!(!wide.word_overflow());
        // A greedy run starts with `u32` lists and makes the run again with `u64` ones.
        for fit in FITS {
            let plan = plan_in_order(&problem, [0, 1], fit).unwrap();
            assert_eq!(plan.offset(BufferId(1)), (3 << 30) + 1, "{fit:?}");
            assert!(crate::checker::check(&problem, &plan).is_valid(), "{fit:?}");
        }
    }

    #[test]
    fn a_bound_past_u32_starts_with_u64_lists() {
        // Live together: max-live is past `u32::MAX` units.
        let three = 3u64 << 30;
        let problem = Problem::from_buffers(vec![
            Buffer::new("a", three + 1, 0, 2),
            Buffer::new("b", three, 0, 2),
        ])
        .unwrap();
        assert!(!u32_may_hold(&problem, None));
        // With a common factor of 2^10 the same bytes are 2^22 units: they fit.
        let units = Problem::from_buffers(vec![
            Buffer::new("a", three + 1024, 0, 2),
            Buffer::new("b", three, 0, 2),
        ])
        .unwrap();
        assert!(u32_may_hold(&units, None));
        let plan = plan_in_order(&units, [0, 1], Fit::First).unwrap();
        assert_eq!(plan.offset(BufferId(1)), three + 1024);
    }

    fn spec_buffers(specs: &[(u64, u64, u64, u8, u32)]) -> Vec<Buffer> {
        specs
            .iter()
            .enumerate()
            .map(|(i, &(size, start, len, kind, align))| {
                let size = if kind == 5 { 0 } else { size.max(1) };
                let mut b = Buffer::new(format!("b{i}"), size, start, start + len);
                if kind == 0 && len >= 3 {
                    b.gaps = vec![Lifetime {
                        start: start + 1,
                        end: start + 2,
                    }];
                }
                b.alignment = 1 << align;
                b
            })
            .collect()
    }

    /// Places `order` with `fit`, with a trial of the second half rolled back and placed
    /// again, on an engine in `layout` that keeps every node list (`all`) or only the read
    /// ones.
    fn offsets_with(
        problem: &Problem,
        order: &[u32],
        fit: Fit,
        all: bool,
        layout: Layout,
    ) -> Vec<u64> {
        let mut engine = Engine::<u64>::of_members(problem, &[], |_| true, Some(layout));
        engine = engine.stacked(fit);
        if all {
            engine.nodes.iter_mut().for_each(|node| {
                node.read_inside = true;
                node.read_covering = true;
            });
        }
        let half = order.len() / 2;
        for &i in &order[..half] {
            engine.place_with(i as usize, fit).unwrap();
        }
        engine.begin_trial();
        for &i in order[half..].iter().rev() {
            engine.place_with(i as usize, fit).unwrap();
        }
        engine.rollback();
        for &i in &order[half..] {
            engine.place_with(i as usize, fit).unwrap();
        }
        engine.offsets
    }

    /// The offsets (in bytes) that an engine of `W` ranked by `ranked` gives with `fit`:
    /// those of `order[n / 2..]`, placed in a trial that is then rolled back, and those of
    /// all of `order`, placed after it.
    fn placements<W: Word>(
        problem: &Problem,
        ranked: &[u32],
        order: &[usize],
        fit: Fit,
        layout: Layout,
    ) -> (Vec<u64>, Vec<u64>) {
        let mut engine = Engine::<W>::of_members(problem, ranked, |_| true, Some(layout));
        engine = engine.stacked(fit);
        engine.begin_trial();
        let trial = order[order.len() / 2..]
            .iter()
            .map(|&i| engine.place_with(i, fit).unwrap())
            .collect();
        engine.rollback();
        let all = order
            .iter()
            .map(|&i| engine.place_with(i, fit).unwrap())
            .collect();
        (trial, all)
    }

    /// The offset `fit` gives `buffer`, by brute force over `placed` (buffer, offset) in
    /// the order of placement: the independent oracle of [`Engine::find`]. The first-fit
    /// offset is the lowest aligned `x` at or above the floor where `[x, x + size)` meets
    /// no range it must avoid; such an `x` is the floor or the end of such a range,
    /// rounded up. The best-fit one is, among those free `x` below some range, the one
    /// with the least room up to the next range start (ties: the lowest), else the top.
    fn brute_force(problem: &Problem, placed: &[(usize, u64)], buffer: usize, fit: Fit) -> u64 {
        let buffers = problem.buffers();
        let b = &buffers[buffer];
        if b.size == 0 {
            return 0;
        }
        let partner = |j: usize| {
            problem.conflicts().iter().any(|&(p, q)| {
                (p.index(), q.index()) == (buffer, j) || (p.index(), q.index()) == (j, buffer)
            })
        };
        let range = |&(j, offset): &(usize, u64)| (offset, offset + buffers[j].size);
        let sized = || placed.iter().filter(|&&(j, _)| buffers[j].size > 0);
        let avoid: Vec<Range<u64>> = sized()
            .filter(|&&(j, _)| partner(j) || b.live_together(&buffers[j]))
            .map(range)
            .collect();
        let floor = match fit {
            // The placed buffers whose successor (the first buffer placed after them
            // that is live with them) is `buffer`: live with it, and with none placed
            // after them.
            Fit::Stacked => (0..placed.len())
                .filter(|&k| buffers[placed[k].0].size > 0)
                .filter(|&k| b.live_together(&buffers[placed[k].0]))
                .filter(|&k| {
                    placed[k + 1..].iter().all(|&(j, _)| {
                        buffers[j].size == 0 || !buffers[j].live_together(&buffers[placed[k].0])
                    })
                })
                .map(|k| range(&placed[k]).1)
                .max()
                .unwrap_or(0),
            Fit::StackedPrevious => sized()
                .rev()
                .find(|&&(j, _)| b.live_together(&buffers[j]))
                .map_or(0, |p| range(p).1),
            Fit::First | Fit::Best => 0,
        };
        let free = |x: u64| avoid.iter().all(|&(lo, hi)| x + b.size <= lo || hi <= x);
        let mut candidates: Vec<u64> = std::iter::once(floor)
            .chain(avoid.iter().map(|r| r.1))
            .filter(|&x| x >= floor)
            .map(|x| x.next_multiple_of(b.alignment))
            .filter(|&x| free(x))
            .collect();
        candidates.sort_unstable();
        let top = avoid.iter().map(|r| r.1).fold(floor, u64::max);
        match fit {
            Fit::First | Fit::Stacked | Fit::StackedPrevious => candidates[0],
            Fit::Best => candidates
                .iter()
                .filter_map(|&x| {
                    let next = avoid
                        .iter()
                        .map(|r| r.0)
                        .filter(|&lo| lo >= x + b.size)
                        .min()?;
                    Some((next - x - b.size, x))
                })
                .min()
                .map_or(top.next_multiple_of(b.alignment), |(_, x)| x),
        }
    }

    proptest::proptest! {
        /// A [`List`] (inline, spilled to a `Vec`, and back by rollback) holds the same
        /// ranges as a plain `Vec` kept by the same union insertions, and the splices of
        /// a rollback restore every earlier state.
        /// The tournament hands out the runs' keys in order: each winner is the least
        /// key left, every key comes out once, whatever the number of runs.
        #[test]
        fn tournament_hands_out_the_least_start(
            runs in proptest::collection::vec(
                proptest::collection::vec(0u64..40, 0..6), 1..40)
        ) {
            let mut runs: Vec<Vec<u64>> = runs;
            for run in &mut runs {
                run.sort_unstable();
            }
            let mut tree = Tournament::default();
            tree.reset(runs.len());
            for (i, run) in runs.iter().enumerate() {
                tree.set(i, run.first().copied().unwrap_or(Tournament::DONE));
            }
            tree.build();
            let mut next = vec![0usize; runs.len()];
            let mut out = Vec::new();
            loop {
                let (key, i) = tree.winner();
                if key == Tournament::DONE {
                    break;
                }
                let least = runs
                    .iter()
                    .zip(&next)
                    .filter_map(|(run, &k)| run.get(k))
                    .min()
                    .copied();
                proptest::prop_assert_eq!(Some(key), least);
                proptest::prop_assert_eq!(runs[i][next[i]], key);
                out.push(key);
                next[i] += 1;
                tree.replace_winner(runs[i].get(next[i]).copied().unwrap_or(Tournament::DONE));
            }
            let mut all: Vec<u64> = runs.concat();
            all.sort_unstable();
            proptest::prop_assert_eq!(out, all);
        }

        #[test]
        fn list_matches_a_vec(ranges in proptest::collection::vec((0u64..60, 1u64..6), 1..24)) {
            let mut list = List::default();
            let mut model: Vec<Range<u64>> = Vec::new();
            let mut states = vec![model.clone()];
            let mut undo = Vec::new();
            for &(lo, len) in &ranges {
                let (lo, hi) = (lo, lo + len);
                let mut removed = Vec::new();
                let at = list.as_slice().partition_point(|r| r.1 < lo);
                insert_union_at(&mut list, (lo, hi), at, |old| removed.extend_from_slice(old));
                let mut covered: Vec<Range<u64>> = model
                    .iter()
                    .copied()
                    .filter(|r| r.1 < lo || r.0 > hi)
                    .collect();
                let merged: Vec<Range<u64>> =
                    model.iter().copied().filter(|r| !(r.1 < lo || r.0 > hi)).collect();
                proptest::prop_assert_eq!(&removed, &merged);
                let new = merged
                    .iter()
                    .fold((lo, hi), |(a, b), r| (a.min(r.0), b.max(r.1)));
                covered.push(new);
                covered.sort_unstable();
                model = covered;
                proptest::prop_assert_eq!(list.as_slice(), &model[..]);
                proptest::prop_assert_eq!(list.as_slice()[at], new);
                undo.push((at, removed));
                states.push(model.clone());
            }
            states.pop();
            while let Some((at, removed)) = undo.pop() {
                list.splice(at, &removed);
                proptest::prop_assert_eq!(list.as_slice(), &states.pop().unwrap()[..]);
            }
        }

        /// [`Engine::find`] agrees with the brute force at every placement, with every fit,
        /// across a trial that is rolled back, on problems with gaps, conflict pairs,
        /// alignments and zero-size buffers.
        #[test]
        fn find_matches_brute_force(
            specs in proptest::collection::vec(
                (0u64..40, 0u64..50, 1u64..25, 0u8..6, 0u32..5),
                1..50,
            ),
            pairs in proptest::collection::vec((0usize..50, 0usize..50), 0..8),
            seed in 0u64..1000,
            scale in proptest::sample::select(vec![1u64, 8, 24, 1 << 20]),
        ) {
            // Sizes scaled so that the unit is often above 1 (then an alignment may
            // divide it, or be a multiple of it).
            let mut buffers = spec_buffers(&specs);
            for b in &mut buffers {
                b.size *= scale;
            }
            let n = buffers.len();
            let conflicts: Vec<(BufferId, BufferId)> = pairs
                .iter()
                .filter(|&&(a, b)| a < n && b < n && a != b)
                .map(|&(a, b)| (BufferId(a as u32), BufferId(b as u32)))
                .collect();
            let problem = Problem::new(buffers, conflicts).unwrap();
            let mut order: Vec<usize> = (0..n).collect();
            order.sort_by_key(|&i| (i as u64).wrapping_mul(seed | 1) % 97);
            // Ranks in another order than the placements', some buffers left to be ranked
            // by id: where a buffer goes must not depend on its rank.
            let ranked: Vec<u32> = order
                .iter()
                .rev()
                .take(n * (seed as usize % 3) / 2)
                .map(|&i| i as u32)
                .collect();
            for (fit, layout) in FITS
                .into_iter()
                .flat_map(|fit| LAYOUTS.map(|layout| (fit, layout)))
            {
                let half = n / 2;
                let (trial, offsets) = placements::<u32>(&problem, &ranked, &order, fit, layout);
                // Engines of either word place alike.
                proptest::prop_assert_eq!(
                    (&trial, &offsets),
                    (&placements::<u64>(&problem, &ranked, &order, fit, layout).0,
                     &placements::<u64>(&problem, &ranked, &order, fit, layout).1)
                );
                let mut placed: Vec<(usize, u64)> = Vec::new();
                for (&i, &offset) in order[half..].iter().zip(&trial) {
                    proptest::prop_assert_eq!(offset, brute_force(&problem, &placed, i, fit));
                    placed.push((i, offset));
                }
                placed.clear();
                for (&i, &offset) in order.iter().zip(&offsets) {
                    proptest::prop_assert_eq!(offset, brute_force(&problem, &placed, i, fit));
                    placed.push((i, offset));
                }
                // A greedy run (its engine ranked by the order, placing by rank) agrees.
                let plan = plan_in_order(&problem, order.iter().map(|&i| i as u32), fit).unwrap();
                for &(i, offset) in &placed {
                    proptest::prop_assert_eq!(plan.offset(BufferId(i as u32)), offset);
                }
            }
        }

        /// A first-fit run split in two ([`Halves`]) gives the plan of one engine, on
        /// problems with gaps, alignments, zero-size buffers and many buffers shared by
        /// the halves (long lifetimes).
        #[test]
        fn halves_plan_like_one_engine(
            specs in proptest::collection::vec(
                (0u64..40, 0u64..60, 1u64..40, 0u8..6, 0u32..4),
                2..80,
            ),
            seed in 0u64..1000,
            first_offer in 1usize..4,
            eager: bool,
        ) {
            let buffers = spec_buffers(&specs);
            let problem = Problem::from_buffers(buffers).unwrap();
            let mut order: Vec<u32> = (0..problem.len() as u32).collect();
            order.sort_by_key(|&i| (i as u64).wrapping_mul(seed | 1) % 97);
            let mut halves = Halves::from_size(&problem, Fit::First, 0).unwrap();
            // Small offers, so that the halves offer again for most shared buffers, and
            // with `eager` as much placed ahead as may go (else the threads' timing decides).
            halves.first_offer = first_offer;
            halves.eager = eager;
            halves.layout = [None, Some(Layout::Blocks { shift: 1 }), Some(Layout::Blocks { shift: 2 })]
                [seed as usize % 3];
            let (split, _) = halves.plan::<u32>(&problem, &order).unwrap();
            let mut engine = Engine::<u64>::new(&problem);
            for &i in &order {
                engine.place_with(i as usize, Fit::First).unwrap();
            }
            let offsets: Vec<u64> = (0..problem.len() as u32).map(|i| split.offset(BufferId(i))).collect();
            proptest::prop_assert_eq!(Some(offsets), engine.offsets_by_id());
        }

        /// Keeping only the node lists that some query reads changes no placement, in
        /// either layout (the engine before issue #18 kept them all).
        #[test]
        fn unread_lists_change_nothing(
            specs in proptest::collection::vec((1u64..50, 0u64..60, 1u64..30, 0u8..4), 1..60),
            seed in 0u64..1000,
        ) {
            let buffers: Vec<Buffer> = specs
                .iter()
                .enumerate()
                .map(|(i, &(size, start, len, kind))| {
                    let mut b = Buffer::new(format!("b{i}"), size, start, start + len);
                    if kind == 0 && len >= 3 {
                        b.gaps = vec![Lifetime { start: start + 1, end: start + 2 }];
                    }
                    b
                })
                .collect();
            let problem = Problem::from_buffers(buffers).unwrap();
            let mut order: Vec<u32> = (0..problem.len() as u32).collect();
            order.sort_by_key(|&i| (i as u64).wrapping_mul(seed | 1) % 97);
            for fit in FITS {
                let all = offsets_with(&problem, &order, fit, true, Layout::Starts);
                for layout in LAYOUTS {
                    proptest::prop_assert_eq!(
                        &offsets_with(&problem, &order, fit, false, layout),
                        &all
                    );
                    proptest::prop_assert_eq!(
                        &offsets_with(&problem, &order, fit, true, layout),
                        &all
                    );
                }
            }
        }
    }
}
