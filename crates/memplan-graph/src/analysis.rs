//! Lifetimes, aliasing and in-place reuse: from a [`Graph`] to a memplan [`Problem`].
//!
//! # Steps and lifetimes
//!
//! Step 0 is "before the first node"; the node at position `i` of the execution order runs
//! at step `i + 1`, so a graph of `n` nodes has steps `0..=n`. A value in the activation
//! arena (kind [`ValueKind::Input`] or [`ValueKind::Activation`]) lives over the half-open
//! interval `[first, last + 1)` where
//! - `first` is its producer's step, or 0 for a graph input;
//! - `last` is the largest step of a node reading it; `n` for a graph output (outputs live
//!   to the last step); `first` when nobody reads it (it still occupies `[first, first+1)`).
//!
//! ```text
//!  step:          0        1         2         3
//!                      n0: Conv  n1: Relu  n2: Add(r, x)
//!  x  (input)     [========================)          [0, 4): last read by n2 (step 3)
//!  c = n0(x)               [=========)                [1, 3): last read by n1 (step 2)
//!  r = n1(c)                         [=========)      [2, 4): last read by n2
//!  y = n2(r, x)                                [==)   [3, 4): graph output, to n = 3
//! ```
//!
//! Weights and constants are reported but get no lifetime and no buffer: they are not in
//! the activation arena. Arena values of 0 bytes (a shape with a 0 dimension) get a
//! lifetime but no buffer: they need no memory. (A [`memplan::Problem`] would take them as
//! zero-size buffers, which occupy nothing; leaving them out keeps the problems, plans and
//! reports of a graph as they were.)
//!
//! # Aliasing (views)
//!
//! With [`Options::alias`], the output 0 of a view operator ([`VIEW_OPS`]: Reshape,
//! Flatten, Squeeze, Unsqueeze, Identity, Dropout) shares the storage of its input 0 when
//! both are arena values with the same number of bytes. Values sharing storage form an
//! *alias group* whose root is the value that owns the storage (never itself a view); the
//! group is one buffer whose lifetime is the union of its members' lifetimes:
//!
//! ```text
//!  a = Conv(x)      a ██████                  own [1, 3)
//!  v = Reshape(a)   v      ███████████        own [2, 5)
//!                  buffer "a": ████████████   [1, 5), one buffer of a's size
//! ```
//!
//! The union is never longer than necessary: a view is produced at the step where its
//! input is read, so the members' intervals touch and the union has no hole. A view of a
//! graph input keeps the input's bytes alive while the view is read, and a view that is a
//! graph output keeps its input's bytes to the last step; both are what a runtime that
//! does not copy needs, so graph inputs and outputs may be in alias groups. What they must
//! never be is overwritten, which only in-place reuse could do (below).
//!
//! # In-place reuse
//!
//! With [`Options::inplace`], the output 0 `y` of an elementwise operator
//! ([`INPLACE_OPS`]) at step `s` is written into the storage of one of its inputs `x`
//! when all of these hold:
//! - `x` and `y` are arena values of the same dtype and the same non-zero byte count (so
//!   `x` is not broadcast);
//! - `x`'s alias group dies at this node: no member of the group is read after step `s`
//!   (all readers of all members run at steps `<= s`);
//! - no member of `x`'s group, and not `y`, is a graph input or a graph output: graph
//!   inputs and outputs are never overwritten nor made to share an overwritten buffer;
//! - `y` is not already in a group (it is a fresh output).
//!
//! The first input slot that qualifies is taken. `y` then joins `x`'s group:
//!
//! ```text
//!  c = Conv(x)    c ██████                    dies at n1 (its last reader)
//!  r = Relu(c)    r      ██████               written over c
//!                buffer "c": ███████████      [1, 4) instead of two buffers
//! ```
//!
//! Nodes are visited in execution order, so groups grow forward in time; a later view of
//! `x` would be a reader of `x` after step `s`, which the death test already sees. A later
//! view of `y` may be a graph output and so join the group: it holds what `y`'s node
//! wrote, and nothing writes over the group after it (it is a boundary value from then
//! on).
//!
//! # Savings
//!
//! [`Stats::alias_saved_bytes`] and [`Stats::inplace_saved_bytes`] are the bytes of the
//! values that joined a group as a view or in place: the drop in the sum of buffer sizes.
//! [`Stats::max_live_unshared_bytes`] is the max-live bound without either, to compare
//! with [`Stats::max_live_bytes`].

use std::collections::HashSet;

use memplan::{bound, Buffer, BufferId, Lifetime, Problem, ProblemError};

use crate::ir::{Graph, NodeId, ValueId, ValueKind};
use crate::order::{available_at_start, execution_order, Order, OrderError};

/// Operators whose output 0 is a view of their input 0 (same bytes, new shape).
pub const VIEW_OPS: &[&str] = &[
    "Reshape",
    "Flatten",
    "Squeeze",
    "Unsqueeze",
    "Identity",
    "Dropout",
];

/// Elementwise operators that may write their output 0 over an input of the same size.
pub const INPLACE_OPS: &[&str] = &[
    // unary
    "Relu",
    "LeakyRelu",
    "PRelu",
    "Clip",
    "Sigmoid",
    "HardSigmoid",
    "HardSwish",
    "Tanh",
    "Elu",
    "Selu",
    "Celu",
    "Gelu",
    "Softplus",
    "Softsign",
    "Erf",
    "Neg",
    "Abs",
    "Exp",
    "Log",
    "Sqrt",
    "Reciprocal",
    "Ceil",
    "Floor",
    "Round",
    "Sign",
    "Sin",
    "Cos",
    // binary and variadic
    "Add",
    "Sub",
    "Mul",
    "Div",
    "Pow",
    "Max",
    "Min",
    "Sum",
    "Mean",
];

/// What the analysis may share.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Options {
    /// Let view operators share their input's storage (see the module documentation).
    pub alias: bool,
    /// Let elementwise operators write over an input that dies at them.
    pub inplace: bool,
}

impl Default for Options {
    /// Both on.
    fn default() -> Options {
        Options {
            alias: true,
            inplace: true,
        }
    }
}

impl Options {
    /// Neither aliasing nor in-place: one buffer per arena value (the reference rules).
    pub const NONE: Options = Options {
        alias: false,
        inplace: false,
    };
}

/// What a value is in the report.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    /// A graph input (present from step 0).
    Input,
    /// A node output in the arena that is not a graph output.
    Activation,
    /// A graph output (lives to the last step).
    Output,
    /// A weight: not in the arena.
    Weight,
    /// A constant: not in the arena.
    Constant,
    /// A value in host memory ([`ValueKind::Host`]): not in the (device) arena.
    Host,
}

impl Role {
    /// Lower-case name, as in the reference `tensors.csv` `kind` column.
    pub fn name(self) -> &'static str {
        match self {
            Role::Input => "input",
            Role::Activation => "activation",
            Role::Output => "output",
            Role::Weight => "weight",
            Role::Constant => "constant",
            Role::Host => "host",
        }
    }

    /// True for roles in the activation arena.
    pub fn in_arena(self) -> bool {
        matches!(self, Role::Input | Role::Activation | Role::Output)
    }
}

/// The analysis of one value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ValueInfo {
    pub role: Role,
    /// Its own lifetime (not its group's); `None` outside the arena and for an arena value
    /// that no node produces or reads and that is not a graph input or output.
    pub lifetime: Option<Lifetime>,
    /// The buffer holding its bytes; `None` outside the arena and for 0 bytes.
    pub buffer: Option<BufferId>,
    /// The root of its alias group when the group has other members (itself when it is the
    /// root of such a group); `None` when it has its storage alone.
    pub group_root: Option<ValueId>,
    /// The input whose storage it was written over, when it was computed in place.
    pub inplace_of: Option<ValueId>,
    /// True when it joined its group as a view of its input.
    pub is_view: bool,
}

/// Totals over the graph.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Number of arena values (graph inputs, activations, graph outputs).
    pub arena_values: usize,
    /// Sum of the bytes of every arena value, each counted once.
    pub arena_bytes: u64,
    /// Number of arena values that are neither graph inputs nor graph outputs (the
    /// reference `activation_tensors`).
    pub activation_values: usize,
    /// Their bytes (the reference `sum_activation_bytes`).
    pub activation_bytes: u64,
    /// Sum of the bytes of weights and constants (not in the arena).
    pub weight_bytes: u64,
    /// Max-live bound of [`Analysis::problem`].
    pub max_live_bytes: u64,
    /// Max-live bound with neither aliasing nor in-place.
    pub max_live_unshared_bytes: u64,
    /// The largest arena value, when there is one.
    pub largest: Option<(ValueId, u64)>,
    /// Bytes no longer allocated because views share their input's buffer.
    pub alias_saved_bytes: u64,
    /// Bytes no longer allocated because outputs were written in place.
    pub inplace_saved_bytes: u64,
}

/// The result of [`analyse`].
#[derive(Clone, Debug, PartialEq)]
pub struct Analysis {
    /// Made by [`analyse_every_order`]: every in-place write holds in every execution
    /// order the edges allow, not only in [`Analysis::order`].
    pub every_order: bool,
    /// The execution order used.
    pub order: Vec<NodeId>,
    /// Number of the last step (the number of nodes).
    pub last_step: u64,
    /// One entry per value, indexed by [`ValueId::index`].
    pub values: Vec<ValueInfo>,
    /// One buffer per alias group of arena values with at least one byte.
    pub problem: Problem,
    /// The values stored in each buffer (indexed by [`BufferId::index`]), root first.
    pub buffer_values: Vec<Vec<ValueId>>,
    /// The values in report order: graph inputs, then node outputs in execution order,
    /// then every other value (weights, constants, unused values) in graph order.
    pub report_order: Vec<ValueId>,
    pub stats: Stats,
}

impl Analysis {
    /// Where every arena tensor of `graph` lives (the `exclusive` method, Deployment): for each
    /// buffer, in buffer order, the values it stores (root first), each at offset 0 of the
    /// buffer (a view or an in-place result shares its input's first byte). The blocks of
    /// the `exclusive` problem are these buffers too ([`crate::exclusive_problem`]), so the
    /// slots hold for its plans as well.
    pub fn tensor_slots(&self, graph: &Graph) -> Vec<memplan::plan::tensors::TensorSlot> {
        let mut slots = Vec::new();
        for (i, values) in self.buffer_values.iter().enumerate() {
            for &v in values {
                let value = graph.value(v);
                slots.push(memplan::plan::tensors::TensorSlot {
                    name: value.name.clone(),
                    block: BufferId(i as u32),
                    offset_in_block: 0,
                    size: value.bytes,
                });
            }
        }
        slots
    }
}

/// Why a graph cannot be analysed.
///
/// Only order errors occur for graphs built through [`Graph`]'s methods; the other two
/// guard arithmetic and memplan's own invariants.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AnalysisError {
    #[error(transparent)]
    Order(#[from] OrderError),
    #[error("the bytes live at one step overflow 64 bits")]
    Overflow,
    #[error("internal error building the problem: {0}; please report this bug")]
    Problem(#[from] ProblemError),
}

/// Alias groups: each value points at its group's root (depth 1: only singletons join),
/// and each root keeps its members, the largest end of their lifetimes and whether one
/// of them is a graph input or output, so that the in-place test is O(1).
struct Groups {
    parent: Vec<u32>,
    members: Vec<Vec<u32>>,
    end: Vec<u64>,
    boundary: Vec<bool>,
}

impl Groups {
    fn new(values: &[ValueInfo], boundary: Vec<bool>) -> Groups {
        let n = values.len() as u32;
        Groups {
            parent: (0..n).collect(),
            members: (0..n).map(|v| vec![v]).collect(),
            end: values
                .iter()
                .map(|v| v.lifetime.map_or(0, |l| l.end))
                .collect(),
            boundary,
        }
    }

    fn root(&self, v: ValueId) -> usize {
        self.parent[v.index()] as usize
    }

    /// Puts `member` (still alone in its group) into the group of `of`.
    fn join(&mut self, of: ValueId, member: ValueId) {
        let (root, member) = (self.root(of), member.index());
        self.parent[member] = root as u32;
        let moved = std::mem::take(&mut self.members[member]);
        self.members[root].extend(moved);
        self.end[root] = self.end[root].max(self.end[member]);
        self.boundary[root] |= self.boundary[member];
    }

    /// True when no member of `v`'s group is read after `step` or is a graph input/output.
    fn dies_at(&self, v: ValueId, step: u64) -> bool {
        let root = self.root(v);
        !self.boundary[root] && self.end[root] <= step + 1
    }
}

/// Computes lifetimes, alias groups, in-place partners, the problem and the totals.
pub fn analyse(graph: &Graph, order: Order, options: Options) -> Result<Analysis, AnalysisError> {
    analyse_with_inplace_ops(graph, order, options, INPLACE_OPS)
}

/// [`analyse`] with `inplace_ops` in place of [`INPLACE_OPS`]: only operators of these
/// types may write their output over an input (under the same rules). A platform that
/// runs fewer operators in place (the `npu` method) passes its own list; every entry should
/// be elementwise, as [`INPLACE_OPS`] are, since the rules check sizes, not semantics.
pub fn analyse_with_inplace_ops<S: AsRef<str>>(
    graph: &Graph,
    order: Order,
    options: Options,
    inplace_ops: &[S],
) -> Result<Analysis, AnalysisError> {
    analyse_inner(graph, order, options, inplace_ops, false)
}

/// [`analyse`] for plans that must hold in *every* execution order the edges allow (the
/// `exclusive` planner's every-order mode): views are shared as usual (a view writes
/// nothing), but an output is written in place over an input only when, besides the
/// usual rules, every other use of the input's group (its producers and readers) reaches
/// the writing operator along the edges, so that the group is dead there in every order,
/// not only in `order`. (In the file order `a` read by `B` and by `C = Relu(a)` may be
/// overwritten by `C` when `B` runs first; in the order that runs `C` before `B` it may
/// not, so this analysis keeps `c` apart.) [`Analysis::every_order`] records the rule.
pub fn analyse_every_order(
    graph: &Graph,
    order: Order,
    options: Options,
) -> Result<Analysis, AnalysisError> {
    analyse_inner(graph, order, options, INPLACE_OPS, true)
}

fn analyse_inner<S: AsRef<str>>(
    graph: &Graph,
    order: Order,
    options: Options,
    inplace_ops: &[S],
    every_order: bool,
) -> Result<Analysis, AnalysisError> {
    let order = execution_order(graph, order)?;
    let n_values = graph.values().len();
    let last_step = order.len() as u64;
    let mut step_of = vec![0u64; graph.nodes().len()];
    for (position, &node) in order.iter().enumerate() {
        step_of[node.index()] = position as u64 + 1;
    }
    let outputs: HashSet<ValueId> = graph.outputs().iter().copied().collect();
    let is_boundary = |id: ValueId| {
        outputs.contains(&id)
            || (graph.value(id).producer.is_none() && graph.value(id).is_activation())
    };

    let at_start = available_at_start(graph);
    let mut values: Vec<ValueInfo> = Vec::with_capacity(n_values);
    for (index, value) in graph.values().iter().enumerate() {
        let id = ValueId(index as u32);
        let role = match value.kind {
            ValueKind::Weight => Role::Weight,
            ValueKind::Constant => Role::Constant,
            ValueKind::Host => Role::Host,
            _ if outputs.contains(&id) && value.producer.is_some() => Role::Output,
            _ if at_start[index] => Role::Input,
            _ => Role::Activation,
        };
        let lifetime = if role.in_arena() {
            own_lifetime(
                graph,
                id,
                &step_of,
                last_step,
                outputs.contains(&id),
                at_start[index],
            )
        } else {
            None
        };
        values.push(ValueInfo {
            role,
            lifetime,
            buffer: None,
            group_root: None,
            inplace_of: None,
            is_view: false,
        });
    }

    // Alias groups and in-place partners, node by node in execution order.
    let boundary = (0..n_values as u32)
        .map(|v| is_boundary(ValueId(v)))
        .collect();
    let mut groups = Groups::new(&values, boundary);
    // Every-order rule: the operators that use each group (indexed by its root), cut back
    // to the writer after each in-place write (all earlier uses reach it), and a reacher.
    let (predecessors, position) = if every_order {
        let mut position = vec![0usize; graph.nodes().len()];
        for (p, node) in order.iter().enumerate() {
            position[node.index()] = p;
        }
        (crate::exclusive::adjacency(graph).1, position)
    } else {
        (Vec::new(), Vec::new())
    };
    let mut reacher = memplan::orders::Reacher::new(&predecessors, &position);
    let mut uses: Vec<Vec<u32>> = if every_order {
        graph
            .values()
            .iter()
            .map(|v| {
                let mut ops: Vec<u32> = v.producer.iter().map(|(n, _)| n.0).collect();
                ops.extend(v.consumers.iter().map(|(n, _)| n.0));
                ops
            })
            .collect()
    } else {
        Vec::new()
    };
    let mut stats = Stats::default();
    let live: Vec<bool> = values.iter().map(|v| v.lifetime.is_some()).collect();
    let shareable = |id: ValueId| live[id.index()];
    for &node_id in &order {
        let node = graph.node(node_id);
        if !node.domain.is_empty() && node.domain != "ai.onnx" {
            continue;
        }
        let (Some(&y), Some(Some(x0))) = (node.outputs.first(), node.inputs.first()) else {
            continue;
        };
        if !shareable(y) {
            continue;
        }
        let op = node.op_type.as_str();
        if options.alias && VIEW_OPS.contains(&op) {
            if shareable(*x0) && graph.value(*x0).bytes == graph.value(y).bytes {
                if every_order {
                    let moved = std::mem::take(&mut uses[y.index()]);
                    uses[groups.root(*x0)].extend(moved);
                }
                groups.join(*x0, y);
                values[y.index()].is_view = true;
                stats.alias_saved_bytes =
                    stats.alias_saved_bytes.saturating_add(graph.value(y).bytes);
            }
            continue;
        }
        let inplace_op = inplace_ops.iter().any(|o| o.as_ref() == op);
        if !(options.inplace && inplace_op) || is_boundary(y) {
            continue;
        }
        let step = step_of[node_id.index()];
        let writer = node_id.0;
        let target = node.inputs.iter().flatten().copied().find(|&x| {
            let (vx, vy) = (graph.value(x), graph.value(y));
            shareable(x)
                && vx.dtype == vy.dtype
                && vx.bytes == vy.bytes
                && vx.bytes > 0
                && groups.dies_at(x, step)
                && (!every_order
                    || uses[groups.root(x)]
                        .iter()
                        .all(|&u| u == writer || reacher.reaches(u as usize, writer as usize)))
        });
        if let Some(x) = target {
            if every_order {
                // Every earlier use reaches the writer: from now on the writer stands for
                // them, with the uses of what it wrote.
                let root = groups.root(x);
                let mut moved = std::mem::take(&mut uses[y.index()]);
                moved.push(writer);
                moved.sort_unstable();
                moved.dedup();
                uses[root] = moved;
            }
            groups.join(x, y);
            values[y.index()].inplace_of = Some(x);
            stats.inplace_saved_bytes = stats
                .inplace_saved_bytes
                .saturating_add(graph.value(y).bytes);
        }
    }

    let report_order = report_order(graph, &order);
    let mut buffers = Vec::new();
    let mut buffer_values = Vec::new();
    let mut unshared = Vec::new();
    for &id in &report_order {
        let Some(lifetime) = values[id.index()].lifetime else {
            continue;
        };
        let value = graph.value(id);
        stats.arena_values += 1;
        stats.arena_bytes = stats
            .arena_bytes
            .checked_add(value.bytes)
            .ok_or(AnalysisError::Overflow)?;
        if values[id.index()].role == Role::Activation {
            stats.activation_values += 1;
            // At most arena_bytes, which did not overflow.
            stats.activation_bytes += value.bytes;
        }
        if stats.largest.is_none_or(|(_, b)| value.bytes > b) {
            stats.largest = Some((id, value.bytes));
        }
        if value.bytes == 0 {
            continue;
        }
        unshared.push(Buffer::new(
            value.name.clone(),
            value.bytes,
            lifetime.start,
            lifetime.end,
        ));
        if groups.root(id) != id.index() {
            continue;
        }
        let group: Vec<ValueId> = groups.members[id.index()]
            .iter()
            .map(|&m| ValueId(m))
            .collect();
        let mut union = lifetime;
        for m in &group {
            if let Some(l) = values[m.index()].lifetime {
                union.start = union.start.min(l.start);
                union.end = union.end.max(l.end);
            }
        }
        let buffer = BufferId(buffers.len() as u32);
        for m in &group {
            values[m.index()].buffer = Some(buffer);
            if group.len() > 1 {
                values[m.index()].group_root = Some(id);
            }
        }
        buffers.push(Buffer::new(
            value.name.clone(),
            value.bytes,
            union.start,
            union.end,
        ));
        buffer_values.push(group);
    }
    for value in graph.values().iter().filter(|v| !v.is_activation()) {
        stats.weight_bytes = stats.weight_bytes.saturating_add(value.bytes);
    }
    let problem = Problem::from_buffers(buffers)?;
    stats.max_live_bytes = bound::max_live(&problem).ok_or(AnalysisError::Overflow)?;
    stats.max_live_unshared_bytes =
        bound::max_live(&Problem::from_buffers(unshared)?).ok_or(AnalysisError::Overflow)?;
    Ok(Analysis {
        every_order,
        order,
        last_step,
        values,
        problem,
        buffer_values,
        report_order,
        stats,
    })
}

/// `[first, last + 1)` of an arena value (see the module documentation), or `None` for a
/// value that is not a graph input and that no node produces or reads.
fn own_lifetime(
    graph: &Graph,
    id: ValueId,
    step_of: &[u64],
    last_step: u64,
    is_output: bool,
    at_start: bool,
) -> Option<Lifetime> {
    let value = graph.value(id);
    let start = match value.producer {
        Some((node, _)) => step_of[node.index()],
        None if at_start => 0,
        None => return None,
    };
    let mut last = value
        .consumers
        .iter()
        .map(|(node, _)| step_of[node.index()])
        .max()
        .unwrap_or(start)
        .max(start);
    if is_output {
        last = last_step.max(start);
    }
    Lifetime::new(start, last + 1)
}

/// Graph inputs, then node outputs in execution order, then everything else in graph
/// order; each value once.
fn report_order(graph: &Graph, order: &[NodeId]) -> Vec<ValueId> {
    let mut seen = vec![false; graph.values().len()];
    let mut out = Vec::with_capacity(graph.values().len());
    let mut push = |id: ValueId, out: &mut Vec<ValueId>| {
        if !std::mem::replace(&mut seen[id.index()], true) {
            out.push(id);
        }
    };
    for &id in graph.inputs() {
        if graph.value(id).is_activation() {
            push(id, &mut out);
        }
    }
    for (index, value) in graph.values().iter().enumerate() {
        if value.kind == ValueKind::Input && value.producer.is_none() {
            push(ValueId(index as u32), &mut out);
        }
    }
    for &node in order {
        for &id in &graph.node(node).outputs {
            push(id, &mut out);
        }
    }
    for index in 0..graph.values().len() {
        push(ValueId(index as u32), &mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::ir::{DType, Value};

    /// Builds graphs tersely: values by name, nodes by `(op, inputs, outputs)`.
    struct G(Graph);

    impl G {
        fn new() -> G {
            G(Graph::new("t"))
        }
        fn value(&mut self, name: &str, dtype: DType, bytes: u64, kind: ValueKind) -> &mut G {
            self.0
                .add_value(Value::with_bytes(name, dtype, bytes, kind))
                .unwrap();
            self
        }
        fn act(&mut self, name: &str, bytes: u64) -> &mut G {
            self.value(name, DType::Float, bytes, ValueKind::Activation)
        }
        fn node(&mut self, op: &str, inputs: &[&str], outputs: &[&str]) -> NodeId {
            let id = |n: &str| self.0.value_by_name(n).unwrap();
            let ins = inputs.iter().map(|n| Some(id(n))).collect();
            let outs = outputs.iter().map(|n| id(n)).collect();
            self.0.add_node("", op, ins, outs, BTreeMap::new()).unwrap()
        }
        fn io(&mut self, inputs: &[&str], outputs: &[&str]) -> &Graph {
            let ids = |g: &Graph, names: &[&str]| {
                names.iter().map(|n| g.value_by_name(n).unwrap()).collect()
            };
            let (i, o) = (ids(&self.0, inputs), ids(&self.0, outputs));
            self.0.set_inputs(i).unwrap();
            self.0.set_outputs(o).unwrap();
            &self.0
        }
    }

    fn info<'a>(g: &Graph, a: &'a Analysis, name: &str) -> &'a ValueInfo {
        &a.values[g.value_by_name(name).unwrap().index()]
    }

    fn life(start: u64, end: u64) -> Option<Lifetime> {
        Some(Lifetime { start, end })
    }

    #[test]
    fn unread_values_live_one_step_and_zero_bytes_get_no_buffer() {
        let mut b = G::new();
        b.value("x", DType::Float, 8, ValueKind::Input)
            .act("unread", 8)
            .act("empty", 0)
            .act("y", 8);
        b.node("Split", &["x"], &["unread", "empty"]);
        b.node("Relu", &["x", "empty"], &["y"]);
        let g = b.io(&["x"], &["y"]);
        let a = analyse(g, Order::File, Options::NONE).unwrap();
        assert_eq!(info(g, &a, "unread").lifetime, life(1, 2));
        assert_eq!(info(g, &a, "empty").lifetime, life(1, 3));
        assert_eq!(info(g, &a, "empty").buffer, None);
        assert_eq!(a.problem.len(), 3);
        assert_eq!(a.stats.arena_values, 4);
    }

    #[test]
    fn a_graph_without_nodes_keeps_its_inputs_for_step_zero() {
        let mut b = G::new();
        b.value("x", DType::Float, 8, ValueKind::Input).value(
            "unused",
            DType::Float,
            8,
            ValueKind::Input,
        );
        let g = b.io(&["x", "unused"], &["x"]);
        let a = analyse(g, Order::File, Options::default()).unwrap();
        assert_eq!(info(g, &a, "x").lifetime, life(0, 1));
        assert_eq!(info(g, &a, "x").role, Role::Input);
        assert_eq!(info(g, &a, "unused").lifetime, life(0, 1));
    }

    #[test]
    fn views_need_equal_bytes_the_default_domain_and_only_alias_output_zero() {
        let mut b = G::new();
        b.value("x", DType::Float, 16, ValueKind::Input)
            .act("a", 16)
            .act("shrunk", 8)
            .act("d", 16)
            .value("mask", DType::Bool, 4, ValueKind::Activation)
            .act("custom", 16)
            .act("y", 16);
        b.node("Relu", &["x"], &["a"]);
        b.node("Reshape", &["a"], &["shrunk"]);
        b.node("Dropout", &["a"], &["d", "mask"]);
        let custom = b.node("Identity", &["d"], &["custom"]);
        b.0.set_domain(custom, "com.example");
        b.node("Add", &["custom", "shrunk", "mask"], &["y"]);
        let g = b.io(&["x"], &["y"]);
        let a = analyse(
            g,
            Order::File,
            Options {
                alias: true,
                inplace: false,
            },
        )
        .unwrap();
        let root = |n: &str| info(g, &a, n).group_root.map(|r| g.value(r).name.clone());
        assert_eq!(root("shrunk"), None);
        assert_eq!(root("d").as_deref(), Some("a"));
        assert_eq!(root("mask"), None);
        assert_eq!(root("custom"), None);
        assert_eq!(a.stats.alias_saved_bytes, 16);
        assert_eq!(
            a.problem.buffer(info(g, &a, "a").buffer.unwrap()).lifetime,
            Lifetime { start: 1, end: 5 }
        );
    }

    #[test]
    fn inplace_skips_broadcast_and_other_dtypes_and_takes_the_next_slot() {
        let mut b = G::new();
        b.value("x", DType::Float, 64, ValueKind::Input)
            .act("small", 4)
            .value("ints", DType::Int32, 64, ValueKind::Activation)
            .act("big", 64)
            .act("sum", 64)
            .act("y", 64);
        b.node("ReduceMean", &["x"], &["small"]);
        b.node("Cast", &["x"], &["ints"]);
        b.node("Relu", &["x"], &["big"]);
        b.node("Add", &["small", "ints", "big"], &["sum"]);
        b.node("Relu", &["sum"], &["y"]);
        let g = b.io(&["x"], &["y"]);
        let a = analyse(g, Order::File, Options::default()).unwrap();
        assert_eq!(info(g, &a, "sum").inplace_of, g.value_by_name("big"));
        // big's input x is a graph input; y is a graph output.
        assert_eq!(info(g, &a, "big").inplace_of, None);
        assert_eq!(info(g, &a, "y").inplace_of, None);
        assert_eq!(a.stats.inplace_saved_bytes, 64);
    }

    #[test]
    fn inplace_over_a_view_whose_source_is_dead() {
        let mut b = G::new();
        b.value("x", DType::Float, 16, ValueKind::Input)
            .act("a", 16)
            .act("v", 16)
            .act("r", 16)
            .act("y", 16);
        b.node("Conv", &["x"], &["a"]);
        b.node("Reshape", &["a"], &["v"]);
        b.node("Relu", &["v"], &["r"]);
        b.node("Conv", &["r"], &["y"]);
        let g = b.io(&["x"], &["y"]);
        let a = analyse(g, Order::File, Options::default()).unwrap();
        assert_eq!(info(g, &a, "r").inplace_of, g.value_by_name("v"));
        assert_eq!(info(g, &a, "r").group_root, g.value_by_name("a"));
        assert_eq!(
            a.buffer_values[info(g, &a, "a").buffer.unwrap().index()].len(),
            3
        );
        assert_eq!(a.problem.len(), 3);
    }

    #[test]
    fn constant_nodes_take_a_step_but_their_outputs_no_buffer() {
        let mut b = G::new();
        b.value("x", DType::Float, 8, ValueKind::Input)
            .value("c", DType::Float, 8, ValueKind::Constant)
            .act("y", 8);
        b.node("Constant", &[], &["c"]);
        b.node("Add", &["x", "c"], &["y"]);
        let g = b.io(&["x"], &["y"]);
        let a = analyse(g, Order::File, Options::NONE).unwrap();
        assert_eq!(info(g, &a, "c").role, Role::Constant);
        assert_eq!(info(g, &a, "c").lifetime, None);
        assert_eq!(info(g, &a, "x").lifetime, life(0, 3));
        assert_eq!(info(g, &a, "y").lifetime, life(2, 3));
        assert_eq!(a.stats.weight_bytes, 8);
    }
}
