//! Every tensor's address, not only each block's (the `exclusive` method, Deployment).
//!
//! A plan places *blocks* (the buffers of a [`Problem`]). A device loads *tensors*: in a
//! graph several tensors can share one block (a view and its input, an in-place result and
//! the input it overwrote, the outputs an `exclusive` or `npu` block holds). A
//! [`TensorSlot`] says which block holds a tensor and where inside it; [`addresses`] turns
//! slots and a plan into [`TensorAddress`]es, `address = base + block offset + offset in
//! block`, with every sum checked.
//!
//! In a fragmented plan a block's bytes fill its pieces ([`Plan::extents`]) in order, so
//! a tensor's bytes `[k, k + size)` of its block can lie in several pieces:
//! [`TensorAddress::pieces`] lists them, and `offset` is where its first byte lies.
//!
//! ```text
//!  base ──► ┌──────── arena ────────┐
//!           │ block b at offset o   │ tensor t: block b, offset in block k
//!           │   ├─ k ─┤ t           │ address(t) = base + o + k
//! ```

use crate::plan::{Extent, Plan};
use crate::problem::{BufferId, Problem};

/// Where one tensor lives: the block (buffer) holding it and its first byte's offset
/// inside the block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorSlot {
    /// The tensor's name, as its model names it.
    pub name: String,
    /// The block holding its bytes.
    pub block: BufferId,
    /// Its first byte, counted from the block's first byte.
    pub offset_in_block: u64,
    /// Its bytes (at most the block's size minus `offset_in_block`).
    pub size: u64,
}

impl TensorSlot {
    /// One slot per buffer, the buffer holding itself: for problems whose buffers are the
    /// tensors (a minimalloc CSV, a memory-operation sequence).
    pub fn one_per_buffer(problem: &Problem) -> Vec<TensorSlot> {
        problem
            .ids()
            .map(|id| TensorSlot {
                name: problem.buffer(id).name.clone(),
                block: id,
                offset_in_block: 0,
                size: problem.buffer(id).size,
            })
            .collect()
    }
}

/// A tensor's place in a plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorAddress {
    /// The tensor's name.
    pub name: String,
    /// The block holding it.
    pub block: BufferId,
    /// Its first byte counted from the arena's start: block offset + offset in block (in a
    /// fragmented plan, where the block's byte `offset in block` lies).
    pub offset: u64,
    /// `base + offset`.
    pub address: u64,
    /// Its bytes.
    pub size: u64,
    /// `None` when the tensor is one contiguous range `[offset, offset + size)` (always in
    /// a contiguous plan); in a fragmented plan, for a tensor whose bytes lie in two or
    /// more pieces, those pieces in the order its bytes fill them, offsets counted from
    /// the arena's start (the first starts at `offset`; their lengths add up to `size`).
    /// A piece's address is `base + piece offset`, i.e. `address - offset + piece offset`.
    pub pieces: Option<Vec<Extent>>,
}

impl TensorAddress {
    /// One past its last byte counted from the arena's start, `offset + size` (its *top*),
    /// when the tensor is one contiguous range; `None` for a tensor in several pieces.
    /// [`addresses`] checked that the sum fits in 64 bits.
    pub fn top(&self) -> Option<u64> {
        match self.pieces {
            Some(_) => None,
            None => self.offset.checked_add(self.size),
        }
    }

    /// Its pieces: [`TensorAddress::pieces`], or the one piece `[offset, offset + size)`.
    pub fn extents(&self) -> Vec<Extent> {
        match &self.pieces {
            Some(pieces) => pieces.clone(),
            None => vec![Extent {
                offset: self.offset,
                len: self.size,
            }],
        }
    }

    /// The base address the addresses were computed with (`address - offset`).
    pub fn base(&self) -> u64 {
        self.address.wrapping_sub(self.offset)
    }
}

/// Why tensor addresses could not be computed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AddressError {
    /// `base + offset + size` does not fit in 64 bits.
    #[error("tensor '{name}': base address {base} + offset {offset} + size {size} exceeds 2^64; give a lower --base")]
    Overflow {
        name: String,
        base: u64,
        offset: u64,
        size: u64,
    },
    /// `base + arena` does not fit in 64 bits.
    #[error("base address {base} + arena {arena} bytes exceeds 2^64; give a lower base address")]
    PoolOverflow { base: u64, arena: u64 },
    /// A slot names a block the plan does not have, or does not fit in its block.
    #[error("tensor '{name}': {why}; please report this bug")]
    BadSlot { name: String, why: String },
}

/// The address of every slot under `plan`, in the order of `slots`: each tensor starts at
/// `base + plan.offsets[block] + offset_in_block`. In a fragmented plan the block's bytes
/// fill its extents in order: the tensor starts where its block's byte `offset_in_block`
/// lies, and when its bytes cross from one extent into another, [`TensorAddress::pieces`]
/// lists where they lie. Errors when a sum overflows 64 bits (also the end
/// `address + size` of the tensor and of each piece, so that every byte of every tensor
/// has an address) or a slot does not fit its block (or its block's extents).
pub fn addresses(
    problem: &Problem,
    plan: &Plan,
    slots: &[TensorSlot],
    base: u64,
) -> Result<Vec<TensorAddress>, AddressError> {
    slots
        .iter()
        .map(|slot| {
            let (Some(block), Some(&block_offset)) = (
                problem.buffers().get(slot.block.index()),
                plan.offsets.get(slot.block.index()),
            ) else {
                return Err(AddressError::BadSlot {
                    name: slot.name.clone(),
                    why: format!("block {} is not in the plan", slot.block.index()),
                });
            };
            let inside = slot.offset_in_block.checked_add(slot.size);
            if inside.is_none_or(|end| end > block.size) {
                return Err(AddressError::BadSlot {
                    name: slot.name.clone(),
                    why: format!(
                        "{} bytes at {} do not fit in block '{}' of {} bytes",
                        slot.size, slot.offset_in_block, block.name, block.size
                    ),
                });
            }
            let overflow = || AddressError::Overflow {
                name: slot.name.clone(),
                base,
                offset: block_offset.saturating_add(slot.offset_in_block),
                size: slot.size,
            };
            let Some(lists) = &plan.extents else {
                let offset = block_offset
                    .checked_add(slot.offset_in_block)
                    .ok_or_else(overflow)?;
                let address = base.checked_add(offset).ok_or_else(overflow)?;
                address.checked_add(slot.size).ok_or_else(overflow)?;
                return Ok(TensorAddress {
                    name: slot.name.clone(),
                    block: slot.block,
                    offset,
                    address,
                    size: slot.size,
                    pieces: None,
                });
            };
            let list = lists.get(slot.block.index()).map_or(&[][..], |l| &l[..]);
            let Some((offset, mut pieces)) = slice_extents(list, slot.offset_in_block, slot.size)
            else {
                // A plan whose extents do not add up to the block: the checker says so.
                return Err(AddressError::BadSlot {
                    name: slot.name.clone(),
                    why: format!(
                        "{} bytes at {} do not fit in the extents of block '{}'",
                        slot.size, slot.offset_in_block, block.name
                    ),
                });
            };
            let offset = offset.unwrap_or(block_offset);
            let overflow = || AddressError::Overflow {
                name: slot.name.clone(),
                base,
                offset,
                size: slot.size,
            };
            let address = base.checked_add(offset).ok_or_else(overflow)?;
            for piece in &pieces {
                base.checked_add(piece.offset)
                    .and_then(|a| a.checked_add(piece.len))
                    .ok_or_else(overflow)?;
            }
            address.checked_add(slot.size).ok_or_else(overflow)?;
            if pieces.len() <= 1 {
                pieces.clear();
            }
            Ok(TensorAddress {
                name: slot.name.clone(),
                block: slot.block,
                offset,
                address,
                size: slot.size,
                pieces: (!pieces.is_empty()).then_some(pieces),
            })
        })
        .collect()
}

/// The bytes `[skip, skip + len)` of a block whose bytes fill `extents` in order: where
/// its first byte lies (`None` for an empty list, or when `len` is 0 and `skip` is past the
/// last byte) and the non-empty pieces holding it. `None` when the extents hold fewer than
/// `skip + len` bytes, or when an extent's end overflows.
fn slice_extents(extents: &[Extent], skip: u64, len: u64) -> Option<(Option<u64>, Vec<Extent>)> {
    let mut skip = skip;
    let mut left = len;
    let mut first = None;
    let mut pieces = Vec::new();
    for extent in extents {
        extent.end()?;
        if skip >= extent.len {
            skip -= extent.len;
            // A zero-size tensor at the very end of a piece starts where the piece ends.
            if left == 0 && skip == 0 && first.is_none() {
                first = Some(extent.offset + extent.len);
            }
            continue;
        }
        let start = extent.offset + skip;
        let take = (extent.len - skip).min(left);
        if left == 0 {
            return Some((Some(start), pieces));
        }
        if pieces.is_empty() {
            first = Some(start);
        }
        pieces.push(Extent {
            offset: start,
            len: take,
        });
        left -= take;
        skip = 0;
        if left == 0 {
            return Some((first, pieces));
        }
    }
    (left == 0 && skip == 0).then_some((first, pieces))
}

/// `base + arena`: the end of the pool, or an error naming the overflow.
pub fn pool_end(base: u64, arena: u64) -> Result<u64, AddressError> {
    base.checked_add(arena)
        .ok_or(AddressError::PoolOverflow { base, arena })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::problem::Buffer;

    #[test]
    fn addresses_add_base_block_and_slot_with_overflow_checked() {
        let problem =
            Problem::from_buffers(vec![Buffer::new("a", 8, 0, 2), Buffer::new("b", 4, 0, 2)])
                .unwrap();
        let plan = Plan::new(&problem, vec![4, 0]).unwrap();
        let mut slots = TensorSlot::one_per_buffer(&problem);
        slots.push(TensorSlot {
            name: "view".into(),
            block: BufferId(0),
            offset_in_block: 2,
            size: 6,
        });
        let got = addresses(&problem, &plan, &slots, 0x1000).unwrap();
        let pairs: Vec<(u64, u64)> = got.iter().map(|t| (t.offset, t.address)).collect();
        assert_eq!(pairs, vec![(4, 0x1004), (0, 0x1000), (6, 0x1006)]);
        let err = addresses(&problem, &plan, &slots, u64::MAX - 8).unwrap_err();
        assert!(matches!(err, AddressError::Overflow { ref name, .. } if name == "a"));
        slots[2].size = 7;
        let err = addresses(&problem, &plan, &slots, 0).unwrap_err();
        assert!(err.to_string().contains("do not fit"), "{err}");
        assert!(pool_end(u64::MAX, 1).is_err());
        assert_eq!(pool_end(16, 12), Ok(28));
    }

    #[test]
    fn a_tensor_across_a_blocks_extents_lists_its_pieces() {
        let e = |offset, len| Extent { offset, len };
        let problem =
            Problem::from_buffers(vec![Buffer::new("a", 8, 0, 2), Buffer::new("b", 4, 0, 2)])
                .unwrap();
        // Block a: bytes 0-2 at 10, bytes 3-7 at 0 (an empty piece between).
        let plan = Plan::fragmented(
            &problem,
            vec![vec![e(10, 3), e(20, 0), e(0, 5)], vec![e(5, 4)]],
        )
        .unwrap();
        let slot = |name: &str, block, offset_in_block, size| TensorSlot {
            name: name.into(),
            block: BufferId(block),
            offset_in_block,
            size,
        };
        let slots = vec![
            slot("a", 0, 0, 8),
            slot("head", 0, 1, 2),
            slot("tail", 0, 4, 3),
            slot("cross", 0, 2, 3),
            slot("empty_end", 0, 8, 0),
            slot("empty_mid", 0, 3, 0),
            slot("b", 1, 0, 4),
        ];
        let got = addresses(&problem, &plan, &slots, 0x100).unwrap();
        type Row = (u64, u64, Option<Vec<Extent>>, Option<u64>);
        let view: Vec<Row> = got
            .iter()
            .map(|t| (t.offset, t.address, t.pieces.clone(), t.top()))
            .collect();
        assert_eq!(
            view,
            vec![
                (10, 0x10a, Some(vec![e(10, 3), e(0, 5)]), None),
                (11, 0x10b, None, Some(13)),
                (1, 0x101, None, Some(4)),
                (12, 0x10c, Some(vec![e(12, 1), e(0, 2)]), None),
                (5, 0x105, None, Some(5)),
                (0, 0x100, None, Some(0)),
                (5, 0x105, None, Some(9)),
            ]
        );
        assert_eq!(got[3].extents(), vec![e(12, 1), e(0, 2)]);
        assert_eq!(got[1].extents(), vec![e(11, 2)]);
        assert_eq!(got[3].base(), 0x100);
        // Extents that do not hold the block's bytes: an error, not a panic.
        let short = Plan::fragmented(&problem, vec![vec![e(10, 3)], vec![e(5, 4)]]).unwrap();
        let err = addresses(&problem, &short, &slots[..1], 0).unwrap_err();
        assert!(err.to_string().contains("extents of block 'a'"), "{err}");
        // Every piece's end must have an address too.
        let err = addresses(&problem, &plan, &slots[..1], u64::MAX - 12).unwrap_err();
        assert!(matches!(err, AddressError::Overflow { .. }), "{err}");
    }
}
