//! Kernel scratch buffers: memory TFLM's reference kernels request while preparing an
//! operator (`RequestScratchBufferInArena`), placed by TFLM's planner in the same area as
//! the tensors and live during that operator only. They are not in the file, so memplan
//! models the requests of the reference kernels (x86 build, not CMSIS-NN or other
//! optimised kernels) from the operators' shapes, types and options:
//!
//! | operator | when | requests, in order (bytes) |
//! |---|---|---|
//! | MEAN, SUM | int8/int16 input | 4·elements(output), 4·rank(input), 4·elements(axis) |
//! | MEAN, SUM | other input | 4·rank(input), 4·elements(axis) |
//! | REDUCE_MAX, REDUCE_MIN | any | 4·rank(input), 4·elements(axis) |
//! | TRANSPOSE_CONV | int8 input | 4·elements(output) |
//! | TRANSPOSE_CONV | int16 input | 8·elements(output), then 8·elements(bias) for an int16 bias |
//! | UNIDIRECTIONAL_SEQUENCE_LSTM | any | 4 × batch·state·size(cell state) |
//! | CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED | int4 filter | elements(filter) |
//! | ADD_N | float32/int8 | 8·inputs (pointers on a 64-bit host) |
//! | MIRROR_PAD | any | 4·rank(input), twice |
//!
//! SVDF and custom operators (TFLite_Detection_PostProcess among them) request scratch memory memplan does
//! not model; [`requests`] names them so that reports can warn that TFLM's head may be
//! larger. Every other builtin operator's reference kernel requests none.

use crate::model::{BuiltinOperator, Model, TensorType};

/// One scratch buffer request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScratchRequest {
    pub subgraph: usize,
    pub operator: usize,
    /// The request's number among its operator's requests.
    pub index: usize,
    pub bytes: u64,
}

impl ScratchRequest {
    /// `KIND@operator` (`KIND@subgraph:operator` beyond subgraph 0), for names.
    pub fn operator_label(&self, model: &Model) -> String {
        let op = &model.subgraphs[self.subgraph].operators[self.operator];
        if self.subgraph == 0 {
            format!("{}@{}", op.kind(), self.operator)
        } else {
            format!("{}@{}:{}", op.kind(), self.subgraph, self.operator)
        }
    }

    /// "scratch buffer K of KIND@N".
    pub fn describe(&self, model: &Model) -> String {
        format!(
            "scratch buffer {} of {}",
            self.index,
            self.operator_label(model)
        )
    }
}

/// The scratch requests of every operator, in TFLM's request order (subgraphs in index
/// order, operators in order), and the operators that may request scratch memory that
/// memplan does not model (`KIND at subgraph S operator N`).
pub fn requests(model: &Model) -> (Vec<ScratchRequest>, Vec<String>) {
    let mut out = Vec::new();
    let mut unmodelled = Vec::new();
    for (s, sg) in model.subgraphs.iter().enumerate() {
        for (o, op) in sg.operators.iter().enumerate() {
            let Some(sizes) = op_requests(model, s, o) else {
                unmodelled.push(format!("{} at subgraph {s} operator {o}", op.kind()));
                continue;
            };
            for (index, bytes) in sizes.into_iter().enumerate() {
                out.push(ScratchRequest {
                    subgraph: s,
                    operator: o,
                    index,
                    bytes,
                });
            }
        }
    }
    (out, unmodelled)
}

/// The byte sizes an operator requests, or `None` when memplan does not know them.
fn op_requests(model: &Model, s: usize, o: usize) -> Option<Vec<u64>> {
    let sg = &model.subgraphs[s];
    let op = &sg.operators[o];
    let input = |i: usize| op.inputs.get(i).copied().flatten().map(|t| &sg.tensors[t]);
    let output = |i: usize| op.outputs.get(i).map(|&t| &sg.tensors[t]);
    let elements = |shape: &[i32]| -> u64 {
        shape
            .iter()
            .map(|&d| u64::try_from(d).unwrap_or(0))
            .fold(1u64, u64::saturating_mul)
    };
    let rank = |i: usize| input(i).map_or(0, |t| t.shape.len() as u64);
    let axis_elements = || input(1).map_or(1, |t| elements(&t.shape));
    let int4_filter = || input(1).is_some_and(|t| t.dtype == TensorType::INT4);
    Some(match op.opcode {
        BuiltinOperator::MEAN | BuiltinOperator::SUM => {
            let dtype = input(0)?.dtype;
            let mut sizes = Vec::new();
            if dtype == TensorType::INT8 || dtype == TensorType::INT16 {
                sizes.push(4u64.saturating_mul(elements(&output(0)?.shape)));
            }
            sizes.push(4 * rank(0));
            sizes.push(4u64.saturating_mul(axis_elements()));
            sizes
        }
        BuiltinOperator::REDUCE_MAX | BuiltinOperator::REDUCE_MIN => {
            vec![4 * rank(0), 4u64.saturating_mul(axis_elements())]
        }
        BuiltinOperator::TRANSPOSE_CONV => {
            // Inputs: output shape, filter, input, optional bias.
            let out = elements(&output(0)?.shape);
            match input(2)?.dtype {
                TensorType::INT8 => vec![4u64.saturating_mul(out)],
                TensorType::INT16 => {
                    let mut sizes = vec![8u64.saturating_mul(out)];
                    if let Some(bias) = input(3).filter(|b| b.dtype == TensorType::INT16) {
                        sizes.push(8u64.saturating_mul(elements(&bias.shape)));
                    }
                    sizes
                }
                _ => Vec::new(),
            }
        }
        BuiltinOperator::UNIDIRECTIONAL_SEQUENCE_LSTM => {
            let x = input(0)?;
            let batch = if op.options.time_major {
                x.shape.get(1)
            } else {
                x.shape.first()
            };
            let batch = u64::try_from(*batch?).ok()?;
            // Hidden state (input 18) [batch, state]; cell state (input 19) sets the type.
            let state = u64::try_from(*input(18)?.shape.get(1)?).ok()?;
            let cell = crate::model::element_size(input(19)?.dtype)?;
            vec![batch.saturating_mul(state).saturating_mul(cell); 4]
        }
        BuiltinOperator::CONV_2D
        | BuiltinOperator::DEPTHWISE_CONV_2D
        | BuiltinOperator::FULLY_CONNECTED => {
            if int4_filter() {
                vec![elements(&input(1)?.shape)]
            } else {
                Vec::new()
            }
        }
        BuiltinOperator::ADD_N => {
            let dtype = input(0)?.dtype;
            if dtype == TensorType::FLOAT32 || dtype == TensorType::INT8 {
                vec![8 * op.inputs.len() as u64]
            } else {
                Vec::new()
            }
        }
        BuiltinOperator::MIRROR_PAD => vec![4 * rank(0), 4 * rank(0)],
        BuiltinOperator::SVDF | BuiltinOperator::CUSTOM => return None,
        _ => Vec::new(),
    })
}
