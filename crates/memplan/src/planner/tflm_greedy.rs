//! `tflm-greedy`: TensorFlow Lite Micro's `GreedyMemoryPlanner`, reproduced exactly, ties
//! included, so that memplan can say what arena TFLM would plan and compare against it.
//!
//! TFLM's algorithm (`greedy_memory_planner.cc`), over buffers in the order they were
//! added (for a `.tflite` model, `memplan-tflite` lists them in TFLM's order):
//!
//! 1. Buffers with a fixed (offline) offset come first, in id order, at their offsets.
//! 2. The others follow in size-descending order; equal sizes keep *reverse* id order
//!    (TFLM fills its sort array from the tail and bubble-sorts it, which is stable).
//! 3. Each is placed by walking the placed buffers in offset order (equal offsets in
//!    placement order), skipping those not live at the same time: the candidate offset
//!    starts at 0 and rises to the end of each live buffer passed; the walk stops at the
//!    first live buffer that begins at least the wanted size above the candidate.
//!
//! Beyond TFLM's problems: an explicit conflict pair counts as live together, a buffer's
//! gaps are ignored (it is taken as live for its whole lifetime), and a candidate offset
//! is rounded up to the buffer's alignment. On TFLM's own problems (16-byte sizes and
//! alignment, no gaps or conflicts) none of this changes a placement. A zero-size buffer
//! (which `memplan-tflite` never makes: TFLM places zero-size tensors itself) goes to its
//! fixed offset or 0 and is not in the walk, so it never moves another buffer.
//!
//! TFLM walks every placed buffer for each placement (`O(n²)`: 10^5 tensors took minutes).
//! memplan walks only the placed buffers live at the same time, found by their
//! lifetimes — those live at the new buffer's start (a segment tree over the steps,
//! filled as buffers are placed) and those starting inside its lifetime (placed buffers
//! ordered by start) — sorted as TFLM's list is (offset, then placement order). The
//! skipped buffers are exactly those TFLM's walk skips, so the offsets are TFLM's:
//! `O(n log n + Σ k log k)` for `k` placed buffers live beside each one.

use std::collections::{BTreeSet, HashSet};

use super::placement::fixed_top;
use super::{PlanError, Planner};
use crate::plan::Plan;
use crate::problem::Problem;

/// TFLite Micro's greedy planner (size-descending first fit, later-added first on ties).
pub struct TflmGreedy;

impl Planner for TflmGreedy {
    fn name(&self) -> &'static str {
        "tflm-greedy"
    }

    fn description(&self) -> &'static str {
        "TFLite Micro's GreedyMemoryPlanner exactly: fixed offsets first, then size-descending first fit, ties later-added first"
    }

    fn plan(&self, problem: &Problem) -> Result<Plan, PlanError> {
        // Refuses clashing fixed offsets.
        fixed_top(problem)?;
        let offsets = tflm_greedy_offsets(problem)?;
        Plan::new(problem, offsets).ok_or(PlanError::ArenaOverflow)
    }
}

/// The offsets TFLM's greedy planner gives `problem`'s buffers. Fixed offsets are taken as
/// given, as TFLM takes offline offsets, even when they overlap: this is how memplan
/// predicts what TFLM does with a model's offline plan, including a wrong one (the
/// `tflm-greedy` planner refuses clashing fixed offsets before calling this).
///
/// Errors only when an offset would pass 2^64.
pub fn tflm_greedy_offsets(problem: &Problem) -> Result<Vec<u64>, PlanError> {
    let buffers = problem.buffers();
    let conflicts: HashSet<(u32, u32)> = problem
        .conflicts()
        .iter()
        .map(|&(a, b)| (a.0.min(b.0), a.0.max(b.0)))
        .collect();
    let together = |a: usize, b: usize| {
        buffers[a].lifetime.overlaps(buffers[b].lifetime)
            || (!conflicts.is_empty() && conflicts.contains(&(a.min(b) as u32, a.max(b) as u32)))
    };

    let mut offsets = vec![0u64; buffers.len()];
    // Zero-size buffers occupy nothing: at their fixed offset or 0, outside the walk.
    for (i, buffer) in buffers.iter().enumerate() {
        if buffer.size == 0 {
            offsets[i] = buffer.fixed_offset.unwrap_or(0);
        }
    }
    let mut order: Vec<usize> = (0..buffers.len())
        .filter(|&i| buffers[i].fixed_offset.is_some() && buffers[i].size > 0)
        .collect();
    let mut online: Vec<usize> = (0..buffers.len())
        .rev()
        .filter(|&i| buffers[i].fixed_offset.is_none() && buffers[i].size > 0)
        .collect();
    online.sort_by(|&a, &b| buffers[b].size.cmp(&buffers[a].size));
    order.extend(online);

    // Placed buffers live at a step, by the steps' segment tree; placed buffers by start.
    let mut live = LiveIndex::new(buffers.iter().map(|b| (b.lifetime.start, b.lifetime.end)));
    let mut by_start: BTreeSet<(u64, u32)> = BTreeSet::new();
    let mut partners: Vec<Vec<u32>> = Vec::new();
    if !conflicts.is_empty() {
        partners = vec![Vec::new(); buffers.len()];
        for &(a, b) in &conflicts {
            partners[a as usize].push(b);
            partners[b as usize].push(a);
        }
    }
    // When each buffer was placed (its place in TFLM's list among equal offsets).
    let mut placed_at: Vec<u32> = vec![u32::MAX; buffers.len()];
    let mut candidates: Vec<usize> = Vec::new();
    for (seq, &id) in order.iter().enumerate() {
        let wanted = &buffers[id];
        let offset = match wanted.fixed_offset {
            Some(fixed) => fixed,
            None => {
                let (start, end) = (wanted.lifetime.start, wanted.lifetime.end);
                candidates.clear();
                live.placed_at(start, &mut candidates);
                candidates.extend(
                    by_start
                        .range((start + 1, 0)..(end, 0))
                        .map(|&(_, j)| j as usize),
                );
                if !partners.is_empty() {
                    candidates.extend(
                        partners[id]
                            .iter()
                            .map(|&j| j as usize)
                            .filter(|&j| placed_at[j] != u32::MAX),
                    );
                    candidates.sort_unstable();
                    candidates.dedup();
                }
                candidates.sort_unstable_by_key(|&j| (offsets[j], placed_at[j]));
                let mut candidate = 0u64;
                for &placed in &candidates {
                    debug_assert!(together(placed, id));
                    if offsets[placed] >= candidate && offsets[placed] - candidate >= wanted.size {
                        break;
                    }
                    let end = offsets[placed]
                        .checked_add(buffers[placed].size)
                        .ok_or(PlanError::ArenaOverflow)?;
                    if end > candidate {
                        candidate = end
                            .checked_next_multiple_of(wanted.alignment)
                            .ok_or(PlanError::ArenaOverflow)?;
                    }
                }
                candidate
            }
        };
        offsets[id] = offset;
        placed_at[id] = seq as u32;
        live.insert(id, wanted.lifetime.start, wanted.lifetime.end);
        by_start.insert((wanted.lifetime.start, id as u32));
    }
    Ok(offsets)
}

/// The placed buffers live at each step: a segment tree over the distinct lifetime
/// starts, each placed buffer listed at the `O(log n)` nodes that cover its lifetime, so
/// that the buffers live at one step are those listed on the path to its leaf.
struct LiveIndex {
    /// The distinct starts, sorted: leaf `i` covers `[starts[i], starts[i + 1])`.
    starts: Vec<u64>,
    size: usize,
    lists: Vec<Vec<u32>>,
}

impl LiveIndex {
    fn new(lifetimes: impl Iterator<Item = (u64, u64)>) -> LiveIndex {
        let mut starts: Vec<u64> = lifetimes.map(|(s, _)| s).collect();
        starts.sort_unstable();
        starts.dedup();
        let size = starts.len().max(1).next_power_of_two();
        LiveIndex {
            starts,
            size,
            lists: vec![Vec::new(); 2 * size],
        }
    }

    /// The leaf of the step `t`: the last start at or before it.
    fn leaf(&self, t: u64) -> usize {
        self.starts.partition_point(|&s| s <= t).saturating_sub(1)
    }

    /// Lists buffer `id`, live over `[start, end)`, at the nodes covering its leaves.
    fn insert(&mut self, id: usize, start: u64, end: u64) {
        // Leaves whose step range meets [start, end): from start's leaf to the last leaf
        // starting before end.
        let first = self.leaf(start);
        let last = self.starts.partition_point(|&s| s < end);
        if last <= first {
            return;
        }
        let (mut lo, mut hi) = (first + self.size, last + self.size);
        while lo < hi {
            if lo & 1 == 1 {
                self.lists[lo].push(id as u32);
                lo += 1;
            }
            if hi & 1 == 1 {
                hi -= 1;
                self.lists[hi].push(id as u32);
            }
            lo /= 2;
            hi /= 2;
        }
    }

    /// Appends the placed buffers live at step `t` (the start of a lifetime, so a leaf's
    /// first step) to `out`.
    fn placed_at(&self, t: u64, out: &mut Vec<usize>) {
        let mut node = self.leaf(t) + self.size;
        while node >= 1 {
            out.extend(self.lists[node].iter().map(|&j| j as usize));
            node /= 2;
        }
    }
}
