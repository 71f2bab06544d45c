//! A plan: one offset per buffer of a [`Problem`], and for a fragmented plan the pieces
//! (extents) each buffer's bytes are spread over.

pub mod tensors;

use std::borrow::Cow;

use crate::problem::{BufferId, Problem};

/// One contiguous piece of a buffer's memory: the addresses `[offset, offset + len)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Extent {
    /// First byte of the piece.
    pub offset: u64,
    /// Bytes in the piece.
    pub len: u64,
}

impl Extent {
    /// One past the last byte, or `None` when it overflows 64 bits.
    pub fn end(self) -> Option<u64> {
        self.offset.checked_add(self.len)
    }
}

/// Where a problem's buffers lie in one arena.
///
/// Contract: `offsets.len() == problem.len()` and `offsets[i]` is the first byte of
/// buffer `i`.
/// - A *contiguous* plan (`extents: None`, what every planner but `exclusive
///   --fragmented` makes) puts buffer `i` on `[offsets[i], offsets[i] + size)`: one
///   offset per buffer and nothing more, so contiguous plans stay as cheap as before.
/// - A *fragmented* plan (`extents: Some(lists)`, `lists.len() == problem.len()`) spreads
///   buffer `i` over the pieces `lists[i]`, in the order its bytes fill them: they do not
///   overlap each other, their lengths add up to the buffer's size, and the first starts
///   at `offsets[i]` (which the buffer's alignment and fixed offset apply to; later pieces
///   have no alignment). A buffer in one piece has a one-element list.
///
/// A plan says nothing about validity by itself: [`crate::checker::check`] decides that
/// against the problem, extents included.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// `offsets[id.index()]` is the offset of buffer `id` (of its first extent).
    pub offsets: Vec<u64>,
    /// The arena size its producer claims (the end of the highest byte), when it claims
    /// one. The checker reports a claim that differs from the recomputed value.
    pub arena_bytes: Option<u64>,
    /// Fragmented plans: the extents of every buffer; `None` for a contiguous plan.
    pub extents: Option<Vec<Vec<Extent>>>,
}

impl Plan {
    /// A plan with these offsets claiming the arena they imply, or `None` when the lengths
    /// differ or an `offset + size` overflows.
    pub fn new(problem: &Problem, offsets: Vec<u64>) -> Option<Plan> {
        let arena = arena_bytes(problem, &offsets)?;
        Some(Plan {
            offsets,
            arena_bytes: Some(arena),
            extents: None,
        })
    }

    /// A fragmented plan with these extents (`offsets` taken from the first extent of
    /// each buffer, 0 for an empty list) claiming the arena they imply, or `None` when the
    /// number of lists differs from the number of buffers or an extent's end overflows.
    pub fn fragmented(problem: &Problem, extents: Vec<Vec<Extent>>) -> Option<Plan> {
        if extents.len() != problem.len() {
            return None;
        }
        let mut arena = 0u64;
        for extent in extents.iter().flatten() {
            arena = arena.max(extent.end()?);
        }
        Some(Plan {
            offsets: extents
                .iter()
                .map(|e| e.first().map_or(0, |e| e.offset))
                .collect(),
            arena_bytes: Some(arena),
            extents: Some(extents),
        })
    }

    /// The offset of one buffer.
    pub fn offset(&self, id: BufferId) -> u64 {
        self.offsets[id.index()]
    }

    /// True for a fragmented plan (one with extents) in which some buffer has more than
    /// one piece.
    pub fn is_fragmented(&self) -> bool {
        self.extents
            .as_ref()
            .is_some_and(|lists| lists.iter().any(|l| l.len() > 1))
    }

    /// The extents of buffer `id` (of size `size`): its list in a fragmented plan, else
    /// the single piece `[offset, offset + size)`. An id without a list reads as empty.
    pub fn extents_of(&self, id: BufferId, size: u64) -> Cow<'_, [Extent]> {
        match &self.extents {
            Some(lists) => Cow::Borrowed(lists.get(id.index()).map_or(&[][..], |l| &l[..])),
            None => Cow::Owned(vec![Extent {
                offset: self.offsets[id.index()],
                len: size,
            }]),
        }
    }

    /// The highest byte's end recomputed (extents included), or `None` when the plan does
    /// not have one offset (or list) per buffer or an end overflows.
    pub fn recomputed_arena(&self, problem: &Problem) -> Option<u64> {
        match &self.extents {
            None => arena_bytes(problem, &self.offsets),
            Some(lists) => {
                if lists.len() != problem.len() || self.offsets.len() != problem.len() {
                    return None;
                }
                lists
                    .iter()
                    .flatten()
                    .try_fold(0u64, |arena, e| Some(arena.max(e.end()?)))
            }
        }
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
