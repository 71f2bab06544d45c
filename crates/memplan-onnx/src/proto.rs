//! The ONNX protobuf messages memplan reads, written by hand with `prost`'s derive (no
//! `protoc`, no build script).
//!
//! Field numbers are those of the ONNX specification, `onnx/onnx.proto` (IR version 10).
//! Only the fields memplan reads are declared; protobuf decoders skip the others (doc
//! strings, training info, sparse tensors, `value_info`: every shape is inferred), so they
//! are never kept. Local functions (`ModelProto.functions`) are read to be inlined, and the
//! sub-graphs of `If`/`Loop`/`Scan` (graph-valued attributes) to be analysed. Scalar repeated fields accept both packed and unpacked encodings.
//!
//! Byte fields use [`bytes::Bytes`]: decoding from one shared buffer makes `raw_data` a view
//! into the file's bytes rather than a copy, so large inline tensors cost nothing until
//! read, and memplan reads them only for small integer tensors (shape operands).

use bytes::Bytes;

/// `ModelProto` (onnx.proto): the top-level message of a `.onnx` file.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ModelProto {
    /// Field 1, `ir_version`.
    #[prost(int64, tag = "1")]
    pub ir_version: i64,
    /// Field 8, `opset_import`.
    #[prost(message, repeated, tag = "8")]
    pub opset_import: Vec<OperatorSetIdProto>,
    /// Field 2, `producer_name`.
    #[prost(string, tag = "2")]
    pub producer_name: String,
    /// Field 7, `graph`.
    #[prost(message, optional, tag = "7")]
    pub graph: Option<GraphProto>,
    /// Field 25, `functions`: model-local functions, inlined at import.
    #[prost(message, repeated, tag = "25")]
    pub functions: Vec<FunctionProto>,
}

/// `FunctionProto` (onnx.proto): a model-local function, called by nodes whose
/// `(domain, op_type, overload)` is its `(domain, name, overload)`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct FunctionProto {
    /// Field 1, `name`.
    #[prost(string, tag = "1")]
    pub name: String,
    /// Field 4, `input`: formal input names.
    #[prost(string, repeated, tag = "4")]
    pub input: Vec<String>,
    /// Field 5, `output`: formal output names.
    #[prost(string, repeated, tag = "5")]
    pub output: Vec<String>,
    /// Field 6, `attribute`: names of attributes without a default.
    #[prost(string, repeated, tag = "6")]
    pub attribute: Vec<String>,
    /// Field 11, `attribute_proto`: attributes with their default values.
    #[prost(message, repeated, tag = "11")]
    pub attribute_proto: Vec<AttributeProto>,
    /// Field 7, `node`: the body.
    #[prost(message, repeated, tag = "7")]
    pub node: Vec<NodeProto>,
    /// Field 9, `opset_import`.
    #[prost(message, repeated, tag = "9")]
    pub opset_import: Vec<OperatorSetIdProto>,
    /// Field 10, `domain`.
    #[prost(string, tag = "10")]
    pub domain: String,
    /// Field 13, `overload`.
    #[prost(string, tag = "13")]
    pub overload: String,
}

/// `OperatorSetIdProto` (onnx.proto): an operator set and its version.
#[derive(Clone, PartialEq, prost::Message)]
pub struct OperatorSetIdProto {
    /// Field 1, `domain` (`""` or `ai.onnx` for the default set).
    #[prost(string, tag = "1")]
    pub domain: String,
    /// Field 2, `version`.
    #[prost(int64, tag = "2")]
    pub version: i64,
}

/// `GraphProto` (onnx.proto).
#[derive(Clone, PartialEq, prost::Message)]
pub struct GraphProto {
    /// Field 1, `node`, in the file's order.
    #[prost(message, repeated, tag = "1")]
    pub node: Vec<NodeProto>,
    /// Field 2, `name`.
    #[prost(string, tag = "2")]
    pub name: String,
    /// Field 5, `initializer`.
    #[prost(message, repeated, tag = "5")]
    pub initializer: Vec<TensorProto>,
    /// Field 11, `input`.
    #[prost(message, repeated, tag = "11")]
    pub input: Vec<ValueInfoProto>,
    /// Field 12, `output`.
    #[prost(message, repeated, tag = "12")]
    pub output: Vec<ValueInfoProto>,
}

/// `NodeProto` (onnx.proto).
#[derive(Clone, PartialEq, prost::Message)]
pub struct NodeProto {
    /// Field 1, `input`; `""` is an omitted optional input.
    #[prost(string, repeated, tag = "1")]
    pub input: Vec<String>,
    /// Field 2, `output`; `""` is an omitted optional output.
    #[prost(string, repeated, tag = "2")]
    pub output: Vec<String>,
    /// Field 3, `name`.
    #[prost(string, tag = "3")]
    pub name: String,
    /// Field 4, `op_type`.
    #[prost(string, tag = "4")]
    pub op_type: String,
    /// Field 7, `domain`.
    #[prost(string, tag = "7")]
    pub domain: String,
    /// Field 5, `attribute`.
    #[prost(message, repeated, tag = "5")]
    pub attribute: Vec<AttributeProto>,
    /// Field 8, `overload` (which overload of a local function the node calls).
    #[prost(string, tag = "8")]
    pub overload: String,
}

/// `AttributeProto` (onnx.proto).
#[derive(Clone, PartialEq, prost::Message)]
pub struct AttributeProto {
    /// Field 1, `name`.
    #[prost(string, tag = "1")]
    pub name: String,
    /// Field 20, `type` (`AttributeProto.AttributeType`: 1 FLOAT, 2 INT, 3 STRING, 4 TENSOR,
    /// 5 GRAPH, 6 FLOATS, 7 INTS, 8 STRINGS, 9 TENSORS, 10 GRAPHS, ...).
    #[prost(int32, tag = "20")]
    pub r#type: i32,
    /// Field 2, `f`.
    #[prost(float, tag = "2")]
    pub f: f32,
    /// Field 3, `i`.
    #[prost(int64, tag = "3")]
    pub i: i64,
    /// Field 4, `s` (UTF-8 bytes).
    #[prost(bytes = "bytes", tag = "4")]
    pub s: Bytes,
    /// Field 5, `t`.
    #[prost(message, optional, tag = "5")]
    pub t: Option<TensorProto>,
    /// Field 7, `floats`.
    #[prost(float, repeated, tag = "7")]
    pub floats: Vec<f32>,
    /// Field 8, `ints`.
    #[prost(int64, repeated, tag = "8")]
    pub ints: Vec<i64>,
    /// Field 9, `strings`.
    #[prost(bytes = "bytes", repeated, tag = "9")]
    pub strings: Vec<Bytes>,
    /// Field 6, `g`: a sub-graph (`If` branches, `Loop`/`Scan` bodies).
    #[prost(message, optional, boxed, tag = "6")]
    pub g: Option<Box<GraphProto>>,
    /// Field 21, `ref_attr_name`: inside a function, the caller's attribute this one takes.
    #[prost(string, tag = "21")]
    pub ref_attr_name: String,
}

/// `AttributeProto.AttributeType` numbers memplan converts.
pub mod attribute_type {
    pub const FLOAT: i32 = 1;
    pub const INT: i32 = 2;
    pub const STRING: i32 = 3;
    pub const TENSOR: i32 = 4;
    pub const FLOATS: i32 = 6;
    pub const INTS: i32 = 7;
    pub const STRINGS: i32 = 8;
    pub const GRAPH: i32 = 5;
}

/// `ValueInfoProto` (onnx.proto).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ValueInfoProto {
    /// Field 1, `name`.
    #[prost(string, tag = "1")]
    pub name: String,
    /// Field 2, `type`.
    #[prost(message, optional, tag = "2")]
    pub r#type: Option<TypeProto>,
}

/// `TypeProto` (onnx.proto). Only the `tensor_type` member of its `value` oneof is read;
/// sequence, map, optional and sparse types decode as `None`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TypeProto {
    /// Field 1, `tensor_type` (oneof `value`).
    #[prost(message, optional, tag = "1")]
    pub tensor_type: Option<TypeProtoTensor>,
}

/// `TypeProto.Tensor` (onnx.proto).
#[derive(Clone, PartialEq, prost::Message)]
pub struct TypeProtoTensor {
    /// Field 1, `elem_type` (a `TensorProto.DataType`).
    #[prost(int32, tag = "1")]
    pub elem_type: i32,
    /// Field 2, `shape`; absent when the rank is unknown.
    #[prost(message, optional, tag = "2")]
    pub shape: Option<TensorShapeProto>,
}

/// `TensorShapeProto` (onnx.proto).
#[derive(Clone, PartialEq, prost::Message)]
pub struct TensorShapeProto {
    /// Field 1, `dim`.
    #[prost(message, repeated, tag = "1")]
    pub dim: Vec<Dimension>,
}

/// `TensorShapeProto.Dimension` (onnx.proto).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Dimension {
    /// Oneof `value`: field 1 `dim_value` or field 2 `dim_param`; `None` for an unknown dim.
    #[prost(oneof = "DimensionValue", tags = "1, 2")]
    pub value: Option<DimensionValue>,
}

/// The `value` oneof of `TensorShapeProto.Dimension`.
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum DimensionValue {
    /// Field 1, `dim_value`.
    #[prost(int64, tag = "1")]
    DimValue(i64),
    /// Field 2, `dim_param` (a symbolic dim such as `batch`).
    #[prost(string, tag = "2")]
    DimParam(String),
}

/// `TensorProto` (onnx.proto). `string_data` (6), `uint64_data` (11) and `segment` (3) are
/// not read.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TensorProto {
    /// Field 1, `dims`.
    #[prost(int64, repeated, tag = "1")]
    pub dims: Vec<i64>,
    /// Field 2, `data_type` (a `TensorProto.DataType`).
    #[prost(int32, tag = "2")]
    pub data_type: i32,
    /// Field 4, `float_data` (FLOAT, COMPLEX64).
    #[prost(float, repeated, tag = "4")]
    pub float_data: Vec<f32>,
    /// Field 5, `int32_data` (INT32, INT16, INT8, UINT16, UINT8, BOOL, FLOAT16, ...).
    #[prost(int32, repeated, tag = "5")]
    pub int32_data: Vec<i32>,
    /// Field 7, `int64_data` (INT64).
    #[prost(int64, repeated, tag = "7")]
    pub int64_data: Vec<i64>,
    /// Field 8, `name`.
    #[prost(string, tag = "8")]
    pub name: String,
    /// Field 9, `raw_data` (little-endian elements); a view into the file's bytes.
    #[prost(bytes = "bytes", tag = "9")]
    pub raw_data: Bytes,
    /// Field 10, `double_data` (DOUBLE, COMPLEX128).
    #[prost(double, repeated, tag = "10")]
    pub double_data: Vec<f64>,
    /// Field 13, `external_data` (`location`, `offset`, `length`, ...); never followed.
    #[prost(message, repeated, tag = "13")]
    pub external_data: Vec<StringStringEntryProto>,
    /// Field 14, `data_location` (`TensorProto.DataLocation`: 0 DEFAULT, 1 EXTERNAL).
    #[prost(int32, tag = "14")]
    pub data_location: i32,
}

/// `TensorProto.DataLocation.EXTERNAL`.
pub const DATA_LOCATION_EXTERNAL: i32 = 1;

/// `StringStringEntryProto` (onnx.proto).
#[derive(Clone, PartialEq, prost::Message)]
pub struct StringStringEntryProto {
    /// Field 1, `key`.
    #[prost(string, tag = "1")]
    pub key: String,
    /// Field 2, `value`.
    #[prost(string, tag = "2")]
    pub value: String,
}
