//! Plans valid for *every* execution order a dataflow graph allows (methods.md §1,
//! corrected): two buffers may share bytes only if one is provably dead before the other
//! is produced in all topological orders.
//!
//! The graph is given abstractly ([`Dataflow`]): operators `0..n` with their edges, and per
//! buffer the operators that produce it, the operators that read it and whether it is kept
//! to the end (a graph output). Buffer `x` is *ordered before* buffer `y`
//! ([`Dataflow::ordered_before`]) when
//!
//! - `x` is not kept to the end and `y` has at least one producer (a buffer without one,
//!   a graph input, is live from the start), and
//! - every producer and every reader of `x` reaches every producer of `y` along one or
//!   more edges.
//!
//! Then in every topological order the last use of `x` runs strictly before the first
//! producer of `y`: with the project's lifetimes (`[first, last + 1)`, a tensor live at the
//! step that reads it), `x` is dead when `y` is born. A reader of `x` that *is* the
//! producer of `y` does not count as before it: at that step both are live, and the
//! ordinary checker rejects the pair (an output written over its input is the analysis'
//! in-place block, a single buffer).
//!
//! [`check_all_orders`] reports every pair of buffers whose address ranges overlap and that
//! are ordered neither way; a plan it accepts is valid for every topological order.
//! [`unordered_pairs`] lists the pairs that must not share bytes, for a planner.

use std::fmt;

use crate::plan::Plan;
use crate::problem::{BufferId, Problem};

/// The dataflow facts of a graph that decide which buffers are ordered in every execution
/// order. Operators are `0..successors.len()`; the edges must form a DAG.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Dataflow {
    /// `successors[op]`: the operators `op` has an edge to (data or control).
    pub successors: Vec<Vec<usize>>,
    /// `producers[buffer]`: the operators that write the buffer (none for a graph input).
    pub producers: Vec<Vec<usize>>,
    /// `readers[buffer]`: the operators that read it.
    pub readers: Vec<Vec<usize>>,
    /// `kept[buffer]`: live to the end of the run (a graph output).
    pub kept: Vec<bool>,
}

/// What is wrong with a [`Dataflow`] given with a problem, naming what and where.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DataflowError {
    #[error("the dataflow describes {dataflow} buffers but the problem has {problem}")]
    BufferCount { dataflow: usize, problem: usize },
    #[error("buffer {buffer}: operator {op} is out of range (the dataflow has {ops} operators)")]
    OperatorOutOfRange {
        buffer: usize,
        op: usize,
        ops: usize,
    },
    #[error("operator {op}: successor {to} is out of range (the dataflow has {ops} operators)")]
    EdgeOutOfRange { op: usize, to: usize, ops: usize },
    #[error("the edges form a cycle through operator {op}; a dataflow graph must be acyclic")]
    Cycle { op: usize },
}

/// Reachability rows over the operators: `reaches(a, b)` when a path of one or more edges
/// leads from `a` to `b`. Memory: n² / 64 words.
pub struct Reach {
    words: usize,
    bits: Vec<u64>,
}

impl Reach {
    /// Whether `from` reaches `to` along one or more edges.
    pub fn reaches(&self, from: usize, to: usize) -> bool {
        self.bits[from * self.words + to / 64] >> (to % 64) & 1 == 1
    }
}

impl Dataflow {
    /// Checks the sizes and ranges against `problem` and computes the reachability.
    pub fn reach(&self, problem: &Problem) -> Result<Reach, DataflowError> {
        let n = self.successors.len();
        let m = problem.len();
        for len in [self.producers.len(), self.readers.len(), self.kept.len()] {
            if len != m {
                return Err(DataflowError::BufferCount {
                    dataflow: len,
                    problem: m,
                });
            }
        }
        for (buffer, ops) in self.producers.iter().chain(&self.readers).enumerate() {
            if let Some(&op) = ops.iter().find(|&&op| op >= n) {
                return Err(DataflowError::OperatorOutOfRange {
                    buffer: buffer % m.max(1),
                    op,
                    ops: n,
                });
            }
        }
        let mut indegree = vec![0usize; n];
        for (op, tos) in self.successors.iter().enumerate() {
            for &to in tos {
                if to >= n {
                    return Err(DataflowError::EdgeOutOfRange { op, to, ops: n });
                }
                indegree[to] += 1;
            }
        }
        // Kahn's order, then rows in reverse: a node's row is its successors' rows.
        let mut order: Vec<usize> = (0..n).filter(|&i| indegree[i] == 0).collect();
        let mut next = 0;
        while next < order.len() {
            let op = order[next];
            next += 1;
            for &to in &self.successors[op] {
                indegree[to] -= 1;
                if indegree[to] == 0 {
                    order.push(to);
                }
            }
        }
        if order.len() < n {
            let op = (0..n).find(|&i| indegree[i] > 0).unwrap_or(0);
            return Err(DataflowError::Cycle { op });
        }
        let words = n.div_ceil(64).max(1);
        let mut bits = vec![0u64; n * words];
        for &op in order.iter().rev() {
            for &to in &self.successors[op] {
                bits[op * words + to / 64] |= 1 << (to % 64);
                for w in 0..words {
                    let b = bits[to * words + w];
                    bits[op * words + w] |= b;
                }
            }
        }
        Ok(Reach { words, bits })
    }

    /// Whether buffer `x` is dead before buffer `y` is produced in every topological order
    /// (see the module documentation). `reach` comes from [`Dataflow::reach`].
    pub fn ordered_before(&self, reach: &Reach, x: usize, y: usize) -> bool {
        if self.kept[x] || self.producers[y].is_empty() {
            return false;
        }
        self.producers[y].iter().all(|&q| {
            self.producers[x]
                .iter()
                .chain(&self.readers[x])
                .all(|&u| reach.reaches(u, q))
        })
    }

    /// Whether `a` and `b` are ordered one way or the other.
    pub fn ordered(&self, reach: &Reach, a: usize, b: usize) -> bool {
        self.ordered_before(reach, a, b) || self.ordered_before(reach, b, a)
    }
}

/// Every pair `(a, b)`, `a < b`, of buffers of at least one byte that are ordered neither
/// way: the pairs that must never share bytes. Time O(m² · the producers and readers
/// involved); intended as the conflict pairs of a planner's problem.
pub fn unordered_pairs(
    problem: &Problem,
    dataflow: &Dataflow,
) -> Result<Vec<(BufferId, BufferId)>, DataflowError> {
    let reach = dataflow.reach(problem)?;
    let sized: Vec<usize> = (0..problem.len())
        .filter(|&i| problem.buffers()[i].size > 0)
        .collect();
    let mut pairs = Vec::new();
    for (k, &a) in sized.iter().enumerate() {
        for &b in &sized[k + 1..] {
            if !dataflow.ordered(&reach, a, b) {
                pairs.push((BufferId(a as u32), BufferId(b as u32)));
            }
        }
    }
    Ok(pairs)
}

/// Two buffers that share addresses although neither is provably dead before the other
/// is produced in every execution order.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Unordered {
    pub a: String,
    pub b: String,
    /// The shared addresses `[start, end)`.
    pub start: u64,
    pub end: u64,
}

impl fmt::Display for Unordered {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "buffers '{}' and '{}' share addresses [{}, {}) but neither is dead before the other is produced in every execution order",
            self.a, self.b, self.start, self.end
        )
    }
}

/// Every pair of buffers of `plan` whose address ranges (offset, offset + size, or the
/// extents of a fragmented plan) overlap and that are ordered neither way in `dataflow`,
/// sorted (one entry per overlapping pair of pieces); empty when the plan is valid
/// for every topological order as far as sharing goes (run [`crate::checker::check`] too
/// for sizes, alignment and fixed offsets). A sweep over the pieces by offset: time
/// O(m log m + overlapping pairs). A plan whose length differs from the problem's is an
/// error, like a dataflow that does not fit the problem.
pub fn check_all_orders(
    problem: &Problem,
    plan: &Plan,
    dataflow: &Dataflow,
) -> Result<Vec<Unordered>, DataflowError> {
    let reach = dataflow.reach(problem)?;
    let buffers = problem.buffers();
    if plan.offsets.len() != buffers.len() {
        return Err(DataflowError::BufferCount {
            dataflow: plan.offsets.len(),
            problem: buffers.len(),
        });
    }
    // Address pieces `(start, end, buffer)`: one per buffer, or its extents when the plan
    // is fragmented.
    let mut pieces: Vec<(u64, u64, usize)> = Vec::new();
    for (i, buffer) in buffers.iter().enumerate().filter(|(_, b)| b.size > 0) {
        match plan.extents.as_ref().and_then(|e| e.get(i)) {
            Some(extents) => pieces.extend(
                extents
                    .iter()
                    .map(|e| (e.offset, e.offset.saturating_add(e.len), i)),
            ),
            None => {
                let start = plan.offsets[i];
                pieces.push((start, start.saturating_add(buffer.size), i));
            }
        }
    }
    pieces.sort_unstable();
    let mut open: Vec<(u64, u64, usize)> = Vec::new();
    let mut found = Vec::new();
    for &(start, end, b) in &pieces {
        open.retain(|&(_, e, _)| e > start);
        for &(_, e, a) in &open {
            if a != b && !dataflow.ordered(&reach, a, b) {
                let (x, y) = if a < b { (a, b) } else { (b, a) };
                found.push(Unordered {
                    a: buffers[x].name.clone(),
                    b: buffers[y].name.clone(),
                    start,
                    end: e.min(end),
                });
            }
        }
        open.push((start, end, b));
    }
    found.sort();
    Ok(found)
}
