//! `memplan`: plan, check and bound the memory of tensors from the command line.
//!
//! Exit status: 0 on success, 1 when `memplan check` finds violations (or `memplan report`
//! draws an invalid plan), 2 on bad input or usage (the message says which file, line or
//! field was wrong), 3 and 4 for `--planner search --capacity`: no plan fits (proven), or
//! the limit ran out first.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};
use memplan_graph::{Options, Order};

/// Writes a line to standard error, ignoring a failure: with stderr closed or full there
/// is nowhere left to report it, and a message must never turn into a panic (exit 101).
macro_rules! noteln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

mod commands;
/// Loading inputs lives in the library front door ([`memplan_session::input`]).
use memplan_session::input;
mod inspect;
mod npu;
mod pool;
mod progress;
use memplan_session::spec;
mod swap;
mod table;
mod tflite;

/// Static memory planning for neural-network tensors.
#[derive(Parser, Debug)]
#[command(name = "memplan", version, about, long_about = None)]
struct Cli {
    /// Read text inputs (CSV, graph JSON, plan JSON) of up to this many bytes instead of
    /// 1 GiB, e.g. `4GiB` to check the plan JSON of 10^7 buffers (about 3 GB).
    #[arg(long, global = true, value_name = "BYTES", value_parser = swap::parse_bytes)]
    max_input_bytes: Option<u64>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Plan the buffers of FILE (a minimalloc CSV or another CSV, a graph JSON, an ONNX or a
    /// TFLite model) and print the plan.
    Plan {
        /// The problem: a minimalloc CSV (`id,lower,upper,size[,alignment,offset,hint,gaps]`),
        /// a memory-operation CSV or pool trace, a graph JSON (`.json`), an ONNX model
        /// (`.onnx`) or a TFLite model (`.tflite`, planned as TFLite Micro plans it); `-`
        /// reads standard input (its kind told by its first bytes).
        file: PathBuf,
        /// Which planner to run (see `memplan planners`), or a planner spec with options,
        /// e.g. `npu:match=lifetime` (see doc/planners.md). Default: search for at most 1 s
        /// (it starts from best-of's plan and stops as soon as it proves the arena optimal);
        /// `--planner best-of` gives the greedy plan alone.
        #[arg(long, short)]
        planner: Option<String>,
        /// Output format: a summary table, the plan JSON, or a minimalloc solution CSV.
        #[arg(long, short, value_enum, default_value_t = Format::Table)]
        format: Format,
        /// Write the output to this file instead of standard output.
        #[arg(long, short)]
        output: Option<PathBuf>,
        /// Align every offset to a multiple of N bytes (on top of each buffer's own).
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
        alignment: u64,
        #[command(flatten)]
        graph: GraphArgs,
        /// Also draw the plan as an SVG picture (address map and memory profile) to PATH.
        #[arg(long, value_name = "PATH")]
        svg: Option<PathBuf>,
        /// strip only: the preset metric of the first order, e.g. size, overlap,
        /// size*length, length,size, size+overlap, size/length (default: the portfolio's
        /// metrics, best kept; see doc/strip.md). Order and placement rule: the spec
        /// options strip:order=ascending, strip:placement=bottom|stacked|stacked-previous
        /// (stacked: the source's pairing, each rectangle on the earlier ones it is the next
        /// time-overlapping rectangle of; stacked-previous: on the previous rectangle in the
        /// order overlapping it in time).
        #[arg(long)]
        metric: Option<String>,
        /// strip only: the most peak-suppression adjustments (default: 8).
        #[arg(long)]
        max_iters: Option<u32>,
        #[command(flatten)]
        search: SearchArgs,
        #[command(flatten)]
        npu: npu::NpuArgs,
        /// .tflite only: write the model with the plan embedded as TFLite Micro's
        /// `OfflineMemoryAllocation` metadata (replacing an existing one) to PATH.
        #[arg(long, value_name = "PATH")]
        write_offline_plan: Option<PathBuf>,
        /// The pool's base address (decimal or 0x hex): the JSON, C and table outputs
        /// report every tensor's address = base + offset; overflow is an error.
        #[arg(long, value_name = "ADDR", value_parser = parse_address)]
        base: Option<u64>,
    },
    /// Check PLAN (plan JSON or solution CSV) against PROBLEM; exit 1 listing every violation.
    Check {
        /// The problem the plan claims to solve (any input of `plan`: a CSV, graph JSON,
        /// ONNX or TFLite model).
        problem: PathBuf,
        /// The plan: plan JSON (`memplan plan --format json`) or a CSV with an `offset` column.
        /// Left out for a `.tflite`, the offline plan embedded in the model is checked.
        plan: Option<PathBuf>,
        /// Output format.
        #[arg(long, short, value_enum, default_value_t = ReportFormat::Table)]
        format: ReportFormat,
        /// The platform file of an npu plan, when the plan's `platform_file` cannot be read
        /// from here (see doc/npu.md).
        #[arg(long, value_name = "FILE")]
        platform: Option<PathBuf>,
        #[command(flatten)]
        graph: GraphArgs,
    },
    /// Print the max-live lower bound of FILE: no valid plan has a smaller arena.
    Bound {
        /// The problem (any input of `plan`: a CSV, graph JSON, ONNX or TFLite model).
        file: PathBuf,
        /// Output format.
        #[arg(long, short, value_enum, default_value_t = ReportFormat::Table)]
        format: ReportFormat,
        #[command(flatten)]
        graph: GraphArgs,
    },
    /// One row per tensor of a graph (dtype, shape, bytes, lifetime, kind, alias group,
    /// in-place partner) and totals (activation bytes, max-live bound, largest tensor,
    /// bytes saved by aliasing and in-place).
    Inspect {
        /// The graph: graph JSON (`.json`), ONNX (`.onnx`), TFLite, or a CSV of memory
        /// operations or a pool trace (one row per tensor).
        file: PathBuf,
        /// Output format: a table with totals, a CSV of the arena tensors (its first seven
        /// columns are those of the reference `tensors.csv` files), or JSON with everything.
        #[arg(long, short, value_enum, default_value_t = InspectFormat::Table)]
        format: InspectFormat,
        /// Print the exclusive pairs of blocks (the exclusive method's rules) under `--exclusive-rules`
        /// instead of the tensors: one row per block, or one per pair in CSV and JSON.
        #[arg(long)]
        exclusive: bool,
        /// Print every operator's configuration (the npu method's groups) instead of the tensors:
        /// its group on the `--platform`, the tensors present while it runs with their
        /// usage periods, and its width (their bytes).
        #[arg(long, conflicts_with = "exclusive")]
        operators: bool,
        #[command(flatten)]
        platform: npu::PlatformArg,
        #[command(flatten)]
        graph: GraphArgs,
    },
    /// Draw plans of FILE as one self-contained HTML page for a browser: per plan a
    /// zoomable time x address map and the live bytes over time, side by side on the same
    /// scales; hover for a buffer's details, search by name, click a step for what is live
    /// there; the checker's verdict, violations in red. Exit 1 when a plan drawn is invalid.
    Report {
        /// The problem or model (minimalloc CSV, graph JSON, ONNX, TFLite), or a plan JSON
        /// (`memplan plan -f json`), drawn as it is.
        file: PathBuf,
        /// A planner spec to run and draw (repeatable, drawn in order; see `memplan
        /// planners`). Default: as `memplan plan` (search for at most 1 s), and for a
        /// .tflite TFLite Micro's own planner (tflm-greedy) first.
        #[arg(long, short)]
        planner: Vec<String>,
        /// A plan file of FILE's problem to check and draw beside them (repeatable): plan
        /// JSON or a solution CSV, e.g. another tool's plan or an older one.
        #[arg(long, value_name = "PLAN")]
        compare: Vec<PathBuf>,
        /// Where to write the page (an .html file).
        #[arg(long, short, value_name = "PATH")]
        output: PathBuf,
        /// Align every offset to a multiple of N bytes (on top of each buffer's own).
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
        alignment: u64,
        #[command(flatten)]
        graph: GraphArgs,
        #[command(flatten)]
        search: SearchArgs,
    },
    /// List the planners with a one-line description each.
    Planners,
    /// Print a shell completion script for SHELL to standard output, e.g.
    /// `memplan completions bash > ~/.local/share/bash-completion/completions/memplan`,
    /// `memplan completions zsh > ~/.zfunc/_memplan`,
    /// `memplan completions fish > ~/.config/fish/completions/memplan.fish`.
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
    },
    /// Run planners on problem files and print arena, arena/bound and time for each, in one
    /// run; every plan is checked.
    Bench {
        /// Problem files: any input of `plan` (CSV, graph JSON, ONNX, TFLite).
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Comma-separated planner specs (default: every planner): a name, or a name with
        /// options after `:` such as `exclusive:rules=edges+outputs`, `exclusive:fragmented`,
        /// `exclusive:orders=all` (valid in every execution order), `npu:match=size`,
        /// `npu:platform=FILE` (see doc/planners.md); each is a column named by its spec.
        #[arg(long, short, value_delimiter = ',')]
        planners: Vec<String>,
        /// Output format.
        #[arg(long, short, value_enum, default_value_t = BenchFormat::Table)]
        format: BenchFormat,
        /// Run each planner this many times per file and report the fastest time.
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
        repeat: u32,
        #[command(flatten)]
        graph: GraphArgs,
        #[command(flatten)]
        npu: npu::NpuArgs,
    },
    /// The pool method, a profile-guided tensor pool: train a plan from an allocation trace,
    /// replay traces through allocators, compare them.
    #[command(subcommand)]
    Pool(pool::PoolCommand),
    /// The swap method, swap and compression by graph rewriting, on one training step built from
    /// a PipeDream profile (`graph.txt`) or an ONNX model (`.onnx`, roofline latencies):
    /// the no-swap baseline (`--planner none`), or planners that insert
    /// reductions and restores until the simulated peak fits `--budget`, or for the
    /// lowest peak within `--max-overhead`; prints peak and step time before and after.
    Swap(SwapCli),
}

/// The options of `memplan swap` (see `doc/swap.md`).
#[derive(Args, Clone, Debug)]
struct SwapCli {
    /// A PipeDream profile (`graph.txt`) or an ONNX forward graph (`.onnx`), built into
    /// one training step.
    graph: PathBuf,
    /// Which planner: none (baseline), method, lms, everything, or all three.
    #[arg(long, value_enum, default_value_t = swap::SwapPlanner::None)]
    planner: swap::SwapPlanner,
    /// Link bandwidth, both directions, e.g. 12GB/s (PCIe 3 x16) or 25GB/s (PCIe 4).
    #[arg(long, default_value = "12GB/s", value_parser = swap::parse_rate, value_name = "RATE")]
    link: f64,
    /// Device-to-host bandwidth when it differs from --link.
    #[arg(long, value_parser = swap::parse_rate, value_name = "RATE")]
    link_d2h: Option<f64>,
    /// Host-to-device bandwidth when it differs from --link.
    #[arg(long, value_parser = swap::parse_rate, value_name = "RATE")]
    link_h2d: Option<f64>,
    /// Fixed cost of every copy, in milliseconds.
    #[arg(long, default_value_t = memplan_swap::simulate::Machine::COPY_LATENCY_MS, value_parser = parse_millis, value_name = "MS")]
    copy_latency: f64,
    /// Codec throughput on the compute stream (over the uncompressed bytes).
    #[arg(long, default_value = "200GB/s", value_parser = swap::parse_rate, value_name = "RATE")]
    codec_speed: f64,
    /// Pinned host pool size (unlimited when absent), e.g. 16GiB.
    #[arg(long, value_parser = swap::parse_bytes, value_name = "BYTES")]
    pinned: Option<u64>,
    /// Goal: peak device memory at most this, as bytes (6GiB) or % of the no-swap peak
    /// (50%); the planners then minimise the step time.
    #[arg(long, value_parser = swap::parse_budget, value_name = "BYTES|%")]
    budget: Option<swap::Budget>,
    /// Goal: step time at most this much over the no-swap step (5%); the planners then
    /// minimise the peak.
    #[arg(long, value_parser = swap::parse_overhead, value_name = "%")]
    max_overhead: Option<f64>,
    /// Compress reduced tensors (then copy them to the host, unless --on-device).
    #[arg(long, value_enum)]
    compress: Option<swap::SwapCodec>,
    /// With --compress: keep the compressed tensors on the device (no copies).
    #[arg(long)]
    on_device: bool,
    /// Delete and recompute instead of copying: a chosen tensor is dropped after its
    /// last early reader and its producer runs again before each later reader.
    #[arg(long, conflicts_with_all = ["compress", "on_device"])]
    recompute: bool,
    /// The method's improvements: all, none, or a list of link, peak, iterate, timed,
    /// retime, unserialized.
    #[arg(long, default_value = "all", value_parser = swap::parse_improvements, value_name = "LIST")]
    improvements: memplan_swap::planner::Improvements,
    /// thTTS: inputs whose timing slack exceeds this many milliseconds are candidates
    /// (searched by the planners when absent; 0 for --planner none).
    #[arg(long, value_parser = parse_millis)]
    th_tts: Option<f64>,
    /// thS: inputs whose tensor exceeds this many bytes are candidates (searched when
    /// absent; 0 for --planner none).
    #[arg(long)]
    th_size: Option<u64>,
    /// N: keep at most this many candidates, the first in the planner's order.
    #[arg(long)]
    max: Option<usize>,
    /// Output format.
    #[arg(long, short, value_enum, default_value_t = swap::SwapFormat::Table)]
    format: swap::SwapFormat,
    /// Also write the (rewritten) training step as graph JSON to PATH.
    #[arg(long, value_name = "PATH")]
    write_json: Option<PathBuf>,
    /// Also write the (rewritten) training step as Graphviz DOT to PATH.
    #[arg(long, value_name = "PATH")]
    write_dot: Option<PathBuf>,
    /// Also write the simulated memory profile as CSV to PATH.
    #[arg(long, value_name = "PATH")]
    profile_csv: Option<PathBuf>,
    /// Also write the simulated memory profile as SVG to PATH.
    #[arg(long, value_name = "PATH")]
    profile_svg: Option<PathBuf>,
    // ONNX models: the import and the roofline device.
    #[command(flatten)]
    import: ImportArgs,
    #[command(flatten)]
    device: swap::DeviceArgs,
}

/// How an ONNX model is imported: overrides of its input shapes and symbolic dims.
#[derive(Args, Clone, Debug)]
struct ImportArgs {
    /// ONNX: the shape of an input whose dims are symbolic or unknown, e.g.
    /// `--input-shape input=1x3x224x224` (repeatable).
    #[arg(long, value_name = "NAME=DIMS", value_parser = memplan_onnx::parse_input_shape)]
    input_shape: Vec<(String, Vec<u64>)>,
    /// ONNX: the value of a named (symbolic) dim, e.g. `--dim batch=8` (repeatable).
    #[arg(long, value_name = "NAME=VALUE", value_parser = memplan_onnx::parse_dim)]
    dim: Vec<(String, u64)>,
    /// ONNX: upper bound for a data-dependent size the graph does not bound itself (a Loop
    /// with a runtime trip count, a Range or ConstantOfShape of runtime values); tensors
    /// planned at a bound are marked in `inspect`.
    #[arg(long, value_name = "N")]
    max_dim: Option<u64>,
}

impl ImportArgs {
    fn options(self) -> memplan_onnx::ImportOptions {
        memplan_onnx::ImportOptions {
            input_shapes: self.input_shape.into_iter().collect(),
            dims: self.dim.into_iter().collect(),
            max_dim: self.max_dim,
        }
    }
}

/// How a graph input becomes a problem (ignored for minimalloc CSV inputs).
#[derive(Args, Clone, Debug)]
struct GraphArgs {
    #[command(flatten)]
    import: ImportArgs,
    /// Graphs: do not let view operators (Reshape, Flatten, ...) share their input's buffer.
    #[arg(long)]
    no_alias: bool,
    /// Graphs: do not let elementwise operators write over an input that dies at them.
    #[arg(long)]
    no_inplace: bool,
    /// Graphs: the execution order: the file's (checked to be topological) or a
    /// deterministic topological order.
    #[arg(long, value_enum, default_value_t = OrderArg::File)]
    order: OrderArg,
    /// `--planner exclusive`: the exclusivity rules to apply, comma-separated, of
    /// `edges`, `branches`, `outputs` (or `none`); rule 4 (blocks live at the same step)
    /// always applies. Its plans are valid in the file's execution order only (rule 2 does
    /// not make running branches concurrently safe); `--planner exclusive:orders=all`
    /// plans for every order the edges allow. See doc/exclusive.md.
    #[arg(long, value_name = "RULES", default_value = "edges,branches,outputs", value_parser = memplan_graph::Rules::parse)]
    exclusive_rules: memplan_graph::Rules,
    /// `--planner exclusive`: let a block spread over several reusable pieces (the plan
    /// then carries extents per buffer; contiguous by default). See doc/exclusive.md.
    #[arg(long)]
    fragmented: bool,
}

impl GraphArgs {
    fn settings(self) -> input::GraphSettings {
        input::GraphSettings {
            import: self.import.options(),
            order: match self.order {
                OrderArg::File => Order::File,
                OrderArg::Topological => Order::Topological,
            },
            options: Options {
                alias: !self.no_alias,
                inplace: !self.no_inplace,
            },
            exclusive_rules: self.exclusive_rules,
            fragmented: self.fragmented,
            all_orders: false,
        }
    }
}

/// `--order`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum OrderArg {
    /// The order of the nodes in the file.
    File,
    /// Kahn's algorithm, smallest file position first.
    Topological,
}

/// How `memplan inspect` prints its result.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum InspectFormat {
    /// A human-readable table with totals.
    Table,
    /// CSV rows of the tensors in the activation arena.
    Csv,
    /// JSON with every tensor and the totals.
    Json,
}

/// Options of `--planner search` (ignored by the other planners).
#[derive(clap::Args, Debug, Clone)]
pub struct SearchArgs {
    /// search: return the best plan found within this many seconds; never worse than
    /// best-of, whose plan it starts from (all of it, even when that takes longer).
    /// Default: 5 s for `--planner search`, 1 s when no planner is named.
    #[arg(long, value_parser = parse_seconds, value_name = "SECONDS")]
    pub time_limit: Option<f64>,
    /// search: seed of the preorder rotation and of the large-neighbourhood search.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// search: worker threads (0: every core; the exact search uses at most 2).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
    /// search: pruning rules to switch off or on, e.g. `-dominance,-restarts` (rules:
    /// canonical, dominance, sections, hatless, restarts, decompose, reuse, reorder, dive,
    /// probe, memo, lns; all but lns on by default).
    #[arg(long, default_value = "", allow_hyphen_values = true)]
    pub search_rules: String,
    /// search: decision mode: find a plan with arena at most BYTES or prove that none
    /// exists. Exit status 0 when one fits, 3 when none does (proven), 4 when the time
    /// limit ran out first; the plan written is the best found either way.
    #[arg(long, value_name = "BYTES")]
    pub capacity: Option<u64>,
    /// search: stop after this many search nodes (all threads together), or at the time
    /// limit if that comes first. With `--threads 1` a run that a node limit ends is
    /// deterministic, whatever the machine's load: benchmarks compare planners this way.
    #[arg(long, value_name = "NODES")]
    pub node_limit: Option<u64>,
}

fn parse_millis(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(ms) if ms.is_finite() && ms >= 0.0 => Ok(ms),
        _ => Err(format!(
            "'{text}' is not a number of milliseconds (0 or more)"
        )),
    }
}

fn parse_address(text: &str) -> Result<u64, String> {
    let parsed = match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => text.parse::<u64>(),
    };
    parsed.map_err(|_| {
        format!("'{text}' is not an address: give a decimal number or 0x followed by hex digits, below 2^64")
    })
}

fn parse_seconds(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(s) if (0.0..1e9).contains(&s) => Ok(s),
        _ => Err(format!("'{text}' is not a number of seconds (0 or more)")),
    }
}

/// How `memplan bench` prints its result.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum BenchFormat {
    /// A plain-text table, one row per file and planner.
    Table,
    /// A Markdown table, one row per file, one column per planner.
    Markdown,
    /// JSON lines, one object per file and planner.
    Json,
}

/// How `memplan plan` prints its result.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Format {
    /// A human-readable summary.
    Table,
    /// The plan JSON (stable, machine-readable).
    Json,
    /// A minimalloc solution CSV (the input with an `offset` column).
    Csv,
    /// A time × address map of the plan for terminals.
    Ascii,
    /// A C header of every tensor's offset (and address with --base), the arena size and
    /// the alignment, for device builds.
    C,
}

/// How `check` and `bound` print their result.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum ReportFormat {
    /// A human-readable summary.
    Table,
    /// JSON.
    Json,
}

/// The command line with negative numbers taken as values in every subcommand, so that
/// `--time-limit -5` is refused by the flag's own parser, naming the flag, instead of
/// being read as an unknown option `-5`.
fn command_line() -> clap::Command {
    fn allow_negative(command: clap::Command) -> clap::Command {
        command
            .allow_negative_numbers(true)
            .mut_subcommands(allow_negative)
    }
    allow_negative(<Cli as clap::CommandFactory>::command())
}

fn main() -> ExitCode {
    let matches = command_line().get_matches();
    let cli = match <Cli as clap::FromArgMatches>::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    if let Some(limit) = cli.max_input_bytes {
        memplan::io::file::set_max_text_bytes(limit);
    }
    let result = match cli.command {
        Command::Plan {
            file,
            planner,
            format,
            output,
            alignment,
            graph,
            svg,
            metric,
            max_iters,
            search,
            npu,
            write_offline_plan,
            base,
        } => commands::plan(
            &file,
            planner.as_deref(),
            format,
            output.as_deref(),
            alignment,
            &graph.settings(),
            &commands::PlanExtras {
                svg: svg.as_deref(),
                metric: metric.as_deref(),
                max_iters,
                search: &search,
                npu: &npu,
                write_offline_plan: write_offline_plan.as_deref(),
                base,
            },
        ),
        Command::Check {
            problem,
            plan,
            format,
            platform,
            graph,
        } => match plan {
            Some(plan) if input::is_stdin(&problem) && input::is_stdin(&plan) => {
                Err(anyhow::anyhow!(
                    "memplan check: the problem and the plan cannot both be read from standard input ('-'); give one of them as a file"
                ))
            }
            Some(plan) => commands::check(
                &problem,
                &plan,
                format,
                &graph.settings(),
                &npu::PlatformArg { platform },
            ),
            None if input::FileKind::of(&problem) == input::FileKind::Tflite => {
                tflite::check_embedded(&problem, format)
            }
            None => Err(anyhow::anyhow!(
                "memplan check needs a PLAN file after '{}' (only a .tflite carries its own plan)",
                problem.display()
            )),
        },
        Command::Bound {
            file,
            format,
            graph,
        } => commands::bound(&file, format, &graph.settings()),
        Command::Inspect {
            file,
            format,
            exclusive,
            operators,
            platform,
            graph,
        } => {
            if platform.platform.is_some() && !operators {
                Err(anyhow::anyhow!(
                    "--platform applies to `memplan inspect --operators` only (the tensors and the exclusive pairs do not depend on a platform); add --operators, or leave --platform out"
                ))
            } else if exclusive {
                inspect::inspect_exclusive(&file, format, &graph.settings())
            } else if operators {
                npu::inspect_operators(&file, format, &graph.settings(), &platform)
            } else if input::FileKind::of(&file) == input::FileKind::Tflite {
                tflite::inspect(&file, format, &graph.settings())
            } else if input::is_operations_csv(&file) {
                inspect::inspect_csv(&file, format, &graph.settings())
            } else {
                commands::inspect(&file, format, &graph.settings())
            }
        }
        Command::Report {
            file,
            planner,
            compare,
            output,
            alignment,
            graph,
            search,
        } => commands::report(
            &file,
            &planner,
            &compare,
            &output,
            alignment,
            &graph.settings(),
            &search,
        ),
        Command::Planners => commands::planners(),
        Command::Completions { shell } => {
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut command_line(), "memplan", &mut script);
            commands::emit(&String::from_utf8_lossy(&script), None).map(|()| ExitCode::SUCCESS)
        }
        Command::Bench {
            files,
            planners,
            format,
            repeat,
            graph,
            npu,
        } => commands::bench(&files, &planners, format, repeat, &graph.settings(), &npu),
        Command::Pool(command) => pool::run(command),
        Command::Swap(a) => swap::run(&swap::SwapArgs {
            graph: &a.graph,
            import: a.import.options(),
            device: a.device.device(),
            planner: a.planner,
            format: a.format,
            write_json: a.write_json.as_deref(),
            write_dot: a.write_dot.as_deref(),
            profile_csv: a.profile_csv.as_deref(),
            profile_svg: a.profile_svg.as_deref(),
            th_tts_ms: a.th_tts,
            th_size_bytes: a.th_size,
            max_count: a.max,
            machine: memplan_swap::simulate::Machine {
                d2h_bytes_per_ms: a.link_d2h.unwrap_or(a.link),
                h2d_bytes_per_ms: a.link_h2d.unwrap_or(a.link),
                copy_latency_ms: a.copy_latency,
                codec_bytes_per_ms: a.codec_speed,
                pinned_bytes: a.pinned,
            },
            compress: a.compress,
            on_device: a.on_device,
            recompute: a.recompute,
            budget: a.budget,
            max_overhead: a.max_overhead,
            improvements: a.improvements,
        }),
    };
    match result {
        Ok(code) => code,
        Err(error) => {
            // Names and file contents echoed in a message are shown, never obeyed: every
            // control character but the line breaks between causes is escaped.
            let text: String = describe(&error)
                .split('\n')
                .map(|line| memplan::render::printable(line).into_owned())
                .collect::<Vec<_>>()
                .join("\n");
            noteln!("error: {text}");
            let too_large = error.chain().any(|cause| {
                matches!(
                    cause.downcast_ref::<memplan::io::file::FileError>(),
                    Some(memplan::io::file::FileError::TooLarge { .. })
                )
            });
            if too_large {
                noteln!("note: memplan reads larger inputs with --max-input-bytes BYTES (e.g. --max-input-bytes 4GiB)");
            }
            ExitCode::from(2)
        }
    }
}

/// The error and its causes joined by `: `, leaving out a cause whose message the text
/// already contains (typed errors often repeat their source in their own message).
fn describe(error: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in error.chain() {
        let message = cause.to_string();
        if text.contains(&message) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&message);
    }
    text
}
