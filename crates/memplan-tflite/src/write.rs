//! Writing a model back with an offline plan embedded.
//!
//! The model is unpacked into the generated object API and packed again, so every field
//! of the schema memplan was generated from survives (fields of a newer schema would not:
//! [`with_offline_plan`] refuses nothing, so keep the schema current). Buffer data is
//! aligned to 16 bytes, as the schema's `force_align: 16` asks and as TFLM's kernels
//! expect of weights; the generated packer would align it to 4 only.

use flatbuffers::{FlatBufferBuilder, WIPOffset};

use crate::error::TfliteError;
use crate::model::{self, MAX_FILE_BYTES};
use crate::offline::{self, METADATA_NAME};
use crate::schema_generated::tflite as fb;

/// Alignment of every buffer's data in the written file.
pub const DATA_ALIGNMENT: usize = 16;

/// The model in `bytes` with its `OfflineMemoryAllocation` metadata set to `offsets`
/// (one per tensor of every subgraph, `-1` for tensors TFLM should plan itself). An
/// existing offline plan is replaced; nothing else changes meaning.
pub fn with_offline_plan(
    bytes: &[u8],
    offsets: &[i32],
    file: &str,
) -> Result<Vec<u8>, TfliteError> {
    let mut model = model::root(bytes, file)?.unpack();
    let data = offline::encode(offsets);
    let buffers = model.buffers.get_or_insert_with(Vec::new);
    if buffers.is_empty() {
        // TFLite reserves buffer 0 as the empty buffer.
        buffers.push(fb::BufferT::default());
    }
    let metadata = model.metadata.get_or_insert_with(Vec::new);
    // Reuse the old plan's buffer when nothing else refers to it, else add one.
    let mut used_elsewhere = std::collections::HashSet::new();
    for sg in model.subgraphs.iter().flatten() {
        for t in sg.tensors.iter().flatten() {
            used_elsewhere.insert(t.buffer);
        }
    }
    for m in metadata.iter() {
        if m.name.as_deref() != Some(METADATA_NAME) {
            used_elsewhere.insert(m.buffer);
        }
    }
    let old = metadata
        .iter()
        .position(|m| m.name.as_deref() == Some(METADATA_NAME));
    let reusable = old
        .map(|i| metadata[i].buffer)
        .filter(|&b| b != 0 && (b as usize) < buffers.len() && !used_elsewhere.contains(&b));
    let buffer = match reusable {
        Some(b) => {
            buffers[b as usize] = fb::BufferT {
                data: Some(data),
                offset: 0,
                size: 0,
            };
            b
        }
        None => {
            buffers.push(fb::BufferT {
                data: Some(data),
                offset: 0,
                size: 0,
            });
            u32::try_from(buffers.len() - 1).map_err(|_| TfliteError::Invalid {
                file: file.to_string(),
                what: "the model has too many buffers to add one".into(),
            })?
        }
    };
    // One OfflineMemoryAllocation entry, where the old one was (or at the end).
    metadata.retain(|m| m.name.as_deref() != Some(METADATA_NAME));
    let entry = fb::MetadataT {
        name: Some(METADATA_NAME.to_string()),
        buffer,
    };
    match old {
        Some(i) if i <= metadata.len() => metadata.insert(i, entry),
        _ => metadata.push(entry),
    }
    let out = pack_with_external_data(bytes, &mut model, file)?;
    verify_buffers(bytes, &out, file)?;
    if out.len() as u64 > MAX_FILE_BYTES {
        return Err(TfliteError::TooLarge {
            file: file.to_string(),
            limit: MAX_FILE_BYTES,
        });
    }
    Ok(out)
}

/// Whether a buffer keeps its data outside the flatbuffer: `offset`/`size` locate it in the
/// file (large converters append weights after the flatbuffer this way; an offset of 1 is
/// the schema's placeholder for "no data").
fn is_external(buffer: &fb::BufferT) -> bool {
    buffer.offset > 1
}

/// The bytes of `buffer` of the model in `bytes` (its inline data, or its range of the
/// file), or an error naming the buffer when the range is outside the file.
fn buffer_data<'a>(
    bytes: &'a [u8],
    buffer: &'a fb::BufferT,
    index: usize,
    file: &str,
) -> Result<&'a [u8], TfliteError> {
    if !is_external(buffer) {
        return Ok(buffer.data.as_deref().unwrap_or(&[]));
    }
    let start = usize::try_from(buffer.offset).ok();
    let end = start.and_then(|s| s.checked_add(usize::try_from(buffer.size).ok()?));
    match (start, end) {
        (Some(start), Some(end)) if end <= bytes.len() => Ok(&bytes[start..end]),
        _ => Err(TfliteError::Invalid {
            file: file.to_string(),
            what: format!(
                "buffer {index} keeps its data at offset {} ({} bytes), past the end of the file ({} bytes); the file may be truncated",
                buffer.offset,
                buffer.size,
                bytes.len()
            ),
        }),
    }
}

/// [`pack`], keeping the data of buffers stored after the flatbuffer: it is copied after
/// the new flatbuffer, each range 16-byte aligned, and the buffers' offsets are moved to
/// it. (Packing alone wrote the offsets of the old file with nothing there: the weights
/// were lost.)
fn pack_with_external_data(
    bytes: &[u8],
    model: &mut fb::ModelT,
    file: &str,
) -> Result<Vec<u8>, TfliteError> {
    let buffers = model.buffers.as_deref().unwrap_or(&[]);
    let external: Vec<(usize, Vec<u8>)> = buffers
        .iter()
        .enumerate()
        .filter(|(_, b)| is_external(b))
        .map(|(i, b)| buffer_data(bytes, b, i, file).map(|d| (i, d.to_vec())))
        .collect::<Result<_, _>>()?;
    if external.is_empty() {
        return Ok(pack(model));
    }
    // The flatbuffer's length does not depend on the offsets' values (non-zero u64
    // fields either way), so pack once to learn it, lay the data out after it, and pack
    // again with the new offsets.
    let length = pack(model).len();
    let mut at = length.next_multiple_of(DATA_ALIGNMENT);
    let mut layout = Vec::with_capacity(external.len());
    for (i, data) in &external {
        layout.push((*i, at));
        at = (at + data.len()).next_multiple_of(DATA_ALIGNMENT);
    }
    let list = model.buffers.as_mut().expect("external buffers exist");
    for &(i, offset) in &layout {
        list[i].offset = offset as u64;
    }
    let mut out = pack(model);
    if out.len() != length {
        return Err(TfliteError::Invalid {
            file: file.to_string(),
            what: "internal error: the model's flatbuffer changed length when its buffers' offsets moved; please report this bug".into(),
        });
    }
    for ((_, data), &(_, offset)) in external.iter().zip(&layout) {
        out.resize(offset, 0);
        out.extend_from_slice(data);
    }
    out.resize(at, 0);
    Ok(out)
}

/// Re-reads the written model and holds every buffer's bytes (inline or after the
/// flatbuffer) to the input's, except the offline plan's metadata buffer: nothing the
/// writer does not change may change.
fn verify_buffers(input: &[u8], output: &[u8], file: &str) -> Result<(), TfliteError> {
    let before = model::root(input, file)?.unpack();
    let after = model::root(output, file)?.unpack();
    let plan_buffer = after
        .metadata
        .iter()
        .flatten()
        .find(|m| m.name.as_deref() == Some(METADATA_NAME))
        .map(|m| m.buffer as usize);
    let old = before.buffers.as_deref().unwrap_or(&[]);
    let new = after.buffers.as_deref().unwrap_or(&[]);
    for (i, b) in old.iter().enumerate() {
        if Some(i) == plan_buffer {
            continue;
        }
        let kept = new
            .get(i)
            .map(|n| buffer_data(output, n, i, file))
            .transpose()?;
        if kept != Some(buffer_data(input, b, i, file)?) {
            return Err(TfliteError::Invalid {
                file: file.to_string(),
                what: format!(
                    "internal error: writing the plan changed buffer {i}'s bytes; nothing was written; please report this bug"
                ),
            });
        }
    }
    Ok(())
}

/// Packs a model as the generated `ModelT::pack` does, but with buffer data aligned to
/// [`DATA_ALIGNMENT`] and the whole file a multiple of it.
pub fn pack(model: &fb::ModelT) -> Vec<u8> {
    let mut fbb = FlatBufferBuilder::with_capacity(1 << 16);
    let operator_codes = model.operator_codes.as_ref().map(|x| {
        let w: Vec<_> = x.iter().map(|t| t.pack(&mut fbb)).collect();
        fbb.create_vector(&w)
    });
    let subgraphs = model.subgraphs.as_ref().map(|x| {
        let w: Vec<_> = x.iter().map(|t| t.pack(&mut fbb)).collect();
        fbb.create_vector(&w)
    });
    let description = model.description.as_ref().map(|x| fbb.create_string(x));
    let buffers = model.buffers.as_ref().map(|x| {
        let w: Vec<_> = x.iter().map(|b| pack_buffer(&mut fbb, b)).collect();
        fbb.create_vector(&w)
    });
    let metadata_buffer = model.metadata_buffer.as_ref().map(|x| fbb.create_vector(x));
    let metadata = model.metadata.as_ref().map(|x| {
        let w: Vec<_> = x.iter().map(|t| t.pack(&mut fbb)).collect();
        fbb.create_vector(&w)
    });
    let signature_defs = model.signature_defs.as_ref().map(|x| {
        let w: Vec<_> = x.iter().map(|t| t.pack(&mut fbb)).collect();
        fbb.create_vector(&w)
    });
    let external_buffer_groups = model.external_buffer_groups.as_ref().map(|x| {
        let w: Vec<_> = x.iter().map(|t| t.pack(&mut fbb)).collect();
        fbb.create_vector(&w)
    });
    let external_buffers = model.external_buffers.as_ref().map(|x| {
        let w: Vec<_> = x.iter().map(|t| t.pack(&mut fbb)).collect();
        fbb.create_vector(&w)
    });
    let root = fb::Model::create(
        &mut fbb,
        &fb::ModelArgs {
            version: model.version,
            operator_codes,
            subgraphs,
            description,
            buffers,
            metadata_buffer,
            metadata,
            signature_defs,
            external_buffer_groups,
            external_buffers,
        },
    );
    // `finish` writes the root offset and the 4-byte identifier after what is built; pad
    // so that the finished file is a multiple of DATA_ALIGNMENT, which keeps every data
    // vector's start aligned relative to the file's start.
    pad_to(&mut fbb, 8);
    fb::finish_model_buffer(&mut fbb, root);
    fbb.finished_data().to_vec()
}

/// Pushes zero bytes until `used + extra` is a multiple of [`DATA_ALIGNMENT`].
fn pad_to(fbb: &mut FlatBufferBuilder<'_>, extra: usize) {
    let used = fbb.unfinished_data().len();
    let pad = (DATA_ALIGNMENT - (used + extra) % DATA_ALIGNMENT) % DATA_ALIGNMENT;
    for _ in 0..pad {
        fbb.push(0u8);
    }
}

/// Packs one buffer with its data's first byte at a multiple of [`DATA_ALIGNMENT`] from
/// the end of the builder (and so, by [`pack`]'s final padding, from the file's start).
fn pack_buffer<'b>(
    fbb: &mut FlatBufferBuilder<'b>,
    buffer: &fb::BufferT,
) -> WIPOffset<fb::Buffer<'b>> {
    let data = buffer.data.as_ref().map(|d| {
        pad_to(fbb, d.len());
        fbb.create_vector(d)
    });
    fb::Buffer::create(
        fbb,
        &fb::BufferArgs {
            data,
            offset: buffer.offset,
            size: buffer.size,
        },
    )
}
