//! Storage sharing that TFLite Micro's kernels allow but its planner never uses: tensors
//! merged into one buffer, so that an offline plan gives them one offset.
//!
//! - **RESHAPE** (`Sharing::reshape`): the output on its input's bytes. TFLM's reshape
//!   kernel copies only when the two pointers differ.
//! - **In place** (`Sharing::inplace`): the output of an elementwise operator on the bytes
//!   of an input that dies at it, with the same shape and type. Only operators whose
//!   reference kernel reads each element before writing that element are admitted
//!   ([`INPLACE_OPERATORS`]), each after a test ran it in TFLM with the shared plan and got
//!   bit-identical outputs (`python/tests/test_tflm.py`).

use crate::arena::Lifetimes;
use crate::model::{BuiltinOperator, Model};

/// Which sharing to apply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sharing {
    pub reshape: bool,
    pub inplace: bool,
}

impl Sharing {
    /// TFLM's own behaviour: every tensor in its own buffer.
    pub const NONE: Sharing = Sharing {
        reshape: false,
        inplace: false,
    };
    /// Every sharing memplan knows to be safe.
    pub const ALL: Sharing = Sharing {
        reshape: true,
        inplace: true,
    };
}

/// Elementwise operators whose int8 reference kernels in TFLM read element `i` of each
/// input before writing element `i` of the output, verified in TFLM.
pub const INPLACE_OPERATORS: &[BuiltinOperator] = &[
    BuiltinOperator::ADD,
    BuiltinOperator::MUL,
    BuiltinOperator::SUB,
    BuiltinOperator::RELU,
    BuiltinOperator::RELU6,
    BuiltinOperator::LOGISTIC,
    BuiltinOperator::TANH,
    BuiltinOperator::QUANTIZE,
];

/// Groups the planned tensors (`(subgraph, tensor)` in TFLM's order) into buffers: one
/// tensor a group unless `sharing` merges some. Groups come in the order of their first
/// tensor, which owns the group.
pub fn groups(
    model: &Model,
    planned: &[(usize, usize)],
    lifetimes: &Lifetimes,
    sharing: Sharing,
) -> Vec<Vec<(usize, usize)>> {
    let position: std::collections::HashMap<(usize, usize), usize> =
        planned.iter().enumerate().map(|(i, &st)| (st, i)).collect();
    // parent[i]: the group owner of planned[i] (always an earlier position, so one hop
    // after path compression).
    let mut parent: Vec<usize> = (0..planned.len()).collect();
    let mut last_scope: Vec<i64> = planned
        .iter()
        .map(|&(s, t)| lifetimes.tensors[s][t].last)
        .collect();
    fn find(parent: &mut [usize], mut i: usize) -> usize {
        while parent[i] != i {
            parent[i] = parent[parent[i]];
            i = parent[i];
        }
        i
    }
    if sharing != Sharing::NONE {
        for (s, sg) in model.subgraphs.iter().enumerate() {
            for op in &sg.operators {
                let [output] = op.outputs[..] else { continue };
                let Some(&out_pos) = position.get(&(s, output)) else {
                    continue;
                };
                let out = &sg.tensors[output];
                let alias = sharing.reshape && op.opcode == BuiltinOperator::RESHAPE;
                let inplace = sharing.inplace && INPLACE_OPERATORS.contains(&op.opcode);
                if !alias && !inplace {
                    continue;
                }
                // RESHAPE's data is its first input; an in-place operator may take any
                // input of the output's shape and type.
                let candidates: Vec<usize> = if alias {
                    op.inputs.first().copied().flatten().into_iter().collect()
                } else {
                    op.inputs.iter().flatten().copied().collect()
                };
                let op_scope = lifetimes.tensors[s][output].first;
                for input in candidates {
                    let Some(&in_pos) = position.get(&(s, input)) else {
                        continue;
                    };
                    let inp = &sg.tensors[input];
                    if inp.bytes != out.bytes || in_pos == out_pos {
                        continue;
                    }
                    let owner = find(&mut parent, in_pos);
                    if find(&mut parent, out_pos) != out_pos || owner > out_pos {
                        continue;
                    }
                    if inplace && !alias {
                        // The whole group must be dead after this operator, and the
                        // element layout the same.
                        if inp.shape != out.shape || inp.dtype != out.dtype {
                            continue;
                        }
                        // The input is last read by this operator: its group ends at the
                        // scope the operator's inputs end at, which is the output's own
                        // first scope unless the operator runs subgraphs.
                        if last_scope[owner] > lifetimes.tensors[s][input].last
                            || lifetimes.tensors[s][input].last != op_scope
                            || op.inputs.iter().flatten().filter(|&&i| i == input).count() > 1
                        {
                            continue;
                        }
                    }
                    parent[out_pos] = owner;
                    last_scope[owner] = last_scope[owner].max(last_scope[out_pos]);
                    break;
                }
            }
        }
    }
    let mut groups: Vec<Vec<(usize, usize)>> = Vec::new();
    let mut group_of = vec![usize::MAX; planned.len()];
    for i in 0..planned.len() {
        let owner = find(&mut parent, i);
        if owner == i {
            group_of[i] = groups.len();
            groups.push(vec![planned[i]]);
        } else {
            groups[group_of[owner]].push(planned[i]);
        }
    }
    groups
}
