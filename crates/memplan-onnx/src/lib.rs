//! ONNX import for memplan.
//!
//! Reads an `.onnx` file (protobuf, decoded by hand-written `prost` messages in [`proto`],
//! no `protoc`), infers the static shape and element type of every tensor (with constant
//! folding of shape sub-graphs), and builds a [`memplan_graph::Graph`]:
//!
//! - graph inputs (not those that are initialisers) are [`ValueKind::Input`];
//! - model-local functions are inlined first (nodes `<call>/<inner>`), see [`ops`] for
//!   the operators inferred (default domain and `com.microsoft`);
//! - initialisers are [`ValueKind::Weight`]: dtype and dims; contents are read only for
//!   small inline tensors (shape operands, float scales). External data is never read, and
//!   a missing `.onnx.data` file is not an error;
//! - every node is kept, in the file's order (so node *i* runs at step *i + 1* when no
//!   function or control-flow body adds steps), including
//!   `Constant` nodes; a `Constant` node has no outputs in the graph and its value is a
//!   [`ValueKind::Constant`] without producer;
//! - every other node output is a [`ValueKind::Activation`] with its inferred static shape;
//!   folded contents (shape values) are kept with [`Graph::set_data`];
//! - `If`/`Loop`/`Scan` nodes take the outer values their sub-graphs read as extra inputs,
//!   and their bodies become steps after them (`<node>/<attribute>/<inner>`, then a closing
//!   step `<node>/end`), so body temporaries are planned: both branches of an `If` in turn,
//!   one iteration of a `Loop` or `Scan` (doc/onnx.md, "The graph built");
//! - data-dependent sizes (NonZero, NonMaxSuppression, …) are planned at an upper bound and
//!   marked with `Graph::set_bounded` (see [`ImportOptions::max_dim`]).
//!
//! Failures are [`OnnxError`]s naming the node, operator, input or dim at fault. No input,
//! however malformed, makes the importer panic (see the `fuzzing` feature).
//!
//! [`ValueKind::Input`]: memplan_graph::ValueKind::Input
//! [`ValueKind::Weight`]: memplan_graph::ValueKind::Weight
//! [`ValueKind::Constant`]: memplan_graph::ValueKind::Constant
//! [`ValueKind::Activation`]: memplan_graph::ValueKind::Activation
//! [`Graph::set_data`]: memplan_graph::Graph::set_data

use std::collections::BTreeMap;
use std::path::Path;

use prost::Message;

mod error;
pub mod fold;
mod import;
pub mod infer;
mod inline;
pub mod ops;
pub mod proto;

#[cfg(feature = "fuzzing")]
pub mod fuzzing;

pub use error::OnnxError;

/// Overrides for graph-input shapes that the file leaves symbolic or unknown.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ImportOptions {
    /// Whole shapes by graph-input name (`--input-shape NAME=1x3x224x224`); they replace
    /// the file's shape for that input.
    pub input_shapes: BTreeMap<String, Vec<u64>>,
    /// Values of named (`dim_param`) dims by name (`--dim batch=1`).
    pub dims: BTreeMap<String, u64>,
    /// Upper bound for a data-dependent dim that the graph itself does not bound
    /// (`--max-dim`): a `Range` or `ConstantOfShape` whose operands are runtime values, a
    /// `Loop` whose trip count is. Sizes the graph bounds (NonZero, NonMaxSuppression, TopK,
    /// Unique, Compress) never need it. Values planned at a bound are listed by
    /// `Graph::bounded`.
    pub max_dim: Option<u64>,
}

/// Parses `NAME=1x3x224x224` (a scalar is `NAME=`). The name may contain `=`; the last `=`
/// separates it from the dims.
pub fn parse_input_shape(arg: &str) -> Result<(String, Vec<u64>), String> {
    let (name, dims) = arg
        .rsplit_once('=')
        .ok_or_else(|| format!("'{arg}' is not NAME=DIMS (e.g. input=1x3x224x224)"))?;
    if name.is_empty() {
        return Err(format!("'{arg}' has no input name before '='"));
    }
    let dims = dims.trim();
    if dims.is_empty() {
        return Ok((name.to_string(), Vec::new()));
    }
    let shape = dims
        .split(['x', 'X'])
        .map(|d| {
            d.trim().parse::<u64>().map_err(|_| {
                format!("'{arg}': dim '{d}' is not a non-negative integer (dims are separated by 'x', e.g. 1x3x224x224)")
            })
        })
        .collect::<Result<Vec<u64>, String>>()?;
    Ok((name.to_string(), shape))
}

/// Parses `NAME=VALUE` for a named dim.
pub fn parse_dim(arg: &str) -> Result<(String, u64), String> {
    let (name, value) = arg
        .rsplit_once('=')
        .ok_or_else(|| format!("'{arg}' is not NAME=VALUE (e.g. batch=1)"))?;
    if name.is_empty() {
        return Err(format!("'{arg}' has no dim name before '='"));
    }
    let value = value
        .trim()
        .parse::<u64>()
        .map_err(|_| format!("'{arg}': '{value}' is not a non-negative integer"))?;
    Ok((name.to_string(), value))
}

/// Reads and imports an `.onnx` file. Only this file is read: external data files are
/// never opened.
pub fn import_file(
    path: &Path,
    options: &ImportOptions,
) -> Result<memplan_graph::Graph, OnnxError> {
    let bytes = memplan::io::file::read_bytes_checked(path, MAX_ONNX_BYTES, |chunk, offset| {
        match (offset, chunk.first()) {
            (0, Some(&first)) if !could_start_a_message(first) => Err(format!(
                "not an ONNX model: its first byte {first:#04x} cannot start a protobuf message (field number 0 or wire type {}); check that this is an .onnx file",
                first & 7
            )),
            _ => Ok(()),
        }
    })
    .map_err(|e| OnnxError::File(Box::new(e)))?;
    import_bytes(&bytes, &path.display().to_string(), options)
}

/// The largest `.onnx` file read: 2 GiB, protobuf's limit for one message (larger models
/// keep their weights in external data files, which memplan never opens).
pub const MAX_ONNX_BYTES: u64 = 2 << 30;

/// Whether `byte`, the first byte of a file, can start a protobuf message: the first
/// byte of a field's tag, whose field number is not 0 (when the tag fits one byte) and
/// whose wire type is one protobuf uses (0, 1, 2, 5; the group types 3 and 4 are gone).
fn could_start_a_message(byte: u8) -> bool {
    let wire_type = byte & 7;
    let number_is_zero = byte & 0x80 == 0 && byte >> 3 == 0;
    !number_is_zero && matches!(wire_type, 0 | 1 | 2 | 5)
}

/// Imports a model from its serialised bytes; `source` names it in messages. Never panics.
pub fn import_bytes(
    bytes: &[u8],
    source: &str,
    options: &ImportOptions,
) -> Result<memplan_graph::Graph, OnnxError> {
    let model = decode_model(bytes, source)?;
    import::import_model(&model, source, options)
}

/// Decodes the protobuf (without importing); large inline byte fields stay views into one
/// copy of `bytes`.
pub fn decode_model(bytes: &[u8], source: &str) -> Result<proto::ModelProto, OnnxError> {
    proto::ModelProto::decode(bytes::Bytes::copy_from_slice(bytes)).map_err(|e| OnnxError::Decode {
        source_name: source.into(),
        message: e.to_string(),
    })
}
