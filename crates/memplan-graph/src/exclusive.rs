//! Exclusivity analysis of methods.md §1: which operators' output blocks may never share
//! memory, and the [`Problem`] that carries it to the `exclusive` planner.
//!
//! # Blocks and rules
//!
//! A *block* is one buffer of the [`Analysis`] (a value, or an alias / in-place group of
//! values); its *operators* are the producers of its values (a graph input has none).
//! Two blocks are exclusive when an operator of one and an operator of the other (two
//! different operators) are exclusive by an enabled rule, or by rule 4:
//!
//! 1. `edges`: one operator feeds the other (a data edge);
//! 2. `branches`: neither operator reaches the other along data and control edges;
//! 3. `outputs`: one operator feeds no other operator (a network output) and the other
//!    runs after it in the execution order;
//! 4. always on: the two blocks are live at a common step of the execution order
//!    ([`memplan::Buffer::live_together`]), which keeps a skip connection's block alive
//!    across the operators between its producer and its last reader.
//!
//! ```text
//!    1 ─► 2 ─┬─► 3 ─► 6 ─┐           3 and 4: no path either way  → rule 2
//!            ├─► 4 ──────┴─► 7 ─► 8  2 and 3: an edge             → rule 1
//!            └─► 5                   5 (an output) and 6, 7, 8    → rule 3
//! ```
//!
//! # The encoding
//!
//! The method ignores lifetimes: blocks that are not exclusive may share memory whenever
//! they run. [`exclusive_problem`] therefore gives block `i` the lifetime `[i, i + 1)`
//! (no two overlap) and turns every exclusive pair into a conflict pair, so the generic
//! [`memplan::checker`] checks an exclusive plan exactly and every planner may plan it.
//!
//! # What it buys and what it costs
//!
//! Rule 2 keeps blocks of parallel branches apart, which the method gives as its reason
//! for running branches concurrently. It does **not** make a plan safe for concurrent
//! execution (methods.md §1, corrected): a block read by one branch can still share bytes
//! with a block that another operator produces while that read is pending (rule 4 only
//! looks at the one execution order). An exclusive plan is valid for the execution order
//! it was made for. The price of rule 2 is memory: every pair of blocks on parallel
//! branches is kept apart even when the order runs them one after the other, so on branchy
//! models the pool can grow above the max-live lower bound (see doc/exclusive.md). With
//! rule 2 off the relation is close to lifetime overlap (rule 4) plus direct edges.

use memplan::{BufferId, Lifetime, Problem, ProblemError};

use crate::analysis::Analysis;
use crate::ir::{Graph, NodeId};

/// Which of the switchable rules are on (rule 4 always is).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rules {
    /// Rule 1: a direct edge.
    pub edges: bool,
    /// Rule 2: parallel branches (no path either way).
    pub branches: bool,
    /// Rule 3: network outputs and the operators executed after them.
    pub outputs: bool,
}

impl Rules {
    /// Every rule on (the method's default).
    pub const ALL: Rules = Rules {
        edges: true,
        branches: true,
        outputs: true,
    };
    /// Only rule 4 (lifetime overlap).
    pub const NONE: Rules = Rules {
        edges: false,
        branches: false,
        outputs: false,
    };

    /// Parses a comma-separated list of `edges`, `branches`, `outputs` (or `none`).
    pub fn parse(text: &str) -> Result<Rules, String> {
        let mut rules = Rules::NONE;
        for word in text.split(',').map(str::trim).filter(|w| !w.is_empty()) {
            match word {
                "edges" => rules.edges = true,
                "branches" => rules.branches = true,
                "outputs" => rules.outputs = true,
                "none" => {}
                other => {
                    return Err(format!(
                        "unknown exclusivity rule '{other}'; the rules are edges, branches, outputs (or none)"
                    ))
                }
            }
        }
        Ok(rules)
    }
}

/// The enabled switchable rules as `--exclusive-rules` spells them (`none` for none):
/// [`Rules::parse`] reads it back.
impl std::fmt::Display for Rules {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let on: Vec<&str> = [
            (self.edges, "edges"),
            (self.branches, "branches"),
            (self.outputs, "outputs"),
        ]
        .iter()
        .filter(|r| r.0)
        .map(|r| r.1)
        .collect();
        if on.is_empty() {
            f.write_str("none")
        } else {
            f.write_str(&on.join(","))
        }
    }
}

impl Default for Rules {
    fn default() -> Rules {
        Rules::ALL
    }
}

/// Which rule made a pair of blocks exclusive (the first one that holds, in rule order).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Reason {
    Edge,
    Branches,
    Output,
    LiveTogether,
}

impl Reason {
    /// The rule's name as `--exclusive-rules` spells it (`live` for rule 4).
    pub fn name(self) -> &'static str {
        match self {
            Reason::Edge => "edges",
            Reason::Branches => "branches",
            Reason::Output => "outputs",
            Reason::LiveTogether => "live",
        }
    }
}

/// The exclusive pairs of blocks of one analysis.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Exclusivity {
    /// `(a, b, reason)` with `a < b`, sorted: blocks (buffers of the analysis) that may
    /// never share memory.
    pub pairs: Vec<(BufferId, BufferId, Reason)>,
}

/// The operators of every block of `analysis`: the producers of its values, sorted by id
/// without repeats (empty for a graph input).
pub fn block_operators(graph: &Graph, analysis: &Analysis) -> Vec<Vec<NodeId>> {
    analysis
        .buffer_values
        .iter()
        .map(|values| {
            let mut ops: Vec<NodeId> = values
                .iter()
                .filter_map(|&v| graph.value(v).producer.map(|(n, _)| n))
                .collect();
            ops.sort_unstable();
            ops.dedup();
            ops
        })
        .collect()
}

/// The successors and predecessors of every node along data and control edges.
pub(crate) fn adjacency(graph: &Graph) -> (Vec<Vec<usize>>, Vec<Vec<usize>>) {
    let n = graph.nodes().len();
    let mut successors: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut predecessors: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut edge = |from: usize, to: usize| {
        successors[from].push(to);
        predecessors[to].push(from);
    };
    for (i, node) in graph.nodes().iter().enumerate() {
        for &out in &node.outputs {
            for &(consumer, _) in &graph.value(out).consumers {
                edge(i, consumer.index());
            }
        }
    }
    for &(from, to) in graph.control_edges() {
        edge(from.index(), to.index());
    }
    (successors, predecessors)
}

/// Words per node of one chunk of sources in [`for_each_unrelated_pair`]: 16 words, 1024
/// sources, so the two sweeps hold 2 × 16 words per node whatever the graph's size.
const CHUNK_WORDS: usize = 16;

/// Calls `f(x, y)` once for every pair of nodes `x < y` (indices) of which neither reaches
/// the other along one or more edges (`successors` / `predecessors`, acyclic; `order`
/// topological): rule 2's parallel branches.
///
/// The sources are taken in chunks of `64 · CHUNK_WORDS`; per chunk, a forward sweep over
/// `order` collects in each node the chunk's sources that reach it, a backward sweep the
/// ones it reaches. Time O((n + e) · n / 64 + pairs), memory O(n · CHUNK_WORDS) words:
/// linear in the graph, not the n² / 64 bits of whole reachability rows.
pub(crate) fn for_each_unrelated_pair(
    successors: &[Vec<usize>],
    predecessors: &[Vec<usize>],
    order: &[NodeId],
    f: impl FnMut(usize, usize),
) {
    unrelated_pairs_in_chunks(successors, predecessors, order, CHUNK_WORDS, f)
}

/// [`for_each_unrelated_pair`] with chunks of `64 · chunk_words` sources.
fn unrelated_pairs_in_chunks(
    successors: &[Vec<usize>],
    predecessors: &[Vec<usize>],
    order: &[NodeId],
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
        for &node in order {
            let v = node.index();
            for &p in &predecessors[v] {
                for w in 0..words {
                    reached_by[v * words + w] |= reached_by[p * words + w];
                }
                if let Some(bit) = in_chunk(p) {
                    reached_by[v * words + bit / 64] |= 1 << (bit % 64);
                }
            }
        }
        for &node in order.iter().rev() {
            let v = node.index();
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

/// The exclusive pairs of the blocks of `analysis` (made from `graph`) under `rules`.
///
/// Each rule is evaluated where it can hold rather than on every pair of blocks: rule 1
/// per edge, rule 2 by [`for_each_unrelated_pair`] (reachability in chunks of sources),
/// rule 3 by the execution positions of the blocks' operators, rule 4 by a sweep over the
/// lifetimes. Every pair found is listed with its rule; the list is sorted and a pair
/// keeps the first rule that holds. For `n` nodes, `m` blocks, `e` edges and `p`
/// exclusive pairs (`p'` counting a pair once per rule that makes it): time
/// O((n + e)·n/64 + p' log p') plus the lifetime sweep (O(m log m + the pairs of
/// overlapping lifetimes)); memory O(n + m + e + p'), linear on a chain. This replaces the
/// former O(m²) pair-by-pair test, whose answers these are (tests/exclusive.rs holds both
/// to the same pairs on random graphs).
pub fn exclusivity(graph: &Graph, analysis: &Analysis, rules: Rules) -> Exclusivity {
    let nodes = graph.nodes();
    let buffers = analysis.problem.buffers();
    let m = buffers.len();
    let mut position = vec![0usize; nodes.len()];
    for (p, node) in analysis.order.iter().enumerate() {
        position[node.index()] = p;
    }
    // The blocks each node produces (a node with several outputs may produce several).
    let mut blocks_of: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
    let producers: Vec<Vec<usize>> = block_operators(graph, analysis)
        .iter()
        .map(|ops| ops.iter().map(|n| n.index()).collect())
        .collect();
    for (block, ps) in producers.iter().enumerate() {
        for &p in ps {
            blocks_of[p].push(block);
        }
    }
    // Every (a, b, rule) found, a < b; sorted and reduced to the first rule per pair.
    let mut found: Vec<(u32, u32, Reason)> = Vec::new();
    let mut pair = |rule: Reason, a: usize, b: usize| {
        if a != b {
            found.push((a.min(b) as u32, a.max(b) as u32, rule));
        }
    };
    if rules.edges {
        for (x, node) in nodes.iter().enumerate() {
            for &out in &node.outputs {
                for &(consumer, _) in &graph.value(out).consumers {
                    let y = consumer.index();
                    if x == y {
                        continue;
                    }
                    for &a in &blocks_of[x] {
                        for &b in &blocks_of[y] {
                            pair(Reason::Edge, a, b);
                        }
                    }
                }
            }
        }
    }
    if rules.branches {
        let (successors, predecessors) = adjacency(graph);
        for_each_unrelated_pair(&successors, &predecessors, &analysis.order, |x, y| {
            for &a in &blocks_of[x] {
                for &b in &blocks_of[y] {
                    pair(Reason::Branches, a, b);
                }
            }
        });
    }
    if rules.outputs {
        // Block `a` with a network output among its operators, the first at position `s`,
        // is exclusive with every block that has an operator after `s`.
        let is_sink = |x: usize| {
            nodes[x]
                .outputs
                .iter()
                .all(|&v| graph.value(v).consumers.is_empty())
        };
        let last: Vec<Option<usize>> = producers
            .iter()
            .map(|ps| ps.iter().map(|&x| position[x]).max())
            .collect();
        let mut by_last: Vec<usize> = (0..m).filter(|&b| last[b].is_some()).collect();
        by_last.sort_unstable_by_key(|&b| last[b]);
        for (a, ps) in producers.iter().enumerate() {
            let Some(first_sink) = ps
                .iter()
                .filter(|&&x| is_sink(x))
                .map(|&x| position[x])
                .min()
            else {
                continue;
            };
            let after = by_last.partition_point(|&b| last[b] <= Some(first_sink));
            for &b in &by_last[after..] {
                pair(Reason::Output, a, b);
            }
        }
    }
    // Rule 4: a sweep over the lifetimes in order of start; `live` holds the blocks whose
    // lifetime (gaps ignored) has not ended yet, and `live_together` decides with gaps.
    let mut by_start: Vec<usize> = (0..m).collect();
    by_start.sort_unstable_by_key(|&b| buffers[b].lifetime.start);
    let mut live: Vec<usize> = Vec::new();
    for &b in &by_start {
        let start = buffers[b].lifetime.start;
        live.retain(|&a| buffers[a].lifetime.end > start);
        for &a in &live {
            if buffers[a].live_together(&buffers[b]) {
                pair(Reason::LiveTogether, a, b);
            }
        }
        live.push(b);
    }
    found.sort_unstable();
    found.dedup_by_key(|&mut (a, b, _)| (a, b));
    let pairs = found
        .into_iter()
        .map(|(a, b, reason)| (BufferId(a), BufferId(b), reason))
        .collect();
    Exclusivity { pairs }
}

/// The buffers of `analysis` (names, sizes, alignments) with pairwise disjoint lifetimes:
/// block `i` lives `[i, i + 1)`, no gaps, so that only conflict pairs keep blocks apart.
fn encoded_buffers(analysis: &Analysis) -> Vec<memplan::Buffer> {
    analysis
        .problem
        .buffers()
        .iter()
        .enumerate()
        .map(|(i, b)| {
            let mut b = b.clone();
            b.lifetime = Lifetime {
                start: i as u64,
                end: i as u64 + 1,
            };
            b.gaps.clear();
            b
        })
        .collect()
}

/// The problem the `exclusive` planner plans for `analysis`: its buffers (names, sizes,
/// alignments) with pairwise disjoint lifetimes (block `i` lives `[i, i + 1)`, no gaps)
/// and one conflict pair per exclusive pair, so that "may share bytes" is exactly "not
/// exclusive".
pub fn exclusive_problem(
    graph: &Graph,
    analysis: &Analysis,
    rules: Rules,
) -> Result<Problem, ProblemError> {
    let exclusive = exclusivity(graph, analysis, rules);
    let buffers = encoded_buffers(analysis);
    Problem::new(buffers, exclusive.pairs.iter().map(|&(a, b, _)| (a, b)))
}

/// The dataflow facts of `analysis` for the all-orders mode ([`memplan::orders`]): the
/// operators' data and control edges, and per block its producers, its readers (the
/// consumers of its values) and whether it holds a graph output.
pub fn dataflow(graph: &Graph, analysis: &Analysis) -> memplan::orders::Dataflow {
    let (successors, _) = adjacency(graph);
    let producers = block_operators(graph, analysis)
        .into_iter()
        .map(|ops| ops.into_iter().map(|n| n.index()).collect())
        .collect();
    let outputs = graph.outputs();
    let readers = analysis
        .buffer_values
        .iter()
        .map(|values| {
            let mut ops: Vec<usize> = values
                .iter()
                .flat_map(|&v| graph.value(v).consumers.iter().map(|&(n, _)| n.index()))
                .collect();
            ops.sort_unstable();
            ops.dedup();
            ops
        })
        .collect();
    let kept = analysis
        .buffer_values
        .iter()
        .map(|values| values.iter().any(|v| outputs.contains(v)))
        .collect();
    memplan::orders::Dataflow {
        successors,
        producers,
        readers,
        kept,
    }
}

/// The problem of the `exclusive` planner's all-orders mode (`exclusive:orders=all`):
/// like [`exclusive_problem`] (block `i` lives `[i, i + 1)`), with a conflict pair for
/// every two blocks of which neither is provably dead before the other is produced in
/// every topological order ([`memplan::orders::unordered_pairs`]). Any plan valid for it
/// is valid for every execution order the edges allow; [`memplan::checker::check_all_orders`]
/// verifies that property on a plan. Time O(m²) pair tests (m blocks) plus O(n²/64)
/// reachability.
pub fn all_orders_problem(graph: &Graph, analysis: &Analysis) -> Result<Problem, AllOrdersError> {
    let flow = dataflow(graph, analysis);
    let pairs = memplan::orders::unordered_pairs(&analysis.problem, &flow)?;
    let buffers = encoded_buffers(analysis);
    Ok(Problem::new(buffers, pairs)?)
}

/// Why the all-orders problem could not be built.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AllOrdersError {
    #[error(transparent)]
    Dataflow(#[from] memplan::orders::DataflowError),
    #[error(transparent)]
    Problem(#[from] ProblemError),
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
            let order: Vec<NodeId> = (0..n).map(|i| NodeId(i as u32)).collect();
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
