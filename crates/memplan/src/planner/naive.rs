//! `naive`: one block per buffer, nothing shared.

use super::placement::fixed_top;
use super::{PlanError, Planner};
use crate::plan::Plan;
use crate::problem::Problem;

/// Gives every buffer its own block, stacked in id order: the "no sharing" baseline.
///
/// Arena = sum of sizes (plus alignment padding). Buffers with a fixed offset keep it; the
/// others are stacked above the highest fixed buffer (of at least one byte). A zero-size
/// buffer takes no block: it goes to its fixed offset or 0.
///
/// ```text
///  address
///    ▲   ┌──c──┐
///    │ ┌─b─┐   │      every buffer stacked on the previous one,
///    │ a─┐ │   │      whatever its lifetime
///    └────────────▶ time
/// ```
pub struct Naive;

impl Planner for Naive {
    fn name(&self) -> &'static str {
        "naive"
    }

    fn description(&self) -> &'static str {
        "one block per buffer, nothing shared (arena = sum of sizes): the no-sharing baseline"
    }

    fn plan(&self, problem: &Problem) -> Result<Plan, PlanError> {
        // Fixed buffers that must not share bytes but overlap make every plan invalid.
        let mut top = fixed_top(problem)?;
        let buffers = problem.buffers();
        let mut offsets = Vec::with_capacity(buffers.len());
        for b in buffers {
            let offset = match b.fixed_offset {
                Some(fixed) => fixed,
                None if b.size == 0 => 0,
                None => {
                    let offset = top
                        .checked_next_multiple_of(b.alignment)
                        .ok_or(PlanError::ArenaOverflow)?;
                    top = offset.checked_add(b.size).ok_or(PlanError::ArenaOverflow)?;
                    offset
                }
            };
            offsets.push(offset);
        }
        Plan::new(problem, offsets).ok_or(PlanError::ArenaOverflow)
    }
}
