//! `memplan`: plan, check and bound the memory of tensors from the command line.
//!
//! Exit status: 0 on success, 1 when `memplan check` finds violations, 2 on bad input or
//! usage (the message says which file, line or field was wrong).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

mod commands;
mod input;
mod pool;
mod progress;
mod table;

/// Static memory planning for neural-network tensors.
#[derive(Parser, Debug)]
#[command(name = "memplan", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Plan the buffers of FILE (a minimalloc CSV) and print the plan.
    Plan {
        /// The problem: a minimalloc CSV (`id,lower,upper,size[,alignment,offset,hint,gaps]`).
        file: PathBuf,
        /// Which planner to run (see `memplan planners`).
        #[arg(long, short, default_value = "best-of")]
        planner: String,
        /// Output format: a summary table, the plan JSON, or a minimalloc solution CSV.
        #[arg(long, short, value_enum, default_value_t = Format::Table)]
        format: Format,
        /// Write the output to this file instead of standard output.
        #[arg(long, short)]
        output: Option<PathBuf>,
        /// Align every offset to a multiple of N bytes (on top of each buffer's own).
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
        alignment: u64,
    },
    /// Check PLAN (plan JSON or solution CSV) against PROBLEM; exit 1 listing every violation.
    Check {
        /// The problem the plan claims to solve (minimalloc CSV).
        problem: PathBuf,
        /// The plan: plan JSON (`memplan plan --format json`) or a CSV with an `offset` column.
        plan: PathBuf,
        /// Output format.
        #[arg(long, short, value_enum, default_value_t = ReportFormat::Table)]
        format: ReportFormat,
    },
    /// Print the max-live lower bound of FILE: no valid plan has a smaller arena.
    Bound {
        /// The problem (minimalloc CSV).
        file: PathBuf,
        /// Output format.
        #[arg(long, short, value_enum, default_value_t = ReportFormat::Table)]
        format: ReportFormat,
    },
    /// List the planners with a one-line description each.
    Planners,
    /// Run planners on problem files and print arena, arena/bound and time for each, in one
    /// run; every plan is checked.
    Bench {
        /// Problem files (minimalloc CSV).
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Comma-separated planner names (default: every planner).
        #[arg(long, short, value_delimiter = ',')]
        planners: Vec<String>,
        /// Output format.
        #[arg(long, short, value_enum, default_value_t = BenchFormat::Table)]
        format: BenchFormat,
        /// Run each planner this many times per file and report the fastest time.
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
        repeat: u32,
    },
    /// Method 3, the profile-guided tensor pool: train a plan from an allocation trace,
    /// replay traces through allocators, compare them.
    #[command(subcommand)]
    Pool(pool::PoolCommand),
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
}

/// How `check` and `bound` print their result.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum ReportFormat {
    /// A human-readable summary.
    Table,
    /// JSON.
    Json,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Plan {
            file,
            planner,
            format,
            output,
            alignment,
        } => commands::plan(&file, &planner, format, output.as_deref(), alignment),
        Command::Check {
            problem,
            plan,
            format,
        } => commands::check(&problem, &plan, format),
        Command::Bound { file, format } => commands::bound(&file, format),
        Command::Planners => commands::planners(),
        Command::Bench {
            files,
            planners,
            format,
            repeat,
        } => commands::bench(&files, &planners, format, repeat),
        Command::Pool(command) => pool::run(command),
    };
    match result {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::from(2)
        }
    }
}
