//! Tensor addresses in fragmented plans, against a byte-by-byte reference: every byte of
//! every tensor is where its block's byte lies when the block's bytes fill its extents in
//! order, and a plan JSON with those tensors reads back to the same, valid plan.

use memplan::io::json::{read_plan_json, write_plan_json, PlanSummary};
use memplan::plan::tensors::{addresses, TensorSlot};
use memplan::planner::{Exclusive, Planner};
use memplan::{checker, Buffer, BufferId, Problem};
use proptest::prelude::*;

/// Random blocks (size 0-40, one step each), random exclusive pairs, random tensors
/// inside the blocks.
fn case() -> impl Strategy<Value = (Problem, Vec<TensorSlot>)> {
    (2usize..9)
        .prop_flat_map(|n| {
            (
                prop::collection::vec(0u64..40, n),
                prop::collection::vec((0..n, 0..n), 0..n * 2),
                prop::collection::vec((0..n, 0u64..64, 0u64..64), 1..12),
            )
        })
        .prop_map(|(sizes, pairs, tensors)| {
            let buffers = sizes
                .iter()
                .enumerate()
                .map(|(i, &s)| Buffer::new(format!("b{i}"), s, i as u64, i as u64 + 1))
                .collect();
            let pairs: Vec<(BufferId, BufferId)> = pairs
                .into_iter()
                .filter(|(a, b)| a != b)
                .map(|(a, b)| (BufferId(a as u32), BufferId(b as u32)))
                .collect();
            let problem = Problem::new(buffers, pairs).unwrap();
            let slots = tensors
                .into_iter()
                .enumerate()
                .map(|(k, (block, at, len))| {
                    let size = sizes[block];
                    let offset_in_block = at % (size + 1);
                    TensorSlot {
                        name: format!("t{k}"),
                        block: BufferId(block as u32),
                        offset_in_block,
                        size: len % (size - offset_in_block + 1),
                    }
                })
                .collect();
            (problem, slots)
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn tensor_pieces_hold_exactly_their_blocks_bytes((problem, slots) in case()) {
        let plan = Exclusive::FRAGMENTED.plan(&problem).unwrap();
        prop_assert!(checker::check(&problem, &plan).is_valid());
        let tensors = addresses(&problem, &plan, &slots, 0x40).unwrap();
        for (slot, tensor) in slots.iter().zip(&tensors) {
            let block = problem.buffer(slot.block);
            // The block's byte j lies at `bytes[j]`.
            let bytes: Vec<u64> = plan
                .extents_of(slot.block, block.size)
                .iter()
                .flat_map(|e| e.offset..e.offset + e.len)
                .collect();
            prop_assert_eq!(bytes.len() as u64, block.size);
            let k = slot.offset_in_block as usize;
            let expected = &bytes[k..k + slot.size as usize];
            let got: Vec<u64> = tensor
                .extents()
                .iter()
                .flat_map(|e| e.offset..e.offset + e.len)
                .collect();
            prop_assert_eq!(&got[..], expected);
            if let Some(&first) = expected.first() {
                prop_assert_eq!(tensor.offset, first);
            }
            prop_assert_eq!(tensor.address, 0x40 + tensor.offset);
            match &tensor.pieces {
                Some(pieces) => {
                    prop_assert!(pieces.len() >= 2 && pieces.iter().all(|p| p.len > 0));
                    prop_assert_eq!(tensor.top(), None);
                }
                None => prop_assert_eq!(tensor.top(), Some(tensor.offset + tensor.size)),
            }
        }
        let summary = PlanSummary { planner: "exclusive".into(), ..PlanSummary::default() };
        let text = write_plan_json(&problem, &plan, &summary, Some(&tensors));
        let back = read_plan_json(&text, "p.json", &problem).unwrap();
        prop_assert_eq!(&back, &plan);
        prop_assert!(checker::check(&problem, &back).is_valid());
    }
}
