//! `exclusive`: exclusive-operator reuse, largest first (the `exclusive` method).
//!
//! The method sorts blocks by demand, largest first, and gives each one memory that lies
//! under no block it is *exclusive* with, growing the pool when that memory is not
//! enough. Read against a [`Problem`], "exclusive with" is "must not share bytes with"
//! (live together, or an explicit conflict pair), and "the lowest place outside every
//! placed exclusive block, extended past the pool top when it touches it" is exactly the
//! first-fit rule of [`super::SizeFirstFit`]:
//!
//! ```text
//!  pool top ──────────────────────── 35
//!             op7 [20, 35)            op3 (8) may not touch op2 [20, 30): the free
//!            ┌─ op2 [20, 30) ─┐       run above op2 starts at 30 and touches the top,
//!  20 ───────┴────────────────┘       so op3 takes [30, 35) of op7 (reused) and the
//!             op4 [0, 20)             pool grows by 3 to 38: op3 = [30, 38)
//!   0 ────────────────────────────
//! ```
//!
//! So this planner *is* that placement, in the method's order (size descending; ties:
//! earlier lifetime start, then lower id); what makes the `exclusive` method differ from lifetime-based
//! planning is the exclusivity relation, which a graph front-end supplies as conflict
//! pairs on buffers whose lifetimes never overlap (`memplan_graph::exclusive`). On a
//! problem with lifetimes it plans like `greedy-size-firstfit`.
//!
//! # Fragmented
//!
//! [`Exclusive::FRAGMENTED`] (`--fragmented`) lets a block spread over several pieces.
//! In the same order, each block takes the lowest free run below the pool top that holds
//! it whole (one extent, as above); when none does, it takes the free pieces below the
//! top from the lowest up until it has its bytes, and when all of them together are
//! fewer than its demand, it takes them all and the pool grows by the remainder (the last
//! piece, when it touches the top, simply extends). The plan then carries extents
//! ([`Plan::extents`]). Only the first piece is aligned to the block's alignment; a block
//! with a fixed offset is one piece at that offset. A zero-size block is one empty piece
//! at its fixed offset or 0, blocks nothing and does not move the pool top.
//!
//! ```text
//!  pool top ────── 10     T (4) may not touch R [0, 4) or Q [5, 10); P [0, 5) is not
//!   Q [5, 10)             exclusive with T. Free below the top: [4, 5), 1 byte.
//!  5 ──────────── 5       contiguous: T = [10, 14), pool 14
//!   P [0, 5), R [0, 4)    fragmented: T = [4, 5) + [10, 13), pool 13
//!  0 ────────────
//! ```
//!
//! [`ExclusiveStats`] reports what the method reports: per buffer, the bytes reused from
//! the pool as it stood and the bytes by which the pool grew.

use super::{PlanError, Planner, SizeFirstFit};
use crate::plan::{Extent, Plan};
use crate::problem::Problem;

/// The `exclusive` planner (the `exclusive` method): contiguous blocks ([`Exclusive::DEFAULT`]) or
/// blocks spread over several pieces ([`Exclusive::FRAGMENTED`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Exclusive {
    /// Whether a block may take several pieces (the plan carries extents).
    pub fragmented: bool,
}

impl Exclusive {
    /// Contiguous blocks, the method's default.
    pub const DEFAULT: Exclusive = Exclusive { fragmented: false };
    /// Blocks may be spread over several reusable pieces (`--fragmented`).
    pub const FRAGMENTED: Exclusive = Exclusive { fragmented: true };
}

impl Planner for Exclusive {
    fn name(&self) -> &'static str {
        "exclusive"
    }

    fn description(&self) -> &'static str {
        "exclusive-operator reuse: largest first, lowest memory under no exclusive block, else grow the pool (exclusivity from the graph; valid in the file's order, orders=all for every order)"
    }

    fn plan(&self, problem: &Problem) -> Result<Plan, PlanError> {
        if self.fragmented {
            plan_fragmented(problem)
        } else {
            SizeFirstFit.plan(problem)
        }
    }
}

/// The method's order: size descending; ties: lifetime start, then id.
fn method_order(problem: &Problem) -> Vec<usize> {
    let buffers = problem.buffers();
    let mut order: Vec<usize> = (0..buffers.len()).collect();
    order.sort_unstable_by_key(|&i| {
        (
            std::cmp::Reverse(buffers[i].size),
            buffers[i].lifetime.start,
            i,
        )
    });
    order
}

/// Per buffer, the buffers it must not share bytes with: its conflict partners and the
/// buffers live together with it (a sweep over lifetimes by start; gaps decided by
/// [`crate::Buffer::live_together`]). A pair may be listed twice.
fn neighbours(problem: &Problem) -> Vec<Vec<u32>> {
    let buffers = problem.buffers();
    let n = buffers.len();
    let mut out: Vec<Vec<u32>> = vec![Vec::new(); n];
    for &(a, b) in problem.conflicts() {
        out[a.index()].push(b.0);
        out[b.index()].push(a.0);
    }
    let mut by_start: Vec<usize> = (0..n).collect();
    by_start.sort_unstable_by_key(|&b| buffers[b].lifetime.start);
    let mut live: Vec<usize> = Vec::new();
    for &b in &by_start {
        let start = buffers[b].lifetime.start;
        live.retain(|&a| buffers[a].lifetime.end > start);
        for &a in &live {
            if buffers[a].live_together(&buffers[b]) {
                out[a].push(b as u32);
                out[b].push(a as u32);
            }
        }
        live.push(b);
    }
    out
}

/// [`Exclusive::FRAGMENTED`]. O(n + p + Σ e log e) for `n` buffers, `p` pairs that must
/// not share (conflicts and lifetimes live together) and the `e` extents of each
/// buffer's placed partners: only partners are visited, so a chain or a wide fan-out
/// stays near-linear in its pairs.
fn plan_fragmented(problem: &Problem) -> Result<Plan, PlanError> {
    let buffers = problem.buffers();
    let n = buffers.len();
    let partners = neighbours(problem);
    let mut extents: Vec<Vec<Extent>> = vec![Vec::new(); n];
    let mut is_placed = vec![false; n];
    let mut top = 0u64;
    // Fixed buffers first, in id order, each one piece at its offset.
    for (i, buffer) in buffers.iter().enumerate() {
        if buffer.size == 0 {
            // One empty piece that occupies nothing: not `placed`, so it blocks nothing.
            extents[i].push(Extent {
                offset: buffer.fixed_offset.unwrap_or(0),
                len: 0,
            });
            continue;
        }
        let Some(offset) = buffer.fixed_offset else {
            continue;
        };
        let end = offset + buffer.size; // `Problem::new` guarantees it fits.
                                        // The first placed partner in id order that overlaps, as before.
        if let Some(j) = partners[i]
            .iter()
            .map(|&j| j as usize)
            .filter(|&j| {
                is_placed[j]
                    && extents[j]
                        .iter()
                        .any(|e| e.offset < end && offset < e.offset + e.len)
            })
            .min()
        {
            return Err(PlanError::FixedOffsetsClash {
                a: buffers[j].name.clone(),
                b: buffer.name.clone(),
            });
        }
        extents[i].push(Extent {
            offset,
            len: buffer.size,
        });
        is_placed[i] = true;
        top = top.max(end);
    }
    let mut blocked: Vec<(u64, u64)> = Vec::new();
    for i in method_order(problem) {
        if buffers[i].fixed_offset.is_some() || buffers[i].size == 0 {
            continue;
        }
        blocked.clear();
        for &j in &partners[i] {
            if is_placed[j as usize] {
                blocked.extend(
                    extents[j as usize]
                        .iter()
                        .map(|e| (e.offset, e.offset + e.len)),
                );
            }
        }
        blocked.sort_unstable();
        let free = free_runs(&blocked, top);
        extents[i] = take(&free, top, buffers[i].size, buffers[i].alignment)?;
        for e in &extents[i] {
            top = top.max(e.offset + e.len);
        }
        is_placed[i] = true;
    }
    Plan::fragmented(problem, extents).ok_or(PlanError::ArenaOverflow)
}

/// The maximal runs of `[0, top)` outside the sorted ranges `blocked`.
fn free_runs(blocked: &[(u64, u64)], top: u64) -> Vec<(u64, u64)> {
    let mut free = Vec::new();
    let mut cursor = 0u64;
    for &(lo, hi) in blocked {
        if lo > cursor {
            free.push((cursor, lo.min(top)));
        }
        cursor = cursor.max(hi);
    }
    if cursor < top {
        free.push((cursor, top));
    }
    free.retain(|&(lo, hi)| lo < hi);
    free
}

/// The extents of a block of `size` bytes: the lowest free run that holds it whole from an
/// aligned start, else free pieces from the lowest up (the first from an aligned start)
/// and, for what they lack, the pool above `top` (extending a piece that ends at `top`).
fn take(
    free: &[(u64, u64)],
    top: u64,
    size: u64,
    alignment: u64,
) -> Result<Vec<Extent>, PlanError> {
    let align_up = |x: u64| -> Result<u64, PlanError> {
        x.div_ceil(alignment)
            .checked_mul(alignment)
            .ok_or(PlanError::ArenaOverflow)
    };
    for &(lo, hi) in free {
        let start = align_up(lo)?;
        if start < hi && hi - start >= size {
            return Ok(vec![Extent {
                offset: start,
                len: size,
            }]);
        }
    }
    let mut pieces: Vec<Extent> = Vec::new();
    let mut need = size;
    for &(lo, hi) in free {
        let start = if pieces.is_empty() { align_up(lo)? } else { lo };
        if start >= hi {
            continue;
        }
        let len = (hi - start).min(need);
        pieces.push(Extent { offset: start, len });
        need -= len;
        if need == 0 {
            return Ok(pieces);
        }
    }
    match pieces.last_mut() {
        Some(last) if last.offset + last.len == top => last.len += need,
        Some(_) => pieces.push(Extent {
            offset: top,
            len: need,
        }),
        None => pieces.push(Extent {
            offset: align_up(top)?,
            len: need,
        }),
    }
    let last = pieces.last().expect("a piece was just pushed or extended");
    last.offset
        .checked_add(last.len)
        .ok_or(PlanError::ArenaOverflow)?;
    Ok(pieces)
}

/// The method's own accounting of a plan, replayed in the method's order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExclusiveStats {
    /// Number of blocks (buffers).
    pub buffers: usize,
    /// Bytes of blocks that lay below the pool top when they were placed (reused pool).
    pub reused_bytes: u64,
    /// Bytes by which the pool grew; their sum is the final pool size.
    pub new_pool_bytes: u64,
}

/// Replays `plan` in the method's order (size descending; ties: lifetime start, then id)
/// and splits every block into the part below the pool top at that moment (reused) and
/// the part above it (new pool). `None` when the plan does not fit the problem or a sum
/// overflows.
pub fn exclusive_stats(problem: &Problem, plan: &Plan) -> Option<ExclusiveStats> {
    if plan.offsets.len() != problem.len()
        || plan
            .extents
            .as_ref()
            .is_some_and(|l| l.len() != problem.len())
    {
        return None;
    }
    let buffers = problem.buffers();
    let mut stats = ExclusiveStats {
        buffers: buffers.len(),
        ..ExclusiveStats::default()
    };
    let mut top = 0u64;
    for i in method_order(problem) {
        let mut new_top = top;
        for extent in plan
            .extents_of(crate::BufferId(i as u32), buffers[i].size)
            .iter()
        {
            let end = extent.end()?;
            let reused = top.min(end).saturating_sub(extent.offset);
            stats.reused_bytes = stats.reused_bytes.checked_add(reused)?;
            new_top = new_top.max(end);
        }
        // A block placed above the top leaves a hole below it; the pool grows by both.
        stats.new_pool_bytes = stats.new_pool_bytes.checked_add(new_top - top)?;
        top = new_top;
    }
    Some(stats)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::check;
    use crate::plan::Extent;
    use crate::problem::{Buffer, BufferId};

    /// the `exclusive` method with the method's own table of exclusive pairs, encoded as conflict
    /// pairs on buffers whose lifetimes never overlap.
    #[test]
    fn worked_example_with_the_method_table() {
        let mb = 1u64 << 20;
        let demands = [5, 10, 8, 20, 2, 6, 15, 3];
        let table: &[(u32, &[u32])] = &[
            (1, &[2]),
            (2, &[1, 3, 4, 5]),
            (3, &[2, 4, 5, 6]),
            (4, &[2, 3, 5, 6, 7]),
            (5, &[2, 3, 4, 6, 7, 8]),
            (6, &[3, 4, 5, 7]),
            (7, &[4, 5, 6, 8]),
            (8, &[7, 5]),
        ];
        let buffers = demands
            .iter()
            .enumerate()
            .map(|(i, &d)| Buffer::new(format!("op{}", i + 1), d * mb, i as u64, i as u64 + 1))
            .collect();
        let pairs = table
            .iter()
            .flat_map(|&(a, bs)| bs.iter().map(move |&b| (BufferId(a - 1), BufferId(b - 1))));
        let problem = Problem::new(buffers, pairs).unwrap();
        let plan = Exclusive::DEFAULT.plan(&problem).unwrap();
        let report = check(&problem, &plan);
        assert!(report.is_valid(), "{:?}", report.violations);
        assert_eq!(report.arena_bytes, Some(46 * mb));
        assert_eq!(problem.total_size(), Some(69 * mb));
        assert_eq!(problem.conflicts().len(), 15);
        // The walk-through's offsets: op4 [0,20), op7 [20,35), op2 [20,30), op3 [30,38),
        // op6 [38,44), op1 [0,5), op5 [44,46); op8 inside op4 (any place there is valid).
        let at = |op: usize| plan.offsets[op - 1] / mb;
        assert_eq!(
            [at(4), at(7), at(2), at(3), at(6), at(1), at(5)],
            [0, 20, 20, 30, 38, 0, 44]
        );
        assert!(at(8) + 3 <= 20, "op8 at {} MB is not inside op4", at(8));
        let stats = exclusive_stats(&problem, &plan).unwrap();
        assert_eq!(stats.new_pool_bytes, 46 * mb);
        assert_eq!(stats.reused_bytes, 23 * mb);
        assert_eq!(stats.buffers, 8);
    }

    /// The module's picture, computed by hand: P 5, Q 5, R 4, T 4 (in that order; R
    /// before T by lifetime start); exclusive pairs P–Q, Q–R, R–T, Q–T. P [0, 5);
    /// Q [5, 10); R [0, 4) inside P; T may use only [4, 5) (P's bytes outside R):
    /// contiguous it goes on top at [10, 14), fragmented it takes [4, 5) and grows the
    /// pool by the remaining 3 bytes: [10, 13).
    #[test]
    fn fragmented_takes_the_reusable_pieces_and_grows_by_the_remainder() {
        let names = ["P", "Q", "R", "T"];
        let sizes = [5, 5, 4, 4];
        let buffers = names
            .iter()
            .zip(sizes)
            .enumerate()
            .map(|(i, (name, size))| Buffer::new(*name, size, i as u64, i as u64 + 1))
            .collect();
        let pairs = [(0, 1), (1, 2), (2, 3), (1, 3)].map(|(a, b)| (BufferId(a), BufferId(b)));
        let problem = Problem::new(buffers, pairs).unwrap();

        let contiguous = Exclusive::DEFAULT.plan(&problem).unwrap();
        assert!(check(&problem, &contiguous).is_valid());
        assert_eq!(contiguous.offsets, [0, 5, 0, 10]);
        assert_eq!(contiguous.arena_bytes, Some(14));

        let fragmented = Exclusive::FRAGMENTED.plan(&problem).unwrap();
        let report = check(&problem, &fragmented);
        assert!(report.is_valid(), "{:?}", report.violations);
        assert_eq!(report.arena_bytes, Some(13));
        let e = |offset, len| Extent { offset, len };
        assert_eq!(
            fragmented.extents,
            Some(vec![
                vec![e(0, 5)],
                vec![e(5, 5)],
                vec![e(0, 4)],
                vec![e(4, 1), e(10, 3)],
            ])
        );
        assert_eq!(fragmented.offsets, [0, 5, 0, 4]);
        assert!(fragmented.is_fragmented());
        // The method's accounting: R reuses 4 bytes, T 1; the pool ends at 13.
        let stats = exclusive_stats(&problem, &fragmented).unwrap();
        assert_eq!((stats.reused_bytes, stats.new_pool_bytes), (5, 13));
    }
}
