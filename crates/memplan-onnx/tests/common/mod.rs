//! Small hand-built ModelProtos for the error and fuzz tests.
#![allow(dead_code)]

use memplan_onnx::proto::*;
use prost::Message;

pub fn dim(v: i64) -> Dimension {
    Dimension {
        value: Some(DimensionValue::DimValue(v)),
    }
}

pub fn param(p: &str) -> Dimension {
    Dimension {
        value: Some(DimensionValue::DimParam(p.to_string())),
    }
}

pub fn tensor_value(name: &str, elem_type: i32, dims: Vec<Dimension>) -> ValueInfoProto {
    ValueInfoProto {
        name: name.to_string(),
        r#type: Some(TypeProto {
            tensor_type: Some(TypeProtoTensor {
                elem_type,
                shape: Some(TensorShapeProto { dim: dims }),
            }),
        }),
    }
}

pub fn node(name: &str, op: &str, inputs: &[&str], outputs: &[&str]) -> NodeProto {
    NodeProto {
        name: name.to_string(),
        op_type: op.to_string(),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: outputs.iter().map(|s| s.to_string()).collect(),
        ..NodeProto::default()
    }
}

pub fn ints_attr(name: &str, v: &[i64]) -> AttributeProto {
    AttributeProto {
        name: name.to_string(),
        r#type: attribute_type::INTS,
        ints: v.to_vec(),
        ..AttributeProto::default()
    }
}

/// input x: FLOAT 1x3x8x8; a weight held externally (no data file); a Reshape whose shape
/// comes from Shape -> Gather -> Unsqueeze -> Concat with an inline INT64 initialiser.
pub fn small_model() -> ModelProto {
    let w = TensorProto {
        name: "w".into(),
        dims: vec![4, 3, 3, 3],
        data_type: 1,
        data_location: DATA_LOCATION_EXTERNAL,
        external_data: vec![StringStringEntryProto {
            key: "location".into(),
            value: "missing.onnx.data".into(),
        }],
        ..TensorProto::default()
    };
    let minus_one = TensorProto {
        name: "minus_one".into(),
        dims: vec![1],
        data_type: 7,
        raw_data: (-1i64).to_le_bytes().to_vec().into(),
        ..TensorProto::default()
    };
    let mut conv = node("conv", "Conv", &["x", "w"], &["c"]);
    conv.attribute.push(ints_attr("pads", &[1, 1, 1, 1]));
    let mut gather = node("gather", "Gather", &["shape", "zero"], &["batch"]);
    gather.attribute.push(AttributeProto {
        name: "axis".into(),
        r#type: attribute_type::INT,
        i: 0,
        ..AttributeProto::default()
    });
    let mut zero = node("zero_const", "Constant", &[], &["zero"]);
    zero.attribute.push(AttributeProto {
        name: "value".into(),
        r#type: attribute_type::TENSOR,
        t: Some(TensorProto {
            dims: vec![],
            data_type: 7,
            int64_data: vec![0],
            ..TensorProto::default()
        }),
        ..AttributeProto::default()
    });
    let mut unsq = node("unsq", "Unsqueeze", &["batch", "axes"], &["batch1"]);
    unsq.attribute.clear();
    let mut axes = node("axes_const", "Constant", &[], &["axes"]);
    axes.attribute.push(ints_attr("value_ints", &[0]));
    let mut concat = node("concat", "Concat", &["batch1", "minus_one"], &["target"]);
    concat.attribute.push(AttributeProto {
        name: "axis".into(),
        r#type: attribute_type::INT,
        i: 0,
        ..AttributeProto::default()
    });
    ModelProto {
        ir_version: 8,
        opset_import: vec![OperatorSetIdProto {
            domain: String::new(),
            version: 17,
        }],
        producer_name: "test".into(),
        functions: Vec::new(),
        graph: Some(GraphProto {
            name: "small".into(),
            node: vec![
                conv,
                node("relu", "Relu", &["c"], &["r"]),
                node("shape", "Shape", &["r"], &["shape"]),
                zero,
                gather,
                axes,
                unsq,
                concat,
                node("reshape", "Reshape", &["r", "target"], &["y"]),
            ],
            initializer: vec![w, minus_one],
            input: vec![tensor_value("x", 1, vec![dim(1), dim(3), dim(8), dim(8)])],
            output: vec![tensor_value("y", 1, vec![])],
        }),
    }
}

pub fn encode(model: &ModelProto) -> Vec<u8> {
    model.encode_to_vec()
}
