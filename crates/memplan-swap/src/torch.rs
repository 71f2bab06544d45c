//! PyTorch training steps: the `memplan-torch-trace` file `memplan.torch.trace` writes,
//! read into a training step ([`TorchStep`]), and a plan of the swap method turned into
//! what `memplan.torch.apply` executes ([`ExecutionPlan`]).
//!
//! # The trace (format `memplan-torch-trace`, version 1; JSON)
//!
//! - `ops`: every ATen operator the step ran, forward then backward, in order: `name`,
//!   `phase` (`forward`/`backward`), `ms` (measured), `inputs` (ids of the storages it
//!   read), `scratch` (bytes it allocated and freed inside itself).
//! - `values`: every storage the step saw, one per life: `id` (its index), `bytes`,
//!   `producer` (the op that allocated it; `null` for parameters, buffers, inputs and
//!   anything alive before the step), `freed_after` (the op after which it was found
//!   freed; `null`: alive at the end).
//! - `packs`: the tensors autograd saved for backward (saved-tensor hooks), by pack
//!   ordinal: `value` (their storage), shape, stride, offset, dtype. Only storages
//!   produced in the step are recorded; parameters and inputs never are.
//! - `unpacks`: the unpack order (`ordinal`, and `op`, the number of ops run before it).
//! - `machine`: the store's and codecs' measured speeds (bytes per ms);
//!   `measured_peak_bytes`: the step's peak of live tensor bytes above its start.
//!
//! # The training step
//!
//! One node per op (named `op<i>`, its ATen name as operator type, its measured latency),
//! except in backward: autograd unpacks a saved tensor at the start of the node that
//! needs it, and one unpacked copy serves every op of that node, so the ops of one
//! backward *segment* (from an unpack to the next one, across ops that allocate nothing)
//! that read a storage it unpacked form one node, named `op<first>-<last>`, from the
//! first such read to the last (overlapping ranges merge). Then a restore feeds one node,
//! as one restored copy serves one unpack at run time.
//!
//! One value per storage (`s<id>`): an activation when the step produced it, a weight
//! (not counted) otherwise; a value alive at the end is a graph output (never freed).
//! A storage made and freed inside one merged node is not a value: the node's scratch
//! covers it. Each node with scratch bytes gets one more value, read by nobody (freed
//! when it ends): its ops' own scratch, or for a merged node what its ops needed beyond
//! the node's live values. A storage that is not saved for backward and outlives its
//! last reader is read by the node after which it was freed, so its life is the
//! measured one. Every node carries the [`crate::rewrite::RESTORABLE`] attribute: forward
//! ops none of their inputs (saved-tensor hooks cannot hand a forward reader a restored
//! copy), backward nodes the saved storages they unpacked (with a codec, `float32` ones
//! only). The simulator's no-swap peak of this step is the measured peak (tested on
//! real traces in `python/tests/test_torch_swap.py`).
//!
//! # The plan
//!
//! [`plan`] runs a swap planner on the step, checks the rewritten graph
//! ([`crate::rewrite::check`]), turns it into an [`ExecutionPlan`] (by storage and op
//! index) and checks that against the trace ([`verify`], independent of the planner).

use std::collections::{BTreeMap, HashMap, HashSet};

use memplan_graph::{Attribute, DType, Graph, NodeId, Value, ValueId, ValueKind};
use serde::{Deserialize, Serialize};

use crate::rewrite::{COMPRESS, DECOMPRESS, RECOMPUTE, RESTORABLE, SWAP_IN, SWAP_OUT};
use crate::simulate::Machine;

/// The trace's format name.
pub const FORMAT: &str = "memplan-torch-trace";
/// The plan's format name.
pub const PLAN_FORMAT: &str = "memplan-torch-plan";

/// One op of the trace.
#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct Op {
    pub name: String,
    pub phase: String,
    pub ms: f64,
    pub inputs: Vec<usize>,
    #[serde(default)]
    pub outputs: Vec<usize>,
    #[serde(default)]
    pub scratch: u64,
    /// No argument written and no random numbers drawn: re-running it gives its
    /// outputs again.
    #[serde(default)]
    pub pure: bool,
}

/// One storage life of the trace.
#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct Storage {
    pub id: usize,
    pub bytes: u64,
    pub producer: Option<usize>,
    pub freed_after: Option<usize>,
    /// The element type (`float32`, `int64`, …).
    #[serde(default)]
    pub dtype: String,
    /// An op that writes into its arguments read it (its bytes may change after it was
    /// made).
    #[serde(default)]
    pub mutated: bool,
}

/// One saved tensor.
#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct Pack {
    pub ordinal: usize,
    pub value: usize,
}

/// One unpack: which pack, and the number of ops run before it (the op it came before).
#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct Unpack {
    pub ordinal: usize,
    pub op: usize,
}

/// The store's and codecs' speeds.
#[derive(Clone, Copy, Debug, Deserialize, Serialize)]
pub struct TraceMachine {
    pub d2h_bytes_per_ms: f64,
    pub h2d_bytes_per_ms: f64,
    pub copy_latency_ms: f64,
    pub codec_bytes_per_ms: f64,
}

/// The trace file (the fields the planner reads; others are kept by Python).
#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct Trace {
    pub format: String,
    pub version: u32,
    #[serde(default)]
    pub model: String,
    pub ops: Vec<Op>,
    pub values: Vec<Storage>,
    pub packs: Vec<Pack>,
    #[serde(default)]
    pub unpacks: Vec<Unpack>,
    pub measured_peak_bytes: u64,
    pub machine: TraceMachine,
}

/// Why a trace cannot be read.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{file}: {message}")]
pub struct TraceError {
    pub file: String,
    pub message: String,
}

/// A training step built from a trace.
#[derive(Clone, Debug)]
pub struct TorchStep {
    /// The trace it was built from.
    pub trace: Trace,
    pub graph: Graph,
    /// The machine the trace measured.
    pub machine: Machine,
    pub measured_peak_bytes: u64,
    /// Per op: its node.
    pub op_node: Vec<NodeId>,
    /// Per trace storage: its value.
    pub storage_value: Vec<ValueId>,
}

/// Parses a trace from its JSON text; `file` names it in errors.
pub fn parse(text: &str, file: &str) -> Result<Trace, TraceError> {
    let err = |message: String| TraceError {
        file: file.to_string(),
        message,
    };
    let head: serde_json::Value =
        serde_json::from_str(text).map_err(|e| err(format!("not valid JSON: {e}")))?;
    match head.get("format").and_then(|f| f.as_str()) {
        Some(FORMAT) => {}
        Some(other) => {
            return Err(err(format!(
                "format '{other}' is not '{FORMAT}' (a trace written by memplan.torch.trace)"
            )))
        }
        None => {
            return Err(err(format!(
            "no \"format\" field: not a '{FORMAT}' file (a trace written by memplan.torch.trace)"
        )))
        }
    }
    if head.get("version").and_then(|v| v.as_u64()) != Some(1) {
        return Err(err(format!(
            "version {} is not 1, the version this memplan reads; trace the step again with this memplan",
            head.get("version").map_or("(missing)".to_string(), |v| v.to_string())
        )));
    }
    let trace: Trace =
        serde_json::from_value(head).map_err(|e| err(format!("not a valid trace: {e}")))?;
    // A storage's producer lists it among its outputs (memplan.torch.trace registers a
    // new storage as an output of the op that made it); a trace where they disagree
    // would give a training step whose reductions wait on ops that never made them.
    for (k, value) in trace.values.iter().enumerate() {
        let Some(p) = value.producer else { continue };
        match trace.ops.get(p) {
            None => {
                return Err(err(format!(
                    "storage {k} is produced by op {p}, but there are {} ops",
                    trace.ops.len()
                )))
            }
            Some(op) if !op.outputs.contains(&k) => {
                return Err(err(format!(
                    "storage {k} is produced by op {p} ({}), which does not list it among its outputs; the trace's ops and storages disagree (trace the step again with memplan.torch.trace)",
                    op.name
                )))
            }
            Some(_) => {}
        }
    }
    Ok(trace)
}

/// Builds the training step of `trace` for plans with `reduction` (see the module
/// documentation); errors name the op or storage at fault. With a codec, only `float32`
/// storages are restorable (the codecs compress fp32); with recomputation, only storages
/// a pure forward op made (no argument written, no random numbers), that nothing wrote
/// into afterwards, from inputs nothing wrote into.
pub fn training_step(
    trace: &Trace,
    file: &str,
    reduction: &crate::rewrite::Reduction,
) -> Result<TorchStep, TraceError> {
    let codec = reduction.codec.is_some();
    let err = |message: String| TraceError {
        file: file.to_string(),
        message,
    };
    let n = trace.ops.len();
    let m = trace.values.len();
    let machine = Machine {
        d2h_bytes_per_ms: trace.machine.d2h_bytes_per_ms,
        h2d_bytes_per_ms: trace.machine.h2d_bytes_per_ms,
        copy_latency_ms: trace.machine.copy_latency_ms,
        codec_bytes_per_ms: trace.machine.codec_bytes_per_ms,
        pinned_bytes: None,
    };
    for (name, x) in [
        ("d2h_bytes_per_ms", machine.d2h_bytes_per_ms),
        ("h2d_bytes_per_ms", machine.h2d_bytes_per_ms),
        ("codec_bytes_per_ms", machine.codec_bytes_per_ms),
    ] {
        if !(x.is_finite() && x > 0.0) {
            return Err(err(format!("machine.{name} is {x}, not a speed > 0")));
        }
    }
    if !(machine.copy_latency_ms.is_finite() && machine.copy_latency_ms >= 0.0) {
        return Err(err(format!(
            "machine.copy_latency_ms is {}, not a time >= 0",
            machine.copy_latency_ms
        )));
    }
    let mut saved = vec![false; m];
    for pack in &trace.packs {
        let v = trace.values.get(pack.value).ok_or_else(|| {
            err(format!(
                "pack {} names storage {}, but there are {m} storages",
                pack.ordinal, pack.value
            ))
        })?;
        if v.producer.is_none() {
            return Err(err(format!(
                "pack {} saves storage {}, which the step did not produce (parameters and inputs are never saved candidates)",
                pack.ordinal, pack.value
            )));
        }
        saved[pack.value] = true;
    }
    // Phases, and the backward segments: a segment starts at the first backward op and
    // at every op an unpack came just before (an autograd node starting).
    let mut backward = vec![false; n];
    for (i, op) in trace.ops.iter().enumerate() {
        if !(op.ms.is_finite() && op.ms >= 0.0) {
            return Err(err(format!(
                "op {i} ({}): ms {} is not a time >= 0",
                op.name, op.ms
            )));
        }
        backward[i] = match op.phase.as_str() {
            "forward" => false,
            "backward" => true,
            other => {
                return Err(err(format!(
                    "op {i} ({}): phase '{other}' is not 'forward' or 'backward'",
                    op.name
                )))
            }
        };
        if i > 0 && backward[i - 1] && !backward[i] {
            return Err(err(format!(
                "op {i} ({}) is a forward op after backward ops; a trace is one forward, then one backward",
                op.name
            )));
        }
    }
    // Backward segments (autograd nodes, as far as the trace shows them): one starts at
    // the first backward op and at an op an unpack came before, unless every op since
    // the current start allocated nothing (views and detaches: one node unpacking
    // several tensors interleaves them with its unpacks).
    let mut unpack_before = vec![false; n];
    for u in &trace.unpacks {
        let pack = trace.packs.get(u.ordinal).ok_or_else(|| {
            err(format!(
                "an unpack names pack {}, but there are {} packs",
                u.ordinal,
                trace.packs.len()
            ))
        })?;
        if pack.value >= m {
            return Err(err(format!(
                "pack {} names storage {}, but there are {m} storages",
                u.ordinal, pack.value
            )));
        }
        if u.op < n && backward[u.op] {
            unpack_before[u.op] = true;
        }
    }
    let mut segment = vec![0usize; n];
    let mut allocated = false;
    for i in 0..n {
        let start = !backward[i] || i == 0 || !backward[i - 1] || (unpack_before[i] && allocated);
        if start {
            segment[i] = i;
            allocated = false;
        } else {
            segment[i] = segment[i - 1];
        }
        allocated |= !trace.ops[i].outputs.is_empty() || trace.ops[i].scratch > 0;
    }
    let mut unpacked: HashSet<(usize, usize)> = HashSet::new();
    for u in &trace.unpacks {
        if u.op < n && backward[u.op] {
            unpacked.insert((trace.packs[u.ordinal].value, segment[u.op]));
        }
    }
    // Nodes: one per op, except that the ops of one segment that read a storage it
    // unpacked (from the first such read to the last) form one node, so that one
    // restored copy serves them all, as it does at run time; overlapping ranges merge.
    let mut ranges: HashMap<(usize, usize), (usize, usize)> = HashMap::new();
    for (i, op) in trace.ops.iter().enumerate() {
        if !backward[i] {
            continue;
        }
        for &v in &op.inputs {
            if unpacked.contains(&(v, segment[i])) {
                let r = ranges.entry((v, segment[i])).or_insert((i, i));
                r.1 = i;
            }
        }
    }
    let mut merged: Vec<(usize, usize)> = ranges.values().copied().collect();
    merged.sort_unstable();
    let mut end_of = vec![None::<usize>; n];
    let mut current: Option<(usize, usize)> = None;
    for (a, b) in merged {
        current = match current {
            Some((ca, cb)) if a <= cb => Some((ca, cb.max(b))),
            Some((ca, cb)) => {
                end_of[ca] = Some(cb);
                Some((a, b))
            }
            None => Some((a, b)),
        };
    }
    if let Some((ca, cb)) = current {
        end_of[ca] = Some(cb);
    }
    let mut spans: Vec<(usize, usize)> = Vec::new();
    let mut span_of = vec![0usize; n];
    let mut i = 0;
    while i < n {
        let last = end_of[i].unwrap_or(i);
        for slot in &mut span_of[i..=last] {
            *slot = spans.len();
        }
        spans.push((i, last));
        i = last + 1;
    }
    // Each (storage, segment) unpack is read by the one node holding its reads.
    let unpacked: HashSet<(usize, usize)> = ranges
        .iter()
        .map(|(&(v, _), &(first, _))| (v, span_of[first]))
        .collect();

    let mut graph = Graph::with_capacity(trace.model.clone(), spans.len(), m + spans.len());
    let mut storage_value = Vec::with_capacity(m);
    let mut produced: Vec<Vec<ValueId>> = vec![Vec::new(); spans.len()];
    let mut outputs = Vec::new();
    for (k, s) in trace.values.iter().enumerate() {
        if s.id != k {
            return Err(err(format!(
                "storage {k} has id {}; ids are the positions",
                s.id
            )));
        }
        let kind = if s.producer.is_some() {
            ValueKind::Activation
        } else {
            ValueKind::Weight
        };
        let id = graph
            .add_value(Value::with_bytes(
                format!("s{k}"),
                DType::Uint8,
                s.bytes,
                kind,
            ))
            .map_err(|e| err(format!("storage {k}: {e}")))?;
        storage_value.push(id);
        if let Some(p) = s.producer {
            if p >= n {
                return Err(err(format!(
                    "storage {k} is produced by op {p}, but there are {n} ops"
                )));
            }
            if let Some(f) = s.freed_after {
                if f < p || f >= n {
                    return Err(err(format!(
                        "storage {k} is produced by op {p} and freed after op {f}: not within ops {p}..{n}"
                    )));
                }
            } else {
                outputs.push(id);
            }
            // A storage made and freed inside one node is part of its scratch.
            let internal = s.freed_after.is_some_and(|f| span_of[f] == span_of[p]);
            if !internal {
                produced[span_of[p]].push(id);
            }
        }
    }
    // Reads by node, with release reads of storages that outlive their last reader.
    let mut last_read = vec![None::<usize>; m];
    let mut reads: Vec<Vec<usize>> = vec![Vec::new(); spans.len()];
    for (i, op) in trace.ops.iter().enumerate() {
        for &v in &op.inputs {
            if v >= m {
                return Err(err(format!(
                    "op {i} ({}) reads storage {v}, but there are {m} storages",
                    op.name
                )));
            }
            if let Some(p) = trace.values[v].producer {
                if p >= i {
                    return Err(err(format!(
                        "op {i} ({}) reads storage {v}, which op {p} produces later",
                        op.name
                    )));
                }
                if span_of[p] == span_of[i] {
                    continue; // made and read inside one segment
                }
            }
            last_read[v] = Some(i);
            reads[span_of[i]].push(v);
        }
    }
    for (k, s) in trace.values.iter().enumerate() {
        if let (Some(p), Some(f), false) = (s.producer, s.freed_after, saved[k]) {
            if f > last_read[k].unwrap_or(p) && span_of[f] != span_of[p] {
                reads[span_of[f]].push(k);
            }
        }
    }
    // Live bytes at each op as measured (the storages' lives plus scratch), to give a
    // segment the scratch its ops needed beyond what the node holds.
    let mut alloc = vec![0u64; n];
    let mut free = vec![0u64; n];
    for s in &trace.values {
        if let Some(p) = s.producer {
            alloc[p] = alloc[p].saturating_add(s.bytes);
            if let Some(f) = s.freed_after {
                free[f] = free[f].saturating_add(s.bytes);
            }
        }
    }
    let mut live_during = vec![0u64; n];
    let mut live_before = vec![0u64; n];
    let mut live = 0u64;
    for i in 0..n {
        live_before[i] = live;
        live = live.saturating_add(alloc[i]);
        live_during[i] = live.saturating_add(trace.ops[i].scratch);
        live = live.saturating_sub(free[i]);
    }
    let mut op_node = vec![NodeId(0); n];
    for (k, &(first, last)) in spans.iter().enumerate() {
        let mut inputs: Vec<Option<ValueId>> = Vec::new();
        let mut seen = HashSet::new();
        let mut restorable = Vec::new();
        for &v in &reads[k] {
            if seen.insert(v) {
                let is_backward = backward[first];
                let float = !codec || trace.values[v].dtype == "float32";
                let again = !reduction.recompute || rerunnable(trace, v);
                if is_backward && saved[v] && float && again && unpacked.contains(&(v, k)) {
                    restorable.push(inputs.len() as i64);
                }
                inputs.push(Some(storage_value[v]));
            }
        }
        let mut outs = produced[k].clone();
        let made: u64 = outs.iter().map(|&v| graph.value(v).bytes).sum();
        let held = live_before[first].saturating_add(made);
        let need = (first..=last).map(|i| live_during[i]).max().unwrap_or(0);
        let scratch = if first == last {
            trace.ops[first].scratch
        } else {
            need.saturating_sub(held)
        };
        if scratch > 0 {
            let id = graph
                .add_value(Value::with_bytes(
                    format!("op{first}.scratch"),
                    DType::Uint8,
                    scratch,
                    ValueKind::Activation,
                ))
                .map_err(|e| err(format!("op {first}: {e}")))?;
            outs.push(id);
        }
        let mut attributes = BTreeMap::new();
        attributes.insert(RESTORABLE.to_string(), Attribute::Ints(restorable));
        let (name, op_type) = if first == last {
            (format!("op{first}"), trace.ops[first].name.clone())
        } else {
            (
                format!("op{first}-{last}"),
                format!("{} (+{} ops)", trace.ops[first].name, last - first),
            )
        };
        let ms: f64 = trace.ops[first..=last].iter().map(|o| o.ms).sum();
        let node = graph
            .add_node(name, op_type, inputs, outs, attributes)
            .map_err(|e| err(format!("op {first} ({}): {e}", trace.ops[first].name)))?;
        graph.set_latency(node, Some(ms));
        for slot in &mut op_node[first..=last] {
            *slot = node;
        }
    }
    graph
        .set_outputs(outputs)
        .map_err(|e| err(format!("graph outputs: {e}")))?;
    Ok(TorchStep {
        trace: trace.clone(),
        graph,
        machine,
        measured_peak_bytes: trace.measured_peak_bytes,
        op_node,
        storage_value,
    })
}

/// Whether re-running storage `v`'s producer gives its bytes back: a pure forward op,
/// nothing wrote into `v` or into the op's inputs.
fn rerunnable(trace: &Trace, v: usize) -> bool {
    let s = &trace.values[v];
    let Some(p) = s.producer else {
        return false;
    };
    let op = &trace.ops[p];
    op.pure
        && op.phase == "forward"
        && !s.mutated
        && op
            .inputs
            .iter()
            .all(|&i| trace.values.get(i).is_some_and(|x| !x.mutated))
}

/// A reduced storage, in the plan.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Reduced {
    /// The trace's storage id.
    pub value: usize,
    /// Ops that must not start before the reduction is done (serialization edges).
    pub wait_before_ops: Vec<usize>,
}

/// A restore, in the plan.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Restore {
    /// The trace's storage id.
    pub value: usize,
    /// The restore starts once this op has run (its prefetch and serialization edges);
    /// `None`: when its first reader needs it (a decompression on the compute stream).
    pub after_op: Option<usize>,
    /// The ops that read the restored copy.
    pub readers: Vec<usize>,
    /// Re-made by running its producer again (at the first reader), not read back.
    #[serde(default)]
    pub recompute: bool,
}

/// What `memplan.torch.apply` executes: which storages to reduce, when to restore them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExecutionPlan {
    pub reduced: Vec<Reduced>,
    pub restores: Vec<Restore>,
}

/// Why a rewritten graph cannot be executed by saved-tensor hooks.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ExecutionError {
    #[error(
        "node '{node}' of the rewritten graph is not an op of the trace nor a reduction or restore"
    )]
    Unknown { node: String },
}

/// The ops `[first, last]` of a node named `op<i>` or `op<first>-<last>`.
fn op_span(graph: &Graph, node: NodeId) -> Option<(usize, usize)> {
    let rest = graph.node(node).name.strip_prefix("op")?;
    match rest.split_once('-') {
        Some((a, b)) => Some((a.parse().ok()?, b.parse().ok()?)),
        None => {
            let i = rest.parse().ok()?;
            Some((i, i))
        }
    }
}

/// The first op of a node of the step.
fn op_index(graph: &Graph, node: NodeId) -> Option<usize> {
    op_span(graph, node).map(|s| s.0)
}

/// The last op of a node of the step.
fn op_last(graph: &Graph, node: NodeId) -> Option<usize> {
    op_span(graph, node).map(|s| s.1)
}

/// The storage id of a value named `s<id>`.
fn storage_index(graph: &Graph, value: ValueId) -> Option<usize> {
    graph.value(value).name.strip_prefix('s')?.parse().ok()
}

/// The original storage a reduction or restore node works on: its first input, traced
/// back through the reduction and restore nodes before it.
fn source_storage(graph: &Graph, node: NodeId) -> Option<usize> {
    let mut node = node;
    loop {
        let input = (*graph.node(node).inputs.first()?)?;
        if let Some(s) = storage_index(graph, input) {
            if graph
                .value(input)
                .producer
                .is_none_or(|(p, _)| op_index(graph, p).is_some())
            {
                return Some(s);
            }
        }
        node = graph.value(input).producer?.0;
    }
}

/// The execution plan of `rewritten` (a rewrite of a [`training_step`] by the swap
/// planners). With `run` (its simulation), each reduction also makes the first op that
/// the simulation starts after the reduction's end wait for it: the memory it frees is
/// then free at run time no later than simulated, however slow the copy really is
/// (the serialization edges of the method do that for the ops they name).
pub fn execution_plan(
    rewritten: &Graph,
    run: Option<&crate::simulate::Run>,
) -> Result<ExecutionPlan, ExecutionError> {
    let mut reduced: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    let mut preds: HashMap<NodeId, Vec<NodeId>> = HashMap::new();
    for &(from, to) in rewritten.control_edges() {
        preds.entry(to).or_default().push(from);
    }
    let unknown = |node: NodeId| ExecutionError::Unknown {
        node: rewritten.node(node).name.clone(),
    };
    let mut restores = Vec::new();
    for (i, node) in rewritten.nodes().iter().enumerate() {
        let id = NodeId(i as u32);
        match node.op_type.as_str() {
            RECOMPUTE => {
                // Its output is `s<id>@<reader>`: the storage re-made for its readers.
                let out = node.outputs.first().copied().ok_or_else(|| unknown(id))?;
                let name = &rewritten.value(out).name;
                let s: usize = name
                    .split('@')
                    .next()
                    .and_then(|n| n.strip_prefix('s'))
                    .and_then(|n| n.parse().ok())
                    .ok_or_else(|| unknown(id))?;
                reduced.entry(s).or_default();
                let mut readers: Vec<usize> = rewritten
                    .value(out)
                    .consumers
                    .iter()
                    .filter_map(|&(c, _)| op_index(rewritten, c))
                    .collect();
                readers.sort_unstable();
                readers.dedup();
                if !readers.is_empty() {
                    restores.push(Restore {
                        value: s,
                        after_op: None,
                        readers,
                        recompute: true,
                    });
                }
            }
            SWAP_OUT | COMPRESS => {
                let s = source_storage(rewritten, id).ok_or_else(|| unknown(id))?;
                let waits = reduced.entry(s).or_default();
                if let Some(run) = run {
                    let end = run.finish[i] - 1e-9;
                    let next = (i + 1..rewritten.nodes().len())
                        .map(|k| NodeId(k as u32))
                        .filter(|&k| op_index(rewritten, k).is_some())
                        .find(|&k| run.start[k.index()] >= end);
                    if let Some(op) = next.and_then(|k| op_index(rewritten, k)) {
                        waits.push(op);
                    }
                }
                for &(from, to) in rewritten.control_edges() {
                    if from == id {
                        if let Some(op) = op_index(rewritten, to) {
                            waits.push(op);
                        }
                    }
                }
            }
            SWAP_IN | DECOMPRESS => {
                // The last node of a restore chain: its output feeds ops.
                let Some(&out) = node.outputs.first() else {
                    continue;
                };
                let readers: Vec<usize> = rewritten
                    .value(out)
                    .consumers
                    .iter()
                    .filter_map(|&(c, _)| op_index(rewritten, c))
                    .collect();
                if readers.is_empty() {
                    continue;
                }
                let s = source_storage(rewritten, id).ok_or_else(|| unknown(id))?;
                // The copy back of the chain (itself, or the SWAP_IN feeding a
                // decompression) carries the prefetch and serialization edges.
                let copy = if node.op_type == SWAP_IN {
                    Some(id)
                } else {
                    node.inputs
                        .first()
                        .copied()
                        .flatten()
                        .and_then(|v| rewritten.value(v).producer)
                        .map(|(p, _)| p)
                        .filter(|&p| rewritten.node(p).op_type == SWAP_IN)
                };
                // Its prefetch and serialization edges; without any, it starts when its
                // reduction is done, right after the storage's producer.
                let after_op = copy.map(|c| {
                    preds
                        .get(&c)
                        .into_iter()
                        .flatten()
                        .filter_map(|&p| op_last(rewritten, p))
                        .max()
                        .or_else(|| {
                            let v = rewritten.value_by_name(&format!("s{s}"))?;
                            op_last(rewritten, rewritten.value(v).producer?.0)
                        })
                        .unwrap_or(0)
                });
                let mut readers = readers;
                readers.sort_unstable();
                readers.dedup();
                restores.push(Restore {
                    value: s,
                    after_op,
                    readers,
                    recompute: false,
                });
            }
            _ => {
                if op_index(rewritten, id).is_none() {
                    return Err(unknown(id));
                }
            }
        }
    }
    let reduced = reduced
        .into_iter()
        .map(|(value, mut wait_before_ops)| {
            wait_before_ops.sort_unstable();
            wait_before_ops.dedup();
            Reduced {
                value,
                wait_before_ops,
            }
        })
        .collect();
    restores.sort_by_key(|r: &Restore| (r.value, r.readers.first().copied()));
    Ok(ExecutionPlan { reduced, restores })
}

/// The reduction of a plan, in words.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReductionSpec {
    /// Copied to the store.
    pub to_host: bool,
    /// Deleted and recomputed.
    #[serde(default)]
    pub recompute: bool,
    /// Compressed first: `fp16`, `fp24` or `int8`.
    pub codec: Option<String>,
}

/// A plan for `memplan.torch.apply`: what to execute, and what the simulator predicts.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TorchPlan {
    pub format: String,
    pub version: u32,
    pub model: String,
    pub planner: String,
    /// The chosen parameters, in words.
    pub chosen: String,
    pub reduction: ReductionSpec,
    /// The memory budget (bytes), when the goal was one.
    pub budget_bytes: Option<u64>,
    /// The step-time overhead allowed, when the goal was one.
    pub max_overhead: Option<f64>,
    /// Whether the simulated step meets the goal.
    pub met: bool,
    /// Measured in the traced step.
    pub measured_peak_bytes: u64,
    /// The simulator on the traced step, without reductions.
    pub plain_peak_bytes: u64,
    pub plain_step_ms: f64,
    /// The simulator on the rewritten step.
    pub predicted_peak_bytes: u64,
    pub predicted_step_ms: f64,
    /// Storages reduced, their bytes, and graphs simulated by the search.
    pub tensors: usize,
    pub bytes: u64,
    pub evaluated: usize,
    #[serde(flatten)]
    pub execution: ExecutionPlan,
}

/// Why a trace cannot be planned.
#[derive(Debug, thiserror::Error)]
pub enum TorchPlanError {
    #[error(transparent)]
    Plan(#[from] crate::planner::PlanError),
    #[error(transparent)]
    Simulate(#[from] crate::simulate::SimulateError),
    #[error(transparent)]
    Execution(#[from] ExecutionError),
    #[error(transparent)]
    Rewrite(#[from] crate::rewrite::RewriteError),
    #[error("the plan is not executable on its trace: {0}")]
    Invalid(String),
}

/// Plans `step` with `planner` under `setup` and turns the best rewrite into a
/// [`TorchPlan`].
pub fn plan(
    step: &TorchStep,
    planner: crate::planner::Planner,
    setup: &crate::planner::Setup,
) -> Result<TorchPlan, TorchPlanError> {
    use crate::planner::Goal;
    let plain = crate::simulate::simulate(&step.graph, &setup.machine)?;
    let outcome = crate::planner::plan(&step.graph, planner, setup)?;
    crate::rewrite::check(&outcome.graph)?;
    let execution = execution_plan(&outcome.graph, Some(&outcome.run))?;
    verify(&step.trace, &execution)?;
    let (budget_bytes, max_overhead) = match setup.goal {
        Goal::Budget(b) => (Some(b), None),
        Goal::MaxOverhead(o) => (None, Some(o)),
    };
    Ok(TorchPlan {
        format: PLAN_FORMAT.to_string(),
        version: 1,
        model: step.graph.name.clone(),
        planner: planner.name().to_string(),
        chosen: outcome.chosen.clone(),
        reduction: ReductionSpec {
            to_host: setup.reduction.to_host,
            recompute: setup.reduction.recompute,
            codec: setup.reduction.codec.map(|c| c.name().to_string()),
        },
        budget_bytes,
        max_overhead,
        met: outcome.met,
        measured_peak_bytes: step.measured_peak_bytes,
        plain_peak_bytes: plain.peak_bytes,
        plain_step_ms: plain.step_ms,
        predicted_peak_bytes: outcome.run.peak_bytes,
        predicted_step_ms: outcome.run.step_ms,
        tensors: outcome.tensors,
        bytes: outcome.bytes,
        evaluated: outcome.evaluated,
        execution,
    })
}

/// Checks an execution plan against its trace, independently of the planner: every
/// reduced storage is one autograd saved, produced by a forward op; each restore's
/// readers are backward ops that read the storage, after it starts (`after_op` below
/// the first reader, not before the storage exists), and every op serialized after a
/// reduction comes after the storage's producer. Runs on every plan [`plan`] returns.
pub fn verify(trace: &Trace, plan: &ExecutionPlan) -> Result<(), TorchPlanError> {
    let bad = |m: String| Err(TorchPlanError::Invalid(m));
    let n = trace.ops.len();
    let saved: HashSet<usize> = trace.packs.iter().map(|p| p.value).collect();
    let mut reduced = HashSet::new();
    for r in &plan.reduced {
        let Some(s) = trace.values.get(r.value) else {
            return bad(format!("reduced storage {} does not exist", r.value));
        };
        let Some(p) = s.producer else {
            return bad(format!(
                "reduced storage {} was not produced by the step",
                r.value
            ));
        };
        if !saved.contains(&r.value) || trace.ops[p].phase != "forward" {
            return bad(format!(
                "reduced storage {} is not a tensor saved for backward by a forward op",
                r.value
            ));
        }
        if !reduced.insert(r.value) {
            return bad(format!("storage {} is reduced twice", r.value));
        }
        if let Some(&w) = r.wait_before_ops.iter().find(|&&w| w <= p || w >= n) {
            return bad(format!(
                "op {w} waits for the reduction of storage {}, produced by op {p}",
                r.value
            ));
        }
    }
    for r in &plan.restores {
        if !reduced.contains(&r.value) {
            return bad(format!("storage {} is restored but never reduced", r.value));
        }
        let p = trace.values[r.value].producer.unwrap_or(0);
        let Some(&first) = r.readers.first() else {
            return bad(format!("a restore of storage {} has no reader", r.value));
        };
        for &c in &r.readers {
            let reads = trace.ops.get(c).is_some_and(|op| op.phase == "backward");
            if !reads {
                return bad(format!(
                    "op {c}, a reader of the restore of storage {}, is not a backward op",
                    r.value
                ));
            }
        }
        if let Some(a) = r.after_op {
            if a < p || a >= first {
                return bad(format!(
                    "the restore of storage {} starts after op {a}, not between its producer (op {p}) and its first reader (op {first})",
                    r.value
                ));
            }
        }
    }
    Ok(())
}
