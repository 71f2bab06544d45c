//! Every tensor's address, not only each block's (methods.md §1, Deployment).
//!
//! A plan places *blocks* (the buffers of a [`Problem`]). A device loads *tensors*: in a
//! graph several tensors can share one block (a view and its input, an in-place result and
//! the input it overwrote, the outputs an `exclusive` or `npu` block holds). A
//! [`TensorSlot`] says which block holds a tensor and where inside it; [`addresses`] turns
//! slots and a plan into [`TensorAddress`]es, `address = base + block offset + offset in
//! block`, with every sum checked.
//!
//! ```text
//!  base ──► ┌──────── arena ────────┐
//!           │ block b at offset o   │ tensor t: block b, offset in block k
//!           │   ├─ k ─┤ t           │ address(t) = base + o + k
//! ```

use crate::plan::Plan;
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
    /// Its first byte counted from the arena's start: block offset + offset in block.
    pub offset: u64,
    /// `base + offset`.
    pub address: u64,
    /// Its bytes.
    pub size: u64,
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
/// `base + plan.offsets[block] + offset_in_block`. In a fragmented plan that is where the
/// block's first piece starts (its bytes continue in the block's later pieces). Errors
/// when a sum overflows 64 bits (also the end `address + size`, so that every byte of
/// every tensor has an address) or a slot does not fit its block.
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
            if inside.map_or(true, |end| end > block.size) {
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
            let offset = block_offset
                .checked_add(slot.offset_in_block)
                .ok_or_else(overflow)?;
            let address = base.checked_add(offset).ok_or_else(overflow)?;
            address.checked_add(slot.size).ok_or_else(overflow)?;
            Ok(TensorAddress {
                name: slot.name.clone(),
                block: slot.block,
                offset,
                address,
                size: slot.size,
            })
        })
        .collect()
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
}
