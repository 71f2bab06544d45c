//! Exclusivity analysis of the `exclusive` method: which operators' output blocks may never share
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
//! execution (the `exclusive` method, corrected): a block read by one branch can still share bytes
//! with a block that another operator produces while that read is pending (rule 4 only
//! looks at the one execution order). An exclusive plan is valid for the execution order
//! it was made for. The price of rule 2 is memory: every pair of blocks on parallel
//! branches is kept apart even when the order runs them one after the other, so on branchy
//! models the pool can grow above the max-live lower bound (see doc/exclusive.md). With
//! rule 2 off the relation is close to lifetime overlap (rule 4) plus direct edges.

use memplan::orders::for_each_unrelated_pair;
use memplan::{BufferId, Lifetime, Problem, ProblemError};

use crate::analysis::Analysis;
use crate::ir::{Graph, NodeId, ValueId};

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
    let mut found: Vec<(u32, u32, Reason)> = Vec::new();
    for_each_exclusive_pair(graph, analysis, rules, |rule, a, b| {
        found.push((a.min(b) as u32, a.max(b) as u32, rule))
    });
    found.sort_unstable();
    found.dedup_by_key(|&mut (a, b, _)| (a, b));
    let pairs = found
        .into_iter()
        .map(|(a, b, reason)| (BufferId(a), BufferId(b), reason))
        .collect();
    Exclusivity { pairs }
}

/// Calls `pair(rule, a, b)` for every exclusive pair of distinct blocks found by each
/// rule (a pair may come several times, by one rule or several).
fn for_each_exclusive_pair(
    graph: &Graph,
    analysis: &Analysis,
    rules: Rules,
    mut push: impl FnMut(Reason, usize, usize),
) {
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
    let mut pair = |rule: Reason, a: usize, b: usize| {
        if a != b {
            push(rule, a, b);
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
        let order: Vec<usize> = analysis.order.iter().map(|n| n.index()).collect();
        for_each_unrelated_pair(&successors, &predecessors, &order, |x, y| {
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
    // The pairs alone (8 bytes each, no rule): a 5,000-wide fan-out has 12.5 million.
    let mut pairs: Vec<(BufferId, BufferId)> = Vec::new();
    for_each_exclusive_pair(graph, analysis, rules, |_, a, b| {
        pairs.push((BufferId(a.min(b) as u32), BufferId(a.max(b) as u32)))
    });
    pairs.sort_unstable();
    pairs.dedup();
    pairs.shrink_to_fit();
    Problem::with_conflict_vec(encoded_buffers(analysis), pairs)
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
        may_share: Vec::new(),
    }
}

/// The every-order check at the level of tensors, independent of the blocks the analysis
/// formed: one buffer per arena tensor of at least one byte (its own lifetime), placed
/// where `plan` (a plan of `analysis.problem`'s blocks) puts its block, with the dataflow
/// of the graph's operators and, per tensor, the sharings its operator allows by its
/// type alone (a view operator's output on its input 0; an elementwise operator's output
/// on any input of its dtype and size). [`memplan::checker::check_all_orders`] on the
/// result accepts an in-place block only where the write is safe in every order, so it
/// catches an analysis made for one order (see [`crate::analyse_every_order`]).
pub fn tensor_dataflow(
    graph: &Graph,
    analysis: &Analysis,
    plan: &memplan::Plan,
) -> Result<(Problem, memplan::Plan, memplan::orders::Dataflow), AllOrdersError> {
    let blocks = analysis.problem.len();
    if plan.offsets.len() != blocks {
        return Err(AllOrdersError::Dataflow(
            memplan::orders::DataflowError::BufferCount {
                dataflow: plan.offsets.len(),
                problem: blocks,
            },
        ));
    }
    let (successors, _) = adjacency(graph);
    // The tensors in buffers, in value order, and their index among them.
    let mut index = vec![usize::MAX; graph.values().len()];
    let mut tensors = Vec::new();
    for (v, info) in analysis.values.iter().enumerate() {
        if let (Some(block), Some(_)) = (info.buffer, info.lifetime) {
            index[v] = tensors.len();
            tensors.push((ValueId(v as u32), block));
        }
    }
    let outputs = graph.outputs();
    let mut buffers = Vec::with_capacity(tensors.len());
    let mut offsets = Vec::with_capacity(tensors.len());
    let mut extents = plan
        .extents
        .as_ref()
        .map(|_| Vec::with_capacity(tensors.len()));
    let mut flow = memplan::orders::Dataflow {
        successors,
        ..Default::default()
    };
    for &(v, block) in &tensors {
        let value = graph.value(v);
        let life = analysis.values[v.index()]
            .lifetime
            .expect("tensors in buffers have lifetimes");
        buffers.push(memplan::Buffer::new(
            value.name.clone(),
            value.bytes,
            life.start,
            life.end,
        ));
        offsets.push(plan.offsets[block.index()]);
        if let (Some(all), Some(out)) = (&plan.extents, &mut extents) {
            out.push(all.get(block.index()).cloned().unwrap_or_default());
        }
        flow.producers
            .push(value.producer.iter().map(|(n, _)| n.index()).collect());
        let mut readers: Vec<usize> = value.consumers.iter().map(|(n, _)| n.index()).collect();
        readers.sort_unstable();
        readers.dedup();
        flow.readers.push(readers);
        flow.kept.push(outputs.contains(&v));
        let mut shares = Vec::new();
        if let Some((node, 0)) = value.producer {
            let node = graph.node(node);
            let op = node.op_type.as_str();
            let standard = node.domain.is_empty() || node.domain == "ai.onnx";
            let fits = |x: ValueId| {
                let vx = graph.value(x);
                index[x.index()] != usize::MAX && vx.bytes == value.bytes
            };
            if standard && crate::analysis::VIEW_OPS.contains(&op) {
                if let Some(Some(x)) = node.inputs.first() {
                    if fits(*x) {
                        shares.push((index[x.index()], memplan::orders::Share::View));
                    }
                }
            } else if standard && crate::analysis::INPLACE_OPS.contains(&op) {
                for &x in node.inputs.iter().flatten() {
                    if fits(x) && graph.value(x).dtype == value.dtype {
                        shares.push((index[x.index()], memplan::orders::Share::InPlace));
                    }
                }
            }
        }
        flow.may_share.push(shares);
    }
    let problem = Problem::from_buffers(buffers)?;
    let tensor_plan = match extents {
        Some(extents) => memplan::Plan {
            offsets,
            arena_bytes: None,
            extents: Some(extents),
        },
        None => memplan::Plan {
            offsets,
            arena_bytes: None,
            extents: None,
        },
    };
    Ok((problem, tensor_plan, flow))
}

/// The problem of the `exclusive` planner's all-orders mode (`exclusive:orders=all`):
/// like [`exclusive_problem`] (block `i` lives `[i, i + 1)`), with a conflict pair for
/// every two blocks of which neither is provably dead before the other is produced in
/// every topological order ([`memplan::orders::unordered_pairs`]). The analysis must
/// hold in every order too: made by [`crate::analyse_every_order`] (in-place writes only
/// where every other use of the input reaches the writer), or without in-place writes;
/// an analysis that writes in place for one order is refused. Any plan valid for the
/// problem is then valid for every execution order the edges allow;
/// [`memplan::checker::check_all_orders`] on [`tensor_dataflow`] verifies that property
/// on a plan, tensor by tensor. Time O((n + e)·n/64 + m log m + the pairs).
pub fn all_orders_problem(graph: &Graph, analysis: &Analysis) -> Result<Problem, AllOrdersError> {
    if !analysis.every_order {
        let inplace = analysis
            .values
            .iter()
            .filter(|v| v.inplace_of.is_some())
            .count();
        if inplace > 0 {
            return Err(AllOrdersError::OneOrderInplace { inplace });
        }
    }
    let flow = dataflow(graph, analysis);
    let pairs = memplan::orders::unordered_pairs(&analysis.problem, &flow)?;
    Ok(Problem::with_conflict_vec(
        encoded_buffers(analysis),
        pairs,
    )?)
}

/// Why the all-orders problem could not be built.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AllOrdersError {
    #[error(transparent)]
    Dataflow(#[from] memplan::orders::DataflowError),
    #[error(transparent)]
    Problem(#[from] ProblemError),
    #[error("the analysis writes {inplace} tensor(s) in place for one execution order only; the every-order mode needs an analysis made by analyse_every_order (or one without in-place writes)")]
    OneOrderInplace { inplace: usize },
}
