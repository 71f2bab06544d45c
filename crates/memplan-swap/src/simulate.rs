//! The simulator: one compute stream and two copy engines, with device memory timed by
//! the copies. [`no_swap`] is the baseline of a graph without copies.
//!
//! # Machine model ([`Machine`])
//!
//! - Three in-order queues: the **compute** stream runs every node that is not a copy
//!   (operators and the codec nodes [`crate::rewrite::COMPRESS`] and
//!   [`crate::rewrite::DECOMPRESS`]); the **device-to-host** engine runs
//!   [`crate::rewrite::SWAP_OUT`] nodes and the **host-to-device** engine runs
//!   [`crate::rewrite::SWAP_IN`] nodes. Each queue takes its nodes in graph order (FIFO,
//!   as a runtime enqueues them), so the graph order must be topological.
//! - A node starts when its queue is free and every data input and every control edge
//!   into it ("runs after", a wait) has finished: `start = max(queue free, finish of
//!   every predecessor)`. It runs for its `latency_ms`. The step time is the last finish.
//! - Copy and codec latencies are set by the rewriting from the same [`Machine`]:
//!   a copy of `b` bytes takes `copy_latency_ms + b / bandwidth` of its direction, a codec
//!   node `b / codec_bytes_per_ms` where `b` is the *uncompressed* size (a codec reads or
//!   writes the full tensor; it runs on the compute stream, which is what a kernel does).
//!
//! # Memory model
//!
//! - Device values are the arena values ([`memplan_graph::Value::is_activation`]); host
//!   values ([`memplan_graph::ValueKind::Host`], the outputs of
//!   [`crate::rewrite::SWAP_OUT`] nodes) live in the pinned host pool. Weights and
//!   constants are not counted.
//! - A **recomputation** ([`crate::rewrite::RECOMPUTE`], on the compute stream) reads
//!   its producer's inputs. Each must be *available* at its start: produced earlier
//!   (every node's inputs are) and still allocated on the device. A device value is
//!   freed only after its last reader finishes, and the recomputation is one of its
//!   readers, so it is kept live up to it (the memory this costs is counted), or it is
//!   a value restored for the recomputation (a later rewrite of the rewritten graph);
//!   a host value is not available: [`SimulateError::RecomputeInputNotOnDevice`].
//! - A value is allocated when its producer **starts** (a restore allocates when its copy
//!   starts; a codec node holds its source and its result at once) and freed when its
//!   last reader **finishes** (a reduction frees the device copy when the copy ends, if
//!   nothing else reads it later). A value without a producer is allocated at time 0; one
//!   without readers is freed when its producer finishes; a graph output is never freed.
//! - Events at the same instant are ordered: allocations at time 0, then the ends of
//!   nodes that took time, then starts and ends of nodes in graph order (a 0 ms node
//!   holds its inputs and outputs together). With one queue this is exactly the max-live
//!   model of [`memplan_graph::analyse`] (tested: a graph without copies simulates to the
//!   [`no_swap`] baseline).
//! - **Pinned host pool**: with [`Machine::pinned_bytes`] set, a host allocation that
//!   would exceed it is an error naming the copy ([`SimulateError::PinnedPoolExceeded`]);
//!   planners treat such a graph as infeasible (a copy to pageable memory is not
//!   modelled).

use std::fmt::Write;

use memplan::render::{short_bytes, svg::escape, ticks};
use memplan_graph::{analyse, AnalysisError, Graph, NodeId, Options, Order, ValueId, ValueKind};

use crate::rewrite::{RECOMPUTE, SWAP_IN, SWAP_OUT};
use crate::training::MAX_STEP_MS;

/// What a run measured.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Report {
    /// Step time in milliseconds.
    pub step_ms: f64,
    /// Peak device memory of the activation arena, in bytes.
    pub peak_bytes: u64,
    /// Number of nodes run.
    pub nodes: usize,
}

/// Why a graph cannot be simulated.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum SimulateError {
    #[error("node '{node}' has no latency; the simulator needs every node's latency")]
    NoLatency { node: String },
    #[error("node '{node}': latency {ms} ms is not a finite number >= 0")]
    BadLatency { node: String, ms: f64 },
    #[error("node '{node}' reads '{value}', which node '{producer}' later in the graph order produces; the order must be topological")]
    NotTopological {
        node: String,
        value: String,
        producer: String,
    },
    #[error("node '{node}' runs after node '{from}' (control edge), which comes later in the graph order; the order must be topological")]
    ControlNotTopological { node: String, from: String },
    #[error("copy '{node}' needs {needed} B of pinned host memory but the pool holds {limit} B")]
    PinnedPoolExceeded {
        node: String,
        needed: u64,
        limit: u64,
    },
    #[error("recomputation '{node}' reads '{value}', which is not on the device (a host value); a recomputation reads its producer's inputs on the device")]
    RecomputeInputNotOnDevice { node: String, value: String },
    #[error("memory in use leaves the range 0 ..= 2^64 - 1 bytes")]
    Overflow,
    #[error("{message}")]
    BadMachine { message: String },
    #[error(transparent)]
    Analysis(#[from] AnalysisError),
}

/// The no-swap baseline: serial step time and max-live peak from
/// [`memplan_graph::analyse`] (the [`simulate`] of a graph without copies gives the same).
pub fn no_swap(graph: &Graph) -> Result<Report, SimulateError> {
    let mut step_ms = 0.0;
    for node in graph.nodes() {
        step_ms += latency(node)?;
    }
    let analysis = analyse(graph, Order::File, Options::NONE)?;
    Ok(Report {
        step_ms,
        peak_bytes: analysis.stats.max_live_bytes,
        nodes: graph.nodes().len(),
    })
}

fn latency(node: &memplan_graph::Node) -> Result<f64, SimulateError> {
    let ms = node.latency_ms.ok_or_else(|| SimulateError::NoLatency {
        node: node.name.clone(),
    })?;
    if !ms.is_finite() || ms < 0.0 {
        return Err(SimulateError::BadLatency {
            node: node.name.clone(),
            ms,
        });
    }
    Ok(ms)
}

/// Copy engines, link and codec speeds, pinned pool. Speeds are bytes per millisecond
/// (1 GB/s = 1e6 B/ms).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Machine {
    /// Device-to-host bandwidth.
    pub d2h_bytes_per_ms: f64,
    /// Host-to-device bandwidth.
    pub h2d_bytes_per_ms: f64,
    /// Fixed cost of every copy (launch and DMA set-up), in ms.
    pub copy_latency_ms: f64,
    /// Codec throughput on the compute stream, over the uncompressed bytes.
    pub codec_bytes_per_ms: f64,
    /// The pinned host pool, if limited.
    pub pinned_bytes: Option<u64>,
}

impl Machine {
    /// The default per-copy latency: 10 µs.
    pub const COPY_LATENCY_MS: f64 = 0.01;
    /// The default codec throughput: 200 GB/s (an elementwise cast kernel on a
    /// V100-class GPU, the profiles' era, reads 4 and writes 2 bytes per element at a
    /// fraction of its ~900 GB/s memory bandwidth).
    pub const CODEC_BYTES_PER_MS: f64 = 2e8;

    /// The same bandwidth both ways, default latency and codec, no pinned limit.
    pub fn link(bytes_per_ms: f64) -> Machine {
        Machine {
            d2h_bytes_per_ms: bytes_per_ms,
            h2d_bytes_per_ms: bytes_per_ms,
            copy_latency_ms: Machine::COPY_LATENCY_MS,
            codec_bytes_per_ms: Machine::CODEC_BYTES_PER_MS,
            pinned_bytes: None,
        }
    }

    /// The time of a copy of `bytes` on `engine` (0 for the compute stream).
    pub fn copy_ms(&self, engine: Engine, bytes: u64) -> f64 {
        let bw = match engine {
            Engine::Compute => return 0.0,
            Engine::DeviceToHost => self.d2h_bytes_per_ms,
            Engine::HostToDevice => self.h2d_bytes_per_ms,
        };
        self.copy_latency_ms + bytes as f64 / bw
    }

    /// The time of a codec node over a tensor of `bytes` (uncompressed).
    pub fn codec_ms(&self, bytes: u64) -> f64 {
        bytes as f64 / self.codec_bytes_per_ms
    }

    /// Checks that a copy or codec node over `largest` bytes (the largest tensor a rewrite
    /// may move) takes a finite time of at most [`MAX_STEP_MS`] (a year), so that every
    /// simulated step time stays finite: each setting out of range is an error naming its
    /// command-line flag. Speeds must be > 0 and the latency ≥ 0.
    pub fn validate(&self, largest: u64) -> Result<(), SimulateError> {
        let too_long = |flag: &str, value: String, ms: f64, fix: &str| {
            Err(SimulateError::BadMachine {
                message: format!(
                    "{flag} {value} makes a copy or codec node of {largest} B take {ms:e} ms, longer than {MAX_STEP_MS:e} ms (about a year), so step times are not finite numbers; use a {fix} value"
                ),
            })
        };
        let ok = |ms: f64| ms.is_finite() && (0.0..=MAX_STEP_MS).contains(&ms);
        if !ok(self.copy_latency_ms) {
            let ms = self.copy_latency_ms;
            return too_long("--copy-latency", format!("{ms:e}"), ms, "smaller");
        }
        // In bytes per second as given, to 6 significant digits (1e-300B/s, not
        // 9.999999999999999e-301B/s).
        let rate = |bytes_per_ms: f64| {
            let per_s: f64 = format!("{:.5e}", bytes_per_ms * 1e3)
                .parse()
                .unwrap_or(bytes_per_ms * 1e3);
            format!("{per_s:e}B/s")
        };
        for (flag, bw, engine) in [
            (
                "--link-d2h (or --link)",
                self.d2h_bytes_per_ms,
                Engine::DeviceToHost,
            ),
            (
                "--link-h2d (or --link)",
                self.h2d_bytes_per_ms,
                Engine::HostToDevice,
            ),
        ] {
            let ms = self.copy_ms(engine, largest);
            let positive = bw > 0.0;
            if !positive || !ok(ms) {
                return too_long(flag, rate(bw), ms, "larger");
            }
        }
        let ms = self.codec_ms(largest);
        let positive = self.codec_bytes_per_ms > 0.0;
        if !positive || !ok(ms) {
            return too_long("--codec-speed", rate(self.codec_bytes_per_ms), ms, "larger");
        }
        Ok(())
    }
}

/// The queue a node runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    Compute,
    DeviceToHost,
    HostToDevice,
}

impl Engine {
    /// By operator type: [`SWAP_OUT`] and [`SWAP_IN`] are copies, everything else
    /// (including [`crate::rewrite::COMPRESS`] and [`crate::rewrite::DECOMPRESS`]) computes.
    pub fn of(op_type: &str) -> Engine {
        match op_type {
            SWAP_OUT => Engine::DeviceToHost,
            SWAP_IN => Engine::HostToDevice,
            _ => Engine::Compute,
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// True when `value` lives in host memory: a [`ValueKind::Host`] value (the rewriting
/// gives that kind to the outputs of its [`SWAP_OUT`] nodes, and [`crate::rewrite::check`]
/// requires it), so that a rewritten graph written out and read back keeps its host
/// values off the device, also for `memplan plan` and `bound`.
pub fn is_host(graph: &Graph, value: ValueId) -> bool {
    graph.value(value).kind == ValueKind::Host
}

/// Memory in use after one event.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sample {
    pub time_ms: f64,
    pub device_bytes: u64,
    pub host_bytes: u64,
}

/// The result of [`simulate`].
#[derive(Clone, Debug, PartialEq)]
pub struct Run {
    /// The last finish (ms).
    pub step_ms: f64,
    /// Peak device memory (bytes) and the first time it is reached.
    pub peak_bytes: u64,
    pub peak_at_ms: f64,
    /// Peak pinned host memory (bytes).
    pub host_peak_bytes: u64,
    /// Per node: start and finish (ms).
    pub start: Vec<f64>,
    pub finish: Vec<f64>,
    /// Device and host memory after every event, in event order.
    pub profile: Vec<Sample>,
}

/// One memory change.
#[derive(Clone, Copy)]
struct Event {
    time: f64,
    /// 0: time-0 allocations; 1: ends of nodes that took time; 2: node order.
    rank: u8,
    pos: usize,
    /// 0: allocation, 1: release.
    sub: u8,
    value: ValueId,
}

/// What [`simulate`] reads of a graph, in flat arrays: per node its queue, whether it is
/// a [`RECOMPUTE`], its latency and its data inputs (in slot order); per value its kind,
/// bytes, producer and whether it is a graph output; the control edges. The rewriting
/// builds one for a candidate rewrite without building the rewritten [`Graph`]
/// ([`crate::rewrite`]), so a search simulates candidates at the cost of flat arrays; it
/// equals [`Flat::of`] the rewritten graph (tested).
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Flat {
    pub engine: Vec<Engine>,
    pub recompute: Vec<bool>,
    pub latency: Vec<Option<f64>>,
    /// Node `i`'s inputs are `inputs[input_start[i]..input_start[i + 1]]`.
    pub input_start: Vec<usize>,
    pub inputs: Vec<ValueId>,
    pub kind: Vec<ValueKind>,
    pub bytes: Vec<u64>,
    pub producer: Vec<Option<NodeId>>,
    pub output: Vec<bool>,
    pub control: Vec<(NodeId, NodeId)>,
}

impl Flat {
    /// The arrays of `graph`.
    pub fn of(graph: &Graph) -> Flat {
        let nodes = graph.nodes();
        let mut flat = Flat {
            engine: Vec::with_capacity(nodes.len()),
            recompute: Vec::with_capacity(nodes.len()),
            latency: Vec::with_capacity(nodes.len()),
            input_start: Vec::with_capacity(nodes.len() + 1),
            ..Flat::default()
        };
        flat.input_start.push(0);
        for node in nodes {
            flat.push_node(
                Engine::of(&node.op_type),
                node.op_type == RECOMPUTE,
                node.latency_ms,
                node.inputs.iter().flatten().copied(),
            );
        }
        let values = graph.values();
        flat.kind = values.iter().map(|v| v.kind).collect();
        flat.bytes = values.iter().map(|v| v.bytes).collect();
        flat.producer = values.iter().map(|v| v.producer.map(|(p, _)| p)).collect();
        flat.output = vec![false; values.len()];
        for &o in graph.outputs() {
            flat.output[o.index()] = true;
        }
        flat.control = graph.control_edges().to_vec();
        flat
    }

    /// Appends a node (`input_start` must hold its first entry, 0).
    pub fn push_node(
        &mut self,
        engine: Engine,
        recompute: bool,
        latency: Option<f64>,
        inputs: impl Iterator<Item = ValueId>,
    ) {
        self.engine.push(engine);
        self.recompute.push(recompute);
        self.latency.push(latency);
        self.inputs.extend(inputs);
        self.input_start.push(self.inputs.len());
    }

    /// Node `i`'s data inputs.
    pub fn node_inputs(&self, i: usize) -> &[ValueId] {
        &self.inputs[self.input_start[i]..self.input_start[i + 1]]
    }

    /// Whether the graph of these arrays passes [`crate::rewrite::check`]: every data and
    /// control predecessor of a node comes before it, host values are read by copies back
    /// only, and written by copies out, whose outputs are all host values.
    pub fn passes_check(&self) -> bool {
        let writes = self.producer.iter().zip(&self.kind).all(|(p, &kind)| {
            p.is_none_or(|p| {
                (kind == ValueKind::Host) == (self.engine[p.index()] == Engine::DeviceToHost)
            })
        });
        let reads = (0..self.engine.len()).all(|j| {
            self.node_inputs(j).iter().all(|v| {
                self.producer[v.index()].is_none_or(|p| p.index() < j)
                    && (self.kind[v.index()] != ValueKind::Host
                        || self.engine[j] == Engine::HostToDevice)
            })
        });
        writes && reads && self.control.iter().all(|&(from, to)| from < to)
    }
}

/// A [`SimulateError`] by node and value ids ([`simulate`] names them).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum FlatError {
    ControlNotTopological {
        node: NodeId,
        from: NodeId,
    },
    NoLatency {
        node: NodeId,
    },
    BadLatency {
        node: NodeId,
        ms: f64,
    },
    RecomputeInputNotOnDevice {
        node: NodeId,
        value: ValueId,
    },
    NotTopological {
        node: NodeId,
        value: ValueId,
        producer: NodeId,
    },
    PinnedPoolExceeded {
        value: ValueId,
        needed: u64,
        limit: u64,
    },
    Overflow,
}

impl FlatError {
    /// The error, naming `graph`'s nodes and values.
    fn named(self, graph: &Graph) -> SimulateError {
        let node = |id: NodeId| graph.node(id).name.clone();
        let value = |id: ValueId| graph.value(id).name.clone();
        match self {
            FlatError::ControlNotTopological { node: to, from } => {
                SimulateError::ControlNotTopological {
                    node: node(to),
                    from: node(from),
                }
            }
            FlatError::NoLatency { node: n } => SimulateError::NoLatency { node: node(n) },
            FlatError::BadLatency { node: n, ms } => {
                SimulateError::BadLatency { node: node(n), ms }
            }
            FlatError::RecomputeInputNotOnDevice { node: n, value: v } => {
                SimulateError::RecomputeInputNotOnDevice {
                    node: node(n),
                    value: value(v),
                }
            }
            FlatError::NotTopological {
                node: n,
                value: v,
                producer,
            } => SimulateError::NotTopological {
                node: node(n),
                value: value(v),
                producer: node(producer),
            },
            FlatError::PinnedPoolExceeded {
                value: v,
                needed,
                limit,
            } => SimulateError::PinnedPoolExceeded {
                node: graph
                    .value(v)
                    .producer
                    .map_or(String::new(), |(p, _)| node(p)),
                needed,
                limit,
            },
            FlatError::Overflow => SimulateError::Overflow,
        }
    }
}

/// Simulates `graph` on `machine` (see the module documentation).
pub fn simulate(graph: &Graph, machine: &Machine) -> Result<Run, SimulateError> {
    simulate_flat(&Flat::of(graph), machine).map_err(|e| e.named(graph))
}

/// [`simulate`] on a graph's [`Flat`] arrays; errors by id.
pub(crate) fn simulate_flat(f: &Flat, machine: &Machine) -> Result<Run, FlatError> {
    let n = f.engine.len();
    // Control predecessors, grouped by target.
    let mut pred_start = vec![0usize; n + 1];
    for &(from, to) in &f.control {
        if from >= to {
            return Err(FlatError::ControlNotTopological { node: to, from });
        }
        pred_start[to.index() + 1] += 1;
    }
    for i in 0..n {
        pred_start[i + 1] += pred_start[i];
    }
    let mut fill = pred_start.clone();
    let mut preds = vec![NodeId(0); f.control.len()];
    for &(from, to) in &f.control {
        preds[fill[to.index()]] = from;
        fill[to.index()] += 1;
    }
    let mut start = vec![0.0f64; n];
    let mut finish = vec![0.0f64; n];
    let mut free = [0.0f64; 3];
    for i in 0..n {
        let node = NodeId(i as u32);
        let ms = f.latency[i].ok_or(FlatError::NoLatency { node })?;
        if !ms.is_finite() || ms < 0.0 {
            return Err(FlatError::BadLatency { node, ms });
        }
        let engine = f.engine[i];
        let inputs = f.node_inputs(i);
        if f.recompute[i] {
            // Its inputs must be on the device at its start. Produced before it (checked
            // below) and freed only after their last reader, which it is, they are live
            // then unless they are host values.
            if let Some(&v) = inputs.iter().find(|v| f.kind[v.index()] == ValueKind::Host) {
                return Err(FlatError::RecomputeInputNotOnDevice { node, value: v });
            }
        }
        let mut t = free[engine.index()];
        for &v in inputs {
            if let Some(p) = f.producer[v.index()] {
                if p.index() >= i {
                    return Err(FlatError::NotTopological {
                        node,
                        value: v,
                        producer: p,
                    });
                }
                t = t.max(finish[p.index()]);
            }
        }
        for p in &preds[pred_start[i]..pred_start[i + 1]] {
            t = t.max(finish[p.index()]);
        }
        start[i] = t;
        finish[i] = t + ms;
        free[engine.index()] = finish[i];
    }
    let step_ms = finish.iter().copied().fold(0.0f64, f64::max);

    // Each value's last reader: the latest finish, then the latest node.
    let mut last: Vec<Option<NodeId>> = vec![None; f.kind.len()];
    for i in 0..n {
        for &v in f.node_inputs(i) {
            let slot = &mut last[v.index()];
            let later = match *slot {
                None => true,
                Some(c) => finish[i]
                    .total_cmp(&finish[c.index()])
                    .then(i.cmp(&c.index()))
                    .is_ge(),
            };
            if later {
                *slot = Some(NodeId(i as u32));
            }
        }
    }

    // Memory events.
    let end_event = |node: NodeId, value: ValueId| {
        let i = node.index();
        if finish[i] > start[i] {
            Event {
                time: finish[i],
                rank: 1,
                pos: i,
                sub: 1,
                value,
            }
        } else {
            Event {
                time: finish[i],
                rank: 2,
                pos: i,
                sub: 1,
                value,
            }
        }
    };
    let mut events = Vec::with_capacity(2 * f.kind.len());
    for (k, &last_reader) in last.iter().enumerate() {
        let id = ValueId(k as u32);
        let kind = f.kind[k];
        if !matches!(
            kind,
            ValueKind::Input | ValueKind::Activation | ValueKind::Host
        ) || f.bytes[k] == 0
        {
            continue;
        }
        match f.producer[k] {
            Some(p) => events.push(Event {
                time: start[p.index()],
                rank: 2,
                pos: p.index(),
                sub: 0,
                value: id,
            }),
            None => events.push(Event {
                time: 0.0,
                rank: 0,
                pos: 0,
                sub: 0,
                value: id,
            }),
        }
        if f.output[k] {
            continue;
        }
        match (last_reader, f.producer[k]) {
            (Some(c), _) => events.push(end_event(c, id)),
            (None, Some(p)) => events.push(end_event(p, id)),
            (None, None) => events.push(Event {
                time: 0.0,
                rank: 0,
                pos: 0,
                sub: 1,
                value: id,
            }),
        }
    }
    // Each engine's nodes start and finish in their order (it runs one at a time; a
    // node that ends at the time its successor on the engine ends took no time, so rank
    // and position agree), so the events fall into runs already in the order sorted
    // below: the time-0 allocations, the time-0 releases, then per engine its
    // allocations and its releases, each by node, then value (pushed in value order).
    // Two stable counting sorts, by node and then by run, lay the runs out, and the
    // sort (stable, which finds runs) merges them; the key is unique, so the order is
    // the one any sort gives.
    let run_of = |e: &Event| match e.rank {
        0 => usize::from(e.sub),
        _ => 2 + 2 * f.engine[e.pos].index() + usize::from(e.sub),
    };
    let mut events = counting_sort(&counting_sort(&events, n + 1, |e| e.pos), 8, run_of);
    events.sort_by(|a, b| {
        a.time
            .total_cmp(&b.time)
            .then(a.rank.cmp(&b.rank))
            .then(a.pos.cmp(&b.pos))
            .then(a.sub.cmp(&b.sub))
            .then(a.value.cmp(&b.value))
    });
    let (mut device, mut pinned) = (0u64, 0u64);
    let (mut peak_bytes, mut peak_at_ms, mut host_peak_bytes) = (0u64, 0.0f64, 0u64);
    let mut profile = Vec::with_capacity(events.len() + 1);
    profile.push(Sample {
        time_ms: 0.0,
        device_bytes: 0,
        host_bytes: 0,
    });
    for e in &events {
        let bytes = f.bytes[e.value.index()];
        let on_host = f.kind[e.value.index()] == ValueKind::Host;
        let counter = if on_host { &mut pinned } else { &mut device };
        *counter = if e.sub == 0 {
            counter.checked_add(bytes)
        } else {
            counter.checked_sub(bytes)
        }
        .ok_or(FlatError::Overflow)?;
        if on_host {
            if let Some(limit) = machine.pinned_bytes {
                if pinned > limit {
                    return Err(FlatError::PinnedPoolExceeded {
                        value: e.value,
                        needed: pinned,
                        limit,
                    });
                }
            }
            host_peak_bytes = host_peak_bytes.max(pinned);
        } else if device > peak_bytes {
            peak_bytes = device;
            peak_at_ms = e.time;
        }
        profile.push(Sample {
            time_ms: e.time,
            device_bytes: device,
            host_bytes: pinned,
        });
    }
    Ok(Run {
        step_ms,
        peak_bytes,
        peak_at_ms,
        host_peak_bytes,
        start,
        finish,
        profile,
    })
}

/// `items` stably sorted by `key`, which is below `buckets`.
fn counting_sort<T: Copy>(items: &[T], buckets: usize, key: impl Fn(&T) -> usize) -> Vec<T> {
    let mut start = vec![0usize; buckets + 1];
    for item in items {
        start[key(item) + 1] += 1;
    }
    for b in 0..buckets {
        start[b + 1] += start[b];
    }
    let mut out = items.to_vec();
    for item in items {
        let slot = &mut start[key(item)];
        out[*slot] = *item;
        *slot += 1;
    }
    out
}

/// The memory profile as CSV: `time_ms,device_bytes,host_bytes`, one row per event.
pub fn profile_csv(run: &Run) -> String {
    let mut out = String::from("time_ms,device_bytes,host_bytes\n");
    for s in &run.profile {
        let _ = writeln!(out, "{:.6},{},{}", s.time_ms, s.device_bytes, s.host_bytes);
    }
    out
}

/// The memory profile as an SVG step plot: device bytes (filled) and pinned host bytes
/// (line) over time, with the device peak marked. Byte axes use
/// [`memplan::render::short_bytes`] and round binary ticks, as the plan pictures do.
pub fn profile_svg(run: &Run, title: &str) -> String {
    const WIDTH: f64 = 1200.0;
    const HEIGHT: f64 = 360.0;
    const LEFT: f64 = 90.0;
    const RIGHT: f64 = 40.0;
    const TOP: f64 = 50.0;
    const BOTTOM: f64 = 45.0;
    let plot_w = WIDTH - LEFT - RIGHT;
    let plot_h = HEIGHT - TOP - BOTTOM;
    let top_value = run.peak_bytes.max(run.host_peak_bytes).max(1);
    let span = run.step_ms.max(1e-9);
    let x = |t: f64| LEFT + t / span * plot_w;
    let y = |b: u64| TOP + plot_h - b as f64 / top_value as f64 * plot_h;
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(
        out,
        r##"<rect x="0" y="0" width="{WIDTH}" height="{HEIGHT}" fill="white"/>"##
    );
    let heading = format!(
        "{title} — step {:.3} ms, device peak {}, pinned host peak {}",
        run.step_ms,
        short_bytes(run.peak_bytes),
        short_bytes(run.host_peak_bytes)
    );
    let _ = writeln!(
        out,
        r#"<text x="{LEFT}" y="24" font-size="15" font-weight="bold">{}</text>"#,
        escape(&heading)
    );
    let _ = writeln!(
        out,
        r##"<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="#f7f7f7" stroke="#999" stroke-width="0.5"/>"##
    );
    for a in ticks(0, top_value, 5, true) {
        let _ = writeln!(
            out,
            r##"<line x1="{}" y1="{:.2}" x2="{LEFT}" y2="{:.2}" stroke="#333" stroke-width="0.5"/><text x="{}" y="{:.2}" text-anchor="end" font-size="11">{}</text>"##,
            LEFT - 4.0,
            y(a),
            y(a),
            LEFT - 6.0,
            y(a) + 4.0,
            short_bytes(a)
        );
    }
    let step_ticks = ticks(0, run.step_ms.ceil() as u64, 8, false);
    for t in step_ticks {
        let _ = writeln!(
            out,
            r##"<text x="{:.2}" y="{}" text-anchor="middle" font-size="11">{t} ms</text>"##,
            x(t as f64),
            TOP + plot_h + 16.0
        );
    }
    let mut line = |pick: fn(&Sample) -> u64, style: &str| {
        let mut d = format!("M{:.2},{:.2}", x(0.0), y(0));
        let mut last = 0u64;
        for s in &run.profile {
            let _ = write!(d, " L{:.2},{:.2}", x(s.time_ms), y(last));
            last = pick(s);
            let _ = write!(d, " L{:.2},{:.2}", x(s.time_ms), y(last));
        }
        let _ = write!(d, " L{:.2},{:.2}", x(run.step_ms), y(last));
        let _ = writeln!(out, r#"<path d="{d}" {style}/>"#);
    };
    line(
        |s| s.device_bytes,
        r##"fill="none" stroke="#3569b5" stroke-width="1.2""##,
    );
    line(
        |s| s.host_bytes,
        r##"fill="none" stroke="#d0782a" stroke-width="1" stroke-dasharray="4 3""##,
    );
    let _ = writeln!(
        out,
        r##"<line x1="{LEFT}" y1="{:.2}" x2="{}" y2="{:.2}" stroke="#c33" stroke-dasharray="6 4"/><text x="{}" y="{:.2}" fill="#c33" text-anchor="end">device peak {}</text>"##,
        y(run.peak_bytes),
        LEFT + plot_w,
        y(run.peak_bytes),
        LEFT + plot_w - 4.0,
        y(run.peak_bytes) - 4.0,
        short_bytes(run.peak_bytes)
    );
    let _ = writeln!(
        out,
        r##"<text x="{LEFT}" y="{}" fill="#3569b5">device bytes</text><text x="{}" y="{}" fill="#d0782a">pinned host bytes (dashed)</text>"##,
        HEIGHT - 10.0,
        LEFT + 120.0,
        HEIGHT - 10.0
    );
    out.push_str("</svg>\n");
    out
}

/// The simulator before [`Flat`] (one pass over the [`Graph`]), kept as the reference
/// that [`simulate`] must equal.
#[cfg(test)]
pub(crate) mod reference {
    use memplan_graph::{Graph, NodeId, ValueId, ValueKind};

    use super::{is_host, latency, Engine, Machine, Run, Sample, SimulateError};
    use crate::rewrite::RECOMPUTE;

    /// One memory change.
    struct Event {
        time: f64,
        /// 0: time-0 allocations; 1: ends of nodes that took time; 2: node order.
        rank: u8,
        pos: usize,
        /// 0: allocation, 1: release.
        sub: u8,
        value: ValueId,
    }

    /// Simulates `graph` on `machine` (see the module documentation).
    pub fn simulate(graph: &Graph, machine: &Machine) -> Result<Run, SimulateError> {
        let nodes = graph.nodes();
        let n = nodes.len();
        let mut preds: Vec<Vec<NodeId>> = vec![Vec::new(); n];
        for &(from, to) in graph.control_edges() {
            if from >= to {
                return Err(SimulateError::ControlNotTopological {
                    node: graph.node(to).name.clone(),
                    from: graph.node(from).name.clone(),
                });
            }
            preds[to.index()].push(from);
        }
        let mut start = vec![0.0f64; n];
        let mut finish = vec![0.0f64; n];
        let mut free = [0.0f64; 3];
        for (i, node) in nodes.iter().enumerate() {
            let ms = latency(node)?;
            let engine = Engine::of(&node.op_type);
            if node.op_type == RECOMPUTE {
                // Its inputs must be on the device at its start. Produced before it (checked
                // below) and freed only after their last reader, which it is, they are live
                // then unless they are host values.
                if let Some(v) = node.inputs.iter().flatten().find(|&&v| is_host(graph, v)) {
                    return Err(SimulateError::RecomputeInputNotOnDevice {
                        node: node.name.clone(),
                        value: graph.value(*v).name.clone(),
                    });
                }
            }
            let mut t = free[engine.index()];
            for v in node.inputs.iter().flatten() {
                if let Some((p, _)) = graph.value(*v).producer {
                    if p.index() >= i {
                        return Err(SimulateError::NotTopological {
                            node: node.name.clone(),
                            value: graph.value(*v).name.clone(),
                            producer: graph.node(p).name.clone(),
                        });
                    }
                    t = t.max(finish[p.index()]);
                }
            }
            for p in &preds[i] {
                t = t.max(finish[p.index()]);
            }
            start[i] = t;
            finish[i] = t + ms;
            free[engine.index()] = finish[i];
        }
        let step_ms = finish.iter().copied().fold(0.0f64, f64::max);

        // Memory events.
        let end_event = |node: NodeId, value: ValueId| {
            let i = node.index();
            if finish[i] > start[i] {
                Event {
                    time: finish[i],
                    rank: 1,
                    pos: i,
                    sub: 1,
                    value,
                }
            } else {
                Event {
                    time: finish[i],
                    rank: 2,
                    pos: i,
                    sub: 1,
                    value,
                }
            }
        };
        let outputs: std::collections::HashSet<ValueId> = graph.outputs().iter().copied().collect();
        let mut events = Vec::new();
        for (k, value) in graph.values().iter().enumerate() {
            let id = ValueId(k as u32);
            if !(value.is_activation() || value.kind == ValueKind::Host) || value.bytes == 0 {
                continue;
            }
            match value.producer {
                Some((p, _)) => events.push(Event {
                    time: start[p.index()],
                    rank: 2,
                    pos: p.index(),
                    sub: 0,
                    value: id,
                }),
                None => events.push(Event {
                    time: 0.0,
                    rank: 0,
                    pos: 0,
                    sub: 0,
                    value: id,
                }),
            }
            if outputs.contains(&id) {
                continue;
            }
            let last = value.consumers.iter().map(|&(c, _)| c).max_by(|a, b| {
                finish[a.index()]
                    .total_cmp(&finish[b.index()])
                    .then(a.cmp(b))
            });
            match (last, value.producer) {
                (Some(c), _) => events.push(end_event(c, id)),
                (None, Some((p, _))) => events.push(end_event(p, id)),
                (None, None) => events.push(Event {
                    time: 0.0,
                    rank: 0,
                    pos: 0,
                    sub: 1,
                    value: id,
                }),
            }
        }
        events.sort_by(|a, b| {
            a.time
                .total_cmp(&b.time)
                .then(a.rank.cmp(&b.rank))
                .then(a.pos.cmp(&b.pos))
                .then(a.sub.cmp(&b.sub))
        });
        let host: Vec<bool> = (0..graph.values().len())
            .map(|k| is_host(graph, ValueId(k as u32)))
            .collect();
        let (mut device, mut pinned) = (0u64, 0u64);
        let (mut peak_bytes, mut peak_at_ms, mut host_peak_bytes) = (0u64, 0.0f64, 0u64);
        let mut profile = Vec::with_capacity(events.len() + 1);
        profile.push(Sample {
            time_ms: 0.0,
            device_bytes: 0,
            host_bytes: 0,
        });
        for e in &events {
            let bytes = graph.value(e.value).bytes;
            let on_host = host[e.value.index()];
            let counter = if on_host { &mut pinned } else { &mut device };
            *counter = if e.sub == 0 {
                counter.checked_add(bytes)
            } else {
                counter.checked_sub(bytes)
            }
            .ok_or(SimulateError::Overflow)?;
            if on_host {
                if let Some(limit) = machine.pinned_bytes {
                    if pinned > limit {
                        let node = graph
                            .value(e.value)
                            .producer
                            .map_or(String::new(), |(p, _)| graph.node(p).name.clone());
                        return Err(SimulateError::PinnedPoolExceeded {
                            node,
                            needed: pinned,
                            limit,
                        });
                    }
                }
                host_peak_bytes = host_peak_bytes.max(pinned);
            } else if device > peak_bytes {
                peak_bytes = device;
                peak_at_ms = e.time;
            }
            profile.push(Sample {
                time_ms: e.time,
                device_bytes: device,
                host_bytes: pinned,
            });
        }
        Ok(Run {
            step_ms,
            peak_bytes,
            peak_at_ms,
            host_peak_bytes,
            start,
            finish,
            profile,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use memplan_graph::{DType, Value, ValueKind};

    use super::*;
    use crate::pipedream::{parse, training_step};
    use crate::testdata::TINY;

    fn value(g: &mut Graph, name: &str, bytes: u64, kind: ValueKind) -> ValueId {
        g.add_value(Value::with_bytes(name, DType::Float, bytes, kind))
            .unwrap()
    }

    fn node(g: &mut Graph, name: &str, op: &str, ins: &[ValueId], out: ValueId, ms: f64) -> NodeId {
        let ins = ins.iter().map(|&v| Some(v)).collect();
        let id = g
            .add_node(name, op, ins, vec![out], BTreeMap::new())
            .unwrap();
        g.set_latency(id, Some(ms));
        id
    }

    fn machine() -> Machine {
        Machine::link(1000.0)
    }

    /// ```text
    ///  compute   A [0,2)  B [2,6)            C [9,10)
    ///  D2H            S [2,5)                          (S copies a, A's output)
    ///  H2D                         R [6,9)             (R waits for S and, by control
    ///                                                   edge, for B: a prefetch)
    /// ```
    /// Device bytes: x 10 from 0 until B ends (6); a 100 from A's start until S ends
    /// (5); b 20 from 2 until C ends; the restored a2 100 from R's start (6) until C
    /// ends; c 5 from 9 (a graph output, never freed). Peak 10 + 100 + 20 = 130 at 2.
    /// Host: 100 from S's start (2) until R ends (9).
    fn overlap() -> Graph {
        let mut g = Graph::new("overlap");
        let x = value(&mut g, "x", 10, ValueKind::Input);
        let a = value(&mut g, "a", 100, ValueKind::Activation);
        let h = value(&mut g, "h", 100, ValueKind::Host);
        let b = value(&mut g, "b", 20, ValueKind::Activation);
        let a2 = value(&mut g, "a2", 100, ValueKind::Activation);
        let c = value(&mut g, "c", 5, ValueKind::Activation);
        node(&mut g, "A", "Op", &[x], a, 2.0);
        node(&mut g, "S", SWAP_OUT, &[a], h, 3.0);
        let nb = node(&mut g, "B", "Op", &[x], b, 4.0);
        let nr = node(&mut g, "R", SWAP_IN, &[h], a2, 3.0);
        node(&mut g, "C", "Op", &[a2, b], c, 1.0);
        g.add_control_edge(nb, nr).unwrap();
        g.set_inputs(vec![x]).unwrap();
        g.set_outputs(vec![c]).unwrap();
        g
    }

    #[test]
    fn copies_overlap_compute_by_hand() {
        let run = simulate(&overlap(), &machine()).unwrap();
        assert_eq!(run.start, [0.0, 2.0, 2.0, 6.0, 9.0]);
        assert_eq!(run.finish, [2.0, 5.0, 6.0, 9.0, 10.0]);
        assert_eq!(run.step_ms, 10.0);
        assert_eq!((run.peak_bytes, run.peak_at_ms), (130, 2.0));
        assert_eq!(run.host_peak_bytes, 100);
        let device: Vec<(f64, u64)> = run
            .profile
            .iter()
            .map(|s| (s.time_ms, s.device_bytes))
            .collect();
        assert_eq!(
            device,
            [
                (0.0, 0),
                (0.0, 10),   // x
                (0.0, 110),  // A starts: a
                (2.0, 110),  // S starts: h on the host
                (2.0, 130),  // B starts: b
                (5.0, 30),   // S ends: a freed
                (6.0, 20),   // B ends: x freed
                (6.0, 120),  // R starts: a2
                (9.0, 120),  // R ends: h freed on the host
                (9.0, 125),  // C starts: c
                (10.0, 105), // C ends: b freed,
                (10.0, 5),   // and a2
            ]
        );
        let csv = profile_csv(&run);
        assert!(csv.starts_with("time_ms,device_bytes,host_bytes\n0.000000,0,0\n"));
        assert!(csv.contains("\n2.000000,130,100\n"));
        let svg = profile_svg(&run, "over<lap>");
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
        assert!(svg.contains("over&lt;lap&gt;"));
        assert!(svg.contains("device peak 130 B"));
    }

    /// Two copies to the host: S1 is first in the graph order, so it runs first on the
    /// device-to-host engine although S2's input is ready earlier.
    /// ```text
    ///  compute  P2 [0,1) P1 [1,3)
    ///  D2H                       S1 [3,6) S2 [6,7)
    /// ```
    #[test]
    fn copy_engine_is_fifo() {
        let mut g = Graph::new("fifo");
        let a2 = value(&mut g, "a2", 50, ValueKind::Activation);
        let a1 = value(&mut g, "a1", 50, ValueKind::Activation);
        let h1 = value(&mut g, "h1", 50, ValueKind::Host);
        let h2 = value(&mut g, "h2", 50, ValueKind::Host);
        node(&mut g, "P2", "Op", &[], a2, 1.0);
        node(&mut g, "P1", "Op", &[], a1, 2.0);
        node(&mut g, "S1", SWAP_OUT, &[a1], h1, 3.0);
        node(&mut g, "S2", SWAP_OUT, &[a2], h2, 1.0);
        let run = simulate(&g, &machine()).unwrap();
        assert_eq!(run.start, [0.0, 1.0, 3.0, 6.0]);
        assert_eq!(run.step_ms, 7.0);
        // a2 lives from 0 until S2 ends (7), a1 from 1 until 6: peak 100 over [1, 6).
        assert_eq!((run.peak_bytes, run.peak_at_ms), (100, 1.0));
        // h1 from 3 until its producer ends (no reader), h2 from 6 to 7.
        assert_eq!(run.host_peak_bytes, 50);
    }

    #[test]
    fn pinned_limit_hit_names_the_copy() {
        let limited = Machine {
            pinned_bytes: Some(99),
            ..machine()
        };
        assert_eq!(
            simulate(&overlap(), &limited),
            Err(SimulateError::PinnedPoolExceeded {
                node: "S".into(),
                needed: 100,
                limit: 99
            })
        );
        let enough = Machine {
            pinned_bytes: Some(100),
            ..machine()
        };
        assert_eq!(simulate(&overlap(), &enough).unwrap().host_peak_bytes, 100);
    }

    /// A recomputation reads its producer's inputs on the device: one reading a host
    /// value is refused, naming it.
    #[test]
    fn recomputation_of_a_host_input_is_an_error() {
        let mut g = overlap();
        let h = g.value_by_name("h").unwrap();
        let out = value(&mut g, "h2", 100, ValueKind::Activation);
        node(&mut g, "Rc", crate::rewrite::RECOMPUTE, &[h], out, 1.0);
        assert_eq!(
            simulate(&g, &machine()),
            Err(SimulateError::RecomputeInputNotOnDevice {
                node: "Rc".into(),
                value: "h".into()
            })
        );
    }

    #[test]
    fn unsorted_graph_is_an_error() {
        let mut g = overlap();
        let (b, a) = (g.node_by_name("C").unwrap(), g.node_by_name("A").unwrap());
        g.add_control_edge(b, a).unwrap();
        assert!(matches!(
            simulate(&g, &machine()),
            Err(SimulateError::ControlNotTopological { .. })
        ));
    }

    #[test]
    fn without_copies_it_is_the_no_swap_baseline() {
        let g = training_step(&parse(TINY, "tiny").unwrap()).unwrap().graph;
        let run = simulate(&g, &machine()).unwrap();
        let base = no_swap(&g).unwrap();
        assert_eq!(
            (run.step_ms, run.peak_bytes),
            (base.step_ms, base.peak_bytes)
        );
        assert_eq!(run.host_peak_bytes, 0);
    }

    #[test]
    fn machine_times() {
        let m = Machine {
            d2h_bytes_per_ms: 100.0,
            h2d_bytes_per_ms: 50.0,
            copy_latency_ms: 0.5,
            codec_bytes_per_ms: 1000.0,
            pinned_bytes: None,
        };
        assert_eq!(m.copy_ms(Engine::DeviceToHost, 200), 2.5);
        assert_eq!(m.copy_ms(Engine::HostToDevice, 200), 4.5);
        assert_eq!(m.copy_ms(Engine::Compute, 200), 0.0);
        assert_eq!(m.codec_ms(500), 0.5);
        assert_eq!(Engine::of(SWAP_OUT), Engine::DeviceToHost);
        assert_eq!(Engine::of(crate::rewrite::DECOMPRESS), Engine::Compute);
    }
}
