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
//! - Device values are the arena values ([`memplan_graph::Value::is_activation`]) that
//!   are not on the host; host values are the outputs of [`crate::rewrite::SWAP_OUT`]
//!   nodes and live in the pinned host pool. Weights and constants are not counted.
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
use memplan_graph::{analyse, AnalysisError, Graph, NodeId, Options, Order, ValueId};

use crate::rewrite::{SWAP_IN, SWAP_OUT};

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
    #[error("device memory in use does not fit in 64 bits")]
    Overflow,
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

/// True when `value` lives in host memory: the output of a [`SWAP_OUT`] node.
pub fn is_host(graph: &Graph, value: ValueId) -> bool {
    graph
        .value(value)
        .producer
        .is_some_and(|(p, _)| graph.node(p).op_type == SWAP_OUT)
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
        if !value.is_activation() || value.bytes == 0 {
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
        if e.sub == 0 {
            *counter = counter.checked_add(bytes).ok_or(SimulateError::Overflow)?;
        } else {
            *counter -= bytes;
        }
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
