//! `memplan swap`: the `swap` method (swap and compression by graph rewriting) on one training
//! step, built from a PipeDream training profile or from an ONNX model (roofline
//! latencies): the no-swap baseline, or planners that rewrite the training step
//! with reductions and restores until the simulated peak fits a budget (`--budget`) or
//! while the step time stays within an overhead (`--max-overhead`); see `doc/swap.md`.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use memplan_graph::Graph;
use memplan_onnx::ImportOptions;
use memplan_swap::planner::{self, Goal, Improvements, Outcome, Planner, Setup};
use memplan_swap::rewrite::{Codec, Reduction};
use memplan_swap::simulate::{self, Machine, Run};
use memplan_swap::training::{self, Device};
use memplan_swap::{pipedream, select, timing, torch};
use serde_json::{json, Value};

use crate::input::{self, FileKind};
use crate::table;

/// `--planner`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum SwapPlanner {
    /// No swapping: the baseline step time and peak.
    None,
    /// The swap method as published, with the improvements chosen by `--improvements`.
    Method,
    /// The TF-LMS-like level-distance baseline.
    Lms,
    /// Swap every tensor for every reader that is not the next node.
    Everything,
    /// method, lms and everything, one after the other.
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

/// `--compress`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum SwapCodec {
    /// fp32 to fp16 (half the bytes).
    Fp16,
    /// fp32 to 24 bits (three quarters of the bytes).
    Fp24,
    /// fp32 to 8 bits (a quarter of the bytes).
    Int8,
}

/// `--budget`: bytes, or a fraction of the no-swap peak.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Budget {
    Bytes(u64),
    Fraction(f64),
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
    pub profile_csv: Option<&'a Path>,
    pub profile_svg: Option<&'a Path>,
    /// thTTS, thS, N as given (unset: searched by the planners; 0, 0, all for the
    /// candidates shown by `--planner none`).
    pub th_tts_ms: Option<f64>,
    pub th_size_bytes: Option<u64>,
    pub max_count: Option<usize>,
    pub machine: Machine,
    pub compress: Option<SwapCodec>,
    pub on_device: bool,
    /// Delete and recompute instead of copying or compressing.
    pub recompute: bool,
    pub budget: Option<Budget>,
    pub max_overhead: Option<f64>,
    pub improvements: Improvements,
    /// ONNX: the import options (`--input-shape`, `--dim`).
    pub import: ImportOptions,
    /// ONNX: the roofline device; `None` for the default (no device flag given).
    pub device: Option<Device>,
}

const RATE_EXAMPLE: &str = "e.g. 12GB/s, 25 GB/s, 800MiB/s or 1.2e10 (bytes per second)";
const BYTES_EXAMPLE: &str = "e.g. 50% (of the no-swap peak), 6GiB, 8GB or 6000000000";

/// Splits `text` into a number and a byte unit (B, kB/KB, MB, GB, TB, KiB, MiB, GiB,
/// TiB; none means bytes), giving the bytes.
fn scaled_bytes(text: &str) -> Option<f64> {
    let text = text.trim();
    let split = text
        .find(|c: char| c.is_ascii_alphabetic() && c != 'e' && c != 'E')
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: f64 = number.trim().parse().ok()?;
    let scale = match unit.trim() {
        "" | "B" => 1.0,
        "kB" | "KB" => 1e3,
        "MB" => 1e6,
        "GB" => 1e9,
        "TB" => 1e12,
        "KiB" => 1024.0,
        "MiB" => 1024.0 * 1024.0,
        "GiB" => 1024.0 * 1024.0 * 1024.0,
        "TiB" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        _ => return None,
    };
    let bytes = value * scale;
    (bytes.is_finite() && bytes >= 0.0).then_some(bytes)
}

/// `--link`, `--codec-speed`: a bandwidth, returned in bytes per millisecond.
pub fn parse_rate(text: &str) -> Result<f64, String> {
    let amount = text.trim().strip_suffix("/s").unwrap_or(text);
    match scaled_bytes(amount) {
        Some(bytes) if bytes > 0.0 => Ok(bytes / 1e3),
        _ => Err(format!(
            "'{text}' is not a bandwidth above 0; {RATE_EXAMPLE}"
        )),
    }
}

/// `--budget`: a percentage of the no-swap peak or a byte count.
pub fn parse_budget(text: &str) -> Result<Budget, String> {
    let bad = || format!("'{text}' is not a memory budget; {BYTES_EXAMPLE}");
    if let Some(percent) = text.trim().strip_suffix('%') {
        return match percent.trim().parse::<f64>() {
            Ok(p) if p > 0.0 && p.is_finite() => Ok(Budget::Fraction(p / 100.0)),
            _ => Err(bad()),
        };
    }
    match scaled_bytes(text) {
        Some(b) if b < u64::MAX as f64 => Ok(Budget::Bytes(b.round() as u64)),
        _ => Err(bad()),
    }
}

/// `--max-overhead`: a percentage (`5%`) or a fraction (`0.05`), returned as a fraction.
pub fn parse_overhead(text: &str) -> Result<f64, String> {
    let value = match text.trim().strip_suffix('%') {
        Some(p) => p.trim().parse::<f64>().map(|p| p / 100.0),
        None => text.trim().parse::<f64>(),
    };
    match value {
        Ok(f) if f >= 0.0 && f.is_finite() => Ok(f),
        _ => Err(format!(
            "'{text}' is not a step-time overhead; e.g. 5% or 0.05"
        )),
    }
}

/// `--pinned`: a byte count.
pub fn parse_bytes(text: &str) -> Result<u64, String> {
    match scaled_bytes(text) {
        Some(b) if b < u64::MAX as f64 => Ok(b.round() as u64),
        _ => Err(format!(
            "'{text}' is not a byte count; e.g. 16GiB, 8GB or 1000000"
        )),
    }
}

/// `--improvements`: `all`, `none` or a comma list of `link`, `peak`, `iterate`, `timed`,
/// `retime`, `unserialized`.
pub fn parse_improvements(text: &str) -> Result<Improvements, String> {
    match text.trim() {
        "all" => return Ok(Improvements::ALL),
        "none" | "" => return Ok(Improvements::NONE),
        _ => {}
    }
    let mut out = Improvements::NONE;
    for part in text.split(',') {
        match part.trim() {
            "link" => out.link_filter = true,
            "peak" => out.rank_at_peak = true,
            "iterate" => out.iterate = true,
            "timed" => out.timed_serialization = true,
            "retime" => out.retime_restores = true,
            "unserialized" => out.unserialized = true,
            other => {
                return Err(format!(
                    "unknown improvement '{other}'; use all, none or a list of link, peak, iterate, timed, retime, unserialized"
                ))
            }
        }
    }
    Ok(out)
}

/// A training step and what it was built from, as `(key, value)` pairs for the report.
struct Step {
    graph: Graph,
    source: Vec<(&'static str, String, Value)>,
    /// The machine a PyTorch trace measured (it replaces the link and codec flags).
    machine: Option<Machine>,
}

/// Builds the training step: an ONNX model (by extension) through the shared import and
/// [`training::training_step`], anything else as a PipeDream profile.
fn training_step(args: &SwapArgs) -> Result<Step> {
    let file = args.graph.display();
    if let Some(step) = torch_step(args)? {
        return Ok(step);
    }
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
            machine: None,
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
        machine: None,
    })
}

/// The codec of `--compress`.
fn codec(c: SwapCodec) -> Codec {
    match c {
        SwapCodec::Fp16 => Codec::Fp16,
        SwapCodec::Fp24 => Codec::Fp24,
        SwapCodec::Int8 => Codec::Int8,
    }
}

/// The size cap of a PyTorch trace (a step of 10^6 ops is about 200 MB of JSON).
const TRACE_CAP: u64 = 1 << 30;

/// A PyTorch trace (`memplan.torch.trace`, a `.json` file naming its format), or `None`
/// for other inputs.
fn torch_step(args: &SwapArgs) -> Result<Option<Step>> {
    let is_json = args
        .graph
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("json"));
    if !is_json {
        return Ok(None);
    }
    let file = args.graph.display().to_string();
    let text = memplan::io::file::read_text_capped(args.graph, TRACE_CAP)?;
    if args.device.is_some() || args.import != ImportOptions::default() {
        bail!("'{file}': --input-shape, --dim, --peak-tflops, --mem-bandwidth and --launch-us apply to ONNX models (.onnx) only; a PyTorch trace has measured times");
    }
    let trace = torch::parse(&text, &file)?;
    let reduction = Reduction {
        to_host: !args.on_device && !args.recompute,
        codec: args.compress.map(codec),
        recompute: args.recompute,
    };
    let step = torch::training_step(&trace, &file, &reduction)?;
    let n = trace.ops.len();
    let packs = trace.packs.len();
    Ok(Some(Step {
        graph: step.graph,
        source: vec![
            ("ops", n.to_string(), json!(n)),
            ("saved tensors", packs.to_string(), json!(packs)),
            (
                "measured peak",
                format!("{} B", trace.measured_peak_bytes),
                json!(trace.measured_peak_bytes),
            ),
        ],
        machine: Some(step.machine),
    }))
}

/// Runs `memplan swap`.
pub fn run(args: &SwapArgs) -> Result<ExitCode> {
    let step = training_step(args)?;
    let machine = step.machine.unwrap_or(args.machine);
    let graph = &step.graph;
    let name = args.graph.display().to_string();
    if args.planner == SwapPlanner::None {
        write_outputs(args, graph, &simulate::simulate(graph, &machine)?)?;
        return baseline(args, &step, name);
    }
    let before = simulate::simulate(graph, &machine)?;
    let goal = match (args.budget, args.max_overhead) {
        (Some(Budget::Bytes(b)), None) => Goal::Budget(b),
        (Some(Budget::Fraction(f)), None) => Goal::Budget((before.peak_bytes as f64 * f) as u64),
        (None, Some(o)) => Goal::MaxOverhead(o),
        (None, None) => bail!(
            "--planner needs a goal: --budget (e.g. --budget 50%) or --max-overhead (e.g. --max-overhead 5%)"
        ),
        (Some(_), Some(_)) => bail!("give either --budget or --max-overhead, not both"),
    };
    let reduction = Reduction {
        to_host: !args.on_device && !args.recompute,
        codec: args.compress.map(codec),
        recompute: args.recompute,
    };
    if args.on_device && reduction.codec.is_none() {
        bail!(
            "--on-device keeps compressed tensors on the device: it needs --compress fp16, fp24 or int8"
        );
    }
    if args.recompute && (args.on_device || reduction.codec.is_some()) {
        bail!("--recompute re-runs producers: it takes neither --compress nor --on-device");
    }
    let setup = Setup {
        machine,
        reduction,
        goal,
        th_tts_ms: args.th_tts_ms,
        th_size_bytes: args.th_size_bytes,
        max_count: args.max_count,
    };
    let planners: Vec<Planner> = match args.planner {
        SwapPlanner::Method => vec![Planner::Method(args.improvements)],
        SwapPlanner::Lms => vec![Planner::Lms],
        SwapPlanner::Everything => vec![Planner::Everything],
        SwapPlanner::All => vec![
            Planner::Method(args.improvements),
            Planner::Lms,
            Planner::Everything,
        ],
        SwapPlanner::None => unreachable!("handled above"),
    };
    let writes = [
        args.write_json,
        args.write_dot,
        args.profile_csv,
        args.profile_svg,
    ];
    if planners.len() > 1 && writes.iter().any(Option::is_some) {
        bail!("--write-json, --write-dot, --profile-csv and --profile-svg need one planner, not --planner all");
    }
    let total = planners.len() as u64;
    let outcomes = crate::progress::with_count_bar("swap: planning", total, |tick| {
        let mut outcomes = Vec::new();
        for planner in planners {
            let outcome = planner::plan(graph, planner, &setup)?;
            if outcomes.is_empty() {
                write_outputs(args, &outcome.graph, &outcome.run)?;
            }
            outcomes.push((planner, outcome));
            tick();
        }
        anyhow::Ok(outcomes)
    })?;
    let goal_text = match goal {
        Goal::Budget(b) => format!("peak <= {}", table::bytes(b)),
        Goal::MaxOverhead(o) => format!(
            "step time <= {:.3} ms (+{}%)",
            before.step_ms * (1.0 + o),
            o * 100.0
        ),
    };
    let text = match args.format {
        SwapFormat::Table => {
            let mut rows = vec![vec![
                "none (before)".to_string(),
                table::bytes(before.peak_bytes),
                format!("{:.3} ms", before.step_ms),
                "0".into(),
                "0 B".into(),
                "-".into(),
                "-".into(),
            ]];
            for (planner, o) in &outcomes {
                rows.push(vec![
                    planner.name().to_string(),
                    table::bytes(o.run.peak_bytes),
                    format!("{:.3} ms", o.run.step_ms),
                    o.tensors.to_string(),
                    table::bytes(o.bytes),
                    if o.met { "met" } else { "NOT met" }.to_string(),
                    o.chosen.clone(),
                ]);
            }
            let head = table::key_values(&[
                ("graph", name),
                (
                    "machine",
                    format!(
                        "link {} GB/s down, {} GB/s up, {} ms per copy, codec {} GB/s{}",
                        machine.d2h_bytes_per_ms / 1e6,
                        machine.h2d_bytes_per_ms / 1e6,
                        machine.copy_latency_ms,
                        machine.codec_bytes_per_ms / 1e6,
                        machine.pinned_bytes.map_or(String::new(), |p| format!(
                            ", pinned pool {}",
                            table::bytes(p)
                        ))
                    ),
                ),
                ("reduction", reduction_text(&reduction)),
                ("goal", goal_text),
            ]);
            let body = table::columns(
                &[
                    "planner",
                    "peak",
                    "step time",
                    "tensors",
                    "swapped",
                    "goal",
                    "chosen",
                ],
                &rows,
            );
            format!("{head}\n{body}")
        }
        SwapFormat::Json => {
            let before_json = json!({
                "peak_bytes": before.peak_bytes,
                "step_time_ms": before.step_ms,
            });
            let object = |o: &Outcome| {
                json!({
                    "before": before_json,
                    "after": {
                        "peak_bytes": o.run.peak_bytes,
                        "step_time_ms": o.run.step_ms,
                        "swapped_tensors": o.tensors,
                        "swapped_bytes": o.bytes,
                        "host_peak_bytes": o.run.host_peak_bytes,
                        "goal_met": o.met,
                        "chosen": o.chosen,
                        "simulations": o.evaluated,
                    },
                })
            };
            let value = if args.planner == SwapPlanner::All {
                Value::Object(
                    outcomes
                        .iter()
                        .map(|(p, o)| (p.name().to_string(), object(o)))
                        .collect(),
                )
            } else {
                object(&outcomes[0].1)
            };
            format!("{}\n", serde_json::to_string_pretty(&value)?)
        }
    };
    crate::commands::emit(&text, None)?;
    Ok(ExitCode::SUCCESS)
}

fn reduction_text(r: &Reduction) -> String {
    if r.recompute {
        return "delete and recompute".into();
    }
    match (r.to_host, r.codec) {
        (true, None) => "copy to host".into(),
        (true, Some(c)) => format!("compress to {}, copy to host", c.name()),
        (false, Some(c)) => format!("compress to {} on the device", c.name()),
        (false, None) => "none".into(),
    }
}

/// Writes the graph and profile files asked for.
fn write_outputs(args: &SwapArgs, graph: &memplan_graph::Graph, run: &Run) -> Result<()> {
    let title = args.graph.display().to_string();
    let files: [(Option<&Path>, &dyn Fn() -> String); 4] = [
        (args.write_json, &|| memplan_graph::write_graph_json(graph)),
        (args.write_dot, &|| memplan_swap::dot::write_dot(graph)),
        (args.profile_csv, &|| simulate::profile_csv(run)),
        (args.profile_svg, &|| simulate::profile_svg(run, &title)),
    ];
    for (path, text) in files {
        if let Some(path) = path {
            std::fs::write(path, text())
                .with_context(|| format!("cannot write {}", path.display()))?;
        }
    }
    Ok(())
}

/// `--planner none`: the baseline, the critical path and the method's candidates.
fn baseline(args: &SwapArgs, step: &Step, name: String) -> Result<ExitCode> {
    let graph = &step.graph;
    let params = select::Params::method(
        args.th_tts_ms.unwrap_or(0.0),
        args.th_size_bytes.unwrap_or(0),
        args.max_count,
    );
    let report = simulate::no_swap(graph)?;
    let times = timing::analyse(graph)?;
    let chosen = select::candidates(graph, &times, &params);
    let mut values: Vec<_> = chosen.iter().map(|c| c.value).collect();
    values.sort();
    values.dedup();
    let chosen_bytes: u64 = values.iter().map(|&v| graph.value(v).bytes).sum();
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
                        params.th_tts_ms,
                        params.th_size_bytes,
                        params
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
                    "th_tts_ms": params.th_tts_ms,
                    "th_size_bytes": params.th_size_bytes,
                    "max_count": params.max_count,
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
    crate::commands::emit(&text, None)?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates() {
        assert_eq!(parse_rate("12GB/s"), Ok(1.2e7));
        assert_eq!(parse_rate("25 GB/s"), Ok(2.5e7));
        assert_eq!(parse_rate("1MiB/s"), Ok(1048.576));
        assert_eq!(parse_rate("1.2e10"), Ok(1.2e7));
        for bad in ["fast", "0GB/s", "-1GB/s", "12GB/h", ""] {
            let e = parse_rate(bad).unwrap_err();
            assert!(e.contains("12GB/s"), "{e}");
        }
    }

    #[test]
    fn budgets() {
        assert_eq!(parse_budget("50%"), Ok(Budget::Fraction(0.5)));
        assert_eq!(parse_budget("6GiB"), Ok(Budget::Bytes(6 << 30)));
        assert_eq!(parse_budget("8 GB"), Ok(Budget::Bytes(8_000_000_000)));
        assert_eq!(parse_budget("1000"), Ok(Budget::Bytes(1000)));
        for bad in ["half", "0%", "-5%", "5 parsecs"] {
            let e = parse_budget(bad).unwrap_err();
            assert!(e.contains("50%"), "{e}");
        }
        assert_eq!(parse_overhead("5%"), Ok(0.05));
        assert_eq!(parse_overhead("0.05"), Ok(0.05));
        assert!(parse_overhead("lots").is_err());
        assert_eq!(parse_bytes("2KiB"), Ok(2048));
    }

    #[test]
    fn improvements() {
        assert_eq!(parse_improvements("all"), Ok(Improvements::ALL));
        assert_eq!(parse_improvements("none"), Ok(Improvements::NONE));
        let two = parse_improvements("link,iterate").unwrap();
        assert!(two.link_filter && two.iterate && !two.rank_at_peak && !two.timed_serialization);
        assert!(parse_improvements("magic").is_err());
        let new = parse_improvements("retime, unserialized").unwrap();
        assert_eq!(
            new,
            Improvements {
                retime_restores: true,
                unserialized: true,
                ..Improvements::NONE
            }
        );
    }
}
