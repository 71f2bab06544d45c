//! `memplan pool …`: train a pool plan from an allocation trace, replay the trace through
//! an allocator (each in a fresh child process), and compare allocators in one table.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand, ValueEnum};
use memplan_pool::{train, Op, Order, Plan, Pool, PoolOptions, Trace, TrainOptions};
use serde::{Deserialize, Serialize};

use crate::table::{bytes, columns, key_values};
use crate::ReportFormat;

/// Writes to standard output; a closed pipe (`| head`) is not an error.
fn out(text: &str) -> Result<()> {
    crate::commands::emit(text, None)
}

/// `println!` through [`out`].
macro_rules! outln {
    ($($arg:tt)*) => { out(&format!("{}\n", format_args!($($arg)*)))? };
}

/// `print!` through [`out`].
macro_rules! outp {
    ($($arg:tt)*) => { out(&format!($($arg)*))? };
}

/// The `memplan pool` verbs.
#[derive(Subcommand, Debug)]
pub enum PoolCommand {
    /// Train a pool plan (the pool method) from one iteration of TRACE and print its statistics.
    Train {
        /// The allocation trace (CSV, or a replay `.bin`).
        trace: PathBuf,
        #[command(flatten)]
        train: TrainArgs,
        /// Write the plan JSON to this file.
        #[arg(long, short)]
        output: Option<PathBuf>,
        /// Output format of the statistics.
        #[arg(long, short, value_enum, default_value_t = ReportFormat::Table)]
        format: ReportFormat,
    },
    /// Plan size for every class interval and traversal order, in one table.
    Sweep {
        /// The allocation trace.
        trace: PathBuf,
        #[command(flatten)]
        train: TrainArgs,
        /// Class intervals to try, in bytes.
        #[arg(
            long,
            value_delimiter = ',',
            default_value = "512,1024,2048,4096,8192,16384,65536,262144,1048576"
        )]
        intervals: Vec<u64>,
    },
    /// Replay TRACE through an allocator in a fresh child process and print, per
    /// iteration, minor page faults, peak RSS, time per alloc+free pair and plan hit rate.
    Replay {
        /// The allocation trace.
        trace: PathBuf,
        /// The allocator.
        #[arg(long, short, value_enum)]
        allocator: AllocatorKind,
        #[command(flatten)]
        replay: ReplayArgs,
        /// Output format.
        #[arg(long, short, value_enum, default_value_t = ReportFormat::Table)]
        format: ReportFormat,
    },
    /// Replay TRACE through every allocator (each in a fresh child process, touching
    /// every page) and print one comparison table.
    Bench {
        /// The allocation trace.
        trace: PathBuf,
        #[command(flatten)]
        replay: ReplayArgs,
    },
    /// The replay itself, in the child process: prints the report JSON.
    #[command(hide = true)]
    ReplayChild {
        trace: PathBuf,
        #[arg(long, value_enum)]
        allocator: AllocatorKind,
        #[command(flatten)]
        replay: ReplayArgs,
    },
}

/// How to train a plan.
#[derive(Args, Debug, Clone)]
pub struct TrainArgs {
    /// Size-class interval `g` in bytes (a tensor of size s is in class ceil(s/g)*g).
    #[arg(long, default_value_t = memplan_pool::DEFAULT_CLASS_INTERVAL, value_parser = clap::value_parser!(u64).range(1..))]
    class_interval: u64,
    /// Traversal order of the trainer.
    #[arg(long, value_enum, default_value_t = OrderArg::Allocation)]
    order: OrderArg,
    /// The iteration to learn from (default: 1 if the trace has it, else its first).
    #[arg(long)]
    iteration: Option<u64>,
    /// Leave allocations smaller than this many bytes out of the plan.
    #[arg(long, default_value_t = 0)]
    min_size: u64,
    /// Lay the blocks out one after another instead of packing blocks never in use at
    /// the same time into shared addresses.
    #[arg(long)]
    no_pack: bool,
    /// Number of the first iteration of a `.bin` trace (bin files carry no numbers).
    #[arg(long, default_value_t = 1)]
    first_iteration: u64,
    /// A free of an id the trace never allocated: an error (the trace is incomplete), or
    /// skipped, for a trace cut from a running process whose earlier allocations it
    /// does not hold.
    #[arg(long, value_enum, default_value_t = ForeignFreesArg::Error)]
    foreign_frees: ForeignFreesArg,
}

/// `--foreign-frees`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum ForeignFreesArg {
    /// An error naming the line or record.
    Error,
    /// Counted and left out.
    Skip,
}

/// How to replay.
#[derive(Args, Debug, Clone)]
pub struct ReplayArgs {
    /// The pool plan (default: train one from TRACE with the default options).
    #[arg(long)]
    plan: Option<PathBuf>,
    /// Write one byte in every 4 KiB page of each allocation, as real tensors do.
    #[arg(long)]
    touch: bool,
    #[command(flatten)]
    train: TrainArgs,
}

/// The trainer's traversal orders.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum OrderArg {
    /// Allocation order.
    Allocation,
    /// Size descending.
    SizeDescending,
    /// Lifetime length descending.
    LifetimeDescending,
}

impl From<OrderArg> for Order {
    fn from(order: OrderArg) -> Order {
        match order {
            OrderArg::Allocation => Order::Allocation,
            OrderArg::SizeDescending => Order::SizeDescending,
            OrderArg::LifetimeDescending => Order::LifetimeDescending,
        }
    }
}

/// The allocators a trace can be replayed through.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AllocatorKind {
    /// memplan's pool, from a plan.
    Pool,
    /// The C library's `posix_memalign`/`free` (glibc malloc).
    System,
    /// jemalloc (tikv-jemallocator), as an allocator object.
    Jemalloc,
    /// mimalloc, as an allocator object.
    Mimalloc,
}

impl AllocatorKind {
    /// The allocators this build can replay through: jemalloc and mimalloc only with the
    /// `bench-allocators` feature.
    const ALL: &'static [AllocatorKind] = if cfg!(feature = "bench-allocators") {
        &[
            AllocatorKind::System,
            AllocatorKind::Jemalloc,
            AllocatorKind::Mimalloc,
            AllocatorKind::Pool,
        ]
    } else {
        &[AllocatorKind::System, AllocatorKind::Pool]
    };

    fn name(self) -> &'static str {
        match self {
            AllocatorKind::Pool => "pool",
            AllocatorKind::System => "system",
            AllocatorKind::Jemalloc => "jemalloc",
            AllocatorKind::Mimalloc => "mimalloc",
        }
    }
}

/// One iteration of a replay (the `iterations` entries of the JSON report).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct IterationReport {
    iteration: u64,
    minor_faults: u64,
    peak_rss_bytes: u64,
    ns_per_alloc_free: f64,
    /// Requests served from their planned block (pool only, from the plan's iteration on).
    plan_hit_rate: Option<f64>,
    /// The same among requests of 32 KiB and more (pool only).
    plan_hit_rate_ge32k: Option<f64>,
    allocations: u64,
    /// Wall time of the whole iteration, touching included, in milliseconds.
    iteration_ms: f64,
}

/// What a replay child prints.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ReplayReport {
    allocator: AllocatorKind,
    /// Faults and peak RSS after reading the trace and making the allocator (the pool's
    /// arena, prefaulted, is counted here).
    setup_minor_faults: u64,
    setup_peak_rss_bytes: u64,
    /// The pool's arena, if pool.
    plan_bytes: Option<u64>,
    plan_live_peak_bytes: Option<u64>,
    iterations: Vec<IterationReport>,
}

/// Runs a `memplan pool` verb.
pub fn run(command: PoolCommand) -> Result<ExitCode> {
    match command {
        PoolCommand::Train {
            trace,
            train,
            output,
            format,
        } => train_command(&trace, &train, output.as_deref(), format),
        PoolCommand::Sweep {
            trace,
            train,
            intervals,
        } => sweep(&trace, &train, &intervals),
        PoolCommand::Replay {
            trace,
            allocator,
            replay,
            format,
        } => {
            let (replay, _plan_file) =
                with_plan(&trace, &replay, allocator == AllocatorKind::Pool)?;
            let report = spawn_child(&trace, allocator, &replay)?;
            print_replay(&report, format)?;
            Ok(ExitCode::SUCCESS)
        }
        PoolCommand::Bench { trace, replay } => bench(&trace, &replay),
        PoolCommand::ReplayChild {
            trace,
            allocator,
            replay,
        } => {
            let report = replay_here(&trace, allocator, &replay)?;
            outln!("{}", serde_json::to_string(&report)?);
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn read_trace(path: &Path, args: &TrainArgs) -> Result<Trace> {
    let foreign_frees = match args.foreign_frees {
        ForeignFreesArg::Error => memplan_pool::ForeignFrees::Error,
        ForeignFreesArg::Skip => memplan_pool::ForeignFrees::Skip,
    };
    Ok(Trace::read(
        path,
        memplan_pool::ReadOptions {
            first_iteration: args.first_iteration,
            foreign_frees,
        },
    )?)
}

fn options(path: &Path, trace: &Trace, args: &TrainArgs) -> Result<TrainOptions> {
    let iteration = match args.iteration {
        Some(n) => n,
        None if trace.iteration(1).is_some() => 1,
        None => match trace.iterations.first() {
            Some(first) => first.number,
            None => bail!(
                "'{}': the trace has no events to train on (it is empty, or a header alone); record at least one iteration",
                path.display()
            ),
        },
    };
    Ok(TrainOptions {
        class_interval: args.class_interval,
        order: args.order.into(),
        iteration,
        min_size: args.min_size,
        pack: !args.no_pack,
    })
}

fn train_command(
    path: &Path,
    args: &TrainArgs,
    output: Option<&Path>,
    format: ReportFormat,
) -> Result<ExitCode> {
    let trace = read_trace(path, args)?;
    let options = options(path, &trace, args)?;
    let plan = train(&trace, &options)
        .with_context(|| format!("cannot train a plan from '{}'", path.display()))?;
    if let Some(output) = output {
        let json = serde_json::to_string_pretty(&plan)?;
        std::fs::write(output, json + "\n")
            .with_context(|| format!("cannot write '{}'", output.display()))?;
    }
    let stats = plan.stats();
    match format {
        ReportFormat::Json => outln!("{}", serde_json::to_string_pretty(&stats)?),
        ReportFormat::Table => {
            let mut text = key_values(&[
                ("trace", path.display().to_string()),
                ("iteration", options.iteration.to_string()),
                ("class interval", bytes(options.class_interval)),
                ("order", options.order.name().to_string()),
                ("tensors", stats.tensors.to_string()),
                ("blocks", plan.blocks.len().to_string()),
                ("packed", (!args.no_pack).to_string()),
                ("total of blocks", bytes(stats.total_bytes)),
                ("arena", bytes(stats.arena_bytes)),
                ("live peak", bytes(stats.live_peak_bytes)),
                ("total / live peak", format!("{:.3}", stats.ratio)),
                ("arena / live peak", format!("{:.3}", stats.arena_ratio)),
            ]);
            let rows: Vec<Vec<String>> = stats
                .blocks_per_class
                .iter()
                .map(|&(class, blocks)| vec![bytes(class), blocks.to_string()])
                .collect();
            text.push('\n');
            text.push_str(&columns(&["class", "blocks"], &rows));
            outp!("{text}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn sweep(path: &Path, args: &TrainArgs, intervals: &[u64]) -> Result<ExitCode> {
    let trace = read_trace(path, args)?;
    if intervals.contains(&0) {
        bail!("--intervals: a class interval must be at least 1");
    }
    let total = (intervals.len() * Order::ALL.len()) as u64;
    // Every interval and order trained (seconds each on a large trace), a bar showing it.
    let trained = crate::progress::with_count_bar("pool sweep", total, |tick| {
        let mut plans = Vec::new();
        for &g in intervals {
            for order in Order::ALL {
                let mut options = options(path, &trace, args)?;
                options.class_interval = g;
                options.order = order;
                // Only the numbers are kept: one plan in memory at a time.
                let plan = train(&trace, &options)?;
                plans.push((g, order, plan.blocks.len(), plan.stats()));
                tick();
            }
        }
        anyhow::Ok(plans)
    })?;
    let mut rows = Vec::new();
    let mut best: Option<(u64, u64, Order)> = None;
    {
        for (g, order, blocks, stats) in trained {
            if best.is_none() || best.is_some_and(|(arena, _, _)| stats.arena_bytes < arena) {
                best = Some((stats.arena_bytes, g, order));
            }
            rows.push(vec![
                g.to_string(),
                order.name().to_string(),
                blocks.to_string(),
                mib(stats.total_bytes),
                format!("{:.3}", stats.ratio),
                mib(stats.arena_bytes),
                format!("{:.3}", stats.arena_ratio),
            ]);
        }
    }
    let mut text = columns(
        &[
            "interval",
            "order",
            "blocks",
            "total of blocks",
            "total/peak",
            "arena",
            "arena/peak",
        ],
        &rows,
    );
    if let Some((arena, g, order)) = best {
        text.push_str(&format!(
            "\nsmallest arena: interval {g}, order {}: {}\n",
            order.name(),
            bytes(arena)
        ));
    }
    outp!("{text}");
    Ok(ExitCode::SUCCESS)
}

/// A plan file removed when dropped.
struct TempPlan(PathBuf);

impl Drop for TempPlan {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// When the pool needs a plan and none is given, trains it here and writes it to a
/// temporary file for the child, so that training does not count in the child's RSS.
fn with_plan(
    path: &Path,
    args: &ReplayArgs,
    needed: bool,
) -> Result<(ReplayArgs, Option<TempPlan>)> {
    let mut args = args.clone();
    if !needed || args.plan.is_some() {
        return Ok((args, None));
    }
    let trace = read_trace(path, &args.train)?;
    let plan = train(&trace, &options(path, &trace, &args.train)?)
        .with_context(|| format!("cannot train a plan from '{}'", path.display()))?;
    let file = std::env::temp_dir().join(format!("memplan-pool-plan-{}.json", std::process::id()));
    std::fs::write(&file, serde_json::to_string(&plan)?)
        .with_context(|| format!("cannot write '{}'", file.display()))?;
    args.plan = Some(file.clone());
    Ok((args, Some(TempPlan(file))))
}

fn spawn_child(trace: &Path, allocator: AllocatorKind, args: &ReplayArgs) -> Result<ReplayReport> {
    let exe = std::env::current_exe().context("cannot find the memplan executable")?;
    let mut command = Command::new(exe);
    command
        .arg("pool")
        .arg("replay-child")
        .arg(trace)
        .args(["--allocator", allocator.name()])
        .args(["--class-interval", &args.train.class_interval.to_string()])
        .args(["--order", args.train.order.to_possible_value_name()])
        .args(["--min-size", &args.train.min_size.to_string()])
        .args(["--first-iteration", &args.train.first_iteration.to_string()])
        .args([
            "--foreign-frees",
            match args.train.foreign_frees {
                ForeignFreesArg::Error => "error",
                ForeignFreesArg::Skip => "skip",
            },
        ]);
    if args.train.no_pack {
        command.arg("--no-pack");
    }
    if let Some(iteration) = args.train.iteration {
        command.args(["--iteration", &iteration.to_string()]);
    }
    if let Some(plan) = &args.plan {
        command.arg("--plan").arg(plan);
    }
    if args.touch {
        command.arg("--touch");
    }
    let output = command
        .output()
        .context("cannot run the replay child process")?;
    if !output.status.success() {
        bail!(
            "the {} replay failed: {}",
            allocator.name(),
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    serde_json::from_slice(&output.stdout).context("the replay child printed no report")
}

impl OrderArg {
    fn to_possible_value_name(self) -> &'static str {
        Order::from(self).name()
    }
}

fn print_replay(report: &ReplayReport, format: ReportFormat) -> Result<()> {
    match format {
        ReportFormat::Json => {
            let iterations: Vec<serde_json::Value> = report
                .iterations
                .iter()
                .map(|it| {
                    serde_json::json!({
                        "iteration": it.iteration,
                        "minor_faults": it.minor_faults,
                        "peak_rss_bytes": it.peak_rss_bytes,
                        "ns_per_alloc_free": it.ns_per_alloc_free,
                        "plan_hit_rate": it.plan_hit_rate,
                        "plan_hit_rate_ge32k": it.plan_hit_rate_ge32k,
                    })
                })
                .collect();
            let json = serde_json::json!({
                "allocator": report.allocator.name(),
                "setup_minor_faults": report.setup_minor_faults,
                "iterations": iterations,
            });
            outln!("{}", serde_json::to_string_pretty(&json)?);
        }
        ReportFormat::Table => {
            outln!("allocator {}", report.allocator.name());
            let mut rows = vec![vec![
                "setup".to_string(),
                report.setup_minor_faults.to_string(),
                mib(report.setup_peak_rss_bytes),
                "-".into(),
                "-".into(),
                "-".into(),
            ]];
            for it in &report.iterations {
                rows.push(vec![
                    it.iteration.to_string(),
                    it.minor_faults.to_string(),
                    mib(it.peak_rss_bytes),
                    format!("{:.1}", it.ns_per_alloc_free),
                    rate(it.plan_hit_rate),
                    rate(it.plan_hit_rate_ge32k),
                ]);
            }
            outp!(
                "{}",
                columns(
                    &[
                        "iteration",
                        "minor faults",
                        "peak RSS",
                        "ns/alloc+free",
                        "plan hits",
                        "hits >=32KiB"
                    ],
                    &rows
                )
            );
        }
    }
    Ok(())
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

fn rate(rate: Option<f64>) -> String {
    rate.map_or("-".into(), |r| format!("{:.2}%", r * 100.0))
}

fn bench(path: &Path, args: &ReplayArgs) -> Result<ExitCode> {
    let (mut args, _plan_file) = with_plan(path, args, true)?;
    args.touch = true;
    let mut reports = Vec::new();
    for &allocator in AllocatorKind::ALL {
        reports.push(spawn_child(path, allocator, &args)?);
    }
    let system_ns = reports
        .iter()
        .find(|r| r.allocator == AllocatorKind::System)
        .map(|r| mean(r.iterations.iter().skip(1).map(|it| it.ns_per_alloc_free)));
    let mut rows = Vec::new();
    for report in &reports {
        // Steady iterations: all but the first replayed.
        let steady: Vec<&IterationReport> = report.iterations.iter().skip(1).collect();
        let max_faults = steady.iter().map(|it| it.minor_faults).max().unwrap_or(0);
        let peak = report
            .iterations
            .iter()
            .map(|it| it.peak_rss_bytes)
            .max()
            .unwrap_or(report.setup_peak_rss_bytes);
        let ns = mean(steady.iter().map(|it| it.ns_per_alloc_free));
        let ms = mean(steady.iter().map(|it| it.iteration_ms));
        let hits = |f: fn(&IterationReport) -> Option<f64>| {
            let rates: Vec<f64> = report.iterations.iter().filter_map(f).collect();
            if rates.is_empty() {
                "-".to_string()
            } else {
                format!(
                    "{:.2}%",
                    rates.iter().cloned().fold(f64::INFINITY, f64::min) * 100.0
                )
            }
        };
        rows.push(vec![
            report.allocator.name().to_string(),
            report.setup_minor_faults.to_string(),
            report
                .iterations
                .first()
                .map_or("-".into(), |it| it.minor_faults.to_string()),
            max_faults.to_string(),
            mib(peak),
            format!("{ns:.1}"),
            system_ns.map_or("-".into(), |s| format!("{:.2}", ns / s)),
            format!("{ms:.1}"),
            hits(|it| it.plan_hit_rate),
            hits(|it| it.plan_hit_rate_ge32k),
        ]);
    }
    let (first, last) = match (
        reports.first().and_then(|r| r.iterations.first()),
        reports.first().and_then(|r| r.iterations.last()),
    ) {
        (Some(a), Some(b)) => (a.iteration, b.iteration),
        _ => bail!("the trace has no iterations to replay"),
    };
    outln!(
        "trace {} (iterations {first}-{last}; steady = {}-{last}; every page touched)",
        path.display(),
        first + 1
    );
    if let Some(pool) = reports.iter().find(|r| r.allocator == AllocatorKind::Pool) {
        if let (Some(arena), Some(peak)) = (pool.plan_bytes, pool.plan_live_peak_bytes) {
            outln!(
                "pool plan: arena {} for a live peak of {} ({:.3}x)",
                mib(arena),
                mib(peak),
                arena as f64 / peak.max(1) as f64
            );
        }
    }
    outp!(
        "{}",
        columns(
            &[
                "allocator",
                "setup faults",
                "first-iter faults",
                "max steady faults",
                "peak RSS",
                "ns/alloc+free",
                "vs system",
                "ms/iter",
                "min plan hits",
                "min hits >=32KiB",
            ],
            &rows
        )
    );
    Ok(ExitCode::SUCCESS)
}

fn mean(values: impl Iterator<Item = f64>) -> f64 {
    let (sum, n) = values.fold((0.0, 0usize), |(s, n), v| (s + v, n + 1));
    if n == 0 {
        0.0
    } else {
        sum / n as f64
    }
}

/// An allocator the replay drives.
trait Backend {
    /// `size >= 1` bytes aligned to `align`; null on failure.
    fn alloc(&self, size: usize, align: usize) -> *mut u8;
    /// Frees what `alloc` returned with the same size and alignment.
    ///
    /// # Safety
    /// `ptr` came from this backend's `alloc(size, align)` and is freed once.
    unsafe fn free(&self, ptr: *mut u8, size: usize, align: usize);
}

struct System;

impl Backend for System {
    fn alloc(&self, size: usize, align: usize) -> *mut u8 {
        let mut ptr = std::ptr::null_mut();
        let align = align.max(std::mem::size_of::<usize>());
        // SAFETY: align is a power of two and a multiple of sizeof(void*).
        let rc = unsafe { libc::posix_memalign(&mut ptr, align, size) };
        if rc == 0 {
            ptr.cast()
        } else {
            std::ptr::null_mut()
        }
    }

    unsafe fn free(&self, ptr: *mut u8, _size: usize, _align: usize) {
        // SAFETY: ptr came from posix_memalign (the caller's contract).
        unsafe { libc::free(ptr.cast()) }
    }
}

/// An allocator object (jemalloc, mimalloc) as a replay backend.
#[cfg(feature = "bench-allocators")]
struct Global<A: std::alloc::GlobalAlloc>(A);

#[cfg(feature = "bench-allocators")]
impl<A: std::alloc::GlobalAlloc> Backend for Global<A> {
    fn alloc(&self, size: usize, align: usize) -> *mut u8 {
        match std::alloc::Layout::from_size_align(size, align) {
            // SAFETY: the layout has a non-zero size (the replay never asks for 0).
            Ok(layout) => unsafe { self.0.alloc(layout) },
            Err(_) => std::ptr::null_mut(),
        }
    }

    unsafe fn free(&self, ptr: *mut u8, size: usize, align: usize) {
        // SAFETY: the caller's contract: ptr came from alloc with this layout, which was
        // therefore valid.
        unsafe {
            self.0.dealloc(
                ptr,
                std::alloc::Layout::from_size_align_unchecked(size, align),
            )
        }
    }
}

impl Backend for Pool {
    fn alloc(&self, size: usize, align: usize) -> *mut u8 {
        Pool::alloc(self, size, align).map_or(std::ptr::null_mut(), |p| p.as_ptr())
    }

    unsafe fn free(&self, ptr: *mut u8, _size: usize, _align: usize) {
        if let Some(ptr) = std::ptr::NonNull::new(ptr) {
            // SAFETY: the caller's contract: ptr came from this pool and is freed once.
            unsafe { Pool::free(self, ptr) }
        }
    }
}

/// Minor faults and peak RSS of this process so far.
fn usage() -> (u64, u64) {
    // SAFETY: getrusage only writes the struct it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid pointer to a rusage struct.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    (
        u64::try_from(usage.ru_minflt).unwrap_or(0),
        u64::try_from(usage.ru_maxrss).unwrap_or(0) * 1024,
    )
}

/// One request of the replay in 8 bytes, so that the replay's own memory stays small
/// beside the allocator's (peak RSS is measured for the whole process). The live
/// allocation a request makes or frees is known by a slot, reused once freed:
///
/// ```text
///  63        24 23    6 5     1 0
///  ┌──────────┬───────┬───────┬─┐
///  │ size (40)│ slot  │ align │a│   a = 1: allocation; align = log2 of the alignment
///  │          │ (18)  │ (5)   │ │   (alignments up to 2^31)
///  └──────────┴───────┴───────┴─┘
/// ```
#[derive(Clone, Copy)]
struct Step(u64);

const SIZE_BITS: u32 = 40;
const SLOT_BITS: u32 = 18;

impl Step {
    fn new(size: u64, slot: u32, align_log2: u32, alloc: bool) -> Option<Step> {
        if size >> SIZE_BITS != 0 || slot >> SLOT_BITS != 0 || align_log2 >= 32 {
            return None;
        }
        Some(Step(
            (size << (64 - SIZE_BITS))
                | (u64::from(slot) << 6)
                | (u64::from(align_log2) << 1)
                | u64::from(alloc),
        ))
    }
    fn size(self) -> usize {
        (self.0 >> (64 - SIZE_BITS)) as usize
    }
    fn slot(self) -> usize {
        ((self.0 >> 6) & ((1 << SLOT_BITS) - 1)) as usize
    }
    fn align(self) -> usize {
        1 << ((self.0 >> 1) & 31)
    }
    fn alloc(self) -> bool {
        self.0 & 1 == 1
    }
}

/// The steps of one iteration, with its number.
type IterationSteps = (u64, Vec<Step>);

/// The trace as steps, per iteration, and the number of slots.
fn steps(trace: &Trace) -> Result<(Vec<IterationSteps>, usize)> {
    let mut slot_of: HashMap<u64, u32> = HashMap::new();
    let mut free_slots: Vec<u32> = Vec::new();
    let mut slots = 0u32;
    let mut out = Vec::with_capacity(trace.iterations.len());
    for iteration in &trace.iterations {
        let mut steps = Vec::with_capacity(iteration.events.len());
        for event in trace.events_of(iteration) {
            usize::try_from(event.size).context("size does not fit in memory")?;
            let slot = match event.op {
                Op::Alloc => {
                    let slot = free_slots.pop().unwrap_or_else(|| {
                        slots += 1;
                        slots - 1
                    });
                    slot_of.insert(event.id, slot);
                    slot
                }
                Op::Free => {
                    // The trace reader checked that every free names a live id.
                    let slot = slot_of.remove(&event.id).context("free of an unknown id")?;
                    free_slots.push(slot);
                    slot
                }
            };
            // The trace reader checked that alignments are powers of two.
            let step = Step::new(
                event.size,
                slot,
                event.align.trailing_zeros(),
                event.op == Op::Alloc,
            )
            .with_context(|| {
                format!(
                    "the replay handles sizes below 2^{SIZE_BITS}, alignments up to 2^31 and \
                     2^{SLOT_BITS} live allocations; this trace exceeds them (size {}, align {})",
                    event.size, event.align
                )
            })?;
            steps.push(step);
        }
        out.push((iteration.number, steps));
    }
    Ok((out, slots as usize))
}

fn replay_here(path: &Path, kind: AllocatorKind, args: &ReplayArgs) -> Result<ReplayReport> {
    let trace = read_trace(path, &args.train)?;
    let (replay, slots) = steps(&trace)?;
    let pool_plan: Option<Plan> = match (kind, &args.plan) {
        (AllocatorKind::Pool, Some(plan_path)) => {
            let text = memplan::io::file::read_text(plan_path)?;
            let text = memplan::io::json_object(&text).map_err(|found| {
                    anyhow::anyhow!(
                        "'{}': the top level is {found}; a pool plan JSON is one object, as `memplan pool train -f json` writes it",
                        plan_path.display()
                    )
                })?;
            let plan = serde_json::from_str::<Plan>(text)
                .with_context(|| format!("'{}' is not a pool plan JSON", plan_path.display()))?;
            plan.validate().map_err(|why| {
                anyhow::anyhow!(
                    "'{}' is not a valid pool plan: {why}; train one with `memplan pool train TRACE -o PLAN`",
                    plan_path.display()
                )
            })?;
            Some(plan)
        }
        (AllocatorKind::Pool, None) => Some(train(&trace, &options(path, &trace, &args.train)?)?),
        _ => None,
    };
    // Only the compact steps stay in memory during the replay; the C heap gives back what
    // reading the trace used, so that every allocator starts from the same footprint.
    drop(trace);
    // SAFETY: malloc_trim only releases free memory of the C heap.
    unsafe { libc::malloc_trim(0) };
    let chosen = match (kind, &pool_plan) {
        (AllocatorKind::Pool, Some(plan)) => {
            Chosen::Pool(Box::new(Pool::new(plan, PoolOptions { prefault: true })?))
        }
        #[cfg(feature = "bench-allocators")]
        (AllocatorKind::Jemalloc, _) => Chosen::Jemalloc(Global(tikv_jemallocator::Jemalloc)),
        #[cfg(feature = "bench-allocators")]
        (AllocatorKind::Mimalloc, _) => Chosen::Mimalloc(Global(mimalloc::MiMalloc)),
        #[cfg(not(feature = "bench-allocators"))]
        (AllocatorKind::Jemalloc | AllocatorKind::Mimalloc, _) => bail!(
            "this memplan was built without the bench-allocators feature, so it cannot replay through {}; build it with `cargo install --path crates/memplan-cli --locked --features bench-allocators`",
            kind.name()
        ),
        _ => Chosen::System(System),
    };
    let (backend, pool): (&dyn Backend, Option<&Pool>) = match &chosen {
        Chosen::Pool(pool) => (&**pool, Some(&**pool)),
        Chosen::System(system) => (system, None),
        #[cfg(feature = "bench-allocators")]
        Chosen::Jemalloc(jemalloc) => (jemalloc, None),
        #[cfg(feature = "bench-allocators")]
        Chosen::Mimalloc(mimalloc) => (mimalloc, None),
    };
    // Iterations before the plan's are the recording phase: the pool serves them by its
    // OS fallback, so that their long-lived allocations do not hold planned blocks.
    let serve_from = pool_plan.as_ref().map_or(0, |p| p.iteration);
    let (setup_minor_faults, setup_peak_rss_bytes) = usage();
    let mut live: Vec<*mut u8> = vec![std::ptr::null_mut(); slots];
    let mut iterations = Vec::new();
    for (number, steps) in &replay {
        let number = *number;
        if let Some(pool) = pool {
            pool.begin_iteration();
            pool.set_serving(number >= serve_from);
        }
        let before = pool.map(|p| p.stats());
        let (faults_before, _) = usage();
        let started = Instant::now();
        let mut spent_ns: u128 = 0;
        let mut allocations = 0u64;
        for &step in steps {
            let (size, align, slot) = (step.size(), step.align(), step.slot());
            if step.alloc() {
                let t = Instant::now();
                let ptr = backend.alloc(size, align);
                spent_ns += t.elapsed().as_nanos();
                if ptr.is_null() {
                    bail!("{}: out of memory allocating {size} bytes", kind.name());
                }
                if args.touch {
                    touch(ptr, size);
                }
                allocations += 1;
                live[slot] = ptr;
            } else {
                let ptr = std::mem::replace(&mut live[slot], std::ptr::null_mut());
                let t = Instant::now();
                // SAFETY: ptr came from this backend with this size and alignment (the
                // trace reader checked that frees match live allocations).
                unsafe { backend.free(ptr, size, align) };
                spent_ns += t.elapsed().as_nanos();
            }
        }
        let iteration_ms = started.elapsed().as_secs_f64() * 1e3;
        let (faults_after, peak_rss_bytes) = usage();
        // No rate for the iterations before the plan's: the pool does not serve them.
        let (plan_hit_rate, plan_hit_rate_ge32k) = match (pool, before) {
            (Some(pool), Some(before)) if number >= serve_from => {
                let after = pool.stats();
                let fraction = |hits: u64, requests: u64| {
                    if requests == 0 {
                        1.0
                    } else {
                        hits as f64 / requests as f64
                    }
                };
                (
                    Some(fraction(
                        after.plan_hits - before.plan_hits,
                        after.requests - before.requests,
                    )),
                    Some(fraction(
                        after.large_plan_hits - before.large_plan_hits,
                        after.large_requests - before.large_requests,
                    )),
                )
            }
            _ => (None, None),
        };
        iterations.push(IterationReport {
            iteration: number,
            minor_faults: faults_after.saturating_sub(faults_before),
            peak_rss_bytes,
            ns_per_alloc_free: if allocations == 0 {
                0.0
            } else {
                spent_ns as f64 / allocations as f64
            },
            plan_hit_rate,
            plan_hit_rate_ge32k,
            allocations,
            iteration_ms,
        });
    }
    Ok(ReplayReport {
        allocator: kind,
        setup_minor_faults,
        setup_peak_rss_bytes,
        plan_bytes: pool_plan.as_ref().map(|p| p.arena_bytes),
        plan_live_peak_bytes: pool_plan.as_ref().map(|p| p.live_peak_bytes),
        iterations,
    })
}

/// The allocator a replay child drives.
enum Chosen {
    Pool(Box<Pool>),
    System(System),
    #[cfg(feature = "bench-allocators")]
    Jemalloc(Global<tikv_jemallocator::Jemalloc>),
    #[cfg(feature = "bench-allocators")]
    Mimalloc(Global<mimalloc::MiMalloc>),
}

/// Writes one byte in every 4 KiB page of the allocation, and its last byte.
fn touch(ptr: *mut u8, size: usize) {
    for offset in (0..size).step_by(4096).chain(std::iter::once(size - 1)) {
        // SAFETY: the allocator returned `size` writable bytes at ptr; offset < size.
        unsafe { ptr.add(offset).write_volatile(1) };
    }
}

#[cfg(test)]
mod tests {
    use super::Step;

    #[test]
    fn steps_round_trip_and_refuse_what_does_not_fit() {
        for (size, slot, align_log2, alloc) in [
            (1u64, 0u32, 0u32, true),
            ((1 << 40) - 1, (1 << 18) - 1, 31, false),
            (25_690_112, 77, 6, true),
        ] {
            let step = Step::new(size, slot, align_log2, alloc).unwrap();
            assert_eq!(step.size() as u64, size);
            assert_eq!(step.slot(), slot as usize);
            assert_eq!(step.align(), 1usize << align_log2);
            assert_eq!(step.alloc(), alloc);
        }
        assert!(Step::new(1 << 40, 0, 0, true).is_none());
        assert!(Step::new(1, 1 << 18, 0, true).is_none());
        assert!(Step::new(1, 0, 32, true).is_none());
    }
}
