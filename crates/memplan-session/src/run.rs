//! Running one configured planner on a problem and holding its plan to the checker: the
//! step every shell runs between loading an input and reporting on it.
//!
//! ```text
//!  Problem ──► run(problem, &Algorithm, &Hooks) ──► Output { plan, elapsed, stats }
//!                                                        │
//!              verify(problem, &plan) ◄──────────────────┘  (the independent checker)
//!              Bounds::of(problem, &output)                  (max-live, and search's proof)
//! ```
//!
//! [`Algorithm`] names what runs, with its options; [`Stats`] carries what each one
//! reports (best-of's winner and attempts, strip's outcome, search's proof and proven
//! bound). A planner's logic stays in `memplan::planner`; this module only dispatches.

use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use memplan::checker::{self, Report};
use memplan::planner::search::{self, Search};
use memplan::planner::strip::StripOutcome;
use memplan::planner::{best_of, PlanError, Planner, Strip};
use memplan::{bound, Plan, Problem};

/// What to run, with its options.
#[derive(Clone)]
pub enum Algorithm {
    /// `best-of`: every greedy candidate, the smallest arena kept.
    BestOf,
    /// `search`, with its options (time and node limits, seed, threads, rules, capacity).
    Search(Search),
    /// `strip`, with its options.
    Strip(Strip),
    /// Any other planner, run as it is (`exclusive`'s modes are planners too: their
    /// problem carries the exclusivity).
    Planner(&'static dyn Planner),
}

impl Algorithm {
    /// The name of the planner that runs.
    pub fn name(&self) -> &'static str {
        match self {
            Algorithm::BestOf => best_of::BestOf.name(),
            Algorithm::Search(_) => Search::DEFAULT.name(),
            Algorithm::Strip(_) => Strip::DEFAULT.name(),
            Algorithm::Planner(p) => p.name(),
        }
    }
}

/// What a run may be told from outside: a progress callback (search) and a cancel flag
/// (search stops soon after it is set, returning its best plan so far).
#[derive(Clone, Copy, Default)]
pub struct Hooks<'a> {
    pub progress: Option<search::OnProgress<'a>>,
    pub cancel: Option<&'a AtomicBool>,
}

/// Each planner's own report of a run.
pub enum Stats {
    /// A planner that reports nothing beyond its plan.
    None,
    /// best-of: the candidate kept and every candidate's attempt.
    BestOf {
        chosen: &'static str,
        attempts: Vec<best_of::Attempt>,
    },
    /// strip: the options it ran with and its outcome (variant, iterations, stop).
    Strip {
        options: Strip,
        outcome: Box<StripOutcome>,
    },
    /// search: its outcome (proof, proven lower bound, nodes, stop).
    Search(Box<search::Outcome>),
}

/// A run's plan, its planning time and the planner's report.
pub struct Output {
    pub plan: Plan,
    pub elapsed: Duration,
    pub stats: Stats,
}

impl Output {
    /// best-of's kept candidate, when best-of ran.
    pub fn chosen(&self) -> Option<&'static str> {
        match &self.stats {
            Stats::BestOf { chosen, .. } => Some(chosen),
            _ => None,
        }
    }

    /// search's outcome, when search ran.
    pub fn search(&self) -> Option<&search::Outcome> {
        match &self.stats {
            Stats::Search(outcome) => Some(outcome),
            _ => None,
        }
    }
}

/// Runs `algorithm` on `problem`.
pub fn run(problem: &Problem, algorithm: &Algorithm, hooks: &Hooks) -> Result<Output, PlanError> {
    let started = Instant::now();
    let (plan, stats) = match algorithm {
        Algorithm::BestOf => {
            let attempts = best_of::run_all(problem);
            let kept = &attempts[best_of::winner(&attempts)?];
            let plan = kept.result.clone()?;
            let chosen = kept.planner;
            (plan, Stats::BestOf { chosen, attempts })
        }
        Algorithm::Search(options) => {
            let outcome = options.run_cancellable(problem, hooks.progress, hooks.cancel)?;
            (outcome.plan.clone(), Stats::Search(Box::new(outcome)))
        }
        Algorithm::Strip(options) => {
            let outcome = options.run(problem)?;
            (
                outcome.plan.clone(),
                Stats::Strip {
                    options: *options,
                    outcome: Box::new(outcome),
                },
            )
        }
        Algorithm::Planner(planner) => (planner.plan(problem)?, Stats::None),
    };
    Ok(Output {
        plan,
        elapsed: started.elapsed(),
        stats,
    })
}

/// The lower bounds known for a problem after a run: max-live always, and the bound a
/// search proved (never below max-live) when search ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bounds {
    /// The largest total size live at one step (0 for an empty problem).
    pub max_live: u64,
    /// The bound search proved, when it ran.
    pub proven: Option<u64>,
}

impl Bounds {
    /// The bounds of `problem`, with search's proven bound from `output` when it ran.
    /// `None` when the bytes live at one step overflow 64 bits.
    pub fn of(problem: &Problem, output: Option<&Output>) -> Option<Bounds> {
        Some(Bounds::with_max_live(bound::max_live(problem)?, output))
    }

    /// [`Bounds::of`] with max-live already computed (a staged problem carries it).
    pub fn with_max_live(max_live: u64, output: Option<&Output>) -> Bounds {
        Bounds {
            max_live,
            proven: output
                .and_then(Output::search)
                .map(|s| s.lower_bound.max(max_live)),
        }
    }

    /// The best bound known: the proven one when there is one, else max-live.
    pub fn best(&self) -> u64 {
        self.proven.unwrap_or(self.max_live).max(self.max_live)
    }
}

/// A plan a planner produced that the checker rejects: a bug in memplan, reported with
/// the planner, the number of violations and the first few.
#[derive(Debug)]
pub struct InvalidPlan {
    pub planner: String,
    pub report: Report,
}

impl std::fmt::Display for InvalidPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "internal error: planner '{}' produced an invalid plan ({} violations); please report this bug with the input file:",
            self.planner,
            self.report.violations.len()
        )?;
        for v in self.report.violations.iter().take(10) {
            write!(f, "\n  {v}")?;
        }
        Ok(())
    }
}

impl std::error::Error for InvalidPlan {}

/// Checks `plan` against `problem` with the independent checker; an invalid plan is an
/// [`InvalidPlan`] error naming `planner`.
pub fn verify(problem: &Problem, plan: &Plan, planner: &str) -> Result<Report, InvalidPlan> {
    let report = checker::check(problem, plan);
    if report.is_valid() {
        Ok(report)
    } else {
        Err(InvalidPlan {
            planner: planner.to_string(),
            report,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memplan::Buffer;

    fn problem() -> Problem {
        Problem::from_buffers(vec![
            Buffer::new("a", 32, 0, 2),
            Buffer::new("b", 16, 1, 3),
            Buffer::new("c", 32, 2, 4),
            Buffer::new("d", 8, 0, 4),
        ])
        .unwrap()
    }

    /// Every algorithm runs, its plan passes the checker, and its report is the right one.
    #[test]
    fn every_algorithm_runs_and_checks() {
        let p = problem();
        let algorithms = [
            Algorithm::BestOf,
            Algorithm::Search(Search {
                time_limit: Duration::from_secs(1),
                ..Search::DEFAULT
            }),
            Algorithm::Strip(Strip::DEFAULT),
            Algorithm::Planner(&memplan::planner::Naive),
        ];
        for algorithm in &algorithms {
            let out = run(&p, algorithm, &Hooks::default()).unwrap();
            verify(&p, &out.plan, algorithm.name()).unwrap();
            let bounds = Bounds::of(&p, Some(&out)).unwrap();
            assert_eq!(bounds.max_live, 56);
            match (algorithm, &out.stats) {
                (Algorithm::BestOf, Stats::BestOf { chosen, attempts }) => {
                    assert!(attempts.iter().any(|a| a.planner == *chosen));
                    assert_eq!(out.chosen(), Some(*chosen));
                }
                (Algorithm::Search(_), Stats::Search(s)) => {
                    assert!(s.proven_optimal);
                    assert_eq!(bounds.proven, Some(s.arena.max(56)));
                    assert_eq!(bounds.best(), s.arena);
                }
                (Algorithm::Strip(_), Stats::Strip { .. })
                | (Algorithm::Planner(_), Stats::None) => {
                    assert_eq!(bounds.proven, None)
                }
                _ => panic!("{}: wrong stats", algorithm.name()),
            }
        }
    }

    /// A plan that breaks its problem is an error naming the planner and the violation.
    #[test]
    fn verify_rejects_a_broken_plan() {
        let p = problem();
        let broken = Plan::new(&p, vec![0, 0, 0, 0]).unwrap();
        let e = verify(&p, &broken, "naive").unwrap_err().to_string();
        assert!(
            e.contains("planner 'naive'") && e.contains("violations"),
            "{e}"
        );
    }
}
