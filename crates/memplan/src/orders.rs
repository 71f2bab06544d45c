//! Plans valid for *every* execution order a dataflow graph allows (the every-order mode
//! of the `exclusive` method): two buffers may share bytes only if one is provably dead
//! before the other is produced in all topological orders, or if one is stored on the
//! other by a sharing the operators allow in every order (a view, or an in-place write
//! that runs after every other use of what it overwrites).
//!
//! The graph is given abstractly ([`Dataflow`]): operators `0..n` with their edges, and per
//! buffer the operators that produce it, the operators that read it, whether it is kept
//! to the end (a graph output) and, optionally, the inputs its producer may store it on
//! ([`Dataflow::may_share`]). Buffer `x` is *ordered before* buffer `y`
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
//! producer of `y` does not count as before it: at that step both are live.
//!
//! # Sharing along the edges: views and in-place writes
//!
//! When the buffers are single tensors (values), a plan may put a tensor on the bytes of
//! an input of its producer even though the two are never ordered:
//!
//! - a **view** (`Share::View`): the producer writes nothing, the tensor *is* its input's
//!   data under another shape, so the two may share bytes whenever they live;
//! - an **in-place write** (`Share::InPlace`): the producer reads the input while writing
//!   its output over it. The input's data is destroyed at that operator, so the input (and
//!   everything stored on the same data) must have no other use that may run after it:
//!   every other producer and reader of it reaches the writing operator in every order.
//!
//! [`check_all_orders`] derives these *storage links* from the plan (a tensor linked to an
//! input it may share when both have exactly the same pieces) and accepts a pair of
//! unordered tensors on common bytes only when the links explain it: both descend from
//! one storage, and each of them is dead before the first in-place write on the other's
//! side of the tree. An in-place write decided for one execution order (the file's) is
//! therefore caught when another order lets a reader of the input run after it.
//!
//! # Cost
//!
//! [`unordered_pairs`] lists the pairs that must not share bytes without building the
//! `n²/64` words of whole reachability rows: pairs whose uses overlap in one topological
//! order come from a sweep over intervals, the others from the operator pairs of which
//! neither reaches the other ([`for_each_unrelated_pair`], chunked bit sets). Time
//! O((n + e)·n/64 + m log m + pairs), memory O(n + m + e + pairs). On a chain (no
//! unrelated operators) that is linear. [`check_all_orders`] tests exactly those pairs for
//! common bytes, so checking a valid plan never visits the (quadratic) ordered pairs that
//! share bytes legitimately. [`unordered_pairs_naive`] is the quadratic definition, kept
//! as the reference the tests hold the fast one to.

use std::fmt;

use crate::plan::{Extent, Plan};
use crate::problem::{BufferId, Problem};

/// How a tensor may be stored on an input of its producer (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Share {
    /// The same data under another shape: nothing is written.
    View,
    /// The producer writes its output over the input while reading it (an elementwise
    /// kernel).
    InPlace,
}

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
    /// `may_share[buffer]`: the buffers (inputs of its single producer) it may be stored
    /// on, and how. Empty when no sharing is declared (then only ordered buffers share);
    /// otherwise one list per buffer. Meaningful for buffers that are single tensors.
    pub may_share: Vec<Vec<(usize, Share)>>,
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
    #[error("buffer {buffer}: it may share buffer {other}, which is out of range or itself")]
    ShareOutOfRange { buffer: usize, other: usize },
}

/// Reachability rows over the operators: `reaches(a, b)` when a path of one or more edges
/// leads from `a` to `b`. Memory: n² / 64 words (the reference; see [`Reacher`] for
/// single queries on large graphs).
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

/// A topological order of a checked dataflow, its positions and the predecessors.
struct Topology {
    order: Vec<usize>,
    position: Vec<usize>,
    predecessors: Vec<Vec<usize>>,
}

/// Answers single reachability queries by a search backwards from the target, pruned to
/// the operators placed after the source in a topological order: cheap where the two are
/// close (an in-place write and the uses of its input), O(n + e) at worst, and no
/// quadratic table.
pub struct Reacher<'a> {
    predecessors: &'a [Vec<usize>],
    position: &'a [usize],
    seen: Vec<u32>,
    epoch: u32,
    stack: Vec<usize>,
}

impl<'a> Reacher<'a> {
    /// A reacher over these predecessor lists and topological positions.
    pub fn new(predecessors: &'a [Vec<usize>], position: &'a [usize]) -> Reacher<'a> {
        Reacher {
            predecessors,
            position,
            seen: vec![0; position.len()],
            epoch: 0,
            stack: Vec::new(),
        }
    }

    /// Whether `from` reaches `to` along one or more edges.
    pub fn reaches(&mut self, from: usize, to: usize) -> bool {
        if self.position[from] >= self.position[to] {
            return false;
        }
        self.epoch = self.epoch.wrapping_add(1);
        if self.epoch == 0 {
            self.seen.iter_mut().for_each(|s| *s = 0);
            self.epoch = 1;
        }
        let floor = self.position[from];
        self.stack.clear();
        self.stack.push(to);
        self.seen[to] = self.epoch;
        while let Some(v) = self.stack.pop() {
            for &p in &self.predecessors[v] {
                if p == from {
                    return true;
                }
                if self.position[p] > floor && self.seen[p] != self.epoch {
                    self.seen[p] = self.epoch;
                    self.stack.push(p);
                }
            }
        }
        false
    }
}

impl Dataflow {
    /// Checks the sizes and ranges against `problem` (of `m` buffers) and finds a
    /// topological order.
    fn topology(&self, m: usize) -> Result<Topology, DataflowError> {
        let n = self.successors.len();
        for len in [self.producers.len(), self.readers.len(), self.kept.len()] {
            if len != m {
                return Err(DataflowError::BufferCount {
                    dataflow: len,
                    problem: m,
                });
            }
        }
        if !self.may_share.is_empty() && self.may_share.len() != m {
            return Err(DataflowError::BufferCount {
                dataflow: self.may_share.len(),
                problem: m,
            });
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
        for (buffer, shares) in self.may_share.iter().enumerate() {
            if let Some(&(other, _)) = shares.iter().find(|&&(o, _)| o >= m || o == buffer) {
                return Err(DataflowError::ShareOutOfRange { buffer, other });
            }
        }
        let mut indegree = vec![0usize; n];
        let mut predecessors: Vec<Vec<usize>> = vec![Vec::new(); n];
        for (op, tos) in self.successors.iter().enumerate() {
            for &to in tos {
                if to >= n {
                    return Err(DataflowError::EdgeOutOfRange { op, to, ops: n });
                }
                indegree[to] += 1;
                predecessors[to].push(op);
            }
        }
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
        let mut position = vec![0usize; n];
        for (p, &op) in order.iter().enumerate() {
            position[op] = p;
        }
        Ok(Topology {
            order,
            position,
            predecessors,
        })
    }

    /// Checks the sizes and ranges against `problem` and computes the whole reachability
    /// (n² / 64 words: the reference, for small graphs and tests).
    pub fn reach(&self, problem: &Problem) -> Result<Reach, DataflowError> {
        let topology = self.topology(problem.len())?;
        let n = self.successors.len();
        let words = n.div_ceil(64).max(1);
        let mut bits = vec![0u64; n * words];
        for &op in topology.order.iter().rev() {
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

/// Calls `f(x, y)` once for every pair of operators `x < y` of which neither reaches the
/// other along one or more edges (`successors` / `predecessors` of a DAG, `order`
/// topological).
///
/// The sources are taken in chunks of 1024; per chunk, a forward sweep over `order`
/// collects in each operator the chunk's sources that reach it, a backward sweep the ones
/// it reaches. Time O((n + e) · n / 64 + pairs), memory O(16 n) words: linear in the
/// graph, not the n² / 64 bits of whole reachability rows.
pub fn for_each_unrelated_pair(
    successors: &[Vec<usize>],
    predecessors: &[Vec<usize>],
    order: &[usize],
    f: impl FnMut(usize, usize),
) {
    unrelated_pairs_in_chunks(successors, predecessors, order, CHUNK_WORDS, f)
}

/// Words per operator of one chunk of sources in [`for_each_unrelated_pair`].
const CHUNK_WORDS: usize = 16;

/// [`for_each_unrelated_pair`] with chunks of `64 · chunk_words` sources.
#[doc(hidden)]
pub fn unrelated_pairs_in_chunks(
    successors: &[Vec<usize>],
    predecessors: &[Vec<usize>],
    order: &[usize],
    chunk_words: usize,
    mut f: impl FnMut(usize, usize),
) {
    let n = successors.len();
    let words = chunk_words.min(n.div_ceil(64)).max(1);
    let chunk = 64 * words;
    let mut reached_by = vec![0u64; n * words];
    let mut reaches = vec![0u64; n * words];
    let mut first = 0;
    while first < n {
        let last = (first + chunk).min(n);
        let in_chunk = |x: usize| (first..last).contains(&x).then(|| x - first);
        reached_by.iter_mut().for_each(|w| *w = 0);
        reaches.iter_mut().for_each(|w| *w = 0);
        for &v in order {
            for &p in &predecessors[v] {
                for w in 0..words {
                    reached_by[v * words + w] |= reached_by[p * words + w];
                }
                if let Some(bit) = in_chunk(p) {
                    reached_by[v * words + bit / 64] |= 1 << (bit % 64);
                }
            }
        }
        for &v in order.iter().rev() {
            for &s in &successors[v] {
                for w in 0..words {
                    reaches[v * words + w] |= reaches[s * words + w];
                }
                if let Some(bit) = in_chunk(s) {
                    reaches[v * words + bit / 64] |= 1 << (bit % 64);
                }
            }
        }
        // Pairs (x, y) with x in the chunk and x < y.
        for y in first + 1..n {
            let limit = y.min(last) - first; // sources x - first in [0, limit)
            for w in 0..words.min(limit.div_ceil(64)) {
                let mut free = !(reached_by[y * words + w] | reaches[y * words + w]);
                let top = limit - 64 * w;
                if top < 64 {
                    free &= (1u64 << top) - 1;
                }
                while free != 0 {
                    let bit = free.trailing_zeros() as usize;
                    free &= free - 1;
                    f(first + 64 * w + bit, y);
                }
            }
        }
        first = last;
    }
}

/// Every pair `(a, b)`, `a < b`, of buffers of at least one byte that are ordered neither
/// way: the pairs that must never share bytes (unless a storage link explains it, which
/// only [`check_all_orders`] considers). Sorted, without repeats. See the module
/// documentation for the method and its cost.
pub fn unordered_pairs(
    problem: &Problem,
    dataflow: &Dataflow,
) -> Result<Vec<(BufferId, BufferId)>, DataflowError> {
    let m = problem.len();
    let topology = dataflow.topology(m)?;
    let position = &topology.position;
    let sized: Vec<bool> = problem.buffers().iter().map(|b| b.size > 0).collect();
    // lo: the first producer's position (-1: live from the start); hi: the last use's
    // (i64::MAX when kept to the end), never below lo.
    let lo: Vec<i64> = dataflow
        .producers
        .iter()
        .map(|ps| ps.iter().map(|&p| position[p] as i64).min().unwrap_or(-1))
        .collect();
    let hi: Vec<i64> = (0..m)
        .map(|b| {
            if dataflow.kept[b] {
                return i64::MAX;
            }
            dataflow.producers[b]
                .iter()
                .chain(&dataflow.readers[b])
                .map(|&p| position[p] as i64)
                .max()
                .unwrap_or(-1)
                .max(lo[b])
        })
        .collect();
    let mut found: Vec<(u32, u32)> = Vec::new();
    let mut push = |a: usize, b: usize| found.push((a.min(b) as u32, a.max(b) as u32));
    // Uses overlapping in the topological order: ordered neither way.
    let mut by_lo: Vec<usize> = (0..m).filter(|&b| sized[b]).collect();
    by_lo.sort_unstable_by_key(|&b| lo[b]);
    let mut active: Vec<usize> = Vec::new();
    for &b in &by_lo {
        active.retain(|&a| hi[a] >= lo[b]);
        for &a in &active {
            push(a, b);
        }
        active.push(b);
    }
    // `a` entirely before `b`: unordered exactly when a use of `a` and a producer of `b`
    // are unrelated operators.
    let n = dataflow.successors.len();
    let mut used_by: Vec<Vec<u32>> = vec![Vec::new(); n];
    let mut produced_by: Vec<Vec<u32>> = vec![Vec::new(); n];
    for b in (0..m).filter(|&b| sized[b]) {
        for &p in &dataflow.producers[b] {
            produced_by[p].push(b as u32);
        }
        let mut uses: Vec<usize> = dataflow.producers[b]
            .iter()
            .chain(&dataflow.readers[b])
            .copied()
            .collect();
        uses.sort_unstable();
        uses.dedup();
        for u in uses {
            used_by[u].push(b as u32);
        }
    }
    for_each_unrelated_pair(
        &dataflow.successors,
        &topology.predecessors,
        &topology.order,
        |u, v| {
            for (u, v) in [(u, v), (v, u)] {
                for &a in &used_by[u] {
                    for &b in &produced_by[v] {
                        if hi[a as usize] < lo[b as usize] {
                            push(a as usize, b as usize);
                        }
                    }
                }
            }
        },
    );
    found.sort_unstable();
    found.dedup();
    Ok(found
        .into_iter()
        .filter(|&(a, b)| a != b)
        .map(|(a, b)| (BufferId(a), BufferId(b)))
        .collect())
}

/// [`unordered_pairs`] by its definition: every pair tested with [`Dataflow::ordered`]
/// on whole reachability rows. O(m² + n²/64): the reference for tests and small graphs.
pub fn unordered_pairs_naive(
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
/// is produced in every execution order, and no view or in-place write explains it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Unordered {
    pub a: String,
    pub b: String,
    /// The first shared addresses `[start, end)`.
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

/// The pieces of buffer `i`, sorted by offset (empty for a buffer without bytes).
fn sorted_pieces(problem: &Problem, plan: &Plan, i: usize) -> Vec<Extent> {
    let size = problem.buffers()[i].size;
    if size == 0 {
        return Vec::new();
    }
    let mut pieces = plan.extents_of(BufferId(i as u32), size).into_owned();
    pieces.sort_unstable();
    pieces
}

/// The first addresses two sorted piece lists share, if any.
fn first_shared(a: &[Extent], b: &[Extent]) -> Option<(u64, u64)> {
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        let (ea, eb) = (a[i], b[j]);
        let end_a = ea.offset.saturating_add(ea.len);
        let end_b = eb.offset.saturating_add(eb.len);
        let start = ea.offset.max(eb.offset);
        let end = end_a.min(end_b);
        if start < end {
            return Some((start, end));
        }
        if end_a <= end_b {
            i += 1;
        } else {
            j += 1;
        }
    }
    None
}

/// Every pair of buffers of `plan` that share addresses although they are ordered neither
/// way in `dataflow` and no storage link explains it (see the module documentation),
/// sorted, one entry per pair with the first shared addresses; empty when the plan is
/// valid for every topological order as far as sharing goes (run
/// [`crate::checker::check`] too for sizes, alignment and fixed offsets).
///
/// Only the unordered pairs ([`unordered_pairs`]) are tested, so the cost is that of
/// listing them plus, per pair that shares bytes, a walk up the storage links. A plan
/// whose length differs from the problem's is an error, like a dataflow that does not fit
/// the problem.
pub fn check_all_orders(
    problem: &Problem,
    plan: &Plan,
    dataflow: &Dataflow,
) -> Result<Vec<Unordered>, DataflowError> {
    let m = problem.len();
    let topology = dataflow.topology(m)?;
    if plan.offsets.len() != m || plan.extents.as_ref().is_some_and(|e| e.len() != m) {
        return Err(DataflowError::BufferCount {
            dataflow: plan.offsets.len(),
            problem: m,
        });
    }
    let pairs = unordered_pairs(problem, dataflow)?;
    let pieces: Vec<Vec<Extent>> = (0..m).map(|i| sorted_pieces(problem, plan, i)).collect();
    let links = storage_links(dataflow, &topology, &pieces);
    let mut reacher = Reacher::new(&topology.predecessors, &topology.position);
    let buffers = problem.buffers();
    let mut found = Vec::new();
    for (a, b) in pairs {
        let (a, b) = (a.index(), b.index());
        let Some((start, end)) = first_shared(&pieces[a], &pieces[b]) else {
            continue;
        };
        if links.explains(dataflow, &mut reacher, a, b) {
            continue;
        }
        found.push(Unordered {
            a: buffers[a].name.clone(),
            b: buffers[b].name.clone(),
            start,
            end,
        });
    }
    found.sort();
    Ok(found)
}

/// The storage links of a plan: `parent[y] = (x, how)` when `y`'s producer may store it on
/// its input `x` (a declared sharing) and the plan gives both exactly the same pieces.
struct Links {
    parent: Vec<Option<(usize, Share)>>,
    depth: Vec<usize>,
}

fn storage_links(dataflow: &Dataflow, topology: &Topology, pieces: &[Vec<Extent>]) -> Links {
    let m = pieces.len();
    // A link goes to a buffer born strictly earlier, so links form a forest.
    let birth = |b: usize| {
        dataflow.producers[b]
            .iter()
            .map(|&p| topology.position[p] as i64)
            .min()
            .unwrap_or(-1)
    };
    let mut parent: Vec<Option<(usize, Share)>> = vec![None; m];
    for (y, shares) in dataflow.may_share.iter().enumerate() {
        if pieces[y].is_empty() || dataflow.producers[y].len() != 1 {
            continue;
        }
        parent[y] = shares
            .iter()
            .copied()
            .find(|&(x, _)| pieces[x] == pieces[y] && birth(x) < birth(y));
    }
    let mut by_birth: Vec<usize> = (0..m).collect();
    by_birth.sort_unstable_by_key(|&b| birth(b));
    let mut depth = vec![0usize; m];
    for &b in &by_birth {
        if let Some((x, _)) = parent[b] {
            depth[b] = depth[x] + 1;
        }
    }
    Links { parent, depth }
}

impl Links {
    /// Whether the links explain `a` and `b` sharing bytes in every order: both descend
    /// from one storage and each is dead before the first in-place write on the other's
    /// side (every other use of it reaches that write), never over a graph input or a
    /// kept buffer.
    fn explains(&self, dataflow: &Dataflow, reacher: &mut Reacher, a: usize, b: usize) -> bool {
        // Walk both up to their common ancestor, remembering the in-place write nearest
        // to it on each side (the first to destroy the common data).
        let (mut x, mut y) = (a, b);
        let (mut write_a, mut write_b) = (None, None);
        let step = |v: usize, write: &mut Option<usize>| -> Option<usize> {
            let (up, how) = self.parent[v]?;
            if how == Share::InPlace {
                *write = Some(v);
            }
            Some(up)
        };
        while self.depth[x] > self.depth[y] {
            let Some(up) = step(x, &mut write_a) else {
                return false;
            };
            x = up;
        }
        while self.depth[y] > self.depth[x] {
            let Some(up) = step(y, &mut write_b) else {
                return false;
            };
            y = up;
        }
        while x != y {
            let (Some(ux), Some(uy)) = (step(x, &mut write_a), step(y, &mut write_b)) else {
                return false;
            };
            x = ux;
            y = uy;
        }
        let root = x;
        if write_a.is_none() && write_b.is_none() {
            return true; // views of one data
        }
        if dataflow.producers[root].is_empty() || dataflow.kept[root] {
            return false; // a graph input or a kept buffer is never written over
        }
        // `other` must be dead before the write that made `written`'s side.
        let mut dead_before = |other: usize, written: usize| -> bool {
            if dataflow.kept[other] {
                return false;
            }
            let w = dataflow.producers[written][0];
            dataflow.producers[other]
                .iter()
                .chain(&dataflow.readers[other])
                .all(|&u| u == w || reacher.reaches(u, w))
        };
        let a_side = match write_a {
            Some(w) => dead_before(b, w),
            None => true,
        };
        a_side
            && match write_b {
                Some(w) => dead_before(a, w),
                None => true,
            }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Chunked reachability against a depth-first search per node, on random DAGs of up
    /// to 300 nodes with chunks of 64 and 128 sources (several chunks, partial last ones).
    #[test]
    #[allow(clippy::needless_range_loop)] // x, y index several tables
    fn unrelated_pairs_match_a_search_per_node() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = |bound: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % bound as u64) as usize
        };
        for round in 0..12 {
            let n = 1 + next(300);
            let mut successors = vec![Vec::new(); n];
            let mut predecessors = vec![Vec::new(); n];
            for to in 1..n {
                for _ in 0..next(3) {
                    let from = next(to);
                    successors[from].push(to);
                    predecessors[to].push(from);
                }
            }
            let order: Vec<usize> = (0..n).collect();
            let mut reach = vec![vec![false; n]; n];
            for (x, row) in reach.iter_mut().enumerate() {
                let mut stack = successors[x].clone();
                while let Some(y) = stack.pop() {
                    if !row[y] {
                        row[y] = true;
                        stack.extend(&successors[y]);
                    }
                }
            }
            let mut expected = Vec::new();
            for y in 0..n {
                for x in 0..y {
                    if !reach[x][y] && !reach[y][x] {
                        expected.push((x, y));
                    }
                }
            }
            expected.sort_unstable();
            for words in [1, 2] {
                let mut found = Vec::new();
                unrelated_pairs_in_chunks(&successors, &predecessors, &order, words, |x, y| {
                    found.push((x, y))
                });
                found.sort_unstable();
                assert!(found == expected, "round {round}, n {n}, {words} words");
            }
        }
    }
}
