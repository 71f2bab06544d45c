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
//! Placing a buffer walks every placed one: `O(n²)`, as in TFLM.

use std::collections::HashSet;

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

    // Placed buffers by offset; equal offsets in placement order.
    let mut by_offset: Vec<usize> = Vec::with_capacity(buffers.len());
    for &id in &order {
        let wanted = &buffers[id];
        let offset = match wanted.fixed_offset {
            Some(fixed) => fixed,
            None => {
                let mut candidate = 0u64;
                for &placed in &by_offset {
                    if !together(placed, id) {
                        continue;
                    }
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
        let at = by_offset.partition_point(|&p| offsets[p] <= offset);
        by_offset.insert(at, id);
    }
    Ok(offsets)
}
