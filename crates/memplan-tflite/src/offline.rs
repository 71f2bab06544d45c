//! TFLM's offline memory plan: model metadata named `OfflineMemoryAllocation` whose buffer
//! holds little-endian int32 words `[version, subgraph, N, offset_0 … offset_{N-1}]`.
//! `N` is the tensor count of all subgraphs together; offset `i` is the tensor's byte
//! offset from the start of TFLM's planned area, or `-1` to let TFLM plan it. TFLM reads
//! only `N` and the offsets; memplan writes version 1, subgraph 0.

use crate::error::TfliteError;
use crate::model::Model;

/// The metadata name TFLM looks for.
pub const METADATA_NAME: &str = "OfflineMemoryAllocation";

/// "TFLM plans this tensor itself."
pub const ONLINE: i32 = -1;

/// The offsets of the model's offline plan, if it has one.
///
/// Errors when the metadata's buffer is too short for its own `N` (TFLM would read past
/// it); the count is compared with the model's tensors by [`crate::arena::arena`].
pub fn read(model: &Model, file: &str) -> Result<Option<Vec<i32>>, TfliteError> {
    let Some(entry) = model
        .metadata
        .iter()
        .rev()
        .find(|m| m.name == METADATA_NAME)
    else {
        return Ok(None);
    };
    let bad = |what: String| TfliteError::OfflinePlan {
        file: file.to_string(),
        what,
    };
    let words: Vec<i32> = entry
        .data
        .chunks_exact(4)
        .map(|w| i32::from_le_bytes([w[0], w[1], w[2], w[3]]))
        .collect();
    if words.len() < 3 {
        return Err(bad(format!(
            "its buffer {} holds {} bytes; it needs at least 12 (version, subgraph, count)",
            entry.buffer,
            entry.data.len()
        )));
    }
    let count =
        usize::try_from(words[2]).map_err(|_| bad(format!("its tensor count is {}", words[2])))?;
    if words.len() - 3 < count {
        return Err(bad(format!(
            "it declares {count} offsets but its buffer {} holds only {}",
            entry.buffer,
            words.len() - 3
        )));
    }
    Ok(Some(words[3..3 + count].to_vec()))
}

/// The metadata bytes of an offline plan with these offsets.
pub fn encode(offsets: &[i32]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(4 * (offsets.len() + 3));
    for word in [1, 0, offsets.len() as i32].iter().chain(offsets) {
        bytes.extend_from_slice(&word.to_le_bytes());
    }
    bytes
}
