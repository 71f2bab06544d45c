//! A `.tflite` file read into plain Rust values: what memory planning needs of every
//! subgraph, tensor, operator, buffer and metadata entry, validated once so that nothing
//! downstream indexes out of range.

use flatbuffers::VerifierOptions;

use crate::error::TfliteError;
use crate::schema_generated::tflite as fb;

pub use fb::{BuiltinOperator, TensorType};

/// The largest `.tflite` file memplan reads: flatbuffers address at most 2 GiB, and
/// larger models keep their weights outside the flatbuffer.
pub const MAX_FILE_BYTES: u64 = 1 << 31;

/// A TFLite model as memory planning sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct Model {
    /// The schema version the file declares (3 for every current converter).
    pub version: u32,
    pub description: Option<String>,
    pub subgraphs: Vec<Subgraph>,
    /// Every model buffer; tensors refer to them by index.
    pub buffers: Vec<BufferInfo>,
    pub metadata: Vec<Metadata>,
}

/// What a model buffer holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BufferInfo {
    /// Bytes of inline data (`Buffer.data`).
    pub data_len: u64,
    /// The data lies outside the flatbuffer (`Buffer.offset > 1`, models over 2 GiB).
    pub external: bool,
}

impl BufferInfo {
    /// True when a tensor on this buffer is a constant: TFLM points such a tensor at the
    /// data and never gives it arena memory. TFLM reads inline data only: a tensor whose
    /// data lies after the flatbuffer ([`BufferInfo::external`]) is, for TFLM, a tensor
    /// without data, planned in the arena and never filled (see [`TflmCaveat`]).
    ///
    /// [`TflmCaveat`]: crate::TflmCaveat
    pub fn has_data(&self) -> bool {
        self.data_len > 0
    }
}

/// A `Metadata` entry: a name and the buffer that holds its bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Metadata {
    pub name: String,
    pub buffer: u32,
    /// The buffer's bytes (metadata is small; weights are never copied).
    pub data: Vec<u8>,
}

/// One subgraph: its tensors, operators in execution order, inputs and outputs.
#[derive(Clone, Debug, PartialEq)]
pub struct Subgraph {
    pub name: String,
    pub tensors: Vec<Tensor>,
    pub operators: Vec<Operator>,
    pub inputs: Vec<usize>,
    pub outputs: Vec<usize>,
}

/// One tensor of a subgraph.
#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    pub name: String,
    pub dtype: TensorType,
    /// The static shape (`Tensor.shape`); a missing shape is a scalar.
    pub shape: Vec<i32>,
    /// Index into [`Model::buffers`].
    pub buffer: usize,
    pub is_variable: bool,
    /// `shape` as TFLM reads it times the element size (TFLM's `BytesRequiredForTensor`).
    pub bytes: u64,
}

/// One operator of a subgraph.
#[derive(Clone, Debug, PartialEq)]
pub struct Operator {
    /// The resolved builtin code: the larger of `builtin_code` and
    /// `deprecated_builtin_code`, as TFLite's `GetBuiltinCode` does.
    pub opcode: BuiltinOperator,
    /// The custom operator's name, for `CUSTOM`.
    pub custom_code: Option<String>,
    pub opcode_version: i32,
    /// Tensor indices; `None` is an omitted optional input (`-1` in the file).
    pub inputs: Vec<Option<usize>>,
    pub outputs: Vec<usize>,
    pub intermediates: Vec<usize>,
    /// The options memory planning reads.
    pub options: OperatorOptions,
}

impl Operator {
    /// The operator's name for messages: `CONV_2D`, or the custom code.
    pub fn kind(&self) -> String {
        match &self.custom_code {
            Some(code) if self.opcode == BuiltinOperator::CUSTOM => format!("CUSTOM({code})"),
            _ => self
                .opcode
                .variant_name()
                .map_or_else(|| format!("BUILTIN_{}", self.opcode.0), str::to_string),
        }
    }
}

/// The builtin options that change tensor lifetimes or kernel scratch requests.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OperatorOptions {
    /// Subgraphs an `IF`, `WHILE` or `CALL_ONCE` runs, in the order TFLM visits them
    /// (then/else, cond/body, init).
    pub subgraphs: Vec<usize>,
    /// `keep_dims` of a reducer (`ReducerOptions`).
    pub keep_dims: bool,
    /// `TRANSPOSE_CONV`'s padding, strides and fused activation.
    pub padding: Option<Padding>,
    pub stride_w: i32,
    pub stride_h: i32,
    /// `UNIDIRECTIONAL_SEQUENCE_LSTM`'s `time_major`.
    pub time_major: bool,
}

/// TFLite's padding modes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Padding {
    Same,
    Valid,
}

/// Bytes of one element as TFLM's `TfLiteTypeSizeOf` gives them; `None` for types TFLM
/// cannot size (STRING, VARIANT and the sub-byte and 8-bit float types it does not
/// support).
pub fn element_size(dtype: TensorType) -> Option<u64> {
    Some(match dtype {
        TensorType::FLOAT16 | TensorType::BFLOAT16 | TensorType::INT16 | TensorType::UINT16 => 2,
        TensorType::FLOAT32 | TensorType::INT32 | TensorType::UINT32 | TensorType::RESOURCE => 4,
        TensorType::FLOAT64 | TensorType::INT64 | TensorType::UINT64 | TensorType::COMPLEX64 => 8,
        TensorType::COMPLEX128 => 16,
        // TFLM holds INT4 tensors unpacked, one element a byte.
        TensorType::UINT8 | TensorType::INT8 | TensorType::BOOL | TensorType::INT4 => 1,
        _ => return None,
    })
}

/// The name of a tensor type (`INT8`), or its number when the schema has no name for it.
pub fn dtype_name(dtype: TensorType) -> String {
    dtype
        .variant_name()
        .map_or_else(|| format!("TYPE_{}", dtype.0), str::to_string)
}

/// Reads a `.tflite` file from disk, at most [`MAX_FILE_BYTES`].
pub fn read_file(path: &std::path::Path) -> Result<Model, TfliteError> {
    let bytes = read_bytes(path)?;
    read_model(&bytes, &path.display().to_string())
}

/// Reads a whole file of at most [`MAX_FILE_BYTES`] (`-`: standard input), naming it in
/// errors.
pub fn read_bytes(path: &std::path::Path) -> Result<Vec<u8>, TfliteError> {
    use memplan::io::file::FileError;
    memplan::io::file::read_bytes_checked(path, MAX_FILE_BYTES, check_identifier).map_err(|e| {
        match e {
            FileError::TooLarge { limit, .. } => TfliteError::TooLarge {
                file: path.display().to_string(),
                limit,
            },
            FileError::Refused { message, .. } => TfliteError::NotTflite {
                file: path.display().to_string(),
                why: message,
            },
            FileError::Io { source, .. } => TfliteError::Io {
                file: path.display().to_string(),
                message: source.to_string(),
            },
            other => TfliteError::Io {
                file: path.display().to_string(),
                message: other.to_string(),
            },
        }
    })
}

/// The check [`read_bytes`] shows each chunk of a file to: the file identifier sits in
/// bytes 4..8, so a file without `TFL3` there (`/dev/zero` named `.tflite`) is refused in
/// its first chunk, not after reading up to the cap.
pub fn check_identifier(chunk: &[u8], offset: u64) -> Result<(), String> {
    match chunk.get(4..8) {
        Some(id) if offset == 0 && id != b"TFL3" => Err(format!(
            "its file identifier is {:?}, not \"TFL3\"; check that this is a .tflite file",
            String::from_utf8_lossy(id)
        )),
        _ => Ok(()),
    }
}

/// The verifier's limits: generous for real models, bounded for hostile ones.
fn verifier_options() -> VerifierOptions {
    VerifierOptions {
        max_depth: 64,
        max_tables: 10_000_000,
        max_apparent_size: 1 << 32,
        ignore_missing_null_terminator: false,
    }
}

/// Verifies the flatbuffer and returns its root, or an error naming `file`.
pub(crate) fn root<'a>(bytes: &'a [u8], file: &str) -> Result<fb::Model<'a>, TfliteError> {
    if bytes.len() < 8 || !fb::model_buffer_has_identifier(bytes) {
        return Err(TfliteError::NotTflite {
            file: file.to_string(),
            why: if bytes.len() < 8 {
                format!("it has {} bytes", bytes.len())
            } else {
                format!(
                    "its file identifier is {:?}, not \"TFL3\"",
                    String::from_utf8_lossy(&bytes[4..8])
                )
            },
        });
    }
    fb::root_as_model_with_opts(&verifier_options(), bytes).map_err(|e| {
        // Out-of-bounds offsets in a file with the right identifier: almost always a file
        // cut short (an interrupted download or copy) or corrupted; say that first, and
        // keep the verifier's words for whoever debugs a converter.
        let cut = matches!(
            e,
            flatbuffers::InvalidFlatbuffer::RangeOutOfBounds { .. }
                | flatbuffers::InvalidFlatbuffer::SignedOffsetOutOfBounds { .. }
        );
        TfliteError::NotTflite {
            file: file.to_string(),
            why: if cut {
                format!(
                    "its {} bytes end before the data they point to: the file looks truncated or corrupted (copy or export it again); the flatbuffer verifier says: {e}",
                    bytes.len()
                )
            } else {
                format!("its flatbuffer is malformed ({e}); export the model again")
            },
        }
    })
}

/// Reads a model from the bytes of a `.tflite` file; `file` names it in errors.
pub fn read_model(bytes: &[u8], file: &str) -> Result<Model, TfliteError> {
    let model = root(bytes, file)?;
    let bad = |what: String| TfliteError::Invalid {
        file: file.to_string(),
        what,
    };

    let buffers: Vec<BufferInfo> = model
        .buffers()
        .map(|v| {
            v.iter()
                .map(|b| BufferInfo {
                    data_len: b.data().map_or(0, |d| d.len() as u64),
                    external: b.offset() > 1,
                })
                .collect()
        })
        .unwrap_or_default();

    let codes: Vec<(BuiltinOperator, Option<String>, i32)> = model
        .operator_codes()
        .map(|v| {
            v.iter()
                .map(|c| {
                    let deprecated = BuiltinOperator(i32::from(c.deprecated_builtin_code()));
                    let code = if c.builtin_code().0 > deprecated.0 {
                        c.builtin_code()
                    } else {
                        deprecated
                    };
                    (code, c.custom_code().map(str::to_string), c.version())
                })
                .collect()
        })
        .unwrap_or_default();

    let Some(fb_subgraphs) = model.subgraphs() else {
        return Err(bad("the model has no subgraphs".into()));
    };
    if fb_subgraphs.is_empty() {
        return Err(bad("the model has no subgraphs".into()));
    }
    let subgraph_count = fb_subgraphs.len();
    let mut subgraphs = Vec::with_capacity(subgraph_count);
    for (s, sg) in fb_subgraphs.iter().enumerate() {
        let where_sg = |what: String| bad(format!("subgraph {s}: {what}"));
        let mut tensors = Vec::new();
        for (t, tensor) in sg.tensors().into_iter().flatten().enumerate() {
            let name = tensor.name().unwrap_or("").to_string();
            let label = format!("tensor {t} '{}'", crate::display_name(&name));
            let buffer = tensor.buffer() as usize;
            if buffer >= buffers.len().max(1) {
                return Err(where_sg(format!(
                    "{label} names buffer {buffer}, but the model has {} buffers",
                    buffers.len()
                )));
            }
            let shape: Vec<i32> = tensor
                .shape()
                .map(|s| s.iter().collect())
                .unwrap_or_default();
            let dtype = tensor.type_();
            let bytes =
                tensor_bytes(&shape, dtype).map_err(|why| where_sg(format!("{label}: {why}")))?;
            tensors.push(Tensor {
                name,
                dtype,
                shape,
                buffer,
                is_variable: tensor.is_variable(),
                bytes,
            });
        }
        let tensor_count = tensors.len();
        let index = |raw: i32, role: &str| -> Result<usize, TfliteError> {
            usize::try_from(raw)
                .ok()
                .filter(|&i| i < tensor_count)
                .ok_or_else(|| {
                    where_sg(format!(
                        "{role} refers to tensor {raw}, but the subgraph has {tensor_count} tensors"
                    ))
                })
        };
        let inputs = sg
            .inputs()
            .into_iter()
            .flatten()
            .enumerate()
            .map(|(i, raw)| index(raw, &format!("input {i}")))
            .collect::<Result<Vec<_>, _>>()?;
        let outputs = sg
            .outputs()
            .into_iter()
            .flatten()
            .enumerate()
            .map(|(i, raw)| index(raw, &format!("output {i}")))
            .collect::<Result<Vec<_>, _>>()?;
        let mut operators = Vec::new();
        for (o, op) in sg.operators().into_iter().flatten().enumerate() {
            let code_index = op.opcode_index() as usize;
            let Some((opcode, custom_code, opcode_version)) = codes.get(code_index).cloned() else {
                return Err(where_sg(format!(
                    "operator {o} uses operator code {code_index}, but the model has {} operator codes",
                    codes.len()
                )));
            };
            let kind = custom_code
                .clone()
                .filter(|_| opcode == BuiltinOperator::CUSTOM)
                .unwrap_or_else(|| opcode.variant_name().unwrap_or("?").to_string());
            let role = |list: &str, i: usize| format!("operator {o} ({kind}) {list} {i}");
            let mut op_inputs = Vec::new();
            for (i, raw) in op.inputs().into_iter().flatten().enumerate() {
                op_inputs.push(if raw < 0 {
                    None
                } else {
                    Some(index(raw, &role("input", i))?)
                });
            }
            let op_outputs = op
                .outputs()
                .into_iter()
                .flatten()
                .enumerate()
                .map(|(i, raw)| index(raw, &role("output", i)))
                .collect::<Result<Vec<_>, _>>()?;
            let intermediates = op
                .intermediates()
                .into_iter()
                .flatten()
                .enumerate()
                .map(|(i, raw)| index(raw, &role("intermediate", i)))
                .collect::<Result<Vec<_>, _>>()?;
            let (mut options, callees) = operator_options(&op, opcode);
            for callee in callees {
                match usize::try_from(callee) {
                    Ok(c) if c < subgraph_count => options.subgraphs.push(c),
                    _ => {
                        return Err(where_sg(format!(
                            "operator {o} ({kind}) runs subgraph {callee}, but the model has {subgraph_count} subgraphs"
                        )))
                    }
                }
            }
            operators.push(Operator {
                opcode,
                custom_code,
                opcode_version,
                inputs: op_inputs,
                outputs: op_outputs,
                intermediates,
                options,
            });
        }
        subgraphs.push(Subgraph {
            name: sg.name().unwrap_or("").to_string(),
            tensors,
            operators,
            inputs,
            outputs,
        });
    }

    let fb_buffers = model.buffers();
    let mut metadata = Vec::new();
    for (m, entry) in model.metadata().into_iter().flatten().enumerate() {
        let buffer = entry.buffer();
        let data = fb_buffers
            .as_ref()
            .filter(|b| (buffer as usize) < b.len())
            .map(|b| {
                b.get(buffer as usize)
                    .data()
                    .map(|d| d.bytes().to_vec())
                    .unwrap_or_default()
            })
            .ok_or_else(|| {
                bad(format!(
                    "metadata {m} '{}' names buffer {buffer}, but the model has {} buffers",
                    entry.name().unwrap_or(""),
                    buffers.len()
                ))
            })?;
        metadata.push(Metadata {
            name: entry.name().unwrap_or("").to_string(),
            buffer,
            data,
        });
    }

    Ok(Model {
        version: model.version(),
        description: model.description().map(str::to_string),
        subgraphs,
        buffers,
        metadata,
    })
}

/// Elements times element size, as TFLM computes them, with every failure explained.
fn tensor_bytes(shape: &[i32], dtype: TensorType) -> Result<u64, String> {
    let size = element_size(dtype).ok_or_else(|| {
        format!(
            "type {} has no size in TFLite Micro; TFLM cannot run this model",
            dtype_name(dtype)
        )
    })?;
    let mut elements: u64 = 1;
    for (d, &dim) in shape.iter().enumerate() {
        let dim = u64::try_from(dim).map_err(|_| {
            format!("dim {d} of shape {shape:?} is {dim}; TFLM needs static, non-negative dims")
        })?;
        elements = elements
            .checked_mul(dim)
            .ok_or_else(|| format!("shape {shape:?} has more elements than fit in 64 bits"))?;
    }
    elements
        .checked_mul(size)
        .ok_or_else(|| format!("shape {shape:?} has more bytes than fit in 64 bits"))
}

/// The options memory planning reads, and the subgraph indices an `IF`, `WHILE` or
/// `CALL_ONCE` runs as the file gives them (validated by the caller).
fn operator_options(op: &fb::Operator<'_>, opcode: BuiltinOperator) -> (OperatorOptions, Vec<i32>) {
    let mut options = OperatorOptions::default();
    let mut callees = Vec::new();
    match opcode {
        BuiltinOperator::IF => {
            if let Some(o) = op.builtin_options_as_if_options() {
                callees = vec![o.then_subgraph_index(), o.else_subgraph_index()];
            }
        }
        BuiltinOperator::WHILE => {
            if let Some(o) = op.builtin_options_as_while_options() {
                callees = vec![o.cond_subgraph_index(), o.body_subgraph_index()];
            }
        }
        BuiltinOperator::CALL_ONCE => {
            if let Some(o) = op.builtin_options_as_call_once_options() {
                callees = vec![o.init_subgraph_index()];
            }
        }
        BuiltinOperator::MEAN
        | BuiltinOperator::SUM
        | BuiltinOperator::REDUCE_MAX
        | BuiltinOperator::REDUCE_MIN
        | BuiltinOperator::REDUCE_PROD => {
            if let Some(o) = op.builtin_options_as_reducer_options() {
                options.keep_dims = o.keep_dims();
            }
        }
        BuiltinOperator::TRANSPOSE_CONV => {
            if let Some(o) = op.builtin_options_as_transpose_conv_options() {
                options.padding = Some(if o.padding() == fb::Padding::VALID {
                    Padding::Valid
                } else {
                    Padding::Same
                });
                options.stride_w = o.stride_w();
                options.stride_h = o.stride_h();
            }
        }
        BuiltinOperator::UNIDIRECTIONAL_SEQUENCE_LSTM => {
            if let Some(o) = op.builtin_options_as_unidirectional_sequence_lstmoptions() {
                options.time_major = o.time_major();
            }
        }
        _ => {}
    }
    (options, callees)
}
