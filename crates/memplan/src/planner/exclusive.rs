//! `exclusive`: exclusive-operator reuse, largest first (methods.md §1).
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
//! earlier lifetime start, then lower id); what makes method 1 differ from lifetime-based
//! planning is the exclusivity relation, which a graph front-end supplies as conflict
//! pairs on buffers whose lifetimes never overlap (`memplan_graph::exclusive`). On a
//! problem with lifetimes it plans like `greedy-size-firstfit`.
//!
//! [`ExclusiveStats`] reports what the method reports: per buffer, the bytes reused from
//! the pool as it stood and the bytes by which the pool grew.

use super::{PlanError, Planner, SizeFirstFit};
use crate::plan::Plan;
use crate::problem::Problem;

/// The `exclusive` planner (methods.md §1). Contiguous blocks only.
pub struct Exclusive;

impl Planner for Exclusive {
    fn name(&self) -> &'static str {
        "exclusive"
    }

    fn description(&self) -> &'static str {
        "methods.md §1: largest first, lowest memory under no exclusive block, else grow the pool (exclusivity from the graph)"
    }

    fn plan(&self, problem: &Problem) -> Result<Plan, PlanError> {
        SizeFirstFit.plan(problem)
    }
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
    if plan.offsets.len() != problem.len() {
        return None;
    }
    let buffers = problem.buffers();
    let mut order: Vec<usize> = (0..buffers.len()).collect();
    order.sort_unstable_by_key(|&i| {
        (
            std::cmp::Reverse(buffers[i].size),
            buffers[i].lifetime.start,
            i,
        )
    });
    let mut stats = ExclusiveStats {
        buffers: buffers.len(),
        ..ExclusiveStats::default()
    };
    let mut top = 0u64;
    for i in order {
        let start = plan.offsets[i];
        let end = start.checked_add(buffers[i].size)?;
        let reused = top.min(end).saturating_sub(start);
        stats.reused_bytes = stats.reused_bytes.checked_add(reused)?;
        // A block placed above the top leaves a hole below it; the pool grows by both.
        let new_top = top.max(end);
        stats.new_pool_bytes = stats.new_pool_bytes.checked_add(new_top - top)?;
        top = new_top;
    }
    Some(stats)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::check;
    use crate::problem::{Buffer, BufferId};

    /// methods.md §1 with the method's own table of exclusive pairs, encoded as conflict
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
        let plan = Exclusive.plan(&problem).unwrap();
        let report = check(&problem, &plan);
        assert!(report.is_valid(), "{:?}", report.violations);
        assert_eq!(report.arena_bytes, Some(46 * mb));
        assert_eq!(problem.total_size(), Some(69 * mb));
        // The offsets the method determines (op8 may go to [0, 3) or [5, 8): both valid).
        let at = |op: usize| plan.offsets[op - 1] / mb;
        assert_eq!(
            [at(4), at(7), at(2), at(3), at(6), at(1), at(5)],
            [0, 20, 20, 30, 38, 0, 44]
        );
        let stats = exclusive_stats(&problem, &plan).unwrap();
        assert_eq!(stats.new_pool_bytes, 46 * mb);
        assert_eq!(stats.reused_bytes, 23 * mb);
        assert_eq!(stats.buffers, 8);
    }
}
