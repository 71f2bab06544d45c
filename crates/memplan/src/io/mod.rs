//! File formats: minimalloc CSV (problems and solutions) and plan JSON.
//!
//! - [`csv`]: the buffer-list format of MiniMalloc, read and written, problems and solutions;
//! - [`json`]: the stable machine-readable plan result described in the design notes;
//! - [`memops`]: a memory-operation sequence (alloc/free per tensor), read into a problem;
//! - [`c_header`]: a plan as a C header of tensor offsets, for device builds;
//! - [`file`]: reading any input file with a size cap.
//!
//! Readers take the text and a source name (a path, for messages) and report errors that
//! name the source, the line and what to fix; they never panic.

pub mod c_header;
pub mod csv;
pub mod file;
pub mod json;
pub mod memops;

pub use csv::CsvError;

/// `text` without a leading UTF-8 byte-order mark. Every text reader of memplan (CSV,
/// graph JSON, platform JSON, plan JSON, memory-operation sequences, traces) accepts one.
pub fn strip_bom(text: &str) -> &str {
    text.strip_prefix('\u{feff}').unwrap_or(text)
}

/// Whether a plan file's text is JSON (its first character after a BOM and white space
/// opens an object or an array) rather than a solution CSV.
pub fn is_json(text: &str) -> bool {
    strip_bom(text).trim_start().starts_with(['{', '['])
}

/// The text of a JSON document whose top level must be one object (graph, platform and
/// plan JSON), its byte-order mark removed. `Err` says what the top level is instead
/// ("an array", "a string", ...), for the reader's own error message. Only the first
/// character is looked at: the JSON parser reports everything else.
pub fn json_object(text: &str) -> Result<&str, &'static str> {
    let text = strip_bom(text);
    let start = text.trim_start();
    match start.chars().next() {
        Some('{') => Ok(text),
        Some('[') => Err("an array"),
        Some('"') => Err("a string"),
        _ if start.starts_with("true") || start.starts_with("false") => Err("a boolean"),
        _ if start.starts_with("null") => Err("null"),
        Some(c) if c == '-' || c.is_ascii_digit() => Err("a number"),
        // Not JSON at all, or empty: the parser's message says where.
        _ => Ok(text),
    }
}
pub use file::FileError;
pub use json::{JsonError, PlanSummary};
