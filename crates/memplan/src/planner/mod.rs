//! Planners: each turns a [`Problem`] into a [`Plan`].
//!
//! Every planner is a named unit behind the [`Planner`] trait, listed by [`all`] and found
//! by [`by_name`]. A planner either returns a plan that the [`crate::checker`] accepts or
//! an error saying why none could be made; tests hold every planner to that.
//!
//! | name | order | gap |
//! |---|---|---|
//! | `naive` | id | none: stacked, nothing shared |
//! | `greedy-size-firstfit` | size ↓ | lowest that fits (TFLite Micro) |
//! | `greedy-size-bestfit` | size ↓ | smallest that fits (TFLite arena) |
//! | `greedy-spatial` | size ↓, lifetime length ↓ | smallest that fits (XLA) |
//! | `greedy-temporal` | lifetime length ↓, size ↓ | smallest that fits (XLA) |
//! | `greedy-breadth` | busiest step ↓, then size ↓ | smallest that fits (Pisarchyk & Lee) |
//! | `greedy-chronological` | lifetime start ↑, end ↓, size ↓ | smallest that fits (allocation order) |
//! | `best-of` | the six greedy planners in parallel (from 100,000 buffers, the chronological one only) | smallest arena wins |
//! | `strip` | a preset metric, then peak suppression (the `strip` method) | lowest that fits |
//! | `search` | branch and bound over canonical orders, from `best-of` | lowest free offset |
//! | `exclusive` | size ↓ (the `exclusive` method; exclusivity as conflict pairs) | lowest that fits |
//! | `npu` | groups, then widest step first (the `npu` method) | shared objects, end to end |
//! | `tflm-greedy` | fixed first, then size ↓, ties later id first (TFLite Micro exactly) | first gap that fits, walked in offset order |
//!
//! Ties in every order: earlier lifetime start, then lower id; every planner is
//! deterministic.
//!
//! The greedy planners share one placement engine (`placement.rs`): two segment trees over
//! the segment starts whose node lists hold the *union* of the placed address ranges, so
//! the ranges live together with the next buffer come as `O(log n)` sorted runs of `k`
//! ranges in all, merged in `O(k log log n)` and scanned for gaps. Buffers with a fixed
//! offset are placed first, at it; alignment, explicit conflict pairs and gaps are
//! honoured; an arena beyond 2^64 is [`PlanError::ArenaOverflow`]. `greedy-chronological`
//! skips the engine on problems without gaps, conflict pairs and fixed offsets: there the
//! placed buffers live with the next one are those live at its start, and a sweep over
//! time (`sweep.rs`) gives the same plan in `O(n log n)`.
//!
//! Zero-size buffers ([`crate::Buffer`]) occupy nothing: every planner puts one at its fixed
//! offset, or at 0, and places the other buffers exactly as it would without them. The
//! greedy planners (and `best-of`), `naive`, `exclusive`, `npu` and `tflm-greedy` skip them
//! where they go; `strip` and `search` plan the problem without them and add them back.

use crate::plan::Plan;
use crate::problem::Problem;

pub mod best_of;
mod breadth;
pub mod exclusive;
mod granularity;
mod greedy;
pub mod lns;
mod naive;
pub mod npu;
mod placement;
pub mod search;
pub mod strip;
mod sweep;
mod tflm_greedy;
mod zero_size;

pub use best_of::{run_all, Attempt, BestOf};
pub use breadth::Breadth;
pub use exclusive::{exclusive_stats, Exclusive, ExclusiveStats};
pub use greedy::{Chronological, SizeBestFit, SizeFirstFit, Spatial, Temporal};
pub use naive::Naive;
pub use npu::{Layout, Match, Npu, NpuStats, Slack};
pub use search::Search;
pub use strip::{Metric, Stop, Strip, StripOutcome};
pub use tflm_greedy::{tflm_greedy_offsets, TflmGreedy};

/// Why a planner produced no plan.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// The arena would not fit in 64 bits.
    #[error("the arena would exceed 2^64 bytes; the buffer sizes are too large to plan")]
    ArenaOverflow,
    /// Two buffers with fixed offsets must not share bytes but do.
    #[error("buffers '{a}' and '{b}' have fixed offsets that overlap while they must not share bytes; no plan can keep both")]
    FixedOffsetsClash { a: String, b: String },
    /// A planner built an intermediate problem that was not valid (a bug in memplan).
    #[error("internal error, please report it: {0}")]
    Internal(String),
}

/// A static memory planner.
pub trait Planner: Sync {
    /// The name used on the command line (`--planner NAME`) and in outputs.
    fn name(&self) -> &'static str;
    /// One line saying what the planner does.
    fn description(&self) -> &'static str;
    /// Plans the problem. The plan claims its arena (`arena_bytes` is `Some`).
    fn plan(&self, problem: &Problem) -> Result<Plan, PlanError>;
}

/// Every planner, in the order `memplan planners` lists them.
pub fn all() -> &'static [&'static dyn Planner] {
    &[
        &Naive,
        &SizeFirstFit,
        &SizeBestFit,
        &Spatial,
        &Temporal,
        &Breadth,
        &Chronological,
        &BestOf,
        &Strip::DEFAULT,
        &Search::DEFAULT,
        &Exclusive::DEFAULT,
        &Npu {
            rule: Match::Exact,
            slack: Slack::Any,
            layout: Layout::Offsets,
        },
        &TflmGreedy,
    ]
}

/// The planner with this name, or an error listing the known names.
pub fn by_name(name: &str) -> Result<&'static dyn Planner, UnknownPlanner> {
    all()
        .iter()
        .copied()
        .find(|p| p.name() == name)
        .ok_or_else(|| {
            let names: Vec<&str> = all().iter().map(|p| p.name()).collect();
            UnknownPlanner {
                name: name.to_string(),
                suggestion: did_you_mean(name, &names).map(str::to_string),
                known: names.join(", "),
            }
        })
}

/// A planner name that no planner has.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownPlanner {
    pub name: String,
    /// The known name closest to `name`, when one is close enough to be a typo.
    pub suggestion: Option<String>,
    pub known: String,
}

impl std::fmt::Display for UnknownPlanner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "unknown planner '{}'; ", self.name)?;
        match &self.suggestion {
            Some(suggestion) => write!(f, "did you mean '{suggestion}'? Known planners: ")?,
            None => write!(f, "known planners: ")?,
        }
        write!(f, "{} (see `memplan planners`)", self.known)
    }
}

impl std::error::Error for UnknownPlanner {}

/// The candidate closest to `word` by edit distance (case-insensitive), when it is within
/// a third of the longer word's length (at least 1, at most 3 edits): a likely typo.
pub fn did_you_mean<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    if word.len() > 64 {
        return None; // not a typo of a name, and the distance would cost its square
    }
    let word = word.to_ascii_lowercase();
    candidates
        .iter()
        .map(|&c| (edit_distance(&word, &c.to_ascii_lowercase()), c))
        .filter(|&(d, c)| d <= (word.len().max(c.len()) / 3).clamp(1, 3))
        .min_by_key(|&(d, _)| d)
        .map(|(_, c)| c)
}

/// Edit distance over characters with adjacent transpositions counted as one edit (the
/// optimal string alignment distance; short words only: `O(len(a) * len(b))`).
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut before: Vec<usize> = vec![0; b.len() + 1];
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    let mut row: Vec<usize> = vec![0; b.len() + 1];
    for i in 1..=a.len() {
        row[0] = i;
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            row[j] = (previous[j] + 1)
                .min(row[j - 1] + 1)
                .min(previous[j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                row[j] = row[j].min(before[j - 2] + 1);
            }
        }
        std::mem::swap(&mut before, &mut previous);
        std::mem::swap(&mut previous, &mut row);
    }
    previous[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_misspelt_planner_gets_a_suggestion() {
        let message = |name: &str| match by_name(name) {
            Ok(p) => panic!("'{name}' named {}", p.name()),
            Err(e) => e.to_string(),
        };
        assert!(message("serch").contains("did you mean 'search'?"));
        assert!(message("bestof").contains("did you mean 'best-of'?"));
        assert!(message("Strip").contains("did you mean 'strip'?"));
        assert!(message("greedy-breath").contains("did you mean 'greedy-breadth'?"));
        assert!(message("serach").contains("did you mean 'search'?"));
        assert_eq!(edit_distance("bacth", "batch"), 1);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        let far = message("quantum");
        assert!(!far.contains("did you mean") && far.contains("; known planners: naive"));
        assert!(!message(&"x".repeat(100_000)).contains("did you mean"));
    }
}
