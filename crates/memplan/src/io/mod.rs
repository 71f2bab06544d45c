//! File formats: minimalloc CSV (problems and solutions) and plan JSON.

pub mod csv;
pub mod json;
