//! The fuzz target's logic ([`memplan_onnx::fuzzing::onnx_reader`]) on a few thousand
//! deterministic inputs: byte mutations and truncations of a small valid model, random
//! bytes, structured models putting every supported operator behind random inputs and
//! attributes, and byte flips of the shared models when present. The real fuzzing runs in
//! `fuzz/`; this keeps its invariants checked in every `cargo test`.

mod common;

use common::*;
use memplan::fuzzing::Rng;
use memplan_onnx::fuzzing::onnx_reader;
use memplan_onnx::proto::*;

fn mutate(rng: &mut Rng, seed: &[u8]) -> Vec<u8> {
    let mut b = seed.to_vec();
    for _ in 0..1 + rng.below(8) {
        let at = rng.below(b.len());
        match rng.below(6) {
            0 if !b.is_empty() => b[at] ^= 1 << rng.below(8),
            1 if !b.is_empty() => b[at] = *rng.pick(&[0, 1, 0x7f, 0x80, 0xff, 0x08, 0x12]),
            2 => b.insert(at, rng.next_u64() as u8),
            3 if !b.is_empty() => {
                b.remove(at);
            }
            4 => b.truncate(at),
            _ => {
                // Copy a run of bytes elsewhere (duplicates fields and sub-messages).
                let len = rng.below(16).min(b.len() - at.min(b.len()));
                let run: Vec<u8> = b[at..at + len].to_vec();
                let to = rng.below(b.len());
                b.splice(to..to, run);
            }
        }
    }
    b
}

#[test]
fn mutations_and_truncations_of_a_small_model() {
    let seed = encode(&small_model());
    onnx_reader(&seed);
    // The fuzz seed in tests/data is this model (see fuzz/README.md).
    let fixture = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/small.onnx"
    ))
    .unwrap();
    assert_eq!(fixture, seed, "tests/data/small.onnx is stale");
    for cut in 0..seed.len() {
        onnx_reader(&seed[..cut]);
    }
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for _ in 0..3000 {
        onnx_reader(&mutate(&mut rng, &seed));
    }
}

#[test]
fn random_bytes() {
    let mut rng = Rng(42);
    for _ in 0..500 {
        let len = rng.below(300);
        let bytes: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
        onnx_reader(&bytes);
    }
}

const OPS: &[&str] = &[
    "Relu",
    "Softmax",
    "Identity",
    "Neg",
    "Sqrt",
    "Dropout",
    "Add",
    "Sub",
    "Mul",
    "Div",
    "Mod",
    "Equal",
    "Where",
    "MatMul",
    "Gemm",
    "Conv",
    "ConvTranspose",
    "MaxPool",
    "AveragePool",
    "GlobalAveragePool",
    "BatchNormalization",
    "LayerNormalization",
    "Concat",
    "Split",
    "Slice",
    "Gather",
    "GatherElements",
    "Transpose",
    "Reshape",
    "Flatten",
    "Squeeze",
    "Unsqueeze",
    "Expand",
    "Pad",
    "Resize",
    "ReduceMean",
    "ReduceSum",
    "ArgMax",
    "Cast",
    "Shape",
    "Size",
    "ConstantOfShape",
    "Range",
    "Tile",
    "TopK",
    "DepthToSpace",
    "SpaceToDepth",
    "Einsum",
    "Constant",
    "NonZero",
    "Clip",
    "Sum",
];

const ATTRS: &[&str] = &[
    "axis",
    "axes",
    "perm",
    "pads",
    "strides",
    "dilations",
    "kernel_shape",
    "group",
    "transA",
    "transB",
    "keepdims",
    "ceil_mode",
    "auto_pad",
    "to",
    "split",
    "num_outputs",
    "start",
    "end",
    "allowzero",
    "blocksize",
    "equation",
    "value",
    "value_ints",
    "output_padding",
    "k",
    "scales",
];

fn random_attr(rng: &mut Rng) -> AttributeProto {
    let name = rng.pick(ATTRS).to_string();
    let interesting = [0i64, 1, -1, 2, 3, -2, 7, i64::MAX, i64::MIN, 1 << 40];
    let mut a = AttributeProto {
        name,
        ..AttributeProto::default()
    };
    match rng.below(5) {
        0 => {
            a.r#type = attribute_type::INT;
            a.i = *rng.pick(&interesting);
        }
        1 => {
            a.r#type = attribute_type::INTS;
            a.ints = (0..rng.below(6)).map(|_| *rng.pick(&interesting)).collect();
        }
        2 => {
            a.r#type = attribute_type::STRING;
            a.s = rng
                .pick(&[
                    "SAME_UPPER",
                    "VALID",
                    "NOTSET",
                    "ij,jk->ik",
                    "bij,bjk",
                    "x",
                    "",
                ])
                .as_bytes()
                .to_vec()
                .into();
        }
        3 => {
            a.r#type = attribute_type::FLOATS;
            a.floats = (0..rng.below(5))
                .map(|_| *rng.pick(&[0.0, 0.5, 2.0, -1.0, f32::NAN, f32::INFINITY]))
                .collect();
        }
        _ => {
            a.r#type = attribute_type::TENSOR;
            let n = rng.below(4);
            a.t = Some(TensorProto {
                dims: vec![n as i64],
                data_type: *rng.pick(&[1, 7, 9, 10, 6]),
                int64_data: (0..n).map(|_| *rng.pick(&interesting)).collect(),
                ..TensorProto::default()
            });
        }
    }
    a
}

/// A model with a pool of inputs and initialisers and a few random nodes over them.
fn random_model(rng: &mut Rng) -> ModelProto {
    let mut m = small_model();
    let g = m.graph.as_mut().unwrap();
    let ints: &[&[i64]] = &[
        &[0],
        &[-1],
        &[1, -1],
        &[2, 3],
        &[0, 0, -1],
        &[1, 2, 3, 4],
        &[],
        &[i64::MAX],
        &[-9],
        &[3, 1, 1, 2],
    ];
    for (i, v) in ints.iter().enumerate() {
        g.initializer.push(TensorProto {
            name: format!("i{i}"),
            dims: if i % 3 == 0 && v.len() == 1 {
                vec![]
            } else {
                vec![v.len() as i64]
            },
            data_type: 7,
            int64_data: v.to_vec(),
            ..TensorProto::default()
        });
    }
    g.initializer.push(TensorProto {
        name: "fscale".into(),
        dims: vec![4],
        data_type: 1,
        float_data: vec![1.0, 1.0, 2.0, 0.5],
        ..TensorProto::default()
    });
    let shapes: &[&[i64]] = &[
        &[1, 3, 8, 8],
        &[2, 4],
        &[4],
        &[],
        &[1, 1, 5],
        &[0, 3],
        &[3, 1, 2],
    ];
    for (i, s) in shapes.iter().enumerate() {
        g.input.push(tensor_value(
            &format!("f{i}"),
            *rng.pick(&[1, 1, 7, 9]),
            s.iter().map(|&d| dim(d)).collect(),
        ));
    }
    let mut pool: Vec<String> = (0..ints.len()).map(|i| format!("i{i}")).collect();
    pool.extend((0..shapes.len()).map(|i| format!("f{i}")));
    pool.extend(["x", "w", "fscale", "r", "y", "target"].map(String::from));
    for k in 0..1 + rng.below(2) {
        let op = rng.pick(OPS).to_string();
        let n_in = 1 + rng.below(3);
        let mut inputs: Vec<String> = (0..n_in).map(|_| rng.pick(&pool).clone()).collect();
        if rng.below(8) == 0 && !inputs.is_empty() {
            inputs[0] = String::new();
        }
        let n_out = 1 + rng.below(3);
        let outputs: Vec<String> = (0..n_out).map(|o| format!("n{k}_{o}")).collect();
        let mut nd = node(
            &format!("n{k}"),
            &op,
            &inputs.iter().map(String::as_str).collect::<Vec<_>>(),
            &outputs.iter().map(String::as_str).collect::<Vec<_>>(),
        );
        for _ in 0..rng.below(3) {
            nd.attribute.push(random_attr(rng));
        }
        g.node.push(nd);
        pool.extend(outputs);
    }
    m
}

#[test]
fn every_operator_behind_random_inputs_and_attributes() {
    let mut rng = Rng(7);
    let mut imported = 0;
    for _ in 0..3000 {
        let bytes = encode(&random_model(&mut rng));
        onnx_reader(&bytes);
        if memplan_onnx::import_bytes(&bytes, "r", &Default::default()).is_ok() {
            imported += 1;
        }
    }
    // The generator must reach past the error paths often enough to test inference.
    eprintln!("{imported} of 3000 random models imported");
    assert!(imported > 150, "only {imported} random models imported");
}

#[test]
fn byte_flips_of_the_shared_models() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/models/resnet18.onnx"
    );
    let Ok(seed) = std::fs::read(path) else {
        eprintln!("skipping: ../shared not found");
        return;
    };
    let mut rng = Rng(3);
    for _ in 0..300 {
        onnx_reader(&mutate(&mut rng, &seed));
    }
}

#[test]
fn mutations_of_the_operator_fixtures() {
    // tests/data/ops/: quantized, fused, recurrent, detection, functions, control flow.
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/ops");
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "onnx"))
        .collect();
    files.sort();
    assert!(files.len() >= 10);
    for path in files {
        let seed = std::fs::read(&path).unwrap();
        onnx_reader(&seed);
        for _ in 0..300 {
            onnx_reader(&mutate(&mut rng, &seed));
        }
    }
}
