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
pub use file::FileError;
pub use json::{JsonError, PlanSummary};
