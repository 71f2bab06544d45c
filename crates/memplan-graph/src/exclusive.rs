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
//!    1 ─► 2 ─┬─► 3 ─► 6 ─┬─► 7       3 and 4: no path either way  → rule 2
//!            ├─► 4 ──────┘└─► 8      2 and 3: an edge             → rule 1
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
//! With rule 2 on, blocks of parallel branches never share memory, so the plan stays safe
//! when a runtime executes branches concurrently, in any interleaving consistent with the
//! edges; a lifetime-based plan is only safe for the one execution order it was made for.
//! The price is memory: every pair of blocks on parallel branches is kept apart even when
//! the chosen order runs them one after the other, so on branchy models the pool grows
//! well above the max-live lower bound (see doc/exclusive.md for the measured table).
//! With rule 2 off the relation is close to lifetime overlap (rule 4) plus direct edges.

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

/// Node reachability as one bitset row per node: `reaches(a, b)` when a path of one or
/// more data or control edges leads from `a` to `b`.
struct Reach {
    words: usize,
    bits: Vec<u64>,
}

impl Reach {
    fn new(graph: &Graph, order: &[NodeId]) -> Reach {
        let n = graph.nodes().len();
        let words = n.div_ceil(64);
        let mut bits = vec![0u64; n * words];
        let mut successors: Vec<Vec<usize>> = vec![Vec::new(); n];
        for (i, node) in graph.nodes().iter().enumerate() {
            for &out in &node.outputs {
                for &(consumer, _) in &graph.value(out).consumers {
                    successors[i].push(consumer.index());
                }
            }
        }
        for &(from, to) in graph.control_edges() {
            successors[from.index()].push(to.index());
        }
        // Successors run later in the order, so a reverse sweep sees them complete.
        for &node in order.iter().rev() {
            let i = node.index();
            for &s in &successors[i] {
                bits[i * words + s / 64] |= 1 << (s % 64);
                for w in 0..words {
                    let from = bits[s * words + w];
                    bits[i * words + w] |= from;
                }
            }
        }
        Reach { words, bits }
    }

    fn reaches(&self, a: usize, b: usize) -> bool {
        self.bits[a * self.words + b / 64] >> (b % 64) & 1 == 1
    }
}

/// The exclusive pairs of the blocks of `analysis` (made from `graph`) under `rules`.
pub fn exclusivity(graph: &Graph, analysis: &Analysis, rules: Rules) -> Exclusivity {
    let nodes = graph.nodes();
    let reach = Reach::new(graph, &analysis.order);
    let mut position = vec![0usize; nodes.len()];
    for (p, node) in analysis.order.iter().enumerate() {
        position[node.index()] = p;
    }
    let feeds = |a: usize, b: usize| {
        nodes[a].outputs.iter().any(|&v| {
            graph
                .value(v)
                .consumers
                .iter()
                .any(|&(c, _)| c.index() == b)
        })
    };
    let is_sink = |a: usize| {
        nodes[a]
            .outputs
            .iter()
            .all(|&v| graph.value(v).consumers.is_empty())
    };
    let producers: Vec<Vec<usize>> = analysis
        .buffer_values
        .iter()
        .map(|values| {
            let mut ps: Vec<usize> = values
                .iter()
                .filter_map(|&v| graph.value(v).producer.map(|(n, _)| n.index()))
                .collect();
            ps.sort_unstable();
            ps.dedup();
            ps
        })
        .collect();
    let node_reason = |a: usize, b: usize| -> Option<Reason> {
        if a == b {
            return None;
        }
        if rules.edges && (feeds(a, b) || feeds(b, a)) {
            return Some(Reason::Edge);
        }
        if rules.branches && !reach.reaches(a, b) && !reach.reaches(b, a) {
            return Some(Reason::Branches);
        }
        let output_before = |x: usize, y: usize| is_sink(x) && position[y] > position[x];
        if rules.outputs && (output_before(a, b) || output_before(b, a)) {
            return Some(Reason::Output);
        }
        None
    };
    let buffers = analysis.problem.buffers();
    let mut pairs = Vec::new();
    for a in 0..buffers.len() {
        for b in a + 1..buffers.len() {
            let by_rule = producers[a]
                .iter()
                .flat_map(|&x| producers[b].iter().map(move |&y| (x, y)))
                .filter_map(|(x, y)| node_reason(x, y))
                .min();
            let reason = by_rule.or_else(|| {
                buffers[a]
                    .live_together(&buffers[b])
                    .then_some(Reason::LiveTogether)
            });
            if let Some(reason) = reason {
                pairs.push((BufferId(a as u32), BufferId(b as u32), reason));
            }
        }
    }
    Exclusivity { pairs }
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
    let buffers = analysis
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
        .collect();
    Problem::new(buffers, exclusive.pairs.iter().map(|&(a, b, _)| (a, b)))
}
