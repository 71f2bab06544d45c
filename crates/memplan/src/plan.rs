//! A plan: one offset per buffer of a [`Problem`].

use crate::problem::{BufferId, Problem};

/// The offsets of a problem's buffers in one arena.
///
/// Contract: `offsets.len() == problem.len()` and `offsets[i]` is the first byte of
/// buffer `i`, which occupies `[offsets[i], offsets[i] + size)`. A plan says nothing about
/// validity by itself: [`crate::checker::check`] decides that against the problem.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// `offsets[id.index()]` is the offset of buffer `id`.
    pub offsets: Vec<u64>,
    /// The arena size its producer claims (`max(offset + size)`), when it claims one.
    /// The checker reports a claim that differs from the recomputed value.
    pub arena_bytes: Option<u64>,
}

impl Plan {
    /// A plan with these offsets claiming the arena they imply, or `None` when the lengths
    /// differ or an `offset + size` overflows.
    pub fn new(problem: &Problem, offsets: Vec<u64>) -> Option<Plan> {
        let arena = arena_bytes(problem, &offsets)?;
        Some(Plan {
            offsets,
            arena_bytes: Some(arena),
        })
    }

    /// The offset of one buffer.
    pub fn offset(&self, id: BufferId) -> u64 {
        self.offsets[id.index()]
    }
}

/// `max(offset + size)` over all buffers (0 for no buffers), or `None` when the lengths
/// differ or a sum overflows.
pub fn arena_bytes(problem: &Problem, offsets: &[u64]) -> Option<u64> {
    if offsets.len() != problem.len() {
        return None;
    }
    problem
        .buffers()
        .iter()
        .zip(offsets)
        .try_fold(0u64, |arena, (b, &o)| {
            Some(arena.max(o.checked_add(b.size)?))
        })
}
