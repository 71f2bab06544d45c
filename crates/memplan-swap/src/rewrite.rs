//! Rewriting (the `swap` method, "Rewriting"): reduction and restore nodes plus control
//! edges, giving a new graph that runs in less device memory.
//!
//! For each [`Swap`] (a tensor `v` and the readers that get it back from a restore):
//!
//! ```text
//!  p ─v─┬─> r1 (early reader, unchanged)
//!       └─> [compress:v] ─v@fp16─> [swapout:v] ─v@host─┬─> [swapin:v@c1] ─> [decompress:v@c1] ─v@c1─> c1
//!                                                      └─> [swapin:v@c2] ─> ...           ─v@c2─> c2
//!  control edges (dashed):  swapout:v ┄> r1         (serialization: a reader that keeps v)
//!                           c1 ┄> swapin:v@c2        (serialization of restores)
//!                           u ┄> swapin:v@c1         (prefetch: u upstream of c1)
//! ```
//!
//! - **Reduction** ([`Reduction`]): copy to host ([`SWAP_OUT`], on the device-to-host
//!   engine, output a [`ValueKind::Host`] value), compress to fp16, fp24 or int8
//!   ([`COMPRESS`], on the compute stream, output of 1/2, 3/4 or 1/4 of the bytes), or
//!   both (compress, then copy the compressed tensor). One reduction per tensor feeds
//!   every restore of that tensor. Or **delete and recompute**
//!   ([`Reduction::RECOMPUTE`]): no reduction node; `v` is freed after its last reader
//!   that keeps it, and each rerouted reader gets a [`RECOMPUTE`] node right before it
//!   that re-runs `v`'s producer (its inputs, attributes and latency); only
//!   [`recomputable`] tensors.
//! - **Restore**, one per rerouted reader node: copy back ([`SWAP_IN`], host-to-device
//!   engine) and/or decompress ([`DECOMPRESS`], compute stream). The reader's inputs that
//!   read `v` read the restored value instead; other readers keep `v`.
//! - **Serialization of reductions** ([`Options::serialize_reductions`]): an edge from
//!   the last reduction node to a reader of `v` that keeps it ([`Serialize::Consumer`],
//!   the method as stated), or our timed variant ([`Serialize::AfterCopy`]).
//! - **The p/q rule** ([`Options::largest_output`]): where an edge may attach to several
//!   nodes, the one with the largest output.
//! - **Serialization of restores** ([`Options::serialize_restores`]): the restores of one
//!   call, in order of their readers; an edge from the reader of the previous restore to
//!   the next restore (skipped when both restores feed the same reader, which would be a
//!   cycle).
//! - **Prefetch** ([`Prefetch`]): an edge from an upstream compute node `u` to the copy
//!   back, so that it does not start right after the reduction. `u` is never the reader
//!   itself, and comes before it in the (topological) graph order, so it is never
//!   downstream of it. [`Prefetch::Slack`] (the method): the latest `u` whose simulated
//!   finish plus the restore's time is still before the reader's simulated start; when
//!   the slack is too short for that, the last compute node before the reader (the
//!   restore comes back as late as possible and the reader waits for it); when no compute
//!   node lies between producer and reader, no edge.
//!   [`Prefetch::Levels`] (TF-LMS): the latest `u` at least `k` topological levels above
//!   the reader. A decompression without a copy runs on the compute stream right before
//!   its reader and needs no prefetch edge.
//! - **Placement** in the node order (which the simulator's queues follow): reduction
//!   nodes right after the producer (before the first node for a graph input); a copy
//!   back right after the latest of `u`, the producer and the previous restore's reader;
//!   a decompression right before its reader.
//! - Latencies of the new nodes come from [`Machine`]: copies `copy_latency + bytes /
//!   bandwidth` of the bytes on the wire, codecs `bytes / codec speed` of the full tensor.
//!
//! The output is checked by [`check`] (topological order of data and control edges, so
//! acyclic; host values read only by copies back). Repeated application (reduce,
//! re-time, choose again) is [`rewrite`] on its own output: host values are never
//! candidates again ([`crate::select`] skips them).

use std::cell::OnceCell;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::rc::Rc;

use memplan_graph::{DType, Graph, GraphError, NodeId, Value, ValueId, ValueKind};

use crate::simulate::{is_host, simulate, simulate_flat, Engine, Flat, Machine, SimulateError};

/// Operator type of a device-to-host copy (a reduction).
pub const SWAP_OUT: &str = "SwapOut";
/// Operator type of a host-to-device copy (a restore).
pub const SWAP_IN: &str = "SwapIn";
/// Operator type of a compression (a reduction, on the compute stream).
pub const COMPRESS: &str = "Compress";
/// Operator type of a decompression (a restore, on the compute stream).
pub const DECOMPRESS: &str = "Decompress";
/// Operator type of a recomputation (a restore, on the compute stream): the producer of
/// a dropped tensor run again, with the producer's inputs, its attributes and latency,
/// and the attribute [`RECOMPUTES`] naming it.
pub const RECOMPUTE: &str = "Recompute";
/// The attribute of a [`RECOMPUTE`] node that names the node it re-runs.
pub const RECOMPUTES: &str = "recomputes";
/// A node attribute (integers): the input slots of the node that may read a restored
/// copy. A node without it may read any input from a restore; a node with it only those
/// slots (a PyTorch forward op reads what the forward made, never a restore: see
/// [`crate::torch`]).
pub const RESTORABLE: &str = "restorable";

/// Whether input `slot` of `node` may be rerouted to a restore ([`RESTORABLE`]).
pub fn restorable(graph: &Graph, node: NodeId, slot: usize) -> bool {
    match graph.node(node).attributes.get(RESTORABLE) {
        Some(memplan_graph::Attribute::Ints(slots)) => slots.contains(&(slot as i64)),
        Some(_) => false,
        None => true,
    }
}

/// A lossy compression of fp32 activations (the `swap` method: 32→16, 32→24 or 32→8 bits).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Codec {
    /// To fp16: half the bytes (rounded up).
    Fp16,
    /// To 24 bits (fp32 with the low mantissa byte dropped): three quarters of the bytes
    /// (rounded up).
    Fp24,
    /// To 8-bit: a quarter of the bytes (rounded up).
    Int8,
}

impl Codec {
    /// The compressed size of a tensor of `bytes`: `ceil(bytes * bits / 32)`, computed
    /// without overflow for every `u64`.
    pub fn compressed_bytes(self, bytes: u64) -> u64 {
        match self {
            Codec::Fp16 => bytes.div_ceil(2),
            // bytes = 4q + r: 3q + ceil(3r / 4), and 3q <= 3 * (2^64 - 1) / 4 fits.
            Codec::Fp24 => bytes / 4 * 3 + (bytes % 4 * 3).div_ceil(4),
            Codec::Int8 => bytes.div_ceil(4),
        }
    }

    /// `fp16`, `fp24` or `int8`.
    pub fn name(self) -> &'static str {
        match self {
            Codec::Fp16 => "fp16",
            Codec::Fp24 => "fp24",
            Codec::Int8 => "int8",
        }
    }

    /// The element type of the compressed value; 24-bit values, which have no element
    /// type, are raw bytes (`UINT8`, without a shape).
    fn dtype(self) -> DType {
        match self {
            Codec::Fp16 => DType::Float16,
            Codec::Fp24 => DType::Uint8,
            Codec::Int8 => DType::Int8,
        }
    }
}

/// What a reduction does: copy to the host, compress, or both; or, with `recompute`
/// (and neither of the others), drop the tensor after its last early reader and
/// recompute it for each later reader by re-running its producer ([`RECOMPUTE`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reduction {
    pub to_host: bool,
    pub codec: Option<Codec>,
    pub recompute: bool,
}

impl Reduction {
    /// Copy to the host, no compression.
    pub const SWAP: Reduction = Reduction {
        to_host: true,
        codec: None,
        recompute: false,
    };

    /// Delete and recompute.
    pub const RECOMPUTE: Reduction = Reduction {
        to_host: false,
        codec: None,
        recompute: true,
    };

    /// Compression `codec`, on the device (`to_host` false) or then copied to the host.
    pub const fn compress(codec: Codec, to_host: bool) -> Reduction {
        Reduction {
            to_host,
            codec: Some(codec),
            recompute: false,
        }
    }

    /// Copy to the host and/or compress, or recompute alone.
    fn is_valid(&self) -> bool {
        if self.recompute {
            !self.to_host && self.codec.is_none()
        } else {
            self.to_host || self.codec.is_some()
        }
    }

    /// The bytes that cross the link (or stay on the device, compressed).
    pub fn wire_bytes(&self, bytes: u64) -> u64 {
        self.codec.map_or(bytes, |c| c.compressed_bytes(bytes))
    }

    /// Reduction plus restore time of a tensor of `bytes` on `machine`, ignoring queueing
    /// (0 for recomputation, whose cost is its producer's latency, not a rate).
    pub fn round_trip_ms(&self, machine: &Machine, bytes: u64) -> f64 {
        let wire = self.wire_bytes(bytes);
        let copies = if self.to_host {
            machine.copy_ms(Engine::DeviceToHost, wire)
                + machine.copy_ms(Engine::HostToDevice, wire)
        } else {
            0.0
        };
        let codec = if self.codec.is_some() {
            2.0 * machine.codec_ms(bytes)
        } else {
            0.0
        };
        copies + codec
    }

    /// The reduction's time alone.
    pub fn reduce_ms(&self, machine: &Machine, bytes: u64) -> f64 {
        let copy = if self.to_host {
            machine.copy_ms(Engine::DeviceToHost, self.wire_bytes(bytes))
        } else {
            0.0
        };
        copy + self.codec.map_or(0.0, |_| machine.codec_ms(bytes))
    }

    /// The restore's time alone.
    fn restore_ms(&self, machine: &Machine, bytes: u64) -> f64 {
        let copy = if self.to_host {
            machine.copy_ms(Engine::HostToDevice, self.wire_bytes(bytes))
        } else {
            0.0
        };
        copy + self.codec.map_or(0.0, |_| machine.codec_ms(bytes))
    }
}

/// How the prefetch source of a copy back is chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Prefetch {
    /// The method: the latest node after which the restore still finishes before the
    /// reader starts (simulated times of the input graph).
    Slack,
    /// Our variant of `Slack`: it also counts the copy engines' queues as simulated on
    /// the input graph: the copy back waits for the copies back already placed before
    /// it and for its own reduction (after the copies out queued before it), and must
    /// end before the next copy back already in the graph starts, so that it delays none.
    /// When no source lets it end before its reader, the latest source with the
    /// earliest expected end.
    Queued,
    /// TF-LMS: the latest node at least this many topological levels above the reader.
    Levels(usize),
    /// No prefetch edge: the copy back starts as soon as the reduction is done.
    None,
}

/// Where the serialization edge of a reduction goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Serialize {
    /// No edge.
    None,
    /// The method as stated (the `swap` method, corrected): a node that is itself a consumer
    /// of the source tensor. Of the readers that keep the tensor (those not rerouted to
    /// a restore), the **last** in the graph order, after which the tensor's device copy
    /// is freed; with [`Options::largest_output`] the one with the largest output. No
    /// edge when every reader is rerouted.
    Consumer,
    /// Our improvement: the first compute node after the producer and the readers that
    /// keep the tensor and run before the first restored reader, whose simulated start
    /// (input graph) is after the reduction's expected end, so the edge bounds how far
    /// the copies lag behind the compute stream without stalling it.
    AfterCopy,
}

/// Rewriting options.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Options {
    pub reduction: Reduction,
    pub serialize_reductions: Serialize,
    pub serialize_restores: bool,
    pub prefetch: Prefetch,
    /// The method's p/q rule for placing control edges ("find the nodes with the largest
    /// output memory, and choose the node p whose output is larger than q's"): where an
    /// edge may go to or come from several nodes (the readers that keep the tensor for
    /// [`Serialize::Consumer`], the sources that let the restore arrive in time for
    /// [`Prefetch::Slack`]), take the one with the largest output bytes (device values);
    /// equal outputs keep the rule's own choice (the last reader, the latest source).
    pub largest_output: bool,
    /// Sets the new nodes' latencies, and simulates the input for [`Prefetch::Slack`].
    pub machine: Machine,
}

impl Options {
    /// The method as stated: both serializations (the reduction's to a consumer of the
    /// tensor), the slack prefetch and the p/q rule for placing the edges.
    pub fn method(reduction: Reduction, machine: Machine) -> Options {
        Options {
            reduction,
            serialize_reductions: Serialize::Consumer,
            serialize_restores: true,
            prefetch: Prefetch::Slack,
            largest_output: true,
            machine,
        }
    }
}

/// One tensor to reduce, and the reader nodes that read it back from a restore.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Swap {
    pub value: ValueId,
    pub readers: Vec<NodeId>,
}

/// The rewritten graph and what was inserted.
#[derive(Clone, Debug, PartialEq)]
pub struct Rewritten {
    pub graph: Graph,
    /// Tensors reduced, and their bytes (uncompressed).
    pub tensors: usize,
    pub bytes: u64,
    /// Restores inserted.
    pub restores: usize,
    /// Per input node: its id in the new graph.
    pub node_map: Vec<NodeId>,
}

/// Why a rewrite was refused or its result is invalid, naming the value or node.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum RewriteError {
    #[error("value '{value}' cannot be swapped: {why}")]
    BadValue { value: String, why: &'static str },
    #[error("value '{value}': node '{node}' does not read it after its producer in a restorable slot, so it cannot read it from a restore")]
    BadReader { value: String, node: String },
    #[error("a reduction must copy to the host, compress, or both; or recompute, alone")]
    EmptyReduction,
    #[error("node '{node}' comes before '{before}' in the graph order but must run after it (cycle or unsorted rewrite)")]
    Order { node: String, before: String },
    #[error("host value '{value}' is read by node '{node}', which is not a copy back ({SWAP_IN})")]
    HostRead { value: String, node: String },
    #[error("value '{value}' of node '{node}': host values are the outputs of copies to the host ({SWAP_OUT}), and only those")]
    HostWrite { value: String, node: String },
    #[error(transparent)]
    Graph(#[from] GraphError),
    #[error(transparent)]
    Simulate(#[from] SimulateError),
}

/// The copy engines of a simulated graph, by node position.
#[derive(Default)]
struct Queues {
    /// The last finish of a copy back (resp. out) at this position or before.
    h2d_busy_upto: Vec<f64>,
    d2h_busy_upto: Vec<f64>,
    /// The first start of a copy back after this position (infinity when none).
    h2d_next_after: Vec<f64>,
}

impl Queues {
    fn new(graph: &Graph, run: &crate::simulate::Run) -> Queues {
        let n = graph.nodes().len();
        let engine: Vec<Engine> = graph
            .nodes()
            .iter()
            .map(|x| Engine::of(&x.op_type))
            .collect();
        let (mut h2d, mut d2h) = (0.0f64, 0.0f64);
        let mut out = Queues {
            h2d_busy_upto: vec![0.0; n],
            d2h_busy_upto: vec![0.0; n],
            h2d_next_after: vec![f64::INFINITY; n],
        };
        for (i, e) in engine.iter().enumerate() {
            match e {
                Engine::HostToDevice => h2d = h2d.max(run.finish[i]),
                Engine::DeviceToHost => d2h = d2h.max(run.finish[i]),
                Engine::Compute => {}
            }
            out.h2d_busy_upto[i] = h2d;
            out.d2h_busy_upto[i] = d2h;
        }
        let mut next = f64::INFINITY;
        for i in (0..n).rev() {
            out.h2d_next_after[i] = next;
            if engine[i] == Engine::HostToDevice {
                next = next.min(run.start[i]);
            }
        }
        out
    }
}

/// What an inserted node does: its op and the form of its name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    Compress,
    SwapOut,
    SwapIn,
    Decompress,
    Recompute,
}

impl Role {
    const ALL: [Role; 5] = [
        Role::Compress,
        Role::SwapOut,
        Role::SwapIn,
        Role::Decompress,
        Role::Recompute,
    ];

    fn op(self) -> &'static str {
        match self {
            Role::Compress => COMPRESS,
            Role::SwapOut => SWAP_OUT,
            Role::SwapIn => SWAP_IN,
            Role::Decompress => DECOMPRESS,
            Role::Recompute => RECOMPUTE,
        }
    }

    /// What its node's name starts with, before a `:`.
    fn prefix(self) -> &'static str {
        match self {
            Role::Compress => "compress",
            Role::SwapOut => "swapout",
            Role::SwapIn => "swapin",
            Role::Decompress => "decompress",
            Role::Recompute => "recompute",
        }
    }
}

/// [`slice::partition_point`] of `items` (`pred` holds on a prefix), searched from the
/// start with doubling steps, then bisection: O(log d) steps for a prefix of d items.
fn partition_point_from_start<T>(items: &[T], pred: impl Fn(&T) -> bool) -> usize {
    let (mut lo, mut hi) = (0, 1);
    while hi <= items.len() && pred(&items[hi - 1]) {
        lo = hi;
        hi *= 2;
    }
    lo + items[lo..hi.min(items.len())].partition_point(pred)
}

/// [`slice::partition_point`] of `items` (`pred` holds on a prefix), searched from the
/// end with doubling steps, then bisection: O(log d) steps when d items fail `pred`.
fn partition_point_from_end<T>(items: &[T], pred: impl Fn(&T) -> bool) -> usize {
    let len = items.len();
    let (mut hi, mut step) = (len, 1);
    while step <= len {
        let at = len - step;
        if pred(&items[at]) {
            return at + 1 + items[at + 1..hi].partition_point(pred);
        }
        hi = at;
        step *= 2;
    }
    items[..hi].partition_point(pred)
}

/// A node to insert, without its name (made by [`Insert::name`] when a graph is built):
/// the tensor it reduces or restores and the reader a restore serves, its slot (it runs
/// after original node `slot - 1`; slot 0 first), its input (`None`: a recomputation,
/// which reads its producer's inputs), output and latency.
struct Insert {
    role: Role,
    value: ValueId,
    reader: Option<NodeId>,
    slot: usize,
    /// 0 unless moved to a later slot by the serialization of restores: then 1 + the
    /// number of restores moved before it (it runs after those that were in its slot).
    moved: usize,
    input: Option<ValueId>,
    output: ValueId,
    ms: f64,
}

impl Insert {
    /// `{prefix}:{tensor}` for reductions, `{prefix}:{tensor}@{reader}` for restores.
    fn name(&self, graph: &Graph) -> String {
        let v = &graph.value(self.value).name;
        match self.reader {
            Some(r) => format!("{}:{v}@{}", self.role.prefix(), graph.node(r).name),
            None => format!("{}:{v}", self.role.prefix()),
        }
    }

    /// Its data inputs, by slot: its input, or those of the recomputed tensor's producer.
    fn inputs<'a>(&'a self, graph: &'a Graph) -> &'a [Option<ValueId>] {
        match self.input {
            Some(_) => std::slice::from_ref(&self.input),
            None => {
                let (p, _) = graph.value(self.value).producer.expect("validated");
                &graph.node(p).inputs
            }
        }
    }

    /// Where it goes in the node order: by slot; in a slot the reductions, then the
    /// copies back, then the other restores; each group in the order they were laid
    /// out, restores moved into the slot last.
    fn order_key(&self, index: usize) -> (usize, u8, usize, usize) {
        let group = match self.role {
            Role::Compress | Role::SwapOut => 0,
            Role::SwapIn => 1,
            Role::Decompress | Role::Recompute => 2,
        };
        (self.slot, group, self.moved, index)
    }
}

/// A node of the rewritten graph, before it is built: an original node or an inserted one
/// (by its index in [`Layout::inserts`]).
#[derive(Clone, Copy, Debug)]
enum At {
    Node(NodeId),
    Insert(usize),
}

/// What a rewrite needs of its input graph's names: per value and per node whether the
/// names a rewrite makes from it (`{prefix}:{value}`, `{prefix}:{value}@{reader}`,
/// `{value}@{suffix}`) can be told apart without making them. A value qualifies when
/// its name has no `@` and no name in the graph starts with it followed by `@` (nor a
/// node name with `{prefix}:` and it); a reader when its name has no `@` and is neither
/// `host` nor a codec's name. A rewrite of qualifying values read back by qualifying
/// readers makes names that are new (not in the graph) and pairwise distinct: in each,
/// the first `@` ends the tensor's name, and the suffixes of one tensor differ. Other
/// rewrites check their names one by one.
struct Names {
    value_ok: Vec<bool>,
    reader_ok: Vec<bool>,
}

impl Names {
    fn new(graph: &Graph) -> Names {
        let mut value_ok: Vec<bool> = graph
            .values()
            .iter()
            .map(|v| !v.name.contains('@'))
            .collect();
        // `name` could be a name made from value `u` when `u`'s name is `name` or `name`
        // up to one of its `@`.
        let mut taken = |name: &str| {
            let cuts = name.match_indices('@').map(|(i, _)| i);
            for end in cuts.chain([name.len()]) {
                if let Some(u) = graph.value_by_name(&name[..end]) {
                    value_ok[u.index()] = false;
                }
            }
        };
        for v in graph.values() {
            if v.name.contains('@') {
                taken(&v.name);
            }
        }
        for node in graph.nodes() {
            for role in Role::ALL {
                let rest = node
                    .name
                    .strip_prefix(role.prefix())
                    .and_then(|r| r.strip_prefix(':'));
                if let Some(rest) = rest {
                    taken(rest);
                }
            }
        }
        let reserved = |name: &str| {
            name == "host"
                || [Codec::Fp16, Codec::Fp24, Codec::Int8]
                    .iter()
                    .any(|c| c.name() == name)
        };
        let reader_ok = graph
            .nodes()
            .iter()
            .map(|node| !node.name.contains('@') && !reserved(&node.name))
            .collect();
        Names {
            value_ok,
            reader_ok,
        }
    }
}

/// Rewrites `graph` (whose node order must be topological) with `swaps`; see the module
/// documentation. The result passes [`check`].
pub fn rewrite(
    graph: &Graph,
    swaps: &[Swap],
    options: &Options,
) -> Result<Rewritten, RewriteError> {
    rewrite_simulated(graph, swaps, options, None)
}

/// [`rewrite`] with `graph`'s simulation on `options.machine` already at hand (`run`,
/// what [`simulate`] returns for it), so that a search rewriting one graph many times
/// does not simulate it again for each rewrite; `None` simulates it when the options
/// need it. The result is the same as [`rewrite`]'s.
pub fn rewrite_simulated(
    graph: &Graph,
    swaps: &[Swap],
    options: &Options,
    run: Option<&crate::simulate::Run>,
) -> Result<Rewritten, RewriteError> {
    layout(graph, swaps, options, &Prepared::new(graph, run))?.build(graph)
}

/// What rewrites read of their input graph (and its simulation, if given), computed
/// once for the many rewrites of one graph in a search.
pub(crate) struct Prepared<'a> {
    graph: &'a Graph,
    run: Option<&'a crate::simulate::Run>,
    /// Per node: whether it runs on the compute stream.
    compute: Vec<bool>,
    /// The compute-stream positions.
    compute_at: Vec<usize>,
    /// Per node: its output bytes on the device (the p/q rule).
    out_bytes: OnceCell<Result<Vec<u64>, GraphError>>,
    queues: OnceCell<Queues>,
    levels: OnceCell<Vec<usize>>,
    /// The graph's [`Flat`].
    flat: OnceCell<Flat>,
    names: OnceCell<Names>,
    reduced: OnceCell<Vec<bool>>,
}

impl<'a> Prepared<'a> {
    /// For rewrites of `graph`, simulated as `run` when given.
    pub(crate) fn new(graph: &'a Graph, run: Option<&'a crate::simulate::Run>) -> Prepared<'a> {
        let compute: Vec<bool> = graph
            .nodes()
            .iter()
            .map(|node| Engine::of(&node.op_type) == Engine::Compute)
            .collect();
        let compute_at = (0..compute.len()).filter(|&i| compute[i]).collect();
        Prepared {
            graph,
            run,
            compute,
            compute_at,
            out_bytes: OnceCell::new(),
            queues: OnceCell::new(),
            levels: OnceCell::new(),
            flat: OnceCell::new(),
            names: OnceCell::new(),
            reduced: OnceCell::new(),
        }
    }

    fn out_bytes(&self) -> Result<&[u64], GraphError> {
        let graph = self.graph;
        let bytes = self.out_bytes.get_or_init(|| {
            graph
                .nodes()
                .iter()
                .map(|node| {
                    node.outputs
                        .iter()
                        .filter(|&&o| graph.value(o).is_activation())
                        .try_fold(0u64, |sum, &o| sum.checked_add(graph.value(o).bytes))
                        .ok_or(GraphError::TooLarge)
                })
                .collect()
        });
        bytes.as_deref().map_err(Clone::clone)
    }

    fn flat(&self) -> &Flat {
        self.flat.get_or_init(|| Flat::of(self.graph))
    }

    /// [`reduced_values`] of the graph.
    fn reduced(&self) -> &[bool] {
        self.reduced.get_or_init(|| reduced_values(self.graph))
    }
}

/// What a rewrite simulates to, and what it reduced.
pub(crate) struct Simulated {
    /// [`simulate`] of the rewritten graph on the machine given.
    pub run: Result<crate::simulate::Run, SimulateError>,
    pub tensors: usize,
    pub bytes: u64,
}

/// Tests: [`rewrite_and_simulate_prepared`] of `graph` simulated as `run`.
#[cfg(test)]
pub(crate) fn rewrite_and_simulate(
    graph: &Graph,
    swaps: &[Swap],
    options: &Options,
    run: Option<&crate::simulate::Run>,
    machine: &Machine,
) -> Result<Simulated, RewriteError> {
    rewrite_and_simulate_prepared(swaps, options, &Prepared::new(graph, run), machine)
}

/// [`rewrite_simulated`] of `prepared`'s graph and run, then [`simulate`] of the result
/// on `machine`, without building the graph ([`Trial`]).
pub(crate) fn rewrite_and_simulate_prepared(
    swaps: &[Swap],
    options: &Options,
    prepared: &Prepared,
    machine: &Machine,
) -> Result<Simulated, RewriteError> {
    let trial = Trial::new(swaps, options, prepared)?;
    Ok(Simulated {
        run: trial.simulate(machine)?,
        tensors: trial.tensors,
        bytes: trial.bytes,
    })
}

/// A rewrite of a prepared graph ([`rewrite_simulated`]) and rounds of late restores on
/// it ([`Trial::retimed`]), simulated on their [`Flat`] arrays (equal to those of the
/// graphs they build; tested): a graph is built only by [`Trial::build`]. Where the arrays
/// cannot be had without building (a new name that may be taken, a result that would
/// fail [`check`]) or a simulation fails (for the error, naming nodes), and in tests on
/// the old path, the graph is built and used instead; the results are the same.
pub(crate) struct Trial<'p> {
    state: TrialState<'p>,
    /// Tensors the rewrite reduced, and their bytes (uncompressed); 0 for [`Trial::built`].
    pub tensors: usize,
    pub bytes: u64,
}

enum TrialState<'p> {
    Flat {
        prepared: &'p Prepared<'p>,
        layout: Rc<Layout>,
        /// The rounds of late restores, in order.
        retimes: Vec<Rc<Retime>>,
        flat: Flat,
    },
    Built(Graph),
}

impl<'p> Trial<'p> {
    /// The rewrite of `prepared`'s graph with `swaps` (errors as [`rewrite_simulated`]'s).
    pub(crate) fn new(
        swaps: &[Swap],
        options: &Options,
        prepared: &'p Prepared<'p>,
    ) -> Result<Trial<'p>, RewriteError> {
        let graph = prepared.graph;
        let layout = layout(graph, swaps, options, prepared)?;
        let (tensors, bytes) = (layout.tensors, layout.bytes);
        let flat = if slow_path() {
            None
        } else {
            layout.flat(graph, prepared)
        };
        let state = match flat {
            Some(flat) => TrialState::Flat {
                prepared,
                layout: Rc::new(layout),
                retimes: Vec::new(),
                flat,
            },
            None => TrialState::Built(layout.build(graph)?.graph),
        };
        Ok(Trial {
            state,
            tensors,
            bytes,
        })
    }

    /// `graph` itself.
    pub(crate) fn built(graph: Graph) -> Trial<'p> {
        Trial {
            state: TrialState::Built(graph),
            tensors: 0,
            bytes: 0,
        }
    }

    /// [`simulate`] of the graph on `machine`.
    pub(crate) fn simulate(
        &self,
        machine: &Machine,
    ) -> Result<Result<crate::simulate::Run, SimulateError>, RewriteError> {
        if let TrialState::Flat { flat, .. } = &self.state {
            if let Ok(run) = simulate_flat(flat, machine) {
                return Ok(Ok(run));
            }
        }
        Ok(match &self.state {
            TrialState::Built(graph) => simulate_reference(graph, machine),
            TrialState::Flat { .. } => simulate_reference(&self.graph()?, machine),
        })
    }

    /// The graph with one round of [`retime_restores`] applied, from its simulation `run`
    /// (errors as [`retime_restores_simulated`]'s).
    pub(crate) fn retimed(&self, run: &crate::simulate::Run) -> Result<Trial<'p>, RewriteError> {
        let state = match &self.state {
            TrialState::Flat {
                prepared,
                layout,
                retimes,
                flat,
            } => {
                let retime = Retime::of(flat, run);
                match retime.flat(flat) {
                    Some(next) => TrialState::Flat {
                        prepared,
                        layout: Rc::clone(layout),
                        retimes: retimes.iter().cloned().chain([Rc::new(retime)]).collect(),
                        flat: next,
                    },
                    None => TrialState::Built(retime.graph(&self.graph()?)?),
                }
            }
            TrialState::Built(graph) => TrialState::Built(retime_restores_simulated(graph, run)?),
        };
        Ok(Trial {
            state,
            tensors: self.tensors,
            bytes: self.bytes,
        })
    }

    /// The graph.
    fn graph(&self) -> Result<Graph, RewriteError> {
        match &self.state {
            TrialState::Built(graph) => Ok(graph.clone()),
            TrialState::Flat {
                prepared,
                layout,
                retimes,
                flat,
            } => {
                let graph = layout.build(prepared.graph)?.graph;
                if retimes.is_empty() {
                    return Ok(graph);
                }
                // The rounds at once: their orders composed, and the control edges of the
                // last, which `flat` holds (equal to the graph's; tested).
                let mut order: Vec<usize> = (0..graph.nodes().len()).collect();
                for retime in retimes {
                    order = retime.order.iter().map(|&i| order[i]).collect();
                }
                reordered(&graph, &order, &flat.control)
            }
        }
    }

    /// The graph, built.
    pub(crate) fn build(self) -> Result<Graph, RewriteError> {
        match self.state {
            TrialState::Built(graph) => Ok(graph),
            TrialState::Flat { .. } => self.graph(),
        }
    }
}

#[cfg(not(test))]
fn slow_path() -> bool {
    false
}

#[cfg(not(test))]
fn simulate_reference(
    graph: &Graph,
    machine: &Machine,
) -> Result<crate::simulate::Run, SimulateError> {
    simulate(graph, machine)
}

#[cfg(test)]
thread_local! {
    /// Tests: [`rewrite_and_simulate_prepared`] builds every graph and simulates it with
    /// [`crate::simulate::reference`], the code before [`Flat`] (the planners' old path).
    pub(crate) static SLOW_PATH: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

#[cfg(test)]
fn slow_path() -> bool {
    SLOW_PATH.with(|s| s.get())
}

#[cfg(test)]
fn simulate_reference(
    graph: &Graph,
    machine: &Machine,
) -> Result<crate::simulate::Run, SimulateError> {
    if slow_path() {
        crate::simulate::reference::simulate(graph, machine)
    } else {
        simulate(graph, machine)
    }
}

/// A new value of a rewrite, without its name (made by [`NewValue::name`] when a graph is
/// built): `{tensor}@{suffix}`, of `dtype` and `bytes`, with the tensor's shape or none.
struct NewValue {
    of: ValueId,
    suffix: Suffix,
    dtype: DType,
    bytes: u64,
    kind: ValueKind,
    /// Whether it has the tensor's shape (else none).
    shaped: bool,
}

/// What a new value's name adds to its tensor's, after an `@`.
#[derive(Clone, Copy, Debug)]
enum Suffix {
    /// The compressed tensor: the codec's name.
    Codec(Codec),
    /// The copy on the host: `host`.
    Host,
    /// A compressed copy back for a reader: `{codec}@{reader}`.
    CodecFor(Codec, NodeId),
    /// The restored tensor for a reader: the reader's name.
    For(NodeId),
}

impl NewValue {
    fn name(&self, graph: &Graph) -> String {
        let v = &graph.value(self.of).name;
        match self.suffix {
            Suffix::Codec(c) => format!("{v}@{}", c.name()),
            Suffix::Host => format!("{v}@host"),
            Suffix::CodecFor(c, r) => format!("{v}@{}@{}", c.name(), graph.node(r).name),
            Suffix::For(r) => format!("{v}@{}", graph.node(r).name),
        }
    }

    fn shape<'g>(&self, graph: &'g Graph) -> Option<&'g Vec<u64>> {
        self.shaped
            .then(|| graph.value(self.of).shape.as_ref())
            .flatten()
    }

    /// The value [`Layout::build`] adds.
    fn value(&self, graph: &Graph) -> Value {
        let mut value = Value::with_bytes(self.name(graph), self.dtype, self.bytes, self.kind);
        value.shape = self.shape(graph).cloned();
        value
    }
}

/// The new values of a rewrite, added as [`Graph::add_value`] would add them to a copy
/// of the input graph (the same ids and errors).
struct NewValues<'g> {
    graph: &'g Graph,
    /// The names so far, when the rewrite's names must be checked one by one ([`Names`]);
    /// `None` when they are known to be new and distinct.
    names: Option<HashSet<String>>,
    values: Vec<NewValue>,
}

impl NewValues<'_> {
    fn add_value(&mut self, value: NewValue) -> Result<ValueId, GraphError> {
        let graph = self.graph;
        if let Some(names) = &mut self.names {
            let name = value.name(graph);
            if graph.value_by_name(&name).is_some() || names.contains(&name) {
                return Err(GraphError::DuplicateValue { name });
            }
            names.insert(name);
        }
        if let Some(shape) = value.shape(graph) {
            if memplan_graph::ir::shape_bytes(value.dtype, shape) != Some(value.bytes) {
                return Err(GraphError::BytesMismatch {
                    name: value.name(graph),
                    dtype: value.dtype,
                    shape: shape.clone(),
                    bytes: value.bytes,
                });
            }
        }
        let id = ValueId(
            u32::try_from(graph.values().len() + self.values.len())
                .map_err(|_| GraphError::TooLarge)?,
        );
        self.values.push(value);
        Ok(id)
    }
}

/// A rewrite decided but not built: the new values, the inserted nodes, the rerouted
/// inputs and the new control edges.
struct Layout {
    values: Vec<NewValue>,
    inserts: Vec<Insert>,
    /// Whether the names of `values` and `inserts` are known to be new and distinct
    /// ([`Names`]); if not, only [`Layout::build`] checks the nodes' names.
    plain: bool,
    reroute: HashMap<(NodeId, ValueId), ValueId>,
    edges: Vec<(At, At)>,
    tensors: usize,
    bytes: u64,
    restore_count: usize,
}

/// The rewrite of `graph` (see [`rewrite_simulated`]), up to building the graph.
fn layout(
    graph: &Graph,
    swaps: &[Swap],
    options: &Options,
    prepared: &Prepared,
) -> Result<Layout, RewriteError> {
    let given = prepared.run;
    let reduction = options.reduction;
    if !reduction.is_valid() {
        return Err(RewriteError::EmptyReduction);
    }
    let machine = &options.machine;
    let compute = &prepared.compute;
    // Validate the requests.
    let mut seen = HashSet::new();
    let mut requests = Vec::with_capacity(swaps.len());
    for swap in swaps {
        let v = graph.value(swap.value);
        let bad = |why| RewriteError::BadValue {
            value: v.name.clone(),
            why,
        };
        if !seen.insert(swap.value) {
            return Err(bad("it is requested twice"));
        }
        if !v.is_activation() || is_host(graph, swap.value) {
            return Err(bad("it is not a device activation"));
        }
        if v.bytes == 0 {
            return Err(bad("it has no bytes"));
        }
        if prepared.reduced()[swap.value.index()] {
            return Err(bad(
                "it is already reduced (a rewrite reduces a tensor once)",
            ));
        }
        let producer = v.producer.map(|(p, _)| p.index());
        let mut readers = swap.readers.clone();
        readers.sort();
        readers.dedup();
        // The readers that may read a restore, looked up (a scan of the consumers per
        // reader is quadratic for a tensor read by many nodes).
        let restorable_readers: Option<HashSet<NodeId>> = (readers.len() > 8).then(|| {
            v.consumers
                .iter()
                .filter(|&&(c, slot)| restorable(graph, c, slot))
                .map(|&(c, _)| c)
                .collect()
        });
        for &r in &readers {
            let reads = match &restorable_readers {
                Some(set) => set.contains(&r),
                None => v
                    .consumers
                    .iter()
                    .any(|&(c, slot)| c == r && restorable(graph, c, slot)),
            };
            if !reads || producer.is_some_and(|p| r.index() <= p) {
                return Err(RewriteError::BadReader {
                    value: v.name.clone(),
                    node: graph.node(r).name.clone(),
                });
            }
        }
        if readers.is_empty() {
            continue;
        }
        if reduction.recompute {
            if let Err(why) = recomputable(graph, swap.value) {
                return Err(bad(why));
            }
        }
        requests.push((swap.value, producer, readers));
    }
    // Whether the new names are known to be new and distinct.
    let names = prepared.names.get_or_init(|| Names::new(graph));
    let plain = requests.iter().all(|(value, _, readers)| {
        names.value_ok[value.index()] && readers.iter().all(|r| names.reader_ok[r.index()])
    });
    let run = match (options.prefetch, options.serialize_reductions) {
        (Prefetch::Slack | Prefetch::Queued, _) | (_, Serialize::AfterCopy) => match given {
            Some(run) => Some(std::borrow::Cow::Borrowed(run)),
            None => Some(std::borrow::Cow::Owned(simulate(graph, machine)?)),
        },
        _ => None,
    };
    // The copy queues of the run (kept with `prepared` when it is the one given).
    let fresh;
    let queues: &Queues = match &run {
        Some(std::borrow::Cow::Borrowed(r)) => {
            prepared.queues.get_or_init(|| Queues::new(graph, r))
        }
        Some(std::borrow::Cow::Owned(r)) => {
            fresh = Queues::new(graph, r);
            &fresh
        }
        None => {
            fresh = Queues::default();
            &fresh
        }
    };
    let no_levels = Vec::new();
    let levels = match options.prefetch {
        Prefetch::Levels(_) => prepared.levels.get_or_init(|| levels(graph)),
        _ => &no_levels,
    };

    // The p/q rule: each node's output bytes on the device.
    let out_bytes: &[u64] = if options.largest_output {
        prepared.out_bytes()?
    } else {
        &[]
    };
    // Among `nodes` (in any order), the one with the largest output; ties: the latest.
    let largest = |nodes: &mut dyn Iterator<Item = usize>| {
        nodes.max_by(|&a, &b| out_bytes[a].cmp(&out_bytes[b]).then(a.cmp(&b)))
    };
    // Compute-stream positions, for searches by simulated time (their starts and
    // finishes grow along the order: the stream is in-order).
    let compute_at = &prepared.compute_at;

    let mut new_graph = NewValues {
        graph,
        names: (!plain).then(HashSet::new),
        values: Vec::new(),
    };
    // A new activation: `of`'s name and the suffix, with `of`'s shape when `shaped`.
    let add =
        |g: &mut NewValues, of: ValueId, suffix: Suffix, dtype: DType, bytes: u64, shaped: bool| {
            g.add_value(NewValue {
                of,
                suffix,
                dtype,
                bytes,
                kind: ValueKind::Activation,
                shaped,
            })
        };
    // Inserted nodes, each with its slot: slot s runs after original node s - 1 (slot 0
    // first).
    let mut inserts: Vec<Insert> = Vec::new();
    // Rerouted inputs: (reader, value) -> restored value.
    let mut reroute: HashMap<(NodeId, ValueId), ValueId> = HashMap::new();
    // Control edges.
    let mut edges: Vec<(At, At)> = Vec::new();
    // (reader position, value, the restore's first node) for serialization.
    let mut restore_heads: Vec<(usize, ValueId, usize)> = Vec::new();
    let mut bytes_total = 0u64;
    let mut restore_count = 0usize;
    for (value, producer, readers) in &requests {
        let v = graph.value(*value);
        bytes_total = bytes_total
            .checked_add(v.bytes)
            .ok_or(GraphError::TooLarge)?;
        let wire = reduction.wire_bytes(v.bytes);
        let slot = producer.map_or(0, |p| p + 1);
        // A node inserted for this tensor (and `reader`, a restore).
        let insert = |role, reader, slot, input, output, ms| Insert {
            role,
            value: *value,
            reader,
            slot,
            moved: 0,
            input,
            output,
            ms,
        };
        // Reduction chain (none for recomputation).
        let mut last_reduction = None;
        let mut current = *value;
        if let Some(codec) = reduction.codec {
            let suffix = Suffix::Codec(codec);
            let out = add(&mut new_graph, *value, suffix, codec.dtype(), wire, false)?;
            last_reduction = Some(inserts.len());
            inserts.push(insert(
                Role::Compress,
                None,
                slot,
                Some(current),
                out,
                machine.codec_ms(v.bytes),
            ));
            current = out;
        }
        let mut stored = current;
        if reduction.to_host {
            let out = new_graph.add_value(NewValue {
                of: *value,
                suffix: Suffix::Host,
                dtype: reduction.codec.map_or(v.dtype, Codec::dtype),
                bytes: wire,
                kind: ValueKind::Host,
                shaped: false,
            })?;
            last_reduction = Some(inserts.len());
            inserts.push(insert(
                Role::SwapOut,
                None,
                slot,
                Some(current),
                out,
                machine.copy_ms(Engine::DeviceToHost, wire),
            ));
            stored = out;
        }
        // p of the p/q rule: the node the reduction is serialized before, by its output.
        let mut p_out: Option<u64> = None;
        if options.serialize_reductions != Serialize::None && last_reduction.is_some() {
            // Readers that keep the device copy (not rerouted to a restore).
            let keepers = v
                .consumers
                .iter()
                .map(|&(c, _)| c.index())
                .filter(|c| readers.binary_search(&NodeId(*c as u32)).is_err());
            let target = match (options.serialize_reductions, &run) {
                (Serialize::Consumer, _) if options.largest_output => {
                    largest(&mut keepers.into_iter())
                }
                (Serialize::Consumer, _) => keepers.max(),
                (Serialize::AfterCopy, Some(run)) => {
                    let first_restored = readers[0].index();
                    let early = keepers.filter(|&c| c < first_restored).max();
                    let after = early.into_iter().chain(*producer).max();
                    let from = after.map_or(0, |a| a + 1);
                    let ready = producer.map_or(0.0, |p| run.finish[p]);
                    let queue = producer.map_or(0.0, |p| queues.d2h_busy_upto[p]);
                    let done = ready.max(queue) + reduction.reduce_ms(machine, v.bytes);
                    // The first compute node at or after `from` starting at `done` or later.
                    let k = compute_at.partition_point(|&t| t < from);
                    let j = k + partition_point_from_start(&compute_at[k..], |&t| {
                        run.start[t] + 1e-9 < done
                    });
                    compute_at.get(j).copied()
                }
                _ => None,
            };
            if let (Some(t), Some(red)) = (target, last_reduction) {
                edges.push((At::Insert(red), At::Node(NodeId(t as u32))));
                p_out = out_bytes.get(t).copied();
            }
        }
        // Restores.
        for &reader in readers {
            let c = reader.index();
            restore_count += 1;
            let mut current = stored;
            let mut head = None;
            if reduction.to_host {
                let (suffix, dtype, shaped) = match reduction.codec {
                    Some(codec) => (Suffix::CodecFor(codec, reader), codec.dtype(), false),
                    None => (Suffix::For(reader), v.dtype, true),
                };
                let out = add(&mut new_graph, *value, suffix, dtype, wire, shaped)?;
                let low = producer.map_or(0, |p| p + 1);
                let source = match options.prefetch {
                    Prefetch::Slack => {
                        let run = run.as_ref().expect("simulated for Prefetch::Slack");
                        let need = reduction.restore_ms(machine, v.bytes);
                        // Compute nodes in [low, c): compute_at[lo..hi]; those in time
                        // (finish + need <= the reader's start) are a prefix of them.
                        let lo = compute_at.partition_point(|&u| u < low);
                        let hi = compute_at.partition_point(|&u| u < c);
                        let fit = lo
                            + partition_point_from_end(&compute_at[lo..hi], |&u| {
                                run.finish[u] + need <= run.start[c] + 1e-9
                            });
                        let latest = fit.checked_sub(1).filter(|&k| k >= lo);
                        let in_time = match (options.largest_output, p_out, latest) {
                            // The p/q rule (the `swap` method, corrected again): q, this
                            // source, has a smaller output than p, the reduction's
                            // serialization target, and is late enough that the restore
                            // ends just before the reader: the latest in-time source
                            // with a smaller output, among those ending within one
                            // restore time of the latest; else the latest in time.
                            (true, Some(p_bytes), Some(k_latest)) => {
                                let horizon = run.start[c] - 2.0 * need - 1e-9;
                                let smaller = (lo..=k_latest)
                                    .rev()
                                    .map(|k| compute_at[k])
                                    .take_while(|&u| run.finish[u] >= horizon)
                                    .find(|&u| out_bytes[u] < p_bytes);
                                Some(smaller.unwrap_or(compute_at[k_latest]))
                            }
                            (_, _, latest) => latest.map(|k| compute_at[k]),
                        };
                        in_time.or_else(|| (hi > lo).then(|| compute_at[hi - 1]))
                    }
                    Prefetch::Queued => {
                        let run = run.as_ref().expect("simulated for Prefetch::Queued");
                        let need = reduction.restore_ms(machine, v.bytes);
                        let ready = producer.map_or(0.0, |p| {
                            run.finish[p].max(queues.d2h_busy_upto[p])
                                + reduction.reduce_ms(machine, v.bytes)
                        });
                        let end =
                            |u: usize| run.finish[u].max(queues.h2d_busy_upto[u]).max(ready) + need;
                        let fits = |u: usize| {
                            end(u) <= run.start[c] + 1e-9
                                && end(u) <= queues.h2d_next_after[u] + 1e-9
                        };
                        let sources = (low..c).rev().filter(|&u| compute[u]);
                        sources.clone().find(|&u| fits(u)).or_else(|| {
                            // Too late anyway: the latest source with the earliest end.
                            let best = sources.clone().map(end).fold(f64::INFINITY, f64::min);
                            sources.clone().find(|&u| end(u) <= best + 1e-9)
                        })
                    }
                    Prefetch::Levels(k) => levels[c]
                        .checked_sub(k)
                        .and_then(|top| (low..c).rev().find(|&u| compute[u] && levels[u] <= top)),
                    Prefetch::None => None,
                };
                let me = inserts.len();
                if let Some(u) = source {
                    edges.push((At::Node(NodeId(u as u32)), At::Insert(me)));
                }
                let at = source.map_or(slot, |u| (u + 1).max(slot));
                restore_heads.push((c, *value, me));
                head = Some(at);
                inserts.push(insert(
                    Role::SwapIn,
                    Some(reader),
                    at,
                    Some(current),
                    out,
                    machine.copy_ms(Engine::HostToDevice, wire),
                ));
                current = out;
            }
            if reduction.codec.is_some() {
                let suffix = Suffix::For(reader);
                let out = add(&mut new_graph, *value, suffix, v.dtype, v.bytes, true)?;
                if head.is_none() {
                    restore_heads.push((c, *value, inserts.len()));
                }
                inserts.push(insert(
                    Role::Decompress,
                    Some(reader),
                    c,
                    Some(current),
                    out,
                    machine.codec_ms(v.bytes),
                ));
                current = out;
            }
            if reduction.recompute {
                // Validated above: a compute producer with one output and a latency.
                let p = &graph.nodes()[producer.expect("validated")];
                let suffix = Suffix::For(reader);
                current = add(&mut new_graph, *value, suffix, v.dtype, v.bytes, true)?;
                restore_heads.push((c, *value, inserts.len()));
                inserts.push(insert(
                    Role::Recompute,
                    Some(reader),
                    c,
                    None,
                    current,
                    p.latency_ms.expect("validated"),
                ));
            }
            reroute.insert((reader, *value), current);
        }
    }
    // Serialization of restores: reader of the previous restore -> next restore. The
    // restore must then be placed after that reader.
    let mut moved = 0;
    if options.serialize_restores {
        restore_heads.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(&b.1)));
        for pair in restore_heads.windows(2) {
            let (prev, next) = (&pair[0], &pair[1]);
            if prev.0 < next.0 {
                edges.push((At::Node(NodeId(prev.0 as u32)), At::Insert(next.2)));
                let insert = &mut inserts[next.2];
                if insert.slot < prev.0 + 1 {
                    insert.slot = prev.0 + 1;
                    moved += 1;
                    insert.moved = moved;
                }
            }
        }
    }

    Ok(Layout {
        values: new_graph.values,
        inserts,
        plain,
        reroute,
        edges,
        tensors: requests.len(),
        bytes: bytes_total,
        restore_count,
    })
}

impl Layout {
    /// The inserted nodes' indices in [`Layout::inserts`], in the order they are emitted
    /// ([`Insert::order_key`]), and for each slot `s` where its nodes start in that list
    /// (`starts[s]..starts[s + 1]`).
    fn emission(&self, n: usize) -> (Vec<usize>, Vec<usize>) {
        let mut order: Vec<usize> = (0..self.inserts.len()).collect();
        order.sort_unstable_by_key(|&k| self.inserts[k].order_key(k));
        let mut starts = vec![0usize; n + 2];
        for insert in &self.inserts {
            starts[insert.slot + 1] += 1;
        }
        for s in 0..=n {
            starts[s + 1] += starts[s];
        }
        (order, starts)
    }

    /// The rewritten graph.
    fn build(&self, graph: &Graph) -> Result<Rewritten, RewriteError> {
        let n = graph.nodes().len();
        let (order, starts) = self.emission(n);
        let Layout {
            values,
            inserts,
            reroute,
            edges,
            tensors,
            bytes,
            restore_count,
            ..
        } = self;
        let mut new_graph = Graph::with_capacity(
            graph.name.clone(),
            n + inserts.len(),
            graph.values().len() + values.len(),
        );
        for value in graph.values() {
            new_graph.add_value(value.clone())?;
        }
        for value in values {
            new_graph.add_value(value.value(graph))?;
        }
        // Emit the nodes: slot 0, then each original node followed by its slot.
        let mut node_map = Vec::with_capacity(n);
        let mut insert_ids = vec![NodeId(0); inserts.len()];
        let mut emit = |g: &mut Graph, slot: usize| -> Result<(), GraphError> {
            for &k in &order[starts[slot]..starts[slot + 1]] {
                let insert = &inserts[k];
                let mut attributes = BTreeMap::new();
                if insert.role == Role::Recompute {
                    let (p, _) = graph.value(insert.value).producer.expect("validated");
                    let p = graph.node(p);
                    attributes = p.attributes.clone();
                    attributes.insert(
                        RECOMPUTES.to_string(),
                        memplan_graph::Attribute::String(p.name.clone()),
                    );
                }
                let id = g.add_node(
                    insert.name(graph),
                    insert.role.op(),
                    insert.inputs(graph).to_vec(),
                    vec![insert.output],
                    attributes,
                )?;
                g.set_latency(id, Some(insert.ms));
                insert_ids[k] = id;
            }
            Ok(())
        };
        emit(&mut new_graph, 0)?;
        for (i, node) in graph.nodes().iter().enumerate() {
            let me = NodeId(i as u32);
            let inputs = node
                .inputs
                .iter()
                .map(|input| input.map(|v| reroute.get(&(me, v)).copied().unwrap_or(v)))
                .collect();
            let id = new_graph.add_node(
                node.name.clone(),
                node.op_type.clone(),
                inputs,
                node.outputs.clone(),
                node.attributes.clone(),
            )?;
            new_graph.set_latency(id, node.latency_ms);
            new_graph.set_domain(id, node.domain.clone());
            node_map.push(id);
            emit(&mut new_graph, i + 1)?;
        }
        new_graph.set_inputs(graph.inputs().to_vec())?;
        new_graph.set_outputs(graph.outputs().to_vec())?;
        for &(from, to) in graph.control_edges() {
            new_graph.add_control_edge(node_map[from.index()], node_map[to.index()])?;
        }
        let id = |at: At| match at {
            At::Node(u) => node_map[u.index()],
            At::Insert(k) => insert_ids[k],
        };
        for &(from, to) in edges {
            new_graph.add_control_edge(id(from), id(to))?;
        }
        check(&new_graph)?;
        Ok(Rewritten {
            graph: new_graph,
            tensors: *tensors,
            bytes: *bytes,
            restores: *restore_count,
            node_map,
        })
    }

    /// The [`Flat`] arrays of the graph [`Layout::build`] would build; `None` when that
    /// graph would not pass [`check`] or its new names are not known to be new and
    /// distinct ([`Names`]; build it for the error, if any).
    fn flat(&self, graph: &Graph, prepared: &Prepared) -> Option<Flat> {
        if !self.plain {
            return None;
        }
        let base = prepared.flat();
        let n = graph.nodes().len();
        let base_values = graph.values().len();
        let inserted = self.inserts.len();
        let total = n + inserted;
        let (order, starts) = self.emission(n);
        let mut flat = Flat {
            engine: Vec::with_capacity(total),
            recompute: Vec::with_capacity(total),
            latency: Vec::with_capacity(total),
            input_start: Vec::with_capacity(total + 1),
            inputs: Vec::with_capacity(base.inputs.len() + 2 * inserted),
            ..Flat::default()
        };
        flat.input_start.push(0);
        let values = base_values + self.values.len();
        let mut producer: Vec<Option<NodeId>> = vec![None; values];
        let mut insert_ids = vec![NodeId(0); inserted];
        let mut node_map = Vec::with_capacity(n);
        let mut rerouted = vec![false; n];
        for &(reader, _) in self.reroute.keys() {
            rerouted[reader.index()] = true;
        }
        let mut emit = |flat: &mut Flat, producer: &mut Vec<Option<NodeId>>, slot: usize| {
            for &k in &order[starts[slot]..starts[slot + 1]] {
                let insert = &self.inserts[k];
                let id = NodeId(flat.engine.len() as u32);
                insert_ids[k] = id;
                producer[insert.output.index()] = Some(id);
                flat.push_node(
                    Engine::of(insert.role.op()),
                    insert.role == Role::Recompute,
                    Some(insert.ms),
                    insert.inputs(graph).iter().flatten().copied(),
                );
            }
        };
        emit(&mut flat, &mut producer, 0);
        for (i, &moved) in rerouted.iter().enumerate() {
            let id = NodeId(flat.engine.len() as u32);
            let inputs = &base.inputs[base.input_start[i]..base.input_start[i + 1]];
            if moved {
                let me = NodeId(i as u32);
                flat.push_node(
                    base.engine[i],
                    base.recompute[i],
                    base.latency[i],
                    inputs
                        .iter()
                        .map(|&v| self.reroute.get(&(me, v)).copied().unwrap_or(v)),
                );
            } else {
                flat.push_node(
                    base.engine[i],
                    base.recompute[i],
                    base.latency[i],
                    inputs.iter().copied(),
                );
            }
            node_map.push(id);
            emit(&mut flat, &mut producer, i + 1);
        }
        // Original values keep their producers, renumbered; new ones got theirs above.
        for (k, p) in base.producer.iter().enumerate() {
            producer[k] = p.map(|p| node_map[p.index()]);
        }
        flat.kind = base.kind.clone();
        flat.kind.extend(self.values.iter().map(|v| v.kind));
        flat.bytes = base.bytes.clone();
        flat.bytes.extend(self.values.iter().map(|v| v.bytes));
        flat.output = base.output.clone();
        flat.output.resize(values, false);
        flat.producer = producer;
        flat.control = Vec::with_capacity(base.control.len() + self.edges.len());
        for &(from, to) in &base.control {
            flat.control
                .push((node_map[from.index()], node_map[to.index()]));
        }
        let id = |at: At| match at {
            At::Node(u) => node_map[u.index()],
            At::Insert(k) => insert_ids[k],
        };
        for &(from, to) in &self.edges {
            flat.control.push((id(from), id(to)));
        }
        flat.passes_check().then_some(flat)
    }
}

/// Whether `value` can be deleted and recomputed ([`Reduction::RECOMPUTE`]): its producer
/// exists, computes (it is not a copy), has this one output and a latency. The error says
/// why not.
pub fn recomputable(graph: &Graph, value: ValueId) -> Result<(), &'static str> {
    let Some((p, _)) = graph.value(value).producer else {
        return Err("it has no producer to re-run");
    };
    let node = graph.node(p);
    if Engine::of(&node.op_type) != Engine::Compute {
        return Err("its producer is a copy, not a computation");
    }
    if node.outputs.len() != 1 {
        return Err(
            "its producer has several outputs (recomputation re-runs one-output producers only)",
        );
    }
    if node.latency_ms.is_none() {
        return Err("its producer has no latency");
    }
    Ok(())
}

/// True when `value` already feeds a reduction node ([`COMPRESS`] or [`SWAP_OUT`]).
pub fn is_reduced(graph: &Graph, value: ValueId) -> bool {
    graph
        .value(value)
        .consumers
        .iter()
        .any(|&(c, _)| reduces(graph.node(c)))
}

/// [`is_reduced`] of every value, in one pass over the nodes.
pub fn reduced_values(graph: &Graph) -> Vec<bool> {
    let mut out = vec![false; graph.values().len()];
    for node in graph.nodes().iter().filter(|node| reduces(node)) {
        for v in node.inputs.iter().flatten() {
            out[v.index()] = true;
        }
    }
    out
}

/// Whether `node` is a reduction ([`COMPRESS`] or [`SWAP_OUT`]).
fn reduces(node: &memplan_graph::Node) -> bool {
    matches!(node.op_type.as_str(), COMPRESS | SWAP_OUT)
}

/// Topological levels over data and control edges: sources are level 0, every other
/// node one more than its highest predecessor. The node order must be topological.
pub fn levels(graph: &Graph) -> Vec<usize> {
    let n = graph.nodes().len();
    let mut level = vec![0usize; n];
    let mut control: Vec<Vec<NodeId>> = vec![Vec::new(); n];
    for &(from, to) in graph.control_edges() {
        control[to.index()].push(from);
    }
    for (i, node) in graph.nodes().iter().enumerate() {
        let data = node
            .inputs
            .iter()
            .flatten()
            .filter_map(|v| graph.value(*v).producer.map(|(p, _)| p));
        level[i] = data
            .chain(control[i].iter().copied())
            .filter(|p| p.index() < i)
            .map(|p| level[p.index()] + 1)
            .max()
            .unwrap_or(0);
    }
    level
}

/// Checks that `graph` is a valid (rewritten) graph: every data and control
/// predecessor of a node comes before it in the node order (so the graph is acyclic and
/// every restore comes after its reduction, and a prefetch source is never downstream of
/// the reader it serves), host values ([`ValueKind::Host`]) are read only by [`SWAP_IN`]
/// nodes, and written by [`SWAP_OUT`] nodes, whose outputs are all host values.
pub fn check(graph: &Graph) -> Result<(), RewriteError> {
    for (i, node) in graph.nodes().iter().enumerate() {
        for &o in &node.outputs {
            if is_host(graph, o) != (node.op_type == SWAP_OUT) {
                return Err(RewriteError::HostWrite {
                    value: graph.value(o).name.clone(),
                    node: node.name.clone(),
                });
            }
        }
        for v in node.inputs.iter().flatten() {
            if let Some((p, _)) = graph.value(*v).producer {
                if p.index() >= i {
                    return Err(RewriteError::Order {
                        node: node.name.clone(),
                        before: graph.node(p).name.clone(),
                    });
                }
            }
            if is_host(graph, *v) && node.op_type != SWAP_IN {
                return Err(RewriteError::HostRead {
                    value: graph.value(*v).name.clone(),
                    node: node.name.clone(),
                });
            }
        }
    }
    for &(from, to) in graph.control_edges() {
        if from >= to {
            return Err(RewriteError::Order {
                node: graph.node(to).name.clone(),
                before: graph.node(from).name.clone(),
            });
        }
    }
    Ok(())
}

/// Re-places every copy back ([`SWAP_IN`]) of a rewritten graph as late as the simulated
/// schedule of the whole graph allows: one round of "simulate, then move each restore's
/// prefetch source to the latest node that still lets it arrive in time".
///
/// From `simulate(graph, machine)`: each copy back has a deadline (the earliest start of
/// its readers) and is ready when its copy out ends. Taken in order of their first
/// readers' positions, the host-to-device engine is scheduled backwards, as late as
/// possible: the last copy ends at its deadline, each earlier one by the next one's
/// latest start (or, when that one cannot start until its copy out ends, by that time).
/// Each copy back then gets one prefetch edge, from the latest compute node before its
/// reader that finishes by its latest start (none when no such node exists: it starts as
/// soon as its copy out ends), replacing its previous control edges (prefetch and
/// serialization of restores); the copies back are moved right after their source (and
/// after their copy out and the previous copy back, always before their first reader),
/// so the engine's FIFO order is that order. Other nodes and edges are unchanged. The compute stream's times
/// change when a restore arrives later or earlier than before, so callers repeat the
/// round and keep the best simulated result. The result passes [`check`].
pub fn retime_restores(graph: &Graph, machine: &Machine) -> Result<Graph, RewriteError> {
    let run = simulate(graph, machine)?;
    retime_restores_simulated(graph, &run)
}

/// [`retime_restores`] with `graph`'s simulation (`run`, what [`simulate`] returns for it
/// on the machine) already at hand; the same result.
pub fn retime_restores_simulated(
    graph: &Graph,
    run: &crate::simulate::Run,
) -> Result<Graph, RewriteError> {
    Retime::of(&Flat::of(graph), run).graph(graph)
}

/// One round of [`retime_restores`], decided on a graph's [`Flat`] arrays: the new node
/// order, which nodes (the copies back) were moved, and their prefetch sources, by
/// position in the input.
#[derive(Clone, Debug)]
struct Retime {
    order: Vec<usize>,
    moved: Vec<bool>,
    /// (copy back, source).
    sources: Vec<(usize, usize)>,
}

impl Retime {
    /// The round for the graph of `f`, simulated as `run`.
    fn of(f: &Flat, run: &crate::simulate::Run) -> Retime {
        let n = f.engine.len();
        let copy = |i: usize| f.engine[i] == Engine::HostToDevice;
        // Per copy back: its first reader and the earliest start of its readers.
        let mut first = vec![usize::MAX; n];
        let mut deadline = vec![f64::INFINITY; n];
        for j in 0..n {
            for v in f.node_inputs(j) {
                if let Some(p) = f.producer[v.index()]
                    .map(NodeId::index)
                    .filter(|&p| copy(p))
                {
                    first[p] = first[p].min(j);
                    deadline[p] = deadline[p].min(run.start[j]);
                }
            }
        }
        // (deadline, first reader position, ready, duration, copy back position, copy out position)
        let mut copies = Vec::new();
        for i in (0..n).filter(|&i| copy(i) && first[i] != usize::MAX) {
            let source = f.node_inputs(i).iter().find_map(|v| f.producer[v.index()]);
            let out_at = source.map_or(0, NodeId::index);
            let ready = source.map_or(0.0, |p| run.finish[p.index()]);
            let ms = run.finish[i] - run.start[i];
            copies.push((deadline[i], first[i], ready, ms, i, out_at));
        }
        // Queue order: by first reader (a compute reader's start follows its position; a
        // copy out reading a restored value must stay after its restore).
        copies.sort_by(|a, b| a.1.cmp(&b.1).then(a.4.cmp(&b.4)));
        // Latest starts, backwards.
        let mut latest = vec![0.0f64; copies.len()];
        let mut next = f64::INFINITY;
        for (k, &(deadline, _, ready, ms, _, _)) in copies.iter().enumerate().rev() {
            latest[k] = deadline.min(next) - ms;
            next = latest[k].max(ready);
        }
        // Sources and slots: a copy back goes right after original position `slot`.
        let mut after: Vec<Vec<usize>> = vec![Vec::new(); n];
        let mut sources: Vec<(usize, usize)> = Vec::new();
        let mut previous = 0usize;
        // The compute-stream positions: their finishes grow along the order (the stream is
        // in order), so the sources in time are a prefix of those before the reader, and
        // the latest is found by bisection, not by a scan back from the reader (quadratic
        // when many copies back wait long; issue #45).
        let compute_at: Vec<usize> = (0..n).filter(|&u| f.engine[u] == Engine::Compute).collect();
        for (k, &(_, reader, _, _, at, out_at)) in copies.iter().enumerate() {
            let before = &compute_at[..compute_at.partition_point(|&u| u < reader)];
            let fit = partition_point_from_end(before, |&u| run.finish[u] <= latest[k] + 1e-9);
            let source = fit.checked_sub(1).map(|j| before[j]);
            debug_assert_eq!(
                source,
                (0..reader)
                    .rev()
                    .find(|&u| f.engine[u] == Engine::Compute && run.finish[u] <= latest[k] + 1e-9)
            );
            if let Some(u) = source {
                sources.push((at, u));
            }
            let slot = source.unwrap_or(0).max(out_at).max(previous);
            previous = slot;
            after[slot].push(at);
        }
        let mut moved = vec![false; n];
        for c in &copies {
            moved[c.4] = true;
        }
        let mut order = Vec::with_capacity(n);
        for (i, placed) in after.iter().enumerate() {
            if !moved[i] {
                order.push(i);
            }
            order.extend(placed.iter().copied());
        }
        Retime {
            order,
            moved,
            sources,
        }
    }

    /// Per input position, the new node id.
    fn new_ids(&self) -> Vec<NodeId> {
        let mut new_id = vec![NodeId(0); self.order.len()];
        for (k, &i) in self.order.iter().enumerate() {
            new_id[i] = NodeId(k as u32);
        }
        new_id
    }

    /// The control edges of the result, given those of the input and the new ids: the
    /// input's edges except those into moved nodes, then one per prefetch source.
    fn control(&self, control: &[(NodeId, NodeId)], new_id: &[NodeId]) -> Vec<(NodeId, NodeId)> {
        let kept = control
            .iter()
            .filter(|(_, to)| !self.moved[to.index()])
            .map(|&(from, to)| (new_id[from.index()], new_id[to.index()]));
        let sources = self.sources.iter().map(|&(at, u)| (new_id[u], new_id[at]));
        kept.chain(sources).collect()
    }

    /// `graph` with the round applied; it passes [`check`].
    fn graph(&self, graph: &Graph) -> Result<Graph, RewriteError> {
        let control = self.control(graph.control_edges(), &self.new_ids());
        reordered(graph, &self.order, &control)
    }

    /// The [`Flat`] arrays of [`Retime::graph`] of the graph of `f`; `None` when that graph
    /// would not pass [`check`] (build it for the error).
    fn flat(&self, f: &Flat) -> Option<Flat> {
        let new_id = self.new_ids();
        let mut out = Flat {
            engine: Vec::with_capacity(self.order.len()),
            recompute: Vec::with_capacity(self.order.len()),
            latency: Vec::with_capacity(self.order.len()),
            input_start: Vec::with_capacity(self.order.len() + 1),
            inputs: Vec::with_capacity(f.inputs.len()),
            kind: f.kind.clone(),
            bytes: f.bytes.clone(),
            producer: f
                .producer
                .iter()
                .map(|p| p.map(|p| new_id[p.index()]))
                .collect(),
            output: f.output.clone(),
            control: self.control(&f.control, &new_id),
        };
        out.input_start.push(0);
        for &i in &self.order {
            out.push_node(
                f.engine[i],
                f.recompute[i],
                f.latency[i],
                f.node_inputs(i).iter().copied(),
            );
        }
        out.passes_check().then_some(out)
    }
}

/// `graph` with its nodes in `order` (by position in `graph`) and the control edges
/// `control` (by new position) instead of its own; values, inputs and outputs unchanged.
/// The result passes [`check`].
fn reordered(
    graph: &Graph,
    order: &[usize],
    control: &[(NodeId, NodeId)],
) -> Result<Graph, RewriteError> {
    let nodes = graph.nodes();
    let mut out = Graph::with_capacity(graph.name.clone(), nodes.len(), graph.values().len());
    for value in graph.values() {
        out.add_value(value.clone())?;
    }
    for &i in order {
        let node = &nodes[i];
        let id = out.add_node(
            node.name.clone(),
            node.op_type.clone(),
            node.inputs.clone(),
            node.outputs.clone(),
            node.attributes.clone(),
        )?;
        out.set_latency(id, node.latency_ms);
        out.set_domain(id, node.domain.clone());
    }
    out.set_inputs(graph.inputs().to_vec())?;
    out.set_outputs(graph.outputs().to_vec())?;
    for &(from, to) in control {
        out.add_control_edge(from, to)?;
    }
    check(&out)?;
    Ok(out)
}

/// Tests: the [`Flat`] arrays of [`retime_restores_simulated`] of `graph`, without
/// building it.
#[cfg(test)]
pub(crate) fn retime_flat_for_tests(graph: &Graph, run: &crate::simulate::Run) -> Option<Flat> {
    let flat = Flat::of(graph);
    Retime::of(&flat, run).flat(&flat)
}

/// Tests: the [`Flat`] arrays of a rewrite, without building it.
#[cfg(test)]
pub(crate) fn layout_for_tests(
    graph: &Graph,
    swaps: &[Swap],
    options: &Options,
    run: Option<&crate::simulate::Run>,
) -> Option<Flat> {
    let prepared = Prepared::new(graph, run);
    layout(graph, swaps, options, &prepared)
        .ok()?
        .flat(graph, &prepared)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::simulate::no_swap;

    fn value(g: &mut Graph, name: &str, bytes: u64, kind: ValueKind) -> ValueId {
        g.add_value(Value::with_bytes(name, DType::Float, bytes, kind))
            .unwrap()
    }

    fn node(g: &mut Graph, name: &str, ins: &[ValueId], out: ValueId) -> NodeId {
        let ins = ins.iter().map(|&v| Some(v)).collect();
        let id = g
            .add_node(name, "Op", ins, vec![out], BTreeMap::new())
            .unwrap();
        g.set_latency(id, Some(1.0));
        id
    }

    /// Copies of 1000 B take 1 ms, no fixed cost; codecs run at 1000 B/ms too.
    fn machine() -> Machine {
        Machine {
            copy_latency_ms: 0.0,
            codec_bytes_per_ms: 1000.0,
            ..Machine::link(1000.0)
        }
    }

    /// ```text
    ///  x ─> A ─a─> B ─b─> C1 ─c1─> C2 ─c2─> D ─d   (every node 1 ms)
    ///        └──────────────────────────────┘ a is read again by D (and E)
    /// ```
    /// Bytes: x 10, a 1000, b 800, c1 100, c2 100, d 10 (d, e graph outputs).
    fn chain(with_e: bool) -> Graph {
        let mut g = Graph::new("chain");
        let x = value(&mut g, "x", 10, ValueKind::Input);
        let a = value(&mut g, "a", 1000, ValueKind::Activation);
        let b = value(&mut g, "b", 800, ValueKind::Activation);
        let c1 = value(&mut g, "c1", 100, ValueKind::Activation);
        let c2 = value(&mut g, "c2", 100, ValueKind::Activation);
        let d = value(&mut g, "d", 10, ValueKind::Activation);
        node(&mut g, "A", &[x], a);
        node(&mut g, "B", &[a], b);
        node(&mut g, "C1", &[b], c1);
        node(&mut g, "C2", &[c1], c2);
        node(&mut g, "D", &[c2, a], d);
        let mut outputs = vec![d];
        if with_e {
            let e = value(&mut g, "e", 10, ValueKind::Activation);
            node(&mut g, "E", &[d, a], e);
            outputs.push(e);
        }
        g.set_inputs(vec![x]).unwrap();
        g.set_outputs(outputs).unwrap();
        g
    }

    fn names(g: &Graph) -> Vec<&str> {
        g.nodes().iter().map(|n| n.name.as_str()).collect()
    }

    /// Control edges by name, sorted.
    fn edges(g: &Graph) -> Vec<(&str, &str)> {
        let mut out: Vec<_> = g
            .control_edges()
            .iter()
            .map(|&(a, b)| (g.node(a).name.as_str(), g.node(b).name.as_str()))
            .collect();
        out.sort();
        out
    }

    fn swap_a(g: &Graph, readers: &[&str]) -> Swap {
        Swap {
            value: g.value_by_name("a").unwrap(),
            readers: readers.iter().map(|r| g.node_by_name(r).unwrap()).collect(),
        }
    }

    /// New names that may be taken or repeat ([`Names`]): the rewrite without building
    /// its graph gives what building it gives, errors included. `chain` with value `a`
    /// and node `D` renamed, plus an unread value and a node of no inputs.
    #[test]
    fn names_that_may_clash_give_the_built_results() {
        let named = |a: &str, d: &str, extra_value: &str, extra_node: &str| {
            let mut g = Graph::new("named");
            let x = value(&mut g, "x", 10, ValueKind::Input);
            let va = value(&mut g, a, 1000, ValueKind::Activation);
            let b = value(&mut g, "b", 800, ValueKind::Activation);
            let c = value(&mut g, "c", 100, ValueKind::Activation);
            let vd = value(&mut g, "d", 10, ValueKind::Activation);
            let extra = value(&mut g, extra_value, 10, ValueKind::Activation);
            node(&mut g, "A", &[x], va);
            node(&mut g, "B", &[va], b);
            node(&mut g, "C", &[b], c);
            node(&mut g, d, &[c, va], vd);
            node(&mut g, extra_node, &[], extra);
            g.set_inputs(vec![x]).unwrap();
            g.set_outputs(vec![vd, extra]).unwrap();
            (g, va, NodeId(3))
        };
        let cases = [
            // (a, D, extra value, extra node, clashes)
            ("a", "D", "e", "E", false),
            ("a", "D", "a@D", "E", true),
            ("a", "D", "a@fp16", "E", true),
            ("a", "host", "e", "E", true),
            ("a", "fp16", "e", "E", true),
            ("a", "D", "e", "swapout:a", true),
            ("a", "D", "e", "swapin:a@D", true),
            ("a", "D", "e", "recompute:a@D", true),
            ("a@D", "D", "e", "E", false),
            ("a", "x@D", "e", "E", false),
            ("a", "D", "e", "swapin:b@D", false),
        ];
        let reductions = [
            Reduction::SWAP,
            Reduction::compress(Codec::Fp16, true),
            Reduction::compress(Codec::Fp16, false),
            Reduction::RECOMPUTE,
        ];
        let mut clashed = 0;
        for (a, d, extra_value, extra_node, clashes) in cases {
            let (g, va, reader) = named(a, d, extra_value, extra_node);
            let swaps = [Swap {
                value: va,
                readers: vec![reader],
            }];
            let mut any = false;
            for reduction in reductions {
                let options = Options::method(reduction, machine());
                let built = rewrite(&g, &swaps, &options);
                let fast = rewrite_and_simulate(&g, &swaps, &options, None, &machine());
                match (built, fast) {
                    (Ok(built), Ok(fast)) => {
                        assert_eq!(fast.run, simulate(&built.graph, &machine()), "{a} {d}");
                        assert_eq!((fast.tensors, fast.bytes), (built.tensors, built.bytes));
                    }
                    (Err(built), Err(fast)) => {
                        assert_eq!(built, fast);
                        any = true;
                    }
                    (built, fast) => panic!(
                        "{a} {d} {extra_value} {extra_node}: {:?} vs {:?}",
                        built.err(),
                        fast.err()
                    ),
                }
            }
            assert_eq!(any, clashes, "{a} {d} {extra_value} {extra_node}");
            clashed += usize::from(any);
        }
        assert_eq!(clashed, 7);
    }

    /// Swapping a for D, the method as stated. Input times: A [0,1) B [1,2) C1 [2,3)
    /// C2 [3,4) D [4,5).
    /// - Serialization: to a consumer of a that keeps it: B, the only one (p, output b,
    ///   800 B).
    /// - Prefetch: the copy back takes 1 ms and D starts at 4: B (ends 2) and C1 (ends 3)
    ///   let it arrive in time. By the p/q rule as corrected, q's output must be smaller
    ///   than p's and q late enough: C1 (100 B), the latest in time. (The rule once read
    ///   as "the largest output" took B, whose copy back then ran beside C1 and gave the
    ///   no-swap peak, 1900 B: the prefetch did nothing.)
    ///
    /// Simulated: A [0,1), swapout [1,2), B waits for it: [2,3), C1 [3,4), swapin [4,5)
    /// beside C2 [4,5), D [5,6): step 6 ms (1 ms of stall). Device bytes: 1800 while B
    /// runs (a + b); then b + c1 = 900 at 3; c1 + a@D + c2 = 1200 at 4; c2 + a@D + d =
    /// 1110 at 5. Peak 1800 at 2, against 1900 without swap. Without the rule the
    /// prefetch source is the latest in time too, C1.
    #[test]
    fn swap_by_hand() {
        let g = chain(false);
        let out = rewrite(
            &g,
            &[swap_a(&g, &["D"])],
            &Options::method(Reduction::SWAP, machine()),
        )
        .unwrap();
        let r = &out.graph;
        assert_eq!(
            names(r),
            ["A", "swapout:a", "B", "C1", "swapin:a@D", "C2", "D"]
        );
        assert_eq!(edges(r), [("C1", "swapin:a@D"), ("swapout:a", "B")]);
        let run = simulate(r, &machine()).unwrap();
        assert_eq!(run.start, [0.0, 1.0, 2.0, 3.0, 4.0, 4.0, 5.0]);
        assert_eq!(
            (run.step_ms, run.peak_bytes, run.peak_at_ms),
            (6.0, 1800, 2.0)
        );

        // Without the p/q rule: prefetch from C1 (ends 3, the latest in time). Simulated:
        // A [0,1), swapout [1,2), B [2,3), C1 [3,4), swapin [4,5) beside C2 [4,5),
        // D [5,6). Device bytes: 1800 while B runs (a + b); then b + c1 = 900 at 3;
        // c1 + a@D + c2 = 1200 at 4; c2 + a@D + d = 1110 at 5. Peak 1800 at 2, against
        // 1900 without swap.
        let options = Options {
            largest_output: false,
            ..Options::method(Reduction::SWAP, machine())
        };
        let out = rewrite(&g, &[swap_a(&g, &["D"])], &options).unwrap();
        let r = &out.graph;
        assert_eq!(
            names(r),
            ["A", "swapout:a", "B", "C1", "swapin:a@D", "C2", "D"]
        );
        assert_eq!(edges(r), [("C1", "swapin:a@D"), ("swapout:a", "B")]);
        let d = r.node(r.node_by_name("D").unwrap());
        assert_eq!(r.value(d.inputs[1].unwrap()).name, "a@D");
        assert_eq!(r.value(r.value_by_name("a@D").unwrap()).bytes, 1000);
        assert!(is_host(r, r.value_by_name("a@host").unwrap()));
        assert_eq!((out.tensors, out.bytes, out.restores), (1, 1000, 1));
        let run = simulate(r, &machine()).unwrap();
        assert_eq!(run.start, [0.0, 1.0, 2.0, 3.0, 4.0, 4.0, 5.0]);
        assert_eq!(run.step_ms, 6.0);
        assert_eq!((run.peak_bytes, run.peak_at_ms), (1800, 2.0));
        assert_eq!(run.host_peak_bytes, 1000);
        let base = no_swap(&g).unwrap();
        assert_eq!((base.peak_bytes, base.step_ms), (1900, 5.0));
    }

    /// One reduction feeding two restores (D and E); the second restore is serialized
    /// after D, the reader of the first. Prefetch sources by the p/q rule: C1 for D and
    /// C2 for E (each the latest in time, with an output smaller than B's, p); the
    /// serialization places E's copy back after D.
    #[test]
    fn one_reduction_several_restores() {
        let g = chain(true);
        let out = rewrite(
            &g,
            &[swap_a(&g, &["D", "E"])],
            &Options::method(Reduction::SWAP, machine()),
        )
        .unwrap();
        let r = &out.graph;
        assert_eq!(
            names(r),
            [
                "A",
                "swapout:a",
                "B",
                "C1",
                "swapin:a@D",
                "C2",
                "D",
                "swapin:a@E",
                "E"
            ]
        );
        assert_eq!(
            edges(r),
            [
                ("C1", "swapin:a@D"),
                ("C2", "swapin:a@E"),
                ("D", "swapin:a@E"),
                ("swapout:a", "B"),
            ]
        );
        assert_eq!((out.tensors, out.restores), (1, 2));
        check(r).unwrap();
        crate::timing::analyse(r).unwrap();
    }

    /// Compression on the device: compress after A, decompress right before D; the
    /// compressed tensor is half of a. Both: compress, copy out, copy back, decompress.
    #[test]
    fn compression_and_both() {
        let g = chain(false);
        let fp16 = Reduction::compress(Codec::Fp16, false);
        let out = rewrite(&g, &[swap_a(&g, &["D"])], &Options::method(fp16, machine())).unwrap();
        let r = &out.graph;
        assert_eq!(
            names(r),
            ["A", "compress:a", "B", "C1", "C2", "decompress:a@D", "D"]
        );
        assert_eq!(r.value(r.value_by_name("a@fp16").unwrap()).bytes, 500);
        assert_eq!(
            r.node(r.node_by_name("compress:a").unwrap()).latency_ms,
            Some(1.0)
        );
        let both = Reduction::compress(Codec::Int8, true);
        let out = rewrite(&g, &[swap_a(&g, &["D"])], &Options::method(both, machine())).unwrap();
        let r = &out.graph;
        assert_eq!(
            names(r),
            [
                "A",
                "compress:a",
                "swapout:a",
                "B",
                "swapin:a@D",
                "C1",
                "C2",
                "decompress:a@D",
                "D"
            ]
        );
        // The restore takes 0.25 ms (copy) + 1 ms (decompress): C1 (ends 3) is too late
        // for D at 4, B (ends 2) is the prefetch source.
        assert!(edges(r).contains(&("B", "swapin:a@D")));
        assert_eq!(r.value(r.value_by_name("a@host").unwrap()).bytes, 250);
        // The copy of 250 B takes 0.25 ms.
        assert_eq!(
            r.node(r.node_by_name("swapout:a").unwrap()).latency_ms,
            Some(0.25)
        );
        simulate(r, &machine()).unwrap();
    }

    /// A simulation passed in gives the rewrite (and the late restores) of simulating
    /// the input again: the searches pass the runs they already have.
    #[test]
    fn rewrites_with_a_given_simulation_are_the_same() {
        let g = chain(true);
        let m = machine();
        let run = simulate(&g, &m).unwrap();
        let timed = Options {
            serialize_reductions: Serialize::AfterCopy,
            serialize_restores: false,
            prefetch: Prefetch::Queued,
            ..Options::method(Reduction::SWAP, m)
        };
        for options in [Options::method(Reduction::SWAP, m), timed] {
            let swaps = [swap_a(&g, &["D", "E"])];
            let plain = rewrite(&g, &swaps, &options).unwrap();
            let given = rewrite_simulated(&g, &swaps, &options, Some(&run)).unwrap();
            assert_eq!(plain, given);
            let r = &plain.graph;
            let r_run = simulate(r, &m).unwrap();
            assert_eq!(
                retime_restores(r, &m).unwrap(),
                retime_restores_simulated(r, &r_run).unwrap()
            );
        }
    }

    /// Copies of a take 2 ms (500 B/ms). Input times: A [0,1) B [1,2) C1 [2,3) C2 [3,4)
    /// D [4,5). The copy out of a ends at 1 + 2 = 3.
    /// - Timed serialization: the first compute node after B starting at 3 or later is
    ///   C2 (the method's edge goes to B, the consumer of a that keeps it).
    /// - Slack prefetch: B ends at 2, 2 + 2 <= 4, so B; but the copy back cannot start
    ///   before the copy out ends (3). Queued prefetch: ends would be B 5, C1 5, C2 6;
    ///   none is in time for D (4), so the latest with the earliest end: C1.
    #[test]
    fn timed_serialization_and_queued_prefetch() {
        let g = chain(false);
        let slow = Machine {
            copy_latency_ms: 0.0,
            ..Machine::link(500.0)
        };
        let options = Options {
            serialize_reductions: Serialize::AfterCopy,
            serialize_restores: false,
            prefetch: Prefetch::Queued,
            ..Options::method(Reduction::SWAP, slow)
        };
        let out = rewrite(&g, &[swap_a(&g, &["D"])], &options).unwrap();
        assert_eq!(
            edges(&out.graph),
            [("C1", "swapin:a@D"), ("swapout:a", "C2")]
        );
        let method = rewrite(
            &g,
            &[swap_a(&g, &["D"])],
            &Options::method(Reduction::SWAP, slow),
        )
        .unwrap();
        assert_eq!(
            edges(&method.graph),
            [("B", "swapin:a@D"), ("swapout:a", "B")]
        );
        // Simulated: swapout [1,3); C2 waits for it: C1 [2,3), C2 [3,4); swapin after C1
        // and the swapout: [3,5); D [5,6).
        let run = simulate(&out.graph, &slow).unwrap();
        assert_eq!(run.step_ms, 6.0);
    }

    /// a swapped for D and E with no prefetch edges: both copies back start as soon as
    /// the copy out ends (swapout [1,2), copies back [2,3) and [3,4)), long before D (4)
    /// and E (5). Re-placed as late as possible: E's copy ends at 5, so it starts at 4,
    /// after C2 (ends 4); D's must end by 4, so it starts at 3, after C1 (ends 3). The
    /// step stays 6 ms; the peak falls from 2200 B at t = 3 (b 800, a@D, a@E, c1 100,
    /// c2 100 starting) to 2110 B at t = 4 (c2, a@D, a@E, d 10).
    #[test]
    fn late_restores_by_hand() {
        let g = chain(true);
        let options = Options {
            serialize_reductions: Serialize::None,
            serialize_restores: false,
            prefetch: Prefetch::None,
            ..Options::method(Reduction::SWAP, machine())
        };
        let early = rewrite(&g, &[swap_a(&g, &["D", "E"])], &options)
            .unwrap()
            .graph;
        assert!(early.control_edges().is_empty());
        let run = simulate(&early, &machine()).unwrap();
        assert_eq!(
            (run.peak_bytes, run.peak_at_ms, run.step_ms),
            (2200, 3.0, 6.0)
        );
        let late = retime_restores(&early, &machine()).unwrap();
        assert_eq!(
            names(&late),
            [
                "A",
                "swapout:a",
                "B",
                "C1",
                "swapin:a@D",
                "C2",
                "swapin:a@E",
                "D",
                "E"
            ]
        );
        assert_eq!(edges(&late), [("C1", "swapin:a@D"), ("C2", "swapin:a@E")]);
        let run = simulate(&late, &machine()).unwrap();
        let at = |name: &str| late.node_by_name(name).unwrap().index();
        assert_eq!(run.start[at("swapin:a@D")], 3.0);
        assert_eq!(run.start[at("swapin:a@E")], 4.0);
        assert_eq!(
            (run.peak_bytes, run.peak_at_ms, run.step_ms),
            (2110, 4.0, 6.0)
        );
        // Already as late as possible: a second round changes nothing.
        assert_eq!(retime_restores(&late, &machine()).unwrap(), late);
    }

    /// A link too slow for the restores to arrive in time: the deadlines are the readers'
    /// simulated starts (they already wait), so the copies back keep their times.
    /// Copies take 4 ms: swapout [1,5), copies back [5,9) and [9,13), D [9,10), E [13,14).
    /// Latest starts: E 13 - 4 = 9, D 9 - 4 = 5; the latest compute node ending by 5 is
    /// C2 (ends 4), and by 9 before E still C2 (D ends 10).
    #[test]
    fn late_restores_keep_waiting_readers() {
        let g = chain(true);
        let slow = Machine {
            copy_latency_ms: 0.0,
            ..Machine::link(250.0)
        };
        let options = Options {
            serialize_reductions: Serialize::None,
            serialize_restores: false,
            prefetch: Prefetch::None,
            ..Options::method(Reduction::SWAP, slow)
        };
        let early = rewrite(&g, &[swap_a(&g, &["D", "E"])], &options)
            .unwrap()
            .graph;
        let late = retime_restores(&early, &slow).unwrap();
        assert_eq!(edges(&late), [("C2", "swapin:a@D"), ("C2", "swapin:a@E")]);
        let (a, b) = (
            simulate(&early, &slow).unwrap(),
            simulate(&late, &slow).unwrap(),
        );
        assert_eq!((a.step_ms, b.step_ms), (14.0, 14.0));
        let at = |name: &str| late.node_by_name(name).unwrap().index();
        assert_eq!(b.start[at("swapin:a@D")], 5.0);
        assert_eq!(b.start[at("swapin:a@E")], 9.0);
    }

    /// A restored value reduced again (repeated application): its copy out reads the
    /// copy back, which therefore must stay before it when the copies back move.
    #[test]
    fn late_restores_of_a_restored_value() {
        let g = chain(true);
        let options = Options {
            serialize_reductions: Serialize::None,
            serialize_restores: false,
            prefetch: Prefetch::None,
            ..Options::method(Reduction::SWAP, machine())
        };
        let once = rewrite(&g, &[swap_a(&g, &["D", "E"])], &options)
            .unwrap()
            .graph;
        let restored = Swap {
            value: once.value_by_name("a@E").unwrap(),
            readers: vec![once.node_by_name("E").unwrap()],
        };
        let twice = rewrite(&once, &[restored], &options).unwrap().graph;
        let late = retime_restores(&twice, &machine()).unwrap();
        check(&late).unwrap();
        let at = |name: &str| late.node_by_name(name).unwrap();
        assert!(at("swapin:a@E") < at("swapout:a@E"));
        assert!(at("swapout:a@E") < at("swapin:a@E@E"));
        assert!(at("swapin:a@E@E") < at("E"));
        assert_eq!(late.nodes().len(), twice.nodes().len());
    }

    #[test]
    fn levels_prefetch_and_repeated_application() {
        let g = chain(false);
        assert_eq!(levels(&g), [0, 1, 2, 3, 4]);
        let options = Options {
            serialize_reductions: Serialize::None,
            serialize_restores: false,
            prefetch: Prefetch::Levels(2),
            ..Options::method(Reduction::SWAP, machine())
        };
        let out = rewrite(&g, &[swap_a(&g, &["D"])], &options).unwrap();
        // D is at level 4: the latest node at level <= 2 is C1.
        assert_eq!(edges(&out.graph), [("C1", "swapin:a@D")]);
        // Again on the result: c1, read by C2 only, for nothing; then b for C1.
        let r = &out.graph;
        let again = Swap {
            value: r.value_by_name("b").unwrap(),
            readers: vec![r.node_by_name("C1").unwrap()],
        };
        let twice = rewrite(r, &[again], &options).unwrap();
        check(&twice.graph).unwrap();
        assert!(twice.graph.node_by_name("swapin:b@C1").is_some());
        // a is reduced already.
        assert!(matches!(
            rewrite(r, &[swap_a(r, &["B"])], &options),
            Err(RewriteError::BadValue { .. })
        ));
    }

    #[test]
    fn partition_points_from_either_end_are_the_bisection() {
        for len in 0..40usize {
            let items: Vec<usize> = (0..len).collect();
            for cut in 0..=len {
                let pred = |&x: &usize| x < cut;
                assert_eq!(partition_point_from_start(&items, pred), cut);
                assert_eq!(partition_point_from_end(&items, pred), cut);
            }
        }
    }

    #[test]
    fn codec_sizes() {
        assert_eq!(Codec::Fp16.compressed_bytes(1001), 501);
        assert_eq!(Codec::Fp24.compressed_bytes(1000), 750);
        assert_eq!(Codec::Fp24.compressed_bytes(1001), 751);
        assert_eq!(Codec::Fp24.compressed_bytes(2), 2);
        assert_eq!(Codec::Int8.compressed_bytes(1001), 251);
        // No overflow at the top: ceil((2^64 - 1) * 3 / 4) = 3 * 2^62 - 1 + 1.
        assert_eq!(Codec::Fp24.compressed_bytes(u64::MAX), 3 << 62);
        // 24-bit on the device: a@fp24 holds 750 B; both: 750 B cross the link.
        let g = chain(false);
        let out = rewrite(
            &g,
            &[swap_a(&g, &["D"])],
            &Options::method(Reduction::compress(Codec::Fp24, true), machine()),
        )
        .unwrap();
        let r = &out.graph;
        assert_eq!(r.value(r.value_by_name("a@fp24").unwrap()).bytes, 750);
        assert_eq!(r.value(r.value_by_name("a@host").unwrap()).bytes, 750);
        assert_eq!(r.value(r.value_by_name("a@D").unwrap()).bytes, 1000);
        assert_eq!(
            r.node(r.node_by_name("swapout:a").unwrap()).latency_ms,
            Some(0.75)
        );
        simulate(r, &machine()).unwrap();
    }

    /// Delete and recompute a for D: A runs again (reading x) right before D.
    /// Simulated: A [0,1) B [1,2) C1 [2,3) C2 [3,4) recompute [4,5) D [5,6): 6 ms.
    /// Device bytes: x (10 B) now lives until the recomputation ends (5); a is freed when
    /// B ends (2). At B: x + a + b = 1810 (the peak, at 1); at C1: x + b + c1 = 910; at
    /// the recomputation: x + c2 + a@D = 1110; at D: c2 + a@D + d = 1110. Without it:
    /// 1900 (a + b + c1 at C1).
    #[test]
    fn recompute_by_hand() {
        let g = chain(false);
        let out = rewrite(
            &g,
            &[swap_a(&g, &["D"])],
            &Options::method(Reduction::RECOMPUTE, machine()),
        )
        .unwrap();
        let r = &out.graph;
        assert_eq!(names(r), ["A", "B", "C1", "C2", "recompute:a@D", "D"]);
        assert!(edges(r).is_empty());
        let node = r.node(r.node_by_name("recompute:a@D").unwrap());
        assert_eq!(node.op_type, RECOMPUTE);
        assert_eq!(node.inputs, [r.value_by_name("x")]);
        assert_eq!(node.latency_ms, Some(1.0));
        assert_eq!(
            node.attributes.get(RECOMPUTES),
            Some(&memplan_graph::Attribute::String("A".into()))
        );
        assert_eq!((out.tensors, out.bytes, out.restores), (1, 1000, 1));
        let run = simulate(r, &machine()).unwrap();
        assert_eq!(run.start, [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
        assert_eq!(
            (
                run.step_ms,
                run.peak_bytes,
                run.peak_at_ms,
                run.host_peak_bytes
            ),
            (6.0, 1810, 1.0, 0)
        );
        // A graph input has no producer to re-run; a reduction is one kind or the other.
        let x = g.value_by_name("x").unwrap();
        let a_node = g.node_by_name("A").unwrap();
        let recompute = Options::method(Reduction::RECOMPUTE, machine());
        assert!(matches!(
            rewrite(
                &g,
                &[Swap {
                    value: x,
                    readers: vec![a_node]
                }],
                &recompute
            ),
            Err(RewriteError::BadValue { .. })
        ));
        let mixed = Options {
            reduction: Reduction {
                recompute: true,
                ..Reduction::SWAP
            },
            ..recompute
        };
        assert_eq!(
            rewrite(&g, &[swap_a(&g, &["D"])], &mixed),
            Err(RewriteError::EmptyReduction)
        );
    }

    /// The rewritten graph written as graph JSON and read back: its host value is a
    /// `host` value, off the device for the max-live analysis of `memplan plan` and
    /// `bound`. The graph of `swap_by_hand` without the p/q rule, one node per step (A,
    /// swapout, B, C1, swapin, C2, D): a + b = 1800 at B, c1 + a@D + c2 = 1200 at C2,
    /// a@D + c2 + d = 1110 at D. Max-live 1800, the simulator's peak (1800, while B
    /// runs); counting a@host (1000 B from the swapout to the swapin) would give 2800.
    #[test]
    fn host_values_stay_off_the_device_when_read_back() {
        let g = chain(false);
        let options = Options {
            largest_output: false,
            ..Options::method(Reduction::SWAP, machine())
        };
        let r = rewrite(&g, &[swap_a(&g, &["D"])], &options).unwrap().graph;
        let back =
            memplan_graph::read_graph_json(&memplan_graph::write_graph_json(&r), "back").unwrap();
        let host = back.value_by_name("a@host").unwrap();
        assert_eq!(back.value(host).kind, ValueKind::Host);
        check(&back).unwrap();
        let memory = memplan_graph::analyse(
            &back,
            memplan_graph::Order::File,
            memplan_graph::Options::NONE,
        )
        .unwrap();
        assert_eq!(memory.values[host.index()].role, memplan_graph::Role::Host);
        assert_eq!(memory.stats.max_live_bytes, 1800);
        let run = simulate(&back, &machine()).unwrap();
        assert_eq!((run.peak_bytes, run.host_peak_bytes), (1800, 1000));
        assert_eq!(run, simulate(&r, &machine()).unwrap());
        // A copy to the host whose output is a device value is refused.
        let mut bad = Graph::new("bad");
        let a = value(&mut bad, "a", 10, ValueKind::Input);
        let h = value(&mut bad, "h", 10, ValueKind::Activation);
        bad.add_node("S", SWAP_OUT, vec![Some(a)], vec![h], BTreeMap::new())
            .unwrap();
        assert!(matches!(check(&bad), Err(RewriteError::HostWrite { .. })));
    }

    #[test]
    fn bad_requests_are_errors() {
        let g = chain(false);
        let options = Options::method(Reduction::SWAP, machine());
        // C1 does not read a.
        assert!(matches!(
            rewrite(&g, &[swap_a(&g, &["C1"])], &options),
            Err(RewriteError::BadReader { .. })
        ));
        let twice = [swap_a(&g, &["D"]), swap_a(&g, &["D"])];
        assert!(matches!(
            rewrite(&g, &twice, &options),
            Err(RewriteError::BadValue { .. })
        ));
        let none = Options {
            reduction: Reduction {
                to_host: false,
                codec: None,
                recompute: false,
            },
            ..options
        };
        assert_eq!(
            rewrite(&g, &[swap_a(&g, &["D"])], &none),
            Err(RewriteError::EmptyReduction)
        );
    }

    #[test]
    fn check_finds_order_and_host_errors() {
        let mut g = chain(false);
        let (d, a) = (g.node_by_name("D").unwrap(), g.node_by_name("A").unwrap());
        g.add_control_edge(d, a).unwrap();
        assert!(matches!(check(&g), Err(RewriteError::Order { .. })));
        let r = rewrite(
            &chain(false),
            &[swap_a(&chain(false), &["D"])],
            &Options::method(Reduction::SWAP, machine()),
        )
        .unwrap()
        .graph;
        let mut bad = r.clone();
        let host = bad.value_by_name("a@host").unwrap();
        let out = bad
            .add_value(Value::with_bytes(
                "z",
                DType::Float,
                1,
                ValueKind::Activation,
            ))
            .unwrap();
        bad.add_node("Z", "Op", vec![Some(host)], vec![out], BTreeMap::new())
            .unwrap();
        assert!(matches!(check(&bad), Err(RewriteError::HostRead { .. })));
    }
}
