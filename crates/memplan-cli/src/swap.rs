//! `memplan swap`: method 4 (swap and compression by graph rewriting) on one training
//! step, built from a PipeDream training profile or from an ONNX model (roofline
//! latencies). So far only the no-swap baseline (`--planner none`) runs, with the
//! timing analysis and the tensors the method would choose; see `doc/swap.md`.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use memplan_graph::Graph;
use memplan_onnx::ImportOptions;
use memplan_swap::training::Device;
use memplan_swap::{pipedream, select, simulate, timing, training};
use serde_json::{json, Value};

use crate::input::{self, FileKind};
use crate::table;

/// `--planner`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum SwapPlanner {
    /// No swapping: the baseline step time and peak.
    None,
    /// The method as stated (not implemented yet).
    Method,
    /// The TF-LMS-like baseline (not implemented yet).
    Lms,
    /// Every planner (not implemented yet).
    All,
}

/// `--format`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum SwapFormat {
    /// A human-readable summary.
    Table,
    /// JSON.
    Json,
}

/// The roofline device of ONNX training steps (`memplan_swap::training::Device`); unset
/// flags take its V100-like defaults.
#[derive(Args, Clone, Copy, Debug)]
pub struct DeviceArgs {
    /// ONNX: peak throughput of the roofline device in TFLOP/s [default: 15.7].
    #[arg(long, value_name = "TFLOPS")]
    peak_tflops: Option<f64>,
    /// ONNX: memory bandwidth of the roofline device in GB/s (10^9 B/s) [default: 900].
    #[arg(long, value_name = "GB_PER_S")]
    mem_bandwidth: Option<f64>,
    /// ONNX: fixed cost of each kernel launch in microseconds [default: 5].
    #[arg(long, value_name = "US")]
    launch_us: Option<f64>,
}

impl DeviceArgs {
    /// The device, or `None` when no flag was given (the default device).
    pub fn device(self) -> Option<Device> {
        if self.peak_tflops.is_none() && self.mem_bandwidth.is_none() && self.launch_us.is_none() {
            return None;
        }
        let default = Device::default();
        Some(Device {
            peak_flops: self.peak_tflops.map_or(default.peak_flops, |t| t * 1e12),
            mem_bandwidth: self
                .mem_bandwidth
                .map_or(default.mem_bandwidth, |g| g * 1e9),
            launch_ms: self.launch_us.map_or(default.launch_ms, |us| us / 1e3),
        })
    }
}

/// The options of `memplan swap`.
pub struct SwapArgs<'a> {
    pub graph: &'a Path,
    pub planner: SwapPlanner,
    pub format: SwapFormat,
    pub write_json: Option<&'a Path>,
    pub write_dot: Option<&'a Path>,
    pub params: select::Params,
    /// ONNX: the import options (`--input-shape`, `--dim`).
    pub import: ImportOptions,
    /// ONNX: the roofline device; `None` for the default (no device flag given).
    pub device: Option<Device>,
}

/// A training step and what it was built from, as `(key, value)` pairs for the report.
struct Step {
    graph: Graph,
    source: Vec<(&'static str, String, Value)>,
}

/// Builds the training step: an ONNX model (by extension) through the shared import and
/// [`training::training_step`], anything else as a PipeDream profile.
fn training_step(args: &SwapArgs) -> Result<Step> {
    let file = args.graph.display();
    if FileKind::of(args.graph) == FileKind::Onnx {
        let forward = input::read_graph(args.graph, &args.import)?;
        let device = args.device.unwrap_or_default();
        let step =
            training::training_step(&forward, &device).with_context(|| format!("'{file}'"))?;
        let text = format!(
            "{} TFLOP/s, {} GB/s, {} us launch (roofline)",
            device.peak_flops / 1e12,
            device.mem_bandwidth / 1e9,
            device.launch_ms * 1e3
        );
        let json = json!({
            "peak_flops": device.peak_flops,
            "mem_bandwidth_bytes_per_s": device.mem_bandwidth,
            "launch_ms": device.launch_ms,
        });
        let n = forward.nodes().len();
        return Ok(Step {
            graph: step.graph,
            source: vec![
                ("forward nodes", n.to_string(), json!(n)),
                ("device", text, json),
            ],
        });
    }
    if args.device.is_some() || args.import != ImportOptions::default() {
        bail!("'{file}': --input-shape, --dim, --peak-tflops, --mem-bandwidth and --launch-us apply to ONNX models (.onnx) only; a PipeDream profile has shapeless layers and measured times");
    }
    let profile = pipedream::read_file(args.graph)?;
    let step = pipedream::training_step(&profile)?;
    let n = profile.layers.len();
    Ok(Step {
        graph: step.graph,
        source: vec![("layers", n.to_string(), json!(n))],
    })
}

/// Runs `memplan swap`.
pub fn run(args: &SwapArgs) -> Result<ExitCode> {
    if args.planner != SwapPlanner::None {
        bail!(
            "--planner {}: not implemented yet; only --planner none runs (see doc/swap.md)",
            args.planner
                .to_possible_value()
                .map_or("?".into(), |v| v.get_name().to_string())
        );
    }
    let step = training_step(args)?;
    let graph = &step.graph;
    if let Some(path) = args.write_json {
        std::fs::write(path, memplan_graph::write_graph_json(graph))
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    if let Some(path) = args.write_dot {
        std::fs::write(path, memplan_swap::dot::write_dot(graph))
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    let report = simulate::no_swap(graph)?;
    let times = timing::analyse(graph)?;
    let chosen = select::candidates(graph, &times, &args.params);
    let mut values: Vec<_> = chosen.iter().map(|c| c.value).collect();
    values.sort();
    values.dedup();
    let chosen_bytes: u64 = values.iter().map(|&v| graph.value(v).bytes).sum();
    let name = args.graph.display().to_string();
    let text = match args.format {
        SwapFormat::Table => {
            let mut rows = vec![("graph", name)];
            rows.extend(step.source.iter().map(|(k, text, _)| (*k, text.clone())));
            rows.extend([
                ("nodes", format!("{} (forward and backward)", report.nodes)),
                ("planner", "none".to_string()),
                (
                    "step time",
                    format!("{:.3} ms (one compute stream)", report.step_ms),
                ),
                ("critical path", format!("{:.3} ms", times.makespan)),
                ("peak memory", table::bytes(report.peak_bytes)),
                (
                    "candidates",
                    format!(
                        "{} inputs of {} tensors, {} (TTS > {} ms, size > {} B{})",
                        chosen.len(),
                        values.len(),
                        table::bytes(chosen_bytes),
                        args.params.th_tts_ms,
                        args.params.th_size_bytes,
                        args.params
                            .max_count
                            .map_or(String::new(), |n| format!(", at most {n}"))
                    ),
                ),
            ]);
            table::key_values(&rows)
        }
        SwapFormat::Json => {
            let mut value = json!({
                "graph": name,
                "nodes": report.nodes,
                "planner": "none",
                "step_ms": report.step_ms,
                "critical_path_ms": times.makespan,
                "peak_bytes": report.peak_bytes,
                "candidates": {
                    "th_tts_ms": args.params.th_tts_ms,
                    "th_size_bytes": args.params.th_size_bytes,
                    "max_count": args.params.max_count,
                    "inputs": chosen.len(),
                    "tensors": values.len(),
                    "bytes": chosen_bytes,
                },
            });
            for (key, _, v) in &step.source {
                value[key.replace(' ', "_")] = v.clone();
            }
            format!("{}\n", serde_json::to_string_pretty(&value)?)
        }
    };
    print!("{text}");
    Ok(ExitCode::SUCCESS)
}
