//! Zero-size buffers for the planners that plan a problem without them.
//!
//! A zero-size buffer occupies no byte ([`crate::Buffer`]): it constrains nothing, so the
//! planners whose orders, clusters or search nodes would count it (`strip`, `search` and
//! its large-neighbourhood search) plan the problem without the zero-size buffers and put
//! each of them at its fixed offset, or 0, afterwards ([`Split`]). The greedy engine,
//! `naive`, `tflm-greedy`, `exclusive` and `npu` skip them where they go instead, so that
//! their statistics keep the problem's ids.

use super::PlanError;
use crate::plan::{Extent, Plan};
use crate::problem::{Buffer, Problem};

/// Where a zero-size buffer goes: its fixed offset, else 0 (a multiple of every
/// alignment, and the lowest offset, so it never raises the arena).
pub(crate) fn zero_size_offset(buffer: &Buffer) -> u64 {
    buffer.fixed_offset.unwrap_or(0)
}

/// The arena the zero-size buffers of `problem` force: the highest fixed offset among
/// them (0 when none is fixed). Any valid plan's arena is at least this.
pub(crate) fn zero_size_floor(problem: &Problem) -> u64 {
    problem
        .buffers()
        .iter()
        .filter(|b| b.size == 0)
        .filter_map(|b| b.fixed_offset)
        .max()
        .unwrap_or(0)
}

/// A problem split into its buffers of at least one byte (`problem`, renumbered) and its
/// zero-size buffers.
pub(crate) struct Split {
    /// The problem without its zero-size buffers.
    pub(crate) problem: Problem,
    /// `kept[k]`: the id in the full problem of buffer `k` of [`Split::problem`].
    kept: Vec<u32>,
}

impl Split {
    /// `None` when `problem` has no zero-size buffer (plan it as it is).
    pub(crate) fn of(problem: &Problem) -> Option<Split> {
        if !problem.has_zero_size() {
            return None;
        }
        let (reduced, kept) = problem.without_zero_size();
        Some(Split {
            problem: reduced,
            kept,
        })
    }

    /// The plan of the full problem that keeps `plan`'s places (a plan of
    /// [`Split::problem`]) and puts every zero-size buffer at [`zero_size_offset`]. It
    /// claims its recomputed arena: `plan`'s, or the highest fixed offset of a zero-size
    /// buffer when that is higher.
    pub(crate) fn expand(&self, full: &Problem, plan: &Plan) -> Result<Plan, PlanError> {
        let buffers = full.buffers();
        let mut offsets: Vec<u64> = buffers.iter().map(zero_size_offset).collect();
        for (k, &i) in self.kept.iter().enumerate() {
            offsets[i as usize] = plan.offsets[k];
        }
        match &plan.extents {
            None => Plan::new(full, offsets).ok_or(PlanError::ArenaOverflow),
            Some(lists) => {
                let mut extents: Vec<Vec<Extent>> = offsets
                    .iter()
                    .map(|&offset| vec![Extent { offset, len: 0 }])
                    .collect();
                for (k, &i) in self.kept.iter().enumerate() {
                    extents[i as usize] = lists[k].clone();
                }
                Plan::fragmented(full, extents).ok_or(PlanError::ArenaOverflow)
            }
        }
    }

    /// The part of `plan` (a plan of the full problem, one offset per buffer) that places
    /// the buffers of [`Split::problem`], claiming its recomputed arena (`None` when an
    /// end overflows).
    pub(crate) fn reduce(&self, plan: &Plan) -> Plan {
        let pick = |i: &u32| plan.offsets[*i as usize];
        let mut reduced = Plan {
            offsets: self.kept.iter().map(pick).collect(),
            arena_bytes: None,
            extents: plan.extents.as_ref().map(|lists| {
                self.kept
                    .iter()
                    .map(|&i| lists[i as usize].clone())
                    .collect()
            }),
        };
        reduced.arena_bytes = reduced.recomputed_arena(&self.problem);
        reduced
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::check;
    use crate::problem::BufferId;

    #[test]
    fn expand_puts_zero_size_buffers_at_their_fixed_offset_or_zero() {
        let mut fixed = Buffer::new("fixed", 0, 0, 4);
        fixed.fixed_offset = Some(32);
        let mut aligned = Buffer::new("aligned", 0, 0, 4);
        aligned.alignment = 64;
        let full = Problem::new(
            vec![
                Buffer::new("a", 8, 0, 4),
                fixed,
                aligned,
                Buffer::new("b", 8, 0, 4),
            ],
            [(BufferId(1), BufferId(3))],
        )
        .unwrap();
        let split = Split::of(&full).unwrap();
        assert_eq!(split.problem.len(), 2);
        assert!(split.problem.conflicts().is_empty());
        let reduced = Plan::new(&split.problem, vec![0, 8]).unwrap();
        let plan = split.expand(&full, &reduced).unwrap();
        assert_eq!(plan.offsets, vec![0, 32, 0, 8]);
        assert_eq!(plan.arena_bytes, Some(32));
        assert_eq!(zero_size_floor(&full), 32);
        assert!(check(&full, &plan).is_valid());
        let back = split.reduce(&plan);
        assert_eq!(back, reduced);
        let fragmented = Plan::fragmented(
            &split.problem,
            vec![
                vec![Extent { offset: 0, len: 8 }],
                vec![Extent { offset: 8, len: 8 }],
            ],
        )
        .unwrap();
        let plan = split.expand(&full, &fragmented).unwrap();
        assert!(check(&full, &plan).is_valid());
        assert_eq!(plan.offsets, vec![0, 32, 0, 8]);
        assert!(Split::of(&split.problem).is_none());
    }
}
