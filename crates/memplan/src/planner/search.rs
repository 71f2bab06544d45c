//! `search`: an anytime branch-and-bound over canonical placements that minimises the
//! arena and says when the result is proven optimal.
//!
//! It starts from the best greedy plan ([`super::BestOf`]), so it is never worse than
//! `best-of`, and improves it until the arena meets a lower bound, the search proves that
//! nothing smaller exists, or the time (or node) limit runs out. See `doc/search.md` for
//! the algorithm, the rules and measurements.
//!
//! # Canonical placements
//!
//! Any valid plan can be *compacted*: drop every buffer to the lowest aligned offset at
//! which it overlaps none of the buffers below it that it must not share bytes with (and
//! no fixed buffer). Compacting never raises the arena. A compacted plan is rebuilt by
//! placing its buffers in increasing offset order, each at its *minimum offset*: the
//! highest top of the placed buffers it must not share bytes with, rounded up to its
//! alignment and pushed past fixed buffers. So the search only decides an *order*:
//!
//! ```text
//!  address                                 node: every unplaced buffer has a minimum
//!    ▲          ┌───── c (placed) ────┐     offset (the top of its placed neighbours);
//!    │ ┌─ a ─┐  └─────────────────────┘     the search branches on which buffer goes
//!    │ │     │ ┌─── b (placed) ──┐          next, lowest minimum offset first:
//!    └─┴─────┴─┴─────────────────┴──▶ time      x at min(x) = top(b), y at top(c) ...
//! ```
//!
//! # Pruning rules ([`Rules`], each switchable)
//!
//! The search is complete for "is there a plan with arena at most the cap?": among such
//! plans, one with the least sum of offsets is compacted and obeys every rule below.
//!
//! - `canonical`: buffers are placed in non-decreasing (offset, preorder rank): one order
//!   per compacted plan instead of every interleaving of independent buffers.
//! - `dominance`: a buffer whose minimum offset is at or above the lowest *top* an
//!   unplaced buffer could reach (`min_offset + size`) is not placed next: that other
//!   buffer fits entirely below it, so a least-sum plan places it first.
//! - `sections`: time is cut into sections between lifetime endpoints; in each section
//!   the unplaced buffers live there are pairwise live together, so they need
//!   `floor + remaining sizes <= cap`, where the floor is the lowest minimum offset among
//!   them (and, with `canonical`, at least the offset just placed).
//! - `hatless`: once a candidate whose unplaced neighbours all have minimum offsets at or
//!   above its top has failed, the remaining candidates are skipped: a least-sum plan
//!   places it at its current key, before any larger key (MiniMalloc's rule is the case of
//!   no unplaced neighbour).
//! - `restarts`: the search is restarted with a node budget (4 n, doubling every 3
//!   runs), cycling through several static preorders (ranks used to
//!   break ties), so one bad early choice does not trap the whole run (MiniMalloc's round
//!   robin).
//! - `decompose`: MiniMalloc's dynamic decomposition. A section boundary that no unplaced
//!   buffer's lifetime hull crosses (nor a conflict pair with both unplaced) separates the
//!   unplaced buffers into parts that share no constraint: they are searched one after the
//!   other (each in canonical order after the placement that split them, with dominance
//!   and the section rule inside the part). When a part cannot fit under the cap while the
//!   placed buffers do, no completion of the splitting node can, whatever the other parts
//!   do: the search backtracks to that node at once instead of retrying the part under
//!   every arrangement of the parts before it. At the root this is the static split into
//!   time components.
//! - `reuse`: the parts of the root split share nothing, so the lowest plan found for each
//!   (by either thread) is kept and, in later runs, placed as it is while it fits under
//!   the cap; only the other parts are searched. Parts that different preorders solve
//!   (E's two components) are then solved one run at a time.
//! - `reorder` (not a cut): at each split, each part's buffers are reordered by
//!   MiniMalloc's T recomputed for the part (the largest unplaced total live in a section
//!   they span), ties by the preorder; with `restarts` the prover alternates reordered and
//!   static runs of each preorder, the improver stays static.
//! - `lns` (off by default; not a cut): the improver lowers the incumbent with rounds of
//!   the large-neighbourhood search ([`super::lns`]) before its first run and after every
//!   run that found a plan, each round counted as a node.
//! - `dive` (not a cut): the improver's run stops at its first plan, and the same preorder
//!   runs again from the root with the cap just below that plan, for as long as each run
//!   finds one. A depth-first run that found a plan is deep in the subtree of the choices
//!   that made it; a plan a little lower often needs an early choice changed, which a
//!   restart reaches in a few hundred nodes (on J, 13 plans 1 KiB apart, 409-428 nodes
//!   each) where backtracking does not.
//! - `memo` (a cut by memory, not a rule of the plans): a node whose subtree was searched
//!   to the end without a plan is remembered by a 128-bit hash of what its subtree depends
//!   on (the unplaced buffers' minimum offsets, the last key, the part), and the same node
//!   reached again by placing the same buffers another way is cut. The memo of a preorder
//!   stays over its runs while their caps do not rise, so a restart goes on where the last
//!   run of that preorder stopped. On minimalloc D at the best known peak a plan is found
//!   in 171,525 nodes with it and none in 1,500,000 without.
//!
//! The section rule keeps no floors up to date: each section remembers a *witness*, an
//! unplaced member whose minimum offset was low enough, and only a section whose witness is
//! placed or too high scans its members (keeping every floor exact cost 95 % of the time on
//! J's slowest preorder).
//!
//! Always on: a node is cut where an unplaced buffer cannot fit under the cap
//! (`min_offset + size > cap`); caps move in steps of `g`, which divides every compacted
//! plan's arena (the gcd of sizes, alignments of unfixed buffers and fixed offsets).
//!
//! # Optimising
//!
//! Two searches share the incumbent: an *improver* whose cap is aimed between the bound and
//! the incumbent (1/8 of the way first; one eighth closer to the incumbent after each run
//! that ends on its node budget empty-handed; without `dive`, one eighth closer to the
//! bound after a run that found a plan) and set to `arena - g` at every plan it finds
//! (with `dive`, by a new run from the root; without, in the same run: branch and bound),
//! and a *prover* with cap = the lower bound (the max-live bound, rounded up to `g`): a plan found there is optimal. An exhausted search proves that nothing fits under
//! its final cap and raises the bound to `cap + g`. With two threads they run in parallel;
//! with one they alternate under the node budgets, and, with `probe`, once the improver
//! probes, a round is the improver's alone while it has searched fewer than four times the
//! prover's nodes (the prover keeping its own order of preorders and budgets).
//!
//! Problems with more than [`EXACT_LIMIT`] unfixed buffers are not searched exactly: they
//! start from best-of's plan (all of it, even when that takes longer than the time limit:
//! search is never worse than best-of) and what is left of the limit goes to the
//! large-neighbourhood search (LNS) ([`super::lns`]).

use std::collections::HashSet;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::granularity::granularity_and_unfixed;
use super::lns::{improve, Improved, Limits};
use super::zero_size::{zero_size_floor, Split};
use super::{BestOf, PlanError, Planner};
use crate::bound::max_live;
use crate::checker::check;
use crate::plan::Plan;
use crate::problem::Problem;

/// Above this many buffers without a fixed offset, [`Search`] runs the large-neighbourhood
/// search (LNS) instead of the exact search (whose nodes cost `O(n + sections)` each).
pub const EXACT_LIMIT: usize = 2000;

/// The pruning rules of the exact search; all on by [`Default`]. Switching one off never
/// changes the optimum, only the number of nodes it takes to find and prove it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rules {
    /// Place buffers in non-decreasing (offset, rank) order only.
    pub canonical: bool,
    /// Skip buffers that would leave room for another entirely below them.
    pub dominance: bool,
    /// Per time section: floor + remaining sizes must fit under the cap.
    pub sections: bool,
    /// After a failed candidate that no unplaced neighbour can go below any more, skip the
    /// remaining candidates (needs `canonical`).
    pub hatless: bool,
    /// Restart with doubling node budgets over several preorders.
    pub restarts: bool,
    /// Search the parts of the unplaced buffers that the placed ones separate in time one
    /// after the other; a part that does not fit refutes the node that split it off.
    pub decompose: bool,
    /// Keep the best plan found for each part of the root split (`decompose`) and place it
    /// as it is in later runs while it fits under the cap, instead of searching the part
    /// again.
    pub reuse: bool,
    /// The improver runs rounds of the large-neighbourhood search ([`super::lns`]) from the
    /// incumbent before its first run and after every run that found a plan.
    pub lns: bool,
    /// At each split (`decompose`), reorder each part's buffers by the largest unplaced
    /// total size live in a section they span (MiniMalloc's T, recomputed for the part),
    /// ties by the preorder.
    pub reorder: bool,
    /// The improver stops at its first plan and runs the same preorder again from the root
    /// with the cap just below it, for as long as each run finds one; without it, a run
    /// goes on depth-first under the tightened cap.
    pub dive: bool,
    /// Once the improver's aim has reached the incumbent (every lower aim ran out of
    /// budget), its runs that are not dives search at a random cap in the top third of
    /// the gap between the bound and the incumbent instead of just below the incumbent,
    /// one *episode* per cap with budgets from 4 n doubling every few runs (a decision
    /// from scratch), short and long episodes mixed (`doc/search.md`): a decision at a
    /// lower cap can be far easier than one just below the incumbent.
    pub probe: bool,
    /// Remember the nodes whose subtree a run has searched to the end without a plan (by
    /// a 128-bit hash of the unplaced buffers' minimum offsets, the last key and the part)
    /// and cut a node that comes again, reached by placing the same buffers another way.
    pub memo: bool,
}

impl Default for Rules {
    fn default() -> Rules {
        Rules::DEFAULT
    }
}

impl Rules {
    /// Every rule on.
    pub const ALL: Rules = Rules {
        canonical: true,
        dominance: true,
        sections: true,
        hatless: true,
        restarts: true,
        decompose: true,
        reuse: true,
        lns: true,
        reorder: true,
        dive: true,
        probe: true,
        memo: true,
    };

    /// The default: every rule but `lns` (measured: it costs the improver more nodes than
    /// it saves, see `doc/search.md`).
    pub const DEFAULT: Rules = Rules {
        lns: false,
        ..Rules::ALL
    };

    /// The rule names as [`Rules::parse`] reads them.
    pub const NAMES: [&'static str; 12] = [
        "canonical",
        "dominance",
        "sections",
        "hatless",
        "restarts",
        "decompose",
        "reuse",
        "lns",
        "reorder",
        "dive",
        "probe",
        "memo",
    ];

    /// Reads a comma-separated list of rule names starting from [`Rules::DEFAULT`]; a
    /// leading `-` switches a rule off, `+` or nothing on (`"-dominance,+decompose"`). An
    /// empty string is the default.
    pub fn parse(spec: &str) -> Result<Rules, String> {
        let mut rules = Rules::default();
        for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (on, name) = match item.strip_prefix('-') {
                Some(name) => (false, name),
                None => (true, item.strip_prefix('+').unwrap_or(item)),
            };
            let slot = match name {
                "canonical" => &mut rules.canonical,
                "dominance" => &mut rules.dominance,
                "sections" => &mut rules.sections,
                "hatless" => &mut rules.hatless,
                "restarts" => &mut rules.restarts,
                "decompose" => &mut rules.decompose,
                "reuse" => &mut rules.reuse,
                "lns" => &mut rules.lns,
                "reorder" => &mut rules.reorder,
                "dive" => &mut rules.dive,
                "probe" => &mut rules.probe,
                "memo" => &mut rules.memo,
                _ => {
                    return Err(format!(
                        "unknown search rule '{name}'; known rules: {}",
                        Rules::NAMES.join(", ")
                    ))
                }
            };
            *slot = on;
        }
        Ok(rules)
    }
}

/// The `search` planner with its options.
#[derive(Clone, Debug)]
pub struct Search {
    /// Wall-clock budget; the best plan found by then is returned.
    pub time_limit: Duration,
    /// Stop after this many search nodes (all threads together); `None` for no limit.
    /// With one thread and a node limit that ends the search before the time limit, the
    /// result is deterministic.
    pub node_limit: Option<u64>,
    /// Seed of the preorder rotation and of the large-neighbourhood search.
    pub seed: u64,
    /// Worker threads; 0 for every available core. The exact search uses at most 2 (an
    /// improver and a prover), the large-neighbourhood search all of them (one chain each).
    pub threads: usize,
    /// The pruning rules.
    pub rules: Rules,
    /// Decision mode: `Some(c)` asks for any plan with arena at most `c` (or the proof
    /// that none exists) instead of the smallest arena. The search stops at the first
    /// plan that fits ([`Stop::Capacity`]) or when its search at cap `c` is exhausted
    /// (the bound then exceeds `c`: [`Outcome::capacity_met`] is `Some(false)`); both
    /// threads search at cap `c`, as MiniMalloc's `--capacity` does.
    pub capacity: Option<u64>,
    /// The problem's max-live bound ([`crate::bound::max_live`]) when the caller has
    /// computed it already (the CLI prints it): on 10^7 buffers that sweep takes seconds
    /// of the time limit. `None`: computed here. A wrong value gives a wrong lower bound,
    /// never a wrong plan.
    pub max_live: Option<u64>,
}

impl Search {
    /// 5 s, no node limit, seed 0, every available core, the default rules.
    pub const DEFAULT: Search = Search {
        time_limit: Duration::from_secs(5),
        node_limit: None,
        seed: 0,
        threads: 0,
        rules: Rules::DEFAULT,
        capacity: None,
        max_live: None,
    };
}

impl Default for Search {
    fn default() -> Search {
        Search::DEFAULT
    }
}

/// Why the search stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// The arena equals the lower bound.
    LowerBound,
    /// The search below the incumbent was exhausted: proven optimal.
    Exhausted,
    /// The time limit ran out.
    TimeLimit,
    /// The node limit ran out.
    NodeLimit,
    /// The caller cancelled the run ([`Search::run_cancellable`]).
    Interrupted,
    /// Decision mode ([`Search::capacity`]): the plan fits the capacity.
    Capacity,
    /// Decision mode: no plan fits the capacity (the lower bound exceeds it).
    Infeasible,
}

impl Stop {
    /// A short name for tables and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Stop::LowerBound => "lower-bound",
            Stop::Exhausted => "exhausted",
            Stop::TimeLimit => "time-limit",
            Stop::NodeLimit => "node-limit",
            Stop::Interrupted => "interrupted",
            Stop::Capacity => "capacity",
            Stop::Infeasible => "infeasible",
        }
    }
}

/// The result of [`Search::run`].
#[derive(Clone, Debug)]
pub struct Outcome {
    /// The best plan found (checked valid).
    pub plan: Plan,
    /// Its arena.
    pub arena: u64,
    /// The arena of the starting greedy plan (`best-of`).
    pub start_arena: u64,
    /// The best lower bound known at the end (max-live, raised by exhausted searches).
    pub lower_bound: u64,
    /// True when no valid plan has a smaller arena.
    pub proven_optimal: bool,
    /// Search nodes visited (all threads); without the exact search, the rounds of the
    /// large-neighbourhood search (LNS).
    pub nodes: u64,
    /// When the returned plan was found, from the start.
    pub found_after: Duration,
    /// Total time.
    pub elapsed: Duration,
    /// Why it stopped.
    pub stop: Stop,
    /// True when the exact search ran (false: the large-neighbourhood search).
    pub exact: bool,
    /// Decision mode ([`Search::capacity`]): `Some(true)` when the plan fits the capacity,
    /// `Some(false)` when no plan does (proven), `None` when undecided (time or node
    /// limit) or not in decision mode.
    pub capacity_met: Option<bool>,
}

/// A snapshot for progress displays.
#[derive(Clone, Copy, Debug)]
pub struct Progress {
    /// Arena of the incumbent.
    pub best: u64,
    /// Lower bound.
    pub lower_bound: u64,
    /// Nodes so far.
    pub nodes: u64,
    /// Time so far.
    pub elapsed: Duration,
}

/// A progress callback; called from the search threads.
pub type OnProgress<'a> = &'a (dyn Fn(Progress) + Sync);

impl Planner for Search {
    fn name(&self) -> &'static str {
        "search"
    }

    fn description(&self) -> &'static str {
        "anytime exact search over canonical placements from best-of's plan (never worse); proves optimality (5 s; the default planner, for 1 s)"
    }

    fn plan(&self, problem: &Problem) -> Result<Plan, PlanError> {
        self.run(problem, None).map(|o| o.plan)
    }
}

impl Search {
    /// Plans `problem`, reporting progress to `progress` (at most every 200 ms, and when
    /// the incumbent or the bound changes).
    pub fn run(
        &self,
        problem: &Problem,
        progress: Option<OnProgress>,
    ) -> Result<Outcome, PlanError> {
        self.run_cancellable(problem, progress, None)
    }

    /// [`Search::run`] that also ends, with the best plan found so far, soon after
    /// `cancel` becomes true (the Python binding sets it on Ctrl-C). The greedy start
    /// (`best-of`) always completes; the outcome's stop is [`Stop::Interrupted`].
    ///
    /// Zero-size buffers are not searched (they occupy nothing): the problem without them
    /// is, and each is put at its fixed offset or 0 in the result. The outcome's arenas and
    /// bound then count the highest fixed offset of a zero-size buffer, which every plan's
    /// arena reaches; the progress reports do not.
    pub fn run_cancellable(
        &self,
        problem: &Problem,
        progress: Option<OnProgress>,
        cancel: Option<&AtomicBool>,
    ) -> Result<Outcome, PlanError> {
        let Some(split) = Split::of(problem) else {
            return self.run_sized(problem, progress, cancel);
        };
        let outcome = self.run_sized(&split.problem, progress, cancel)?;
        let plan = split.expand(problem, &outcome.plan)?;
        let floor = zero_size_floor(problem);
        let arena = plan.arena_bytes.ok_or(PlanError::ArenaOverflow)?;
        let lower = outcome.lower_bound.max(floor).min(arena);
        let proven_optimal = arena <= lower;
        let capacity_met = decide(self.capacity, arena, lower);
        Ok(Outcome {
            plan,
            arena,
            start_arena: outcome.start_arena.max(floor),
            lower_bound: lower,
            proven_optimal,
            stop: match outcome.stop {
                _ if capacity_met == Some(true) => Stop::Capacity,
                _ if capacity_met == Some(false) => Stop::Infeasible,
                _ if proven_optimal && !outcome.proven_optimal => Stop::LowerBound,
                stop => stop,
            },
            capacity_met,
            ..outcome
        })
    }

    /// [`Search::run_cancellable`] on a problem without zero-size buffers.
    fn run_sized(
        &self,
        problem: &Problem,
        progress: Option<OnProgress>,
        cancel: Option<&AtomicBool>,
    ) -> Result<Outcome, PlanError> {
        let started = Instant::now();
        let (g, fixed_top, unfixed) = granularity_and_unfixed(problem);
        let exact = unfixed <= EXACT_LIMIT;
        // The bound first: on a large problem the greedy start below is what gives way
        // to the time limit, so what comes before it must not (issue #18).
        let bound = self
            .max_live
            .or_else(|| max_live(problem))
            .unwrap_or(0)
            .max(fixed_top)
            .checked_next_multiple_of(g)
            .unwrap_or(u64::MAX);
        // The start is best-of's plan in full, whatever the time limit, so that search is
        // never worse than best-of at any size (issue #46; before, a large problem whose
        // limit ran out during the start got a plan cut short: 1.79x the bound at 10^7
        // where best-of gives 1.10x). On a large problem the start may take longer than
        // the limit; what is left of it goes to the exact search or the LNS.
        let start = BestOf.plan(problem)?;
        let start_arena = start.arena_bytes.ok_or(PlanError::ArenaOverflow)?;
        let mut deadline = started + self.time_limit;
        // Large problems whose start took (nearly) all the time: no LNS, and the start plan
        // (a greedy plan, valid by construction like `best-of`'s) is returned unchecked.
        // The LNS also needs at least the start's time left: it begins by timing a check
        // of the start (about as long as the start's sweep), which on 10^6 buffers took
        // 1.4 s past the limit when only the last 1/8 was left (issue #18).
        let lns_time =
            exact || Instant::now() + (self.time_limit / 8).max(started.elapsed()) < deadline;
        if !exact && lns_time {
            // The LNS result is checked twice after its deadline (by the LNS and below):
            // time one check and end the LNS early enough for both, with room to spare.
            let probe = Instant::now();
            check(problem, &start);
            deadline = deadline
                .checked_sub(probe.elapsed() * 3)
                .unwrap_or(started)
                .max(started);
        }
        // Decision mode: compacted plans' arenas are multiples of `g`, so a plan fits the
        // capacity iff one fits its multiple of `g` at or below.
        let capacity = self.capacity.map(|c| c - c % g);
        let shared = Shared {
            best: AtomicU64::new(start_arena),
            lower: AtomicU64::new(bound.min(start_arena)),
            capacity,
            incumbent: Mutex::new(Incumbent {
                offsets: start.offsets.clone(),
                found_after: started.elapsed(),
            }),
            done: AtomicBool::new(
                start_arena <= bound || decide(capacity, start_arena, bound).is_some(),
            ),
            stop: Mutex::new(None),
            nodes: AtomicU64::new(0),
            started,
            deadline,
            node_limit: self.node_limit.unwrap_or(u64::MAX),
            progress,
            cancel,
            last_report: Mutex::new(started),
            kept: Mutex::new(Vec::new()),
        };
        let threads = match self.threads {
            0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
            n => n,
        };
        if !shared.done.load(Ordering::Relaxed) {
            shared.report(true);
            if exact {
                let model = Model::new(problem);
                let roles: &[Role] = if threads >= 2 {
                    &[Role::Improve, Role::Prove]
                } else {
                    &[Role::Both]
                };
                run_threads(roles.len(), |i| {
                    drive(problem, &model, &shared, self, roles[i])
                });
            } else if lns_time {
                large_neighbourhood(problem, &start, &shared, self.seed, threads);
            }
        }
        let best = shared.best.load(Ordering::Relaxed);
        let lower = shared.lower.load(Ordering::Relaxed);
        let incumbent = shared
            .incumbent
            .into_inner()
            .unwrap_or_else(|e| e.into_inner());
        // The start plan itself (nothing beat it) is returned as it is, not checked again:
        // on 10^7 buffers a check takes seconds.
        let (plan, found_after) = if best < start_arena {
            let plan = Plan::new(problem, incumbent.offsets).ok_or(PlanError::ArenaOverflow)?;
            if check(problem, &plan).is_valid() && plan.arena_bytes == Some(best) {
                (plan, incumbent.found_after)
            } else {
                debug_assert!(false, "search produced an invalid plan");
                (start, Duration::ZERO)
            }
        } else {
            (start, incumbent.found_after)
        };
        let arena = plan.arena_bytes.unwrap_or(start_arena);
        let proven_optimal = arena <= lower;
        let cancelled = cancel.is_some_and(|c| c.load(Ordering::Relaxed));
        let capacity_met = decide(self.capacity, arena, lower);
        let stop = if capacity_met == Some(true) {
            Stop::Capacity
        } else if capacity_met == Some(false) {
            Stop::Infeasible
        } else if proven_optimal {
            let recorded = *shared.stop.lock().unwrap_or_else(|e| e.into_inner());
            recorded.unwrap_or(Stop::LowerBound)
        } else if cancelled {
            Stop::Interrupted
        } else if shared.nodes.load(Ordering::Relaxed) >= shared.node_limit {
            Stop::NodeLimit
        } else {
            Stop::TimeLimit
        };
        Ok(Outcome {
            plan,
            arena,
            start_arena,
            lower_bound: lower.min(arena),
            proven_optimal,
            nodes: shared.nodes.load(Ordering::Relaxed),
            found_after,
            elapsed: started.elapsed(),
            stop,
            exact,
            capacity_met,
        })
    }
}

/// Decision mode: whether a plan of `arena` with lower bound `lower` settles the
/// question "is there a plan with arena at most `capacity`?" (`None`: not yet, or no
/// capacity).
fn decide(capacity: Option<u64>, arena: u64, lower: u64) -> Option<bool> {
    let capacity = capacity?;
    if arena <= capacity {
        Some(true)
    } else if lower > capacity {
        Some(false)
    } else {
        None
    }
}

/// Runs `work(0..count)` on `count` scoped threads (the calling thread is one of them).
fn run_threads(count: usize, work: impl Fn(usize) + Sync) {
    if count <= 1 {
        work(0);
        return;
    }
    std::thread::scope(|scope| {
        for i in 1..count {
            let work = &work;
            let spawned = std::thread::Builder::new()
                .stack_size(64 << 20)
                .spawn_scoped(scope, move || work(i));
            if spawned.is_err() {
                work(i);
            }
        }
        work(0);
    });
}

// ---------------------------------------------------------------------------------------
// Shared state.

struct Incumbent {
    offsets: Vec<u64>,
    found_after: Duration,
}

struct Shared<'a> {
    best: AtomicU64,
    lower: AtomicU64,
    incumbent: Mutex<Incumbent>,
    /// Decision mode: the capacity, rounded down to a multiple of `g`.
    capacity: Option<u64>,
    done: AtomicBool,
    stop: Mutex<Option<Stop>>,
    nodes: AtomicU64,
    started: Instant,
    deadline: Instant,
    node_limit: u64,
    progress: Option<OnProgress<'a>>,
    /// Set by the caller to end the run early.
    cancel: Option<&'a AtomicBool>,
    last_report: Mutex<Instant>,
    /// The best plans for the parts of the root split found by any thread (`reuse`).
    kept: Mutex<Vec<Option<Reuse>>>,
}

impl Shared<'_> {
    /// Records a plan if it beats the incumbent.
    fn offer(&self, arena: u64, offsets: impl FnOnce() -> Vec<u64>) {
        let mut incumbent = self.incumbent.lock().unwrap_or_else(|e| e.into_inner());
        if arena < self.best.load(Ordering::Relaxed) {
            incumbent.offsets = offsets();
            incumbent.found_after = self.started.elapsed();
            self.best.store(arena, Ordering::Relaxed);
            drop(incumbent);
            self.finish_if_optimal(Stop::LowerBound);
            self.report(true);
        }
    }

    /// The arena at which the search is done: the lower bound, or the capacity in
    /// decision mode when it is higher.
    fn goal(&self) -> u64 {
        let lower = self.lower.load(Ordering::Relaxed);
        self.capacity.map_or(lower, |c| c.max(lower))
    }

    /// Raises the lower bound to `lower`.
    fn raise(&self, lower: u64) {
        self.lower.fetch_max(lower, Ordering::Relaxed);
        self.finish_if_optimal(Stop::Exhausted);
        self.report(true);
    }

    fn finish_if_optimal(&self, reason: Stop) {
        let (best, lower) = (
            self.best.load(Ordering::Relaxed),
            self.lower.load(Ordering::Relaxed),
        );
        if lower >= best || decide(self.capacity, best, lower).is_some() {
            let mut stop = self.stop.lock().unwrap_or_else(|e| e.into_inner());
            if stop.is_none() {
                *stop = Some(reason);
            }
            self.done.store(true, Ordering::Relaxed);
        }
    }

    /// Adds nodes; true when the search must stop (done, time or node limit).
    fn poll(&self, nodes: u64) -> bool {
        let total = self.nodes.fetch_add(nodes, Ordering::Relaxed) + nodes;
        if total >= self.node_limit
            || Instant::now() >= self.deadline
            || self.cancel.is_some_and(|c| c.load(Ordering::Relaxed))
        {
            self.done.store(true, Ordering::Relaxed);
        }
        self.report(false);
        self.done.load(Ordering::Relaxed)
    }

    /// Merges a thread's kept part plans with the shared ones, both ways: each part gets
    /// the lower plan.
    fn exchange(&self, kept: &mut Vec<Option<Reuse>>) {
        let mut shared = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        let len = shared.len().max(kept.len());
        shared.resize_with(len, || None);
        kept.resize_with(len, || None);
        for (mine, theirs) in kept.iter_mut().zip(shared.iter_mut()) {
            match (mine.as_ref(), theirs.as_ref()) {
                (Some(a), Some(b)) if b.top < a.top => *mine = theirs.clone(),
                (Some(_), _) => *theirs = mine.clone(),
                (None, _) => *mine = theirs.clone(),
            }
        }
    }

    fn report(&self, force: bool) {
        let Some(progress) = self.progress else {
            return;
        };
        let Ok(mut last) = self.last_report.try_lock() else {
            return;
        };
        if force || last.elapsed() >= Duration::from_millis(200) {
            *last = Instant::now();
            progress(Progress {
                best: self.best.load(Ordering::Relaxed),
                lower_bound: self.lower.load(Ordering::Relaxed),
                nodes: self.nodes.load(Ordering::Relaxed),
                elapsed: self.started.elapsed(),
            });
        }
    }
}

// ---------------------------------------------------------------------------------------
// The model of the exact search: the unfixed buffers, their neighbours, the sections.

/// `offset` of an unplaced buffer.
const UNPLACED: u64 = u64::MAX;

struct Model {
    /// Number of unfixed buffers (the searched ones).
    n: usize,
    /// Problem id of each searched buffer; `ids.len() == n`.
    ids: Vec<u32>,
    size: Vec<u64>,
    align: Vec<u64>,
    /// Lifetime lengths (`end - start`).
    length: Vec<u64>,
    /// `adj[adj_first[i]..adj_first[i + 1]]`: searched buffers that must not share bytes
    /// with `i` (live together or a conflict pair).
    adj_first: Vec<u32>,
    adj: Vec<u32>,
    /// Fixed buffers `i` must avoid: `(offset, offset + size)`, sorted.
    obstacles: Vec<Vec<(u64, u64)>>,
    /// Section ranges `[lo, hi)` covered by each buffer's live segments.
    spans: Vec<Vec<(u32, u32)>>,
    /// Sum of the sizes live in each section.
    section_total: Vec<u64>,
    /// The searched buffers live in each section.
    members: Vec<Vec<u32>>,
    /// The offsets of the fixed buffers (`UNPLACED` for searched ones), by problem id.
    fixed_offsets: Vec<u64>,
    /// Highest top of a fixed buffer (0 when none).
    fixed_top: u64,
    /// Every arena of a compacted plan is a multiple of `g`.
    g: u64,
    /// First and one-past-last section of each buffer's lifetime hull (gaps included;
    /// `(0, 0)` for a buffer live nowhere).
    hull: Vec<(u32, u32)>,
    /// Explicit conflict pairs of each searched buffer: `(partner, lo, hi)`, where
    /// `[lo, hi)` is the section hull of the pair (both lifetimes and what lies between).
    pairs: Vec<Vec<(u32, u32, u32)>>,
    /// For each section boundary `b` (between sections `b` and `b + 1`): the buffers whose
    /// hull crosses it plus the conflict pairs whose hull crosses it.
    crossings: Vec<u32>,
    /// `memo`: random salts of each buffer's terms in a node's hash ([`term`]).
    salt: Vec<[u64; 4]>,
}

/// The section boundaries inside the section range `[lo, hi)` (boundary `b` lies between
/// sections `b` and `b + 1`).
fn boundaries((lo, hi): (u32, u32)) -> std::ops::Range<usize> {
    lo as usize..(hi as usize).saturating_sub(1).max(lo as usize)
}

/// `(g, fixed_top)`: every offset of a compacted plan, hence its arena, is a multiple of
/// `g`; `fixed_top` is the highest top of a fixed buffer (0 when none). See
/// [`granularity_and_unfixed`].
fn granularity(problem: &Problem) -> (u64, u64) {
    let (g, fixed_top, _) = granularity_and_unfixed(problem);
    (g, fixed_top)
}

impl Model {
    fn new(problem: &Problem) -> Model {
        let buffers = problem.buffers();
        let ids: Vec<u32> = (0..buffers.len() as u32)
            .filter(|&i| buffers[i as usize].fixed_offset.is_none())
            .collect();
        let n = ids.len();
        let mut local = vec![u32::MAX; buffers.len()];
        for (l, &id) in ids.iter().enumerate() {
            local[id as usize] = l as u32;
        }
        let (g, fixed_top) = granularity(problem);
        let mut fixed_offsets = vec![UNPLACED; buffers.len()];
        for (i, b) in buffers.iter().enumerate() {
            if let Some(offset) = b.fixed_offset {
                fixed_offsets[i] = offset;
            }
        }

        // Pairs that must not share bytes: sweep over lifetimes sorted by start, then the
        // exact test with gaps; conflict pairs added on top.
        let mut order: Vec<usize> = (0..buffers.len()).collect();
        order.sort_unstable_by_key(|&i| (buffers[i].lifetime.start, i));
        let mut neighbours: Vec<Vec<u32>> = vec![Vec::new(); buffers.len()];
        let mut active: Vec<usize> = Vec::new();
        for &i in &order {
            let start = buffers[i].lifetime.start;
            active.retain(|&j| buffers[j].lifetime.end > start);
            for &j in &active {
                if buffers[i].live_together(&buffers[j]) {
                    neighbours[i].push(j as u32);
                    neighbours[j].push(i as u32);
                }
            }
            active.push(i);
        }
        for &(a, b) in problem.conflicts() {
            neighbours[a.index()].push(b.0);
            neighbours[b.index()].push(a.0);
        }
        let mut adj_first = Vec::with_capacity(n + 1);
        let mut adj = Vec::new();
        let mut obstacles = Vec::with_capacity(n);
        for &id in &ids {
            adj_first.push(adj.len() as u32);
            let mut list: Vec<u32> = neighbours[id as usize]
                .iter()
                .filter_map(|&j| (local[j as usize] != u32::MAX).then_some(local[j as usize]))
                .collect();
            list.sort_unstable();
            list.dedup();
            adj.extend(list);
            let mut obs: Vec<(u64, u64)> = neighbours[id as usize]
                .iter()
                .filter(|&&j| local[j as usize] == u32::MAX)
                .map(|&j| {
                    let o = fixed_offsets[j as usize];
                    (o, o.saturating_add(buffers[j as usize].size))
                })
                .collect();
            obs.sort_unstable();
            obs.dedup();
            obstacles.push(obs);
        }
        adj_first.push(adj.len() as u32);

        let mut points: Vec<u64> = Vec::new();
        for &id in &ids {
            for s in buffers[id as usize].live_segments() {
                points.push(s.start);
                points.push(s.end);
            }
        }
        points.sort_unstable();
        points.dedup();
        let sections = points.len().saturating_sub(1);
        let mut section_total = vec![0u64; sections];
        let mut members: Vec<Vec<u32>> = vec![Vec::new(); sections];
        let mut spans = Vec::with_capacity(n);
        for (l, &id) in ids.iter().enumerate() {
            let b = &buffers[id as usize];
            let mut list = Vec::new();
            for s in b.live_segments() {
                let lo = points.partition_point(|&t| t < s.start) as u32;
                let hi = points.partition_point(|&t| t < s.end) as u32;
                for s in lo as usize..hi as usize {
                    section_total[s] = section_total[s].saturating_add(b.size);
                    members[s].push(l as u32);
                }
                list.push((lo, hi));
            }
            spans.push(list);
        }
        let hull: Vec<(u32, u32)> = spans
            .iter()
            .map(|list| match (list.first(), list.last()) {
                (Some(&(lo, _)), Some(&(_, hi))) => (lo, hi),
                _ => (0, 0),
            })
            .collect();
        let mut pairs: Vec<Vec<(u32, u32, u32)>> = vec![Vec::new(); n];
        for &(a, b) in problem.conflicts() {
            let (a, b) = (local[a.index()], local[b.index()]);
            if a == u32::MAX || b == u32::MAX || a == b {
                continue;
            }
            let (ha, hb) = (hull[a as usize], hull[b as usize]);
            let (lo, hi) = (ha.0.min(hb.0), ha.1.max(hb.1));
            pairs[a as usize].push((b, lo, hi));
            pairs[b as usize].push((a, lo, hi));
        }
        for list in &mut pairs {
            list.sort_unstable();
            list.dedup();
        }
        let mut crossings = vec![0u32; sections.saturating_sub(1)];
        let mut cross = |(lo, hi): (u32, u32)| {
            crossings[boundaries((lo, hi))]
                .iter_mut()
                .for_each(|c| *c += 1);
        };
        hull.iter().for_each(|&h| cross(h));
        for (a, list) in pairs.iter().enumerate() {
            for &(b, lo, hi) in list {
                if (a as u32) < b {
                    cross((lo, hi));
                }
            }
        }
        Model {
            hull,
            pairs,
            crossings,
            salt: (0..n as u64)
                // Salts 1 and 3 are `term`'s multipliers: odd.
                .map(|i| std::array::from_fn(|k| mix(i << 2 | k as u64) | (k as u64 & 1)))
                .collect(),
            n,
            size: ids.iter().map(|&i| buffers[i as usize].size).collect(),
            align: ids.iter().map(|&i| buffers[i as usize].alignment).collect(),
            length: ids
                .iter()
                .map(|&i| buffers[i as usize].lifetime.len())
                .collect(),
            ids,
            adj_first,
            adj,
            obstacles,
            spans,
            section_total,
            members,
            fixed_offsets,
            fixed_top,
            g,
        }
    }

    fn neighbours(&self, i: usize) -> &[u32] {
        &self.adj[self.adj_first[i] as usize..self.adj_first[i + 1] as usize]
    }

    /// The lowest aligned offset `>= floor` where buffer `i` avoids its fixed obstacles;
    /// `UNPLACED` when none fits in 64 bits.
    fn lowest_from(&self, i: usize, floor: u64) -> u64 {
        let (size, align) = (self.size[i], self.align[i]);
        if align == 1 && self.obstacles[i].is_empty() {
            return if floor.checked_add(size).is_some() {
                floor
            } else {
                UNPLACED
            };
        }
        let Some(mut p) = floor.checked_next_multiple_of(align) else {
            return UNPLACED;
        };
        for &(lo, hi) in &self.obstacles[i] {
            let Some(end) = p.checked_add(size) else {
                return UNPLACED;
            };
            if lo >= end {
                break;
            }
            if hi > p {
                match hi.checked_next_multiple_of(align) {
                    Some(q) => p = q,
                    None => return UNPLACED,
                }
            }
        }
        if p.checked_add(size).is_none() {
            return UNPLACED;
        }
        p
    }

    /// The static preorders used as tie-breaks: `rank[i]` for each heuristic, after
    /// MiniMalloc's W (lifetime length), A (size times length) and T (largest total size
    /// live in a section it spans), plus variants counting sections instead of steps.
    fn preorders(&self) -> Vec<Vec<u32>> {
        let total: Vec<u64> = (0..self.n)
            .map(|i| {
                self.spans[i]
                    .iter()
                    .flat_map(|&(lo, hi)| self.section_total[lo as usize..hi as usize].iter())
                    .copied()
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let width = &self.length;
        let sections: Vec<u64> = (0..self.n)
            .map(|i| {
                self.spans[i]
                    .iter()
                    .map(|&(lo, hi)| u64::from(hi - lo))
                    .sum()
            })
            .collect();
        let section_area: Vec<u128> = (0..self.n)
            .map(|i| u128::from(self.size[i]) * u128::from(sections[i]))
            .collect();
        let area: Vec<u128> = (0..self.n)
            .map(|i| u128::from(self.size[i]) * u128::from(width[i]))
            .collect();
        let keys: [&dyn Fn(usize) -> (u128, u128, u128); 6] = [
            &|i| (width[i].into(), area[i], total[i].into()),
            &|i| (total[i].into(), sections[i].into(), section_area[i]),
            &|i| (total[i].into(), area[i], width[i].into()),
            &|i| (sections[i].into(), section_area[i], total[i].into()),
            &|i| (total[i].into(), width[i].into(), area[i]),
            &|i| (section_area[i], total[i].into(), sections[i].into()),
        ];
        keys.iter()
            .map(|key| {
                let mut order: Vec<usize> = (0..self.n).collect();
                order.sort_by_key(|&i| (std::cmp::Reverse(key(i)), i));
                let mut rank = vec![0u32; self.n];
                for (r, &i) in order.iter().enumerate() {
                    rank[i] = r as u32;
                }
                rank
            })
            .collect()
    }
}

// ---------------------------------------------------------------------------------------
// The depth-first search.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    /// Cap `best - g`, tightened at every plan found.
    Improve,
    /// Cap = the lower bound.
    Prove,
    /// Both, alternating (one thread).
    Both,
}

/// How a search run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Flow {
    /// Keep going (the subtree is done).
    Continue,
    /// A plan at or below the target was found.
    Target,
    /// The run's node budget ran out.
    Budget,
    /// The whole search must stop (done, time or node limit).
    Abort,
    /// A part made by the split with this number cannot fit under the cap (`decompose`):
    /// nothing does below the node that split, whatever the other parts do.
    Infeasible(u64),
}

/// A set of unplaced buffers searched on its own: no buffer outside it that is still
/// unplaced must avoid one inside it (`decompose`).
struct Part {
    /// Its sections `[lo, hi)`: every unplaced buffer live there is in `buffers`.
    lo: u32,
    hi: u32,
    buffers: Vec<u32>,
    /// The key `(offset, rank)` of the placement that split it off: its buffers come
    /// after that one in canonical order.
    start: (u64, u32),
    /// The number of the split that made it, and its place among that split's parts.
    origin: u64,
    index: usize,
}

/// The best plan found for a part of the root split (`reuse`): its buffers' offsets and
/// its highest top.
#[derive(Clone)]
struct Reuse {
    top: u64,
    offsets: Vec<(u32, u64)>,
}

struct Worker<'m, 's> {
    m: &'m Model,
    shared: &'s Shared<'s>,
    rules: Rules,
    rank: Vec<u32>,
    offset: Vec<u64>,
    /// Highest top of the placed neighbours.
    raw: Vec<u64>,
    /// Minimum offset of each unplaced buffer (`UNPLACED` for placed ones).
    min_off: Vec<u64>,
    /// The unplaced sizes live in each section.
    remaining: Vec<u64>,
    buffer_log: Vec<(u32, u64, u64)>,
    candidates: Vec<u32>,
    /// For each section, a member whose minimum offset was low enough for the section rule
    /// when last looked at: a hint for [`Worker::sections_fit`], never undone (any unplaced
    /// member's minimum offset bounds the section floor from above).
    witness: Vec<u32>,
    /// [`Model::crossings`] counting unplaced buffers and pairs with both unplaced only.
    crossings: Vec<u32>,
    /// Boundaries whose crossings the last `place` took to zero (`decompose`).
    new_cuts: Vec<u32>,
    /// Parts waiting to be searched, the next on top.
    pending: Vec<Part>,
    /// `(buffer, rank)` before a split reordered its parts (`reorder`).
    rank_log: Vec<(u32, u32)>,
    splits: u64,
    /// The number of the root split (0 when the root did not split), and the best plan
    /// found for each of its parts (`reuse`).
    root_split: u64,
    /// The buffers of each part of the root split (by [`Part::index`]).
    root_parts: Vec<Vec<u32>>,
    reused: Vec<Option<Reuse>>,
    cap: u64,
    target: u64,
    /// Nodes of this run, and since the last poll.
    nodes: u64,
    unpolled: u64,
    /// Nodes between polls of the shared state (fewer under a small node limit).
    poll_every: u64,
    budget: u64,
    found: bool,
    /// `memo`: the hash of the unplaced buffers' minimum offsets (a sum of [`term`]s,
    /// kept up to date by [`Worker::place`] and restored after each candidate), the nodes
    /// searched to the end without a plan, and how many more may be remembered.
    hash: (u64, u64),
    memo: Memo,
    memo_room: usize,
}

/// `memo`: nodes searched to the end without a plan at a cap of at most `cap`, by
/// [`Worker::node_key`]. Kept across the runs of one preorder and step (without
/// `reorder`) while their caps do not rise above `cap`: such a run follows the same tree,
/// so it goes on where the last one stopped on its budget.
#[derive(Default)]
struct Memo {
    cap: u64,
    exhausted: HashSet<u128, BuildHasherDefault<KeyHasher>>,
}

impl<'m, 's> Worker<'m, 's> {
    fn new(
        m: &'m Model,
        shared: &'s Shared<'s>,
        rules: Rules,
        rank: Vec<u32>,
        reused: Vec<Option<Reuse>>,
    ) -> Self {
        Worker {
            m,
            shared,
            rules,
            rank,
            offset: vec![UNPLACED; m.n],
            raw: vec![0; m.n],
            min_off: (0..m.n).map(|i| m.lowest_from(i, 0)).collect(),
            remaining: m.section_total.clone(),
            buffer_log: Vec::new(),
            candidates: Vec::new(),
            witness: m
                .members
                .iter()
                .map(|list| list.first().map_or(0, |&j| j))
                .collect(),
            crossings: m.crossings.clone(),
            new_cuts: Vec::new(),
            pending: Vec::new(),
            rank_log: Vec::new(),
            splits: 0,
            root_split: 0,
            root_parts: Vec::new(),
            reused,
            cap: 0,
            target: 0,
            nodes: 0,
            unpolled: 0,
            poll_every: shared.node_limit.clamp(1, 256),
            budget: u64::MAX,
            found: false,
            hash: (0, 0),
            memo: Memo::default(),
            memo_room: 0,
        }
    }

    /// One run from the root with this cap, target and node budget.
    fn run(&mut self, cap: u64, target: u64, budget: u64) -> Flow {
        self.cap = cap;
        self.target = target;
        self.budget = budget;
        self.nodes = 0;
        self.found = false;
        let m = self.m;
        let all = Part {
            lo: 0,
            hi: m.section_total.len() as u32,
            buffers: (0..m.n as u32).collect(),
            start: (0, 0),
            origin: 0,
            index: 0,
        };
        self.new_cuts.clear();
        if self.rules.decompose {
            let zero = self.crossings.iter().enumerate().filter(|&(_, &c)| c == 0);
            self.new_cuts.extend(zero.map(|(b, _)| b as u32));
        }
        self.root_parts.clear();
        if self.rules.memo {
            if cap > self.memo.cap {
                self.memo.exhausted.clear();
            }
            self.hash = (0..m.n).fold((0, 0), |(a, b), i| {
                let (x, y) = term(&m.salt[i], self.min_off[i]);
                (a.wrapping_add(x), b.wrapping_add(y))
            });
        }
        let flow = if self.new_cuts.is_empty() {
            self.root_split = 0;
            self.dfs(&all, (0, 0), 0)
        } else {
            self.root_split = self.splits + 1;
            self.split(&all, (0, 0), 0)
        };
        self.flush();
        // Every node remembered is exhausted at the cap of its time, at least this one.
        self.memo.cap = self.cap;
        match flow {
            Flow::Infeasible(_) => Flow::Continue,
            flow => flow,
        }
    }

    fn flush(&mut self) -> bool {
        let unpolled = std::mem::take(&mut self.unpolled);
        let stop = self.shared.poll(unpolled);
        let best = self.shared.best.load(Ordering::Relaxed);
        self.cap = self.cap.min(best.saturating_sub(self.m.g));
        stop
    }

    /// Searches `part` from a node whose last placement had key `last`; `top` is the
    /// highest top of the placed buffers.
    fn dfs(&mut self, part: &Part, last: (u64, u32), top: u64) -> Flow {
        self.nodes += 1;
        self.unpolled += 1;
        if self.nodes >= self.budget {
            return Flow::Budget;
        }
        if self.unpolled >= self.poll_every && self.flush() {
            return Flow::Abort;
        }
        if top > self.cap {
            return Flow::Continue;
        }
        let key = self.rules.memo.then(|| self.node_key(part, last));
        if key.is_some_and(|key| self.memo.exhausted.contains(&key)) {
            return Flow::Continue;
        }
        let m = self.m;
        let mut min_height = u64::MAX;
        for &i in &part.buffers {
            let i = i as usize;
            if self.offset[i] == UNPLACED {
                let height = self.min_off[i].saturating_add(m.size[i]);
                if height > self.cap {
                    return Flow::Continue;
                }
                min_height = min_height.min(height);
            }
        }
        if min_height == u64::MAX {
            return self.next_part(top);
        }
        let start = self.candidates.len();
        for &i in &part.buffers {
            let i = i as usize;
            if self.offset[i] != UNPLACED {
                continue;
            }
            let key = (self.min_off[i], self.rank[i]);
            if self.rules.canonical && key < last {
                continue;
            }
            if self.rules.dominance && key.0 >= min_height {
                continue;
            }
            self.candidates.push(i as u32);
        }
        let (min_off, rank) = (&self.min_off, &self.rank);
        self.candidates[start..].sort_unstable_by_key(|&i| (min_off[i as usize], rank[i as usize]));
        let end = self.candidates.len();
        let hash = self.hash;
        for k in start..end {
            let i = self.candidates[k] as usize;
            let offset = self.min_off[i];
            let key = (offset, self.rank[i]);
            let mark = self.place(i, offset);
            let top = top.max(offset + m.size[i]);
            let flow = if self.rules.sections && !self.sections_fit(part, offset) {
                Flow::Continue
            } else if !self.new_cuts.is_empty() {
                self.split(part, key, top)
            } else {
                self.dfs(part, key, top)
            };
            self.undo(i, mark);
            self.hash = hash;
            if flow != Flow::Continue {
                self.candidates.truncate(start);
                return flow;
            }
            if self.rules.canonical && self.rules.hatless && self.is_final(i) {
                break;
            }
        }
        self.candidates.truncate(start);
        if let Some(key) = key {
            if self.memo_room > 0 && self.memo.exhausted.insert(key) {
                self.memo_room -= 1;
            }
        }
        Flow::Continue
    }

    /// `memo`: the key of a node of `part` whose last placement had key `last`. Nodes
    /// with the same key have the same subtree, up to the cap: the same buffers are
    /// unplaced, with the same minimum offsets (all that the placed buffers matter for),
    /// under the same canonical bound, in the same part (its sections; its buffers are the
    /// unplaced ones starting there). Whether a node is exhausted does not depend on the
    /// parts waiting after its own (one that cannot fit ends the search of the node with
    /// [`Flow::Infeasible`], not as exhausted), nor on the highest top once it is under
    /// the cap. The ranks are the preorder's, except with `reorder`, where the splits
    /// above the node set them: then the key holds the part's number (`origin`, never
    /// reused within a run) and the memo is the run's alone.
    fn node_key(&self, part: &Part, last: (u64, u32)) -> u128 {
        let (a, b) = self.hash;
        let context = if self.rules.reorder {
            mix(part.origin)
        } else {
            0
        };
        let a = a ^ mix(last.0 ^ (u64::from(part.lo) << 32 | u64::from(part.hi)));
        let b = b ^ mix(u64::from(last.1) ^ context);
        u128::from(a) << 64 | u128::from(b)
    }

    /// `decompose`: the boundaries in `new_cuts` are crossed by no unplaced buffer (nor
    /// pair) of `part` any more, so its unplaced buffers fall into parts that share no
    /// constraint. They are searched one after the other; when one cannot fit under the cap
    /// while the placed buffers do, no completion of this node can.
    fn split(&mut self, part: &Part, key: (u64, u32), top: u64) -> Flow {
        let m = self.m;
        let mut cuts = std::mem::take(&mut self.new_cuts);
        cuts.sort_unstable();
        self.splits += 1;
        let origin = self.splits;
        let mut parts: Vec<Part> = (0..=cuts.len())
            .map(|k| Part {
                lo: if k == 0 { part.lo } else { cuts[k - 1] + 1 },
                hi: cuts.get(k).map_or(part.hi, |&b| b + 1),
                buffers: Vec::new(),
                start: key,
                origin,
                index: k,
            })
            .collect();
        for &i in &part.buffers {
            if self.offset[i as usize] == UNPLACED {
                let first = m.hull[i as usize].0;
                parts[cuts.partition_point(|&b| b < first)].buffers.push(i);
            }
        }
        cuts.clear();
        self.new_cuts = cuts;
        if origin == self.root_split {
            self.root_parts = parts.iter().map(|p| p.buffers.clone()).collect();
        }
        let ranks = self.rank_log.len();
        if self.rules.reorder {
            for part in &mut parts {
                self.reorder(part);
            }
        }
        let depth = self.pending.len();
        self.pending
            .extend(parts.into_iter().rev().filter(|p| !p.buffers.is_empty()));
        let flow = self.next_part(top);
        self.pending.truncate(depth);
        for &(i, rank) in self.rank_log[ranks..].iter().rev() {
            self.rank[i as usize] = rank;
        }
        self.rank_log.truncate(ranks);
        match flow {
            Flow::Infeasible(o) if o == origin => Flow::Continue,
            flow => flow,
        }
    }

    /// `reorder`: gives the buffers of `part` the ranks they already hold among
    /// themselves, in a new order: the largest total of unplaced sizes live in a section
    /// they span first, ties by the old rank (logged in `rank_log`). The part then starts at
    /// any rank at the split offset: a least-sum completion sorted by (offset, new rank) is
    /// still a canonical sequence, as each buffer sits at its minimum offset in it.
    fn reorder(&mut self, part: &mut Part) {
        let m = self.m;
        let remaining = &self.remaining;
        let total = |i: u32| {
            m.spans[i as usize]
                .iter()
                .flat_map(|&(lo, hi)| remaining[lo as usize..hi as usize].iter())
                .copied()
                .max()
                .unwrap_or(0)
        };
        let mut order: Vec<(u64, u32, u32)> = part
            .buffers
            .iter()
            .map(|&i| (total(i), self.rank[i as usize], i))
            .collect();
        let mut ranks: Vec<u32> = order.iter().map(|&(_, r, _)| r).collect();
        ranks.sort_unstable();
        order.sort_unstable_by_key(|&(t, r, _)| (std::cmp::Reverse(t), r));
        for (&(_, old, i), &new) in order.iter().zip(&ranks) {
            if old != new {
                self.rank_log.push((i, old));
                self.rank[i as usize] = new;
            }
        }
        part.start.1 = 0;
    }

    /// The current part is placed: search the next pending one, or offer the plan when
    /// none is left. A part whose search is exhausted while the placed buffers fit under
    /// the cap refutes the node that split it off: [`Flow::Infeasible`].
    fn next_part(&mut self, top: u64) -> Flow {
        let Some(part) = self.pending.pop() else {
            if self.rules.reuse {
                self.keep(self.root_parts.len());
            }
            return self.leaf(top);
        };
        let mut flow = Flow::Continue;
        if self.rules.reuse && part.origin == self.root_split {
            self.keep(part.index);
            flow = self.reuse(part.index, top);
        }
        if flow == Flow::Continue {
            flow = self.dfs(&part, part.start, top);
        }
        let flow = match flow {
            Flow::Continue if top <= self.cap => Flow::Infeasible(part.origin),
            flow => flow,
        };
        self.pending.push(part);
        flow
    }

    /// Records the plans of the parts of the root split before `end` (all placed now)
    /// where they are the lowest found for them.
    fn keep(&mut self, end: usize) {
        let m = self.m;
        if self.reused.len() < self.root_parts.len() {
            self.reused.resize_with(self.root_parts.len(), || None);
        }
        for (buffers, slot) in self.root_parts[..end].iter().zip(&mut self.reused) {
            let offset = &self.offset;
            let top = buffers
                .iter()
                .map(|&i| offset[i as usize] + m.size[i as usize])
                .max()
                .unwrap_or(0);
            if !buffers.is_empty() && !matches!(slot, Some(r) if r.top <= top) {
                let offsets = buffers.iter().map(|&i| (i, offset[i as usize]));
                *slot = Some(Reuse {
                    top,
                    offsets: offsets.collect(),
                });
            }
        }
    }

    /// Places the kept plan of part `index` of the root split if it fits under the cap and
    /// goes on with the next parts. [`Flow::Continue`] when there is none, it does not fit,
    /// or the cap fell below it meanwhile: then the part is searched.
    fn reuse(&mut self, index: usize, top: u64) -> Flow {
        let Some(kept) = self.reused.get_mut(index).and_then(Option::take) else {
            return Flow::Continue;
        };
        let mut flow = Flow::Continue;
        if kept.top <= self.cap {
            for &(i, offset) in &kept.offsets {
                self.offset[i as usize] = offset;
            }
            flow = self.next_part(top.max(kept.top));
            for &(i, _) in &kept.offsets {
                self.offset[i as usize] = UNPLACED;
            }
        }
        let slot = &mut self.reused[index];
        if !matches!(slot, Some(r) if r.top <= kept.top) {
            *slot = Some(kept);
        }
        flow
    }

    fn leaf(&mut self, top: u64) -> Flow {
        let m = self.m;
        let arena = top.max(m.fixed_top);
        self.found = true;
        self.shared.offer(arena, || {
            let mut offsets = m.fixed_offsets.clone();
            for (l, &id) in m.ids.iter().enumerate() {
                offsets[id as usize] = self.offset[l];
            }
            offsets
        });
        self.cap = self.cap.min(arena.saturating_sub(m.g));
        if arena <= self.target {
            Flow::Target
        } else {
            Flow::Continue
        }
    }

    /// Places `i` at `offset`; returns the log mark for [`Worker::undo`].
    fn place(&mut self, i: usize, offset: u64) -> usize {
        let m = self.m;
        let mark = self.buffer_log.len();
        let height = offset + m.size[i];
        self.offset[i] = offset;
        if self.rules.memo {
            self.retire(i, self.min_off[i], None);
        }
        // Placed buffers count as `UNPLACED` (no floor) in the section rule.
        self.min_off[i] = UNPLACED;
        for &j in m.neighbours(i) {
            let j = j as usize;
            if self.offset[j] == UNPLACED && self.raw[j] < height {
                self.buffer_log
                    .push((j as u32, self.raw[j], self.min_off[j]));
                self.raw[j] = height;
                if self.min_off[j] < height {
                    let old = self.min_off[j];
                    self.min_off[j] = m.lowest_from(j, height);
                    if self.rules.memo {
                        self.retire(j, old, Some(self.min_off[j]));
                    }
                }
            }
        }
        for &(lo, hi) in &m.spans[i] {
            for rem in &mut self.remaining[lo as usize..hi as usize] {
                *rem -= m.size[i];
            }
        }
        if self.rules.decompose {
            self.new_cuts.clear();
            for b in boundaries(m.hull[i]) {
                self.crossings[b] -= 1;
                if self.crossings[b] == 0 {
                    self.new_cuts.push(b as u32);
                }
            }
            for &(j, lo, hi) in &m.pairs[i] {
                if self.offset[j as usize] == UNPLACED {
                    for b in boundaries((lo, hi)) {
                        self.crossings[b] -= 1;
                        if self.crossings[b] == 0 {
                            self.new_cuts.push(b as u32);
                        }
                    }
                }
            }
        }
        mark
    }

    /// `memo`: takes `i`'s term for minimum offset `old` out of the hash and, unless it was
    /// just placed, adds the one for `new`.
    fn retire(&mut self, i: usize, old: u64, new: Option<u64>) {
        let salt = &self.m.salt[i];
        let (x, y) = term(salt, old);
        self.hash = (self.hash.0.wrapping_sub(x), self.hash.1.wrapping_sub(y));
        if let Some(new) = new {
            let (x, y) = term(salt, new);
            self.hash = (self.hash.0.wrapping_add(x), self.hash.1.wrapping_add(y));
        }
    }

    fn undo(&mut self, i: usize, buffers: usize) {
        let m = self.m;
        for &(j, raw, min_off) in self.buffer_log[buffers..].iter().rev() {
            self.raw[j as usize] = raw;
            self.min_off[j as usize] = min_off;
        }
        self.buffer_log.truncate(buffers);
        for &(lo, hi) in &m.spans[i] {
            for rem in &mut self.remaining[lo as usize..hi as usize] {
                *rem += m.size[i];
            }
        }
        if self.rules.decompose {
            for b in boundaries(m.hull[i]) {
                self.crossings[b] += 1;
            }
            for &(j, lo, hi) in &m.pairs[i] {
                if self.offset[j as usize] == UNPLACED {
                    for b in boundaries((lo, hi)) {
                        self.crossings[b] += 1;
                    }
                }
            }
        }
        self.min_off[i] = self.offset[i];
        self.offset[i] = UNPLACED;
    }

    /// True when every unplaced neighbour of `i` has its minimum offset at or above `i`'s
    /// top. Then in a plan of least offset sum `i` sits at its minimum offset (anything
    /// placed before it lies above its top, so it could drop there), its key
    /// `(min_offset, rank)` is final, every canonical completion of this node places it
    /// before any candidate with a larger key, and once it has failed the later candidates
    /// need not be tried. MiniMalloc's "hatless" rule is the case of no unplaced neighbour.
    fn is_final(&self, i: usize) -> bool {
        let top = self.min_off[i].saturating_add(self.m.size[i]);
        self.m.neighbours(i).iter().all(|&j| {
            let j = j as usize;
            self.offset[j] != UNPLACED || self.min_off[j] >= top
        })
    }

    /// The section rule after placing a buffer at `offset` in `part`: in every section of
    /// the part, the unplaced buffers live there go above the section floor and need their
    /// total size below the cap. The floor is the lowest minimum offset among them (each is
    /// at or above its own), and with `canonical` at least `offset`. (Sections of other
    /// parts do not change while this one is searched.)
    ///
    /// The floors are not maintained: a section passes when its witness (or, failing that,
    /// the first member found) is unplaced with a minimum offset low enough, which the
    /// floor is then at most; only a section that fails scans all its members.
    fn sections_fit(&mut self, part: &Part, offset: u64) -> bool {
        let mono = if self.rules.canonical { offset } else { 0 };
        let m = self.m;
        for s in part.lo as usize..part.hi as usize {
            let rem = self.remaining[s];
            if rem == 0 {
                continue;
            }
            // The highest floor under which the section's unplaced buffers fit.
            let Some(room) = self.cap.checked_sub(rem) else {
                return false;
            };
            if mono > room {
                return false;
            }
            if self.min_off[self.witness[s] as usize] <= room {
                continue;
            }
            let min_off = &self.min_off;
            match m.members[s].iter().find(|&&j| min_off[j as usize] <= room) {
                Some(&j) => self.witness[s] = j,
                None => return false,
            }
        }
        true
    }
}

/// Runs (of each role) between doublings of the node budget: half the preorders, so each
/// preorder's budget doubles every second time it comes round (MiniMalloc doubles after
/// each round of its three).
const RUNS_PER_BUDGET: usize = 3;

/// `probe` on one thread: once the improver probes, it searches up to this many times the
/// prover's nodes (the prover never ends at the bound on D or J, whose best known plans
/// are 3-5 % above it; the instances it does prove took at most 1.3 s on one thread).
const IMPROVER_SHARE: u64 = 4;

/// `probe`: long episodes search up to this many times the nodes of short ones (see
/// [`Episode`]).
const LONG_SHARE: u64 = 3;

/// `probe`: the kind of an episode, one random cap searched like a decision from scratch
/// with node budgets from 4 n, doubling every few runs.
///
/// The improver mixes both kinds by nodes ([`LONG_SHARE`]), short first: J is won by short
/// ones, which try many caps (J has many that a short search decides), D by long ones (its
/// few caps at or below 1,024,000 that the search decides at all take 0.5-1.5 s each).
/// Measured with `memo`, seeds 0-9, at or below the best known (doc/search.md): one thread,
/// 10 s: short only D 1 of 10, J 10; long only D 8, J 4; both D 9, J 9. Two threads, 5 s:
/// long only D 8, J 6; both D 8, J 8.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Episode {
    /// 6 runs, budgets 4 n to 16 n, two runs each.
    Short,
    /// 21 runs, budgets 4 n to 256 n, three runs each.
    Long,
}

impl Episode {
    fn runs(self) -> u64 {
        match self {
            Episode::Short => 6,
            Episode::Long => 21,
        }
    }

    fn runs_per_budget(self) -> u64 {
        match self {
            Episode::Short => 2,
            Episode::Long => 3,
        }
    }
}

/// `probe`: the improver's episodes so far.
struct Episodes {
    /// Episodes begun; the current one's number (from 0) is `count - 1`.
    count: u64,
    /// The current episode's kind and the runs it has had.
    kind: Episode,
    runs: u64,
    /// Nodes searched in short and long episodes.
    nodes: [u64; 2],
}

impl Episodes {
    fn new() -> Episodes {
        Episodes {
            count: 0,
            kind: Episode::Short,
            runs: 0,
            nodes: [0; 2],
        }
    }

    /// The kind of the next probing run: the current episode's while it has runs left,
    /// else the kind whose share of the nodes is behind (short first).
    fn next_kind(&self) -> Episode {
        if self.count > 0 && self.runs < self.kind.runs() {
            self.kind
        } else if self.nodes[1] < self.nodes[0].saturating_mul(LONG_SHARE) {
            Episode::Long
        } else {
            Episode::Short
        }
    }

    /// Starts a probing run: `(episode number, budget doublings)`.
    fn begin(&mut self) -> (u64, u32) {
        if self.count == 0 || self.runs >= self.kind.runs() {
            self.kind = self.next_kind();
            self.count += 1;
            self.runs = 0;
        }
        let doublings = self.runs / self.kind.runs_per_budget();
        self.runs += 1;
        (self.count - 1, doublings as u32)
    }

    /// Counts a probing run's nodes to its episode's kind.
    fn end(&mut self, nodes: u64) {
        self.nodes[usize::from(self.kind == Episode::Long)] += nodes;
    }
}

/// One thread of the exact search: runs its role under doubling node budgets, cycling
/// through the preorders (rotated by the seed), until the shared search is done.
fn drive(problem: &Problem, model: &Model, shared: &Shared, options: &Search, role: Role) {
    let preorders = model.preorders();
    let rules = options.rules;
    let mut memos: Vec<Memo> = (0..preorders.len() * 2).map(|_| Memo::default()).collect();
    let first = (options.seed as usize + usize::from(role == Role::Prove)) % preorders.len();
    let mut budget = if rules.restarts {
        (model.n as u64).max(64) * 4
    } else {
        u64::MAX
    };
    let g = model.g;
    let mut round = 0usize;
    // Without restarts a run never ends on its budget: aim straight below the incumbent.
    let mut aim: u64 = if rules.restarts { 1 } else { 8 };
    let mut reused = Vec::new();
    let mut polish = rules.lns && role != Role::Prove;
    // `dive`: the last run of the improver found a plan, so its preorder runs again.
    let mut dive = false;
    // `probe`: the improver's episodes (random caps).
    let mut episodes = Episodes::new();
    // `probe` on one thread: nodes searched by each step, and the prover's runs.
    let (mut prover_nodes, mut improver_nodes, mut prover_runs) = (0u64, 0u64, 0usize);
    loop {
        // `probe` on one thread: once the improver probes, a round whose prover would
        // have searched more than 1/`IMPROVER_SHARE` of the improver's nodes is the
        // improver's alone (the prover's doubling budgets took 75-85 % of the time on J
        // and D, the improver's probes being small).
        let improve_only = rules.probe
            && role == Role::Both
            && shared.capacity.is_none()
            && episodes.count > 0
            && !dive
            && improver_nodes < prover_nodes.saturating_mul(IMPROVER_SHARE);
        // The prover's runs are counted apart, so that skipped rounds do not change the
        // order in which it tries the preorders, nor when its budget doubles.
        let prover_round = if role == Role::Both && rules.probe {
            prover_runs
        } else {
            round
        };
        // With `reorder`, the prover gives each preorder two runs in a row: reordered at
        // the splits, then static (I and E are solved by the first kind, G by the second).
        // The improver keeps the static preorders (D and J lose with `reorder` there).
        let (preorder, reorder) = match (rules.reorder, rules.restarts, role) {
            // One thread: long episodes keep the static preorders like the improver of two
            // threads; short ones alternate reordered and static runs like the prover.
            (true, true, Role::Both) if improve_only => match episodes.next_kind() {
                Episode::Long => ((first + round) % preorders.len(), false),
                Episode::Short => (
                    (first + round / 2) % preorders.len(),
                    round.is_multiple_of(2),
                ),
            },
            (true, true, Role::Prove | Role::Both) => (
                (first + prover_round / 2) % preorders.len(),
                prover_round % 2 == 0,
            ),
            (true, true, Role::Improve) => ((first + round) % preorders.len(), false),
            _ => ((first + round) % preorders.len(), rules.reorder),
        };
        let rank = preorders[preorder].clone();
        let run_rules = Rules { reorder, ..rules };
        let mut worker = Worker::new(model, shared, run_rules, rank, std::mem::take(&mut reused));
        // `memo`: the memo of each step of this run (without `reorder`: the one its
        // preorder kept from its last run of that step).
        let kept =
            |step: Role| (!reorder).then_some(preorder * 2 + usize::from(step == Role::Prove));
        let steps: &[Role] = match role {
            // A dive repeats the improver's run only: the prover's would be the same.
            Role::Both if dive => &[Role::Improve],
            // Decision mode: both steps would search at the capacity.
            Role::Both if shared.capacity.is_some() => &[Role::Prove],
            Role::Both if improve_only => &[Role::Improve],
            Role::Both => &[Role::Prove, Role::Improve],
            _ => std::slice::from_ref(&role),
        };
        let mut proved = false;
        for &step in steps {
            if shared.done.load(Ordering::Relaxed) {
                return;
            }
            if step == Role::Improve && std::mem::take(&mut polish) {
                let seed = options.seed.wrapping_add(round as u64);
                lns_from_incumbent(
                    problem,
                    shared,
                    model.n as u64 * LNS_ROUNDS_PER_BUFFER,
                    seed,
                );
            }
            let best = shared.best.load(Ordering::Relaxed);
            let lower = shared.lower.load(Ordering::Relaxed);
            let improve_cap = best.saturating_sub(g);
            let probing = rules.probe
                && rules.restarts
                && step == Role::Improve
                && !dive
                && aim >= 8
                && shared.capacity.is_none();
            // `probe`: each episode searches its cap like a decision from scratch, budgets
            // 4 n, 8 n, ... doubling every few runs, whatever the restarts' budget has
            // grown to.
            let probe = probing.then(|| episodes.begin());
            let cap = if let Some(capacity) = shared.capacity {
                // Decision mode: every run searches at the capacity.
                capacity.min(improve_cap)
            } else if step == Role::Prove {
                lower.min(improve_cap)
            } else if dive {
                improve_cap
            } else if let Some((episode, _)) = probe {
                // `probe`: a random cap in the top third of the gap, one per episode.
                let steps = improve_cap.saturating_sub(lower) / 3 / g;
                let draw = mix(options.seed ^ (episode << 32) ^ role as u64);
                improve_cap - (draw % (steps + 1)) * g
            } else {
                // Aim `aim / 8` of the way from the bound to the incumbent: a tight cap
                // prunes hard and finds good plans fast, or proves a better bound.
                let gap = improve_cap.saturating_sub(lower);
                let aimed = lower + (gap / 8).saturating_mul(aim);
                (aimed - aimed % g).max(lower).min(improve_cap)
            };
            if shared.capacity.is_some() && cap < lower {
                // The bound already exceeds the capacity (`finish_if_optimal` ended the run).
                shared.raise(lower);
                return;
            }
            if best == 0 || cap < lower {
                shared.raise(best);
                return;
            }
            // With `dive` the improver stops at its first plan and starts again from the
            // root; without it, it goes on under the tightened cap (branch and bound).
            let target = if shared.capacity.is_some() || (step == Role::Improve && rules.dive) {
                cap
            } else {
                lower
            };
            let run_budget = match probe {
                Some((_, doublings)) => ((model.n as u64).max(64) * 4) << doublings,
                None => budget,
            };
            if rules.memo {
                worker.memo =
                    kept(step).map_or_else(Memo::default, |k| std::mem::take(&mut memos[k]));
                let held: usize = memos.iter().map(|m| m.exhausted.len()).sum();
                worker.memo_room = MEMO_LIMIT.saturating_sub(held + worker.memo.exhausted.len());
            }
            let flow = worker.run(cap, target, run_budget);
            if probing {
                episodes.end(worker.nodes);
            }
            if let Some(k) = kept(step).filter(|_| rules.memo) {
                memos[k] = std::mem::take(&mut worker.memo);
            }
            if step == Role::Prove {
                prover_nodes += worker.nodes;
                prover_runs += 1;
                proved = true;
            } else {
                improver_nodes += worker.nodes;
            }
            #[cfg(feature = "trace-search")]
            eprintln!(
                "{:.3}s {step:?} preorder {preorder} reorder {reorder} cap {cap} budget {budget}: \
                 {} nodes, {flow:?}, best {}",
                shared.started.elapsed().as_secs_f64(),
                worker.nodes,
                shared.best.load(Ordering::Relaxed)
            );
            match flow {
                Flow::Continue | Flow::Infeasible(_) => {
                    // Exhausted: nothing at or below the final cap.
                    shared.raise(worker.cap.saturating_add(g));
                }
                Flow::Abort => return,
                // Aim higher after a run without a plan, lower after one with a plan.
                Flow::Budget if step == Role::Improve && !worker.found => {
                    aim = (aim + 1).min(8);
                }
                Flow::Budget if step == Role::Improve => aim = (aim - 1).max(1),
                Flow::Target | Flow::Budget => {}
            }
            polish |= rules.lns && step == Role::Improve && worker.found;
        }
        reused = std::mem::take(&mut worker.reused);
        shared.exchange(&mut reused);
        dive = rules.dive && role != Role::Prove && worker.found;
        if !dive {
            round += 1;
            let doubles = if role == Role::Both && rules.probe {
                // One thread with `probe`: after every third run of the prover's.
                proved && prover_runs % RUNS_PER_BUDGET == 0
            } else {
                round.is_multiple_of(RUNS_PER_BUDGET)
            };
            if rules.restarts && doubles {
                budget = budget.saturating_mul(2);
            }
        }
    }
}

/// `memo`: at most this many nodes are remembered by each thread, over all its memos
/// (16 bytes and a control byte each, at most 7/8 full: about 40 MiB).
const MEMO_LIMIT: usize = 1 << 21;

/// `memo`: a buffer's two 64-bit terms in the hash of the unplaced minimum offsets, from
/// its four random salts (each term a folded 128-bit product, as in wyhash).
fn term(salt: &[u64; 4], min_off: u64) -> (u64, u64) {
    let fold = |x: u64, y: u64| {
        let product = u128::from(x) * u128::from(y);
        (product as u64) ^ (product >> 64) as u64
    };
    (
        fold(min_off ^ salt[0], salt[1]),
        fold(min_off ^ salt[2], salt[3]),
    )
}

/// The keys of `memo`'s table are hashes already: a key's low half is its hash.
#[derive(Default)]
struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(byte);
        }
    }
    fn write_u128(&mut self, key: u128) {
        self.0 = key as u64;
    }
}

/// A 64-bit mix (SplitMix64's finaliser): `probe`'s random caps, `memo`'s hashes.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// LNS rounds per searched buffer each time the improver polishes the incumbent (`lns`).
const LNS_ROUNDS_PER_BUFFER: u64 = 1;

/// `lns`: runs up to `rounds` rounds of the large-neighbourhood search from the incumbent
/// (fewer near the node limit; a round counts as a node) and offers the result.
fn lns_from_incumbent(problem: &Problem, shared: &Shared, rounds: u64, seed: u64) {
    let offsets = {
        let incumbent = shared.incumbent.lock().unwrap_or_else(|e| e.into_inner());
        incumbent.offsets.clone()
    };
    let Some(plan) = Plan::new(problem, offsets) else {
        return;
    };
    let left = shared
        .node_limit
        .saturating_sub(shared.nodes.load(Ordering::Relaxed));
    let limits = Limits {
        deadline: shared.deadline,
        rounds: rounds.min(left),
        target: shared.goal(),
        stop: Some(&shared.done),
        cancel: shared.cancel,
    };
    let improved = improve(problem, &plan, &limits, seed);
    shared.offer(improved.arena, || improved.plan.offsets);
    shared.poll(improved.rounds);
}

// ---------------------------------------------------------------------------------------
// The large-neighbourhood search for problems too large for the exact search.

/// Large problems: one LNS ([`improve`]) chain per thread from the start plan (seeds `seed`,
/// `seed + 1`, ...; the node limit split evenly, a round counting as a node), stopping
/// all when one reaches the lower bound; the best result (ties: the lowest thread) is
/// offered. With one thread, or when no chain reaches the bound, the result depends only
/// on the seed, the thread count and the rounds run.
fn large_neighbourhood(
    problem: &Problem,
    start: &Plan,
    shared: &Shared,
    seed: u64,
    threads: usize,
) {
    let reached = AtomicBool::new(false);
    let limits = Limits {
        deadline: shared.deadline,
        rounds: shared.node_limit.div_ceil(threads as u64),
        target: shared.goal(),
        stop: Some(&reached),
        cancel: shared.cancel,
    };
    let results: Mutex<Vec<Option<Improved>>> = Mutex::new(vec![None; threads]);
    run_threads(threads, |i| {
        let improved = improve(problem, start, &limits, seed.wrapping_add(i as u64));
        if improved.arena <= limits.target {
            reached.store(true, Ordering::Relaxed);
        }
        results.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(improved);
    });
    let results = results.into_inner().unwrap_or_else(|e| e.into_inner());
    let rounds = results.iter().flatten().map(|r| r.rounds).sum();
    shared.poll(rounds);
    if let Some(best) = results.into_iter().flatten().min_by_key(|r| r.arena) {
        let found_after = best
            .improved_at
            .map(|at| at.saturating_duration_since(shared.started));
        shared.offer(best.arena, || best.plan.offsets);
        if let Some(found_after) = found_after {
            let mut incumbent = shared.incumbent.lock().unwrap_or_else(|e| e.into_inner());
            incumbent.found_after = found_after;
        }
    }
}
