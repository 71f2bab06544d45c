//! What can go wrong reading a `.tflite` file or planning for TFLite Micro.

/// An error naming the file and the part of it at fault.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TfliteError {
    #[error("cannot read '{file}': {message}")]
    Io { file: String, message: String },
    #[error("'{file}' is larger than {limit} bytes, the most a flatbuffer model can address")]
    TooLarge { file: String, limit: u64 },
    #[error("'{file}' is not a TFLite model: {why}")]
    NotTflite { file: String, why: String },
    #[error("'{file}': {what}")]
    Invalid { file: String, what: String },
    #[error("'{file}': its OfflineMemoryAllocation metadata is invalid: {what}")]
    OfflinePlan { file: String, what: String },
    #[error("'{file}': {what}")]
    Unsupported { file: String, what: String },
}
