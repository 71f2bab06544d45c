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
    let out = pack(&model);
    if out.len() as u64 > MAX_FILE_BYTES {
        return Err(TfliteError::TooLarge {
            file: file.to_string(),
            limit: MAX_FILE_BYTES,
        });
    }
    Ok(out)
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
