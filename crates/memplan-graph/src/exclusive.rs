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

/// One bitset row per row index: `rows × columns` bits.
struct BitRows {
    words: usize,
    bits: Vec<u64>,
}

impl BitRows {
    fn new(rows: usize, columns: usize) -> BitRows {
        let words = columns.div_ceil(64);
        BitRows {
            words,
            bits: vec![0u64; rows * words],
        }
    }

    fn set(&mut self, row: usize, column: usize) {
        self.bits[row * self.words + column / 64] |= 1 << (column % 64);
    }

    fn get(&self, row: usize, column: usize) -> bool {
        self.bits[row * self.words + column / 64] >> (column % 64) & 1 == 1
    }

    fn row(&self, row: usize) -> &[u64] {
        &self.bits[row * self.words..(row + 1) * self.words]
    }

    /// `row(to) |= row(from)`.
    fn or_row(&mut self, to: usize, from: usize) {
        for w in 0..self.words {
            let bits = self.bits[from * self.words + w];
            self.bits[to * self.words + w] |= bits;
        }
    }
}

/// The set bits of `words` (the columns of one row), in increasing order.
fn ones(words: &[u64]) -> impl Iterator<Item = usize> + '_ {
    words.iter().enumerate().flat_map(|(w, &word)| {
        let mut rest = word;
        std::iter::from_fn(move || {
            (rest != 0).then(|| {
                let bit = rest.trailing_zeros() as usize;
                rest &= rest - 1;
                w * 64 + bit
            })
        })
    })
}

/// Rule 2's parallel branches as bitset rows over the nodes: row `a` holds every node
/// other than `a` that neither reaches `a` nor is reached from it along one or more data
/// or control edges. Built from the forward and backward reachability rows, one sweep
/// each over the topological `order`.
fn unrelated_nodes(graph: &Graph, order: &[NodeId]) -> BitRows {
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
    // Successors run later in the order, so a reverse sweep sees their rows complete;
    // predecessors run earlier, so a forward sweep sees theirs.
    let mut reached = BitRows::new(n, n);
    for &node in order.iter().rev() {
        let i = node.index();
        for &s in &successors[i] {
            reached.set(i, s);
            reached.or_row(i, s);
        }
    }
    let mut reaching = BitRows::new(n, n);
    for &node in order {
        let i = node.index();
        for &p in &predecessors[i] {
            reaching.set(i, p);
            reaching.or_row(i, p);
        }
    }
    let mut unrelated = BitRows::new(n, n);
    let words = unrelated.words;
    for i in 0..n {
        let row = &mut unrelated.bits[i * words..(i + 1) * words];
        for (w, word) in row.iter_mut().enumerate() {
            *word = !(reached.row(i)[w] | reaching.row(i)[w]);
        }
        // Clear `i` itself and the padding bits past the last node.
        row[i / 64] &= !(1 << (i % 64));
        if n % 64 != 0 {
            row[n / 64] &= (1 << (n % 64)) - 1;
        }
    }
    unrelated
}

/// The exclusive pairs of the blocks of `analysis` (made from `graph`) under `rules`.
///
/// Each rule is evaluated where it can hold rather than on every pair of blocks: rule 1
/// per edge, rule 2 by rows of the node reachability bitsets, rule 3 by the execution
/// positions of the blocks' operators, rule 4 by a sweep over the lifetimes. One bitset
/// row per block and rule collects the partners, and a pair takes the first rule whose
/// row holds it. For `n` nodes, `m` blocks, `e` edges and `p` exclusive pairs: time
/// O(e·n/64 + n²/64 + m²/64 + p) plus the lifetime sweep (O(m log m + the pairs of
/// overlapping lifetimes)); memory O(n²/64 + m²/64). Word operations replace the former
/// O(m²) pair-by-pair test, whose answers these are (tests/exclusive.rs holds both to the
/// same pairs on random graphs).
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
    let mut by_rule = [
        BitRows::new(m, m),
        BitRows::new(m, m),
        BitRows::new(m, m),
        BitRows::new(m, m),
    ];
    let mut pair = |rule: Reason, a: usize, b: usize| {
        if a != b {
            by_rule[rule as usize].set(a, b);
            by_rule[rule as usize].set(b, a);
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
        let unrelated_rows = unrelated_nodes(graph, &analysis.order);
        let mut unrelated = vec![0u64; unrelated_rows.words];
        for (a, ps) in producers.iter().enumerate() {
            unrelated.iter_mut().for_each(|w| *w = 0);
            for &x in ps {
                for (w, &word) in unrelated.iter_mut().zip(unrelated_rows.row(x)) {
                    *w |= word;
                }
            }
            for y in ones(&unrelated) {
                for &b in &blocks_of[y] {
                    pair(Reason::Branches, a, b);
                }
            }
        }
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
    let mut pairs = Vec::new();
    let mut partners = vec![0u64; m.div_ceil(64)];
    for a in 0..m {
        for (w, word) in partners.iter_mut().enumerate() {
            *word = by_rule.iter().fold(0, |acc, rows| acc | rows.row(a)[w]);
        }
        for b in ones(&partners).filter(|&b| b > a) {
            let reason = [
                Reason::Edge,
                Reason::Branches,
                Reason::Output,
                Reason::LiveTogether,
            ]
            .into_iter()
            .find(|&r| by_rule[r as usize].get(a, b))
            .expect("a partner comes from one of the rules");
            pairs.push((BufferId(a as u32), BufferId(b as u32), reason));
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
