//! The greedy planners that place buffers in one fixed order: by size (first-fit and
//! best-fit), XLA's spatial order, XLA's temporal order and the chronological order.
//!
//! Each is an order plus a [`Fit`]; the [`super::placement`] engine does the placing.
//! Common to all of them: buffers with a fixed offset are placed first, at that offset; every
//! other buffer goes, in the planner's order, into a gap between the already-placed buffers
//! that it must not share bytes with (live together, or an explicit conflict pair), its
//! offset rounded up to its alignment, or on top of them when no gap holds it. Ties in an
//! order are broken by lifetime start, then by id (the position in the problem), so every
//! plan is deterministic.

use std::cmp::Reverse;

use super::placement::{plan_in_order, Fit};
use super::{PlanError, Planner};
use crate::plan::Plan;
use crate::problem::{Buffer, Problem};

/// Ids of the buffers sorted by `key` (ascending), ties broken by lifetime start, then id.
fn order_by<K: Ord>(problem: &Problem, key: impl Fn(&Buffer) -> K) -> Vec<u32> {
    let buffers = problem.buffers();
    let mut keyed: Vec<(K, u64, u32)> = buffers
        .iter()
        .enumerate()
        .map(|(i, b)| (key(b), b.lifetime.start, i as u32))
        .collect();
    // Ids are unique, so the unstable sort is deterministic.
    keyed.sort_unstable();
    keyed.into_iter().map(|(_, _, id)| id).collect()
}

/// `greedy-size-firstfit`: largest buffer first, each at the lowest offset that fits.
///
/// The rule of TensorFlow Lite for Microcontrollers' `GreedyMemoryPlanner`: buffers sorted
/// by size, descending (ties: earlier lifetime start, then lower id); each one placed at
/// the **lowest** offset where it fits between the placed buffers it must not share bytes
/// with, else on top of them.
///
/// ```text
///  address                            placing x (2 bytes), live at the same steps as
///   10 ┤ ┌──────── c ────────┐        a, b and c:
///    8 ┤ └───────────────────┘
///      │   free [6, 8): 2 bytes       best-fit puts x here (no room left over)
///    6 ┤ ┌──────── b ────────┐
///    5 ┤ └───────────────────┘
///      │   free [2, 5): 3 bytes       first-fit puts x here (the lowest offset)
///    2 ┤ ┌──────── a ────────┐
///    0 ┼─┴───────────────────┴──▶ time
/// ```
pub struct SizeFirstFit;

impl Planner for SizeFirstFit {
    fn name(&self) -> &'static str {
        "greedy-size-firstfit"
    }

    fn description(&self) -> &'static str {
        "largest first, each at the lowest offset that fits (TFLite Micro's greedy planner)"
    }

    fn plan(&self, problem: &Problem) -> Result<Plan, PlanError> {
        let order = order_by(problem, |b| Reverse(b.size));
        plan_in_order(problem, order, Fit::First)
    }
}

/// `greedy-size-bestfit`: largest buffer first, each in the smallest gap that fits.
///
/// The rule of TensorFlow Lite's arena planner (`SimpleMemoryArena`, "greedy by size"):
/// buffers sorted by size, descending (ties: earlier lifetime start, then lower id); each
/// one placed in the **smallest** gap (the least room left above it once aligned) that
/// holds it between the placed buffers it must not share bytes with (ties: lowest offset),
/// else on top of them.
///
/// ```text
///  address                            placing x (2 bytes), live at the same steps as
///   10 ┤ ┌──────── c ────────┐        a, b and c:
///    8 ┤ └───────────────────┘
///      │   free [6, 8): 2 bytes       best-fit puts x here (no room left over)
///    6 ┤ ┌──────── b ────────┐
///    5 ┤ └───────────────────┘
///      │   free [2, 5): 3 bytes       first-fit puts x here (the lowest offset)
///    2 ┤ ┌──────── a ────────┐
///    0 ┼─┴───────────────────┴──▶ time
/// ```
pub struct SizeBestFit;

impl Planner for SizeBestFit {
    fn name(&self) -> &'static str {
        "greedy-size-bestfit"
    }

    fn description(&self) -> &'static str {
        "largest first, each in the smallest gap that fits (TFLite's arena planner)"
    }

    fn plan(&self, problem: &Problem) -> Result<Plan, PlanError> {
        let order = order_by(problem, |b| Reverse(b.size));
        plan_in_order(problem, order, Fit::Best)
    }
}

/// `greedy-spatial`: XLA's spatial order, best-fit.
///
/// XLA's heap simulator (`GlobalDecreasingSizeBestFitHeap`, spatial sort): buffers sorted
/// by size descending, then by lifetime length (`end - start`, gaps included) descending
/// (then earlier start, then lower id); each placed best-fit as in
/// [`SizeBestFit`]. Among buffers of one size the longest-lived go first, so the short ones
/// fill the holes around them.
///
/// ```text
///  order:  ┌──────big, long──────┐ ┌big, short┐ ┌─small, long──┐ ┌small┐
///            1st                   2nd          3rd              4th
/// ```
pub struct Spatial;

impl Planner for Spatial {
    fn name(&self) -> &'static str {
        "greedy-spatial"
    }

    fn description(&self) -> &'static str {
        "size descending, then lifetime length descending; best-fit (XLA's spatial order)"
    }

    fn plan(&self, problem: &Problem) -> Result<Plan, PlanError> {
        let order = order_by(problem, |b| (Reverse(b.size), Reverse(b.lifetime.len())));
        plan_in_order(problem, order, Fit::Best)
    }
}

/// `greedy-temporal`: XLA's temporal order, best-fit.
///
/// XLA's heap simulator (`GlobalDecreasingSizeBestFitHeap`, temporal sort): buffers sorted
/// by lifetime length (`end - start`, gaps included) descending, then by size descending
/// (then earlier start, then lower id); each placed best-fit as in [`SizeBestFit`]. The
/// long-lived buffers form the floor; short ones are packed above and between them.
///
/// ```text
///  order:  ┌──────long, big──────┐ ┌─────long, small─────┐ ┌short, big┐ ┌short┐
///            1st                     2nd                     3rd          4th
/// ```
pub struct Temporal;

impl Planner for Temporal {
    fn name(&self) -> &'static str {
        "greedy-temporal"
    }

    fn description(&self) -> &'static str {
        "lifetime length descending, then size descending; best-fit (XLA's temporal order)"
    }

    fn plan(&self, problem: &Problem) -> Result<Plan, PlanError> {
        let order = order_by(problem, |b| (Reverse(b.lifetime.len()), Reverse(b.size)));
        plan_in_order(problem, order, Fit::Best)
    }
}

/// `greedy-chronological`: allocation order, best-fit.
///
/// Buffers sorted by lifetime start ascending, then lifetime end descending (the buffer
/// that lives longer first), then size descending (then lower id); each placed best-fit as
/// in [`SizeBestFit`]. This is the order in which a program allocates its buffers. When the
/// lifetimes nest like a stack (a buffer made later is freed earlier, as the activations
/// of a training step: made in the forward pass, freed in reverse in the backward pass),
/// each buffer lands on top of the ones that outlive it and no hole is left under it; on
/// the idealloc file S_1 (28,526 buffers) it comes within 0.71 % of max-live, where the
/// size orders stay 1.6 % above (doc/search.md).
///
/// On problems without gaps, conflict pairs and fixed offsets it runs as a sweep over time
/// (`sweep.rs`, `O(n log n)`: the placed buffers live with the next one are exactly those
/// live at its start), with the same plan as the placement engine.
///
/// ```text
///  order:  ┌──────────1st──────────┐
///             ┌──────2nd──────┐
///                ┌──3rd──┐  ┌4th┐
/// ```
pub struct Chronological;

impl Planner for Chronological {
    fn name(&self) -> &'static str {
        "greedy-chronological"
    }

    fn description(&self) -> &'static str {
        "lifetime start ascending, then end descending, then size descending; best-fit (allocation order)"
    }

    fn plan(&self, problem: &Problem) -> Result<Plan, PlanError> {
        // Without gaps, conflict pairs and fixed offsets, the buffers live together with
        // the next one are exactly those live at its start: the sweep gives the engine's
        // plan in O(n log n).
        if super::sweep::applies(problem) {
            return super::sweep::best_fit_chronological(problem);
        }
        let order = order_by(problem, |b| {
            super::sweep::chronological_key(b.lifetime.start, b.lifetime.end, b.size)
        });
        plan_in_order(problem, order, Fit::Best)
    }
}
