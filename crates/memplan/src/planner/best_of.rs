//! `best-of`: every greedy planner, the smallest arena wins.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::placement::with_deadline;
use super::{
    Breadth, Chronological, PlanError, Planner, SizeBestFit, SizeFirstFit, Spatial, Temporal,
};
use crate::plan::Plan;
use crate::problem::Problem;

/// The planners [`BestOf`] runs, in tie-break order: on equal arenas the earliest wins.
///
/// The order is "cheapest by design" first: first-fit stops at the first gap that holds a
/// buffer; the three best-fit orders scan all gaps and differ only in their sort key;
/// breadth also builds an interval tree to compute its order. It is also the order of
/// their measured speed (`benches/planners.rs`, idealloc `S_1`: 62, 97, 102, 107 and
/// 114 ms). The chronological order, added later, comes last so that the earlier
/// candidates keep winning their ties.
pub const CANDIDATES: [&dyn Planner; 6] = [
    &SizeFirstFit,
    &SizeBestFit,
    &Spatial,
    &Temporal,
    &Breadth,
    &Chronological,
];

/// Below this many buffers [`run_all`] runs the candidates one after the other on the
/// calling thread: each takes well under a millisecond, less than starting threads costs.
pub const PARALLEL_FROM: usize = 1000;

/// From this many buffers on, [`run_all`] and [`run_until`] run only the candidates of
/// [`AT_SCALE`]. The other five place every buffer against the `k` placed buffers live
/// with it (`O(n · k)` in all): on a random problem of 100,000 buffers with 20,000 live at
/// once they took 233 s together, against well under a second for the chronological
/// order's sweep. Every benchmark file of the suites (at most 62,185 buffers) is below it.
pub const SCALE_FROM: usize = 100_000;

/// The candidates run from [`SCALE_FROM`] buffers on (indices into [`CANDIDATES`]):
/// `greedy-chronological`, which on problems without gaps, conflict pairs and fixed
/// offsets is a sweep over time in `O(n log n)` (doc/planners.md).
pub const AT_SCALE: [usize; 1] = [5];

/// One planner's run inside [`run_all`].
#[derive(Clone, Debug)]
pub struct Attempt {
    /// The planner's name.
    pub planner: &'static str,
    /// Its plan, or why it made none.
    pub result: Result<Plan, PlanError>,
    /// Wall-clock time of its `plan` call.
    pub elapsed: Duration,
}

impl Attempt {
    /// The arena of the plan, when there is one.
    pub fn arena_bytes(&self) -> Option<u64> {
        self.result.as_ref().ok().and_then(|p| p.arena_bytes)
    }
}

/// Runs every planner of [`CANDIDATES`] (from [`SCALE_FROM`] buffers, those of
/// [`AT_SCALE`] only) on `problem`, in parallel on up to
/// [`std::thread::available_parallelism`] scoped threads (each takes the next candidate
/// not yet started), and returns their attempts in [`CANDIDATES`] order, whatever the order
/// in which they finished. Problems of fewer than [`PARALLEL_FROM`] buffers are planned on
/// the calling thread.
pub fn run_all(problem: &Problem) -> Vec<Attempt> {
    run_candidates(problem, None)
}

/// The order in which [`run_until`] starts the candidates (indices into [`CANDIDATES`]):
/// first-fit and breadth first, the two most different orders (size against busiest step;
/// on the idealloc files one of them is the best candidate on G_1, Y_1 and pangu_2.6B),
/// then the chronological order (the best candidate on S_1, by far), then the other
/// best-fit orders.
pub const UNTIL_ORDER: [usize; 6] = [0, 4, 5, 1, 2, 3];

/// The name of [`run_until`]'s fallback at scale: slabs of equal slots
/// ([`super::sweep::slabs`]).
pub const SLABS: &str = "slabs";

/// Like [`run_all`], but the candidates start in [`UNTIL_ORDER`], and one after the first
/// starts only when it is expected to end by `deadline`: when the current time plus the
/// longest time a candidate has taken so far (the time since the start while none has
/// finished) is at most `deadline`. Returns the attempts that ran, in [`CANDIDATES`] order;
/// the first to start always runs. Which candidates run depends on the timing. A
/// candidate still placing at `deadline` stops there and stacks its unplaced buffers on top
/// of the placed ones (a valid, worse plan), so the call returns soon after `deadline`
/// whatever the size of the problem.
///
/// From [`SCALE_FROM`] buffers a fallback runs first, and the candidate after it under the
/// same rule: [`SLABS`], a plan made whatever the deadline, several times faster than the
/// candidate's sweep (1 s at 10^7 buffers): 1.4-1.8 times the bound on random lifetimes,
/// 1.08 on idealloc's `Y_1` copied 16 times. Its attempt comes last; it is kept only when
/// it beats the candidate, in practice when that did not run or was cut short (issue #18:
/// at 10^7 buffers `search --time-limit 5` leaves the start about 1 s, and the
/// chronological sweep, stacking past the deadline what it had not placed, gave 23,000
/// times the bound).
pub fn run_until(problem: &Problem, deadline: Instant) -> Vec<Attempt> {
    run_candidates(problem, Some(deadline))
}

fn run_candidates(problem: &Problem, deadline: Option<Instant>) -> Vec<Attempt> {
    const ALL_ORDER: [usize; 6] = [0, 1, 2, 3, 4, 5];
    // The index of the slab fallback, after the candidates.
    const FALLBACK: usize = CANDIDATES.len();
    const FALLBACK_FIRST: [usize; 2] = [FALLBACK, AT_SCALE[0]];
    let fallback = deadline.is_some() && problem.len() >= SCALE_FROM && AT_SCALE.len() == 1;
    let order: &[usize] = if problem.len() >= SCALE_FROM {
        if fallback {
            &FALLBACK_FIRST
        } else {
            &AT_SCALE
        }
    } else if deadline.is_some() {
        &UNTIL_ORDER
    } else {
        &ALL_ORDER
    };
    // The fallback and then the sweep, on one thread: the sweep starts only with time
    // left after the fallback (both are bound by memory traffic; run side by side at
    // 10^7 buffers, the fallback took 1.3 s instead of 1.0 s and the sweep was cut anyway).
    let workers = if problem.len() < PARALLEL_FROM || fallback {
        1
    } else {
        std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(CANDIDATES.len())
    };
    let started = Instant::now();
    let next = AtomicUsize::new(0);
    let slots: Mutex<Vec<Option<Attempt>>> = Mutex::new(vec![None; CANDIDATES.len() + 1]);
    let expected_end = || {
        let slots = slots.lock().unwrap_or_else(|e| e.into_inner());
        let longest = slots.iter().flatten().map(|a| a.elapsed).max();
        let now = Instant::now();
        now + longest.unwrap_or(now - started)
    };
    let work = || loop {
        let k = next.fetch_add(1, Ordering::Relaxed);
        let Some(&i) = order.get(k) else {
            break;
        };
        if k > 0 && deadline.is_some_and(|d| expected_end() > d) {
            break;
        }
        let started = Instant::now();
        let (planner, result) = match CANDIDATES.get(i) {
            // Under a deadline a candidate cut short stacks its unplaced buffers on top.
            Some(planner) => (
                planner.name(),
                match deadline {
                    Some(d) => with_deadline(d, || planner.plan(problem)),
                    None => planner.plan(problem),
                },
            ),
            None => (SLABS, super::sweep::slabs(problem)),
        };
        let attempt = Attempt {
            planner,
            result,
            elapsed: started.elapsed(),
        };
        slots.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(attempt);
    };
    if workers <= 1 {
        work();
    } else {
        std::thread::scope(|scope| {
            for _ in 1..workers {
                scope.spawn(work);
            }
            work();
        });
    }
    slots
        .into_inner()
        .unwrap_or_else(|e| e.into_inner())
        .into_iter()
        .flatten()
        .collect()
}

/// The index of the winning attempt: the smallest arena, ties to the earliest attempt.
/// When no attempt has a plan, the first attempt's error.
pub fn winner(attempts: &[Attempt]) -> Result<usize, PlanError> {
    let best = attempts
        .iter()
        .enumerate()
        .filter_map(|(i, a)| a.arena_bytes().map(|arena| (arena, i)))
        .min();
    match best {
        Some((_, i)) => Ok(i),
        None => match attempts.first() {
            Some(Attempt {
                result: Err(error), ..
            }) => Err(error.clone()),
            _ => Err(PlanError::ArenaOverflow),
        },
    }
}

/// `best-of`: runs every greedy planner and keeps the smallest arena.
///
/// Runs the six greedy planners of [`CANDIDATES`] (not `naive`) in parallel on scoped
/// threads and returns the plan with the smallest arena. From [`SCALE_FROM`] buffers it
/// runs only [`AT_SCALE`] (`greedy-chronological`), the one that scales. Ties go to the planner listed
/// first in [`CANDIDATES`] (first-fit, best-fit, spatial, temporal, breadth,
/// chronological), so the result
/// is deterministic whatever the thread timing. If every planner fails, the error of the
/// first one is returned (they fail for the same reasons: clashing fixed offsets, or an
/// arena beyond 2^64).
///
/// ```text
///   problem ─┬─► greedy-size-firstfit ─ 1 040 ─┐
///            ├─► greedy-size-bestfit  ─ 1 024 ─┤
///            ├─► greedy-spatial       ─ 1 024 ─┼─► min (first on ties) ─► bestfit's plan
///            ├─► greedy-temporal      ─ 1 100 ─┤
///            ├─► greedy-breadth       ─ 1 032 ─┤
///            └─► greedy-chronological ─ 1 056 ─┘
/// ```
///
/// [`run_all`] gives every attempt with its time; [`BestOf::plan_with_winner`] also says
/// which planner won.
pub struct BestOf;

impl BestOf {
    /// The best plan and the name of the planner that made it.
    pub fn plan_with_winner(&self, problem: &Problem) -> Result<(Plan, &'static str), PlanError> {
        pick(run_all(problem))
    }

    /// The best plan of the candidates [`run_until`] runs by `deadline` (at least the
    /// first), and the name of the planner that made it.
    pub fn plan_until(
        &self,
        problem: &Problem,
        deadline: Instant,
    ) -> Result<(Plan, &'static str), PlanError> {
        pick(run_until(problem, deadline))
    }
}

/// The winner's plan and name.
fn pick(mut attempts: Vec<Attempt>) -> Result<(Plan, &'static str), PlanError> {
    let i = winner(&attempts)?;
    let attempt = attempts.swap_remove(i);
    Ok((attempt.result?, attempt.planner))
}

impl Planner for BestOf {
    fn name(&self) -> &'static str {
        "best-of"
    }

    fn description(&self) -> &'static str {
        "runs the six greedy planners in parallel and keeps the smallest arena"
    }

    fn plan(&self, problem: &Problem) -> Result<Plan, PlanError> {
        self.plan_with_winner(problem).map(|(plan, _)| plan)
    }
}
