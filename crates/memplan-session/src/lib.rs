//! memplan's library front door: the sequence every user runs — load a model or a
//! problem, plan it with a configured planner, check the plan, describe the result — as
//! a library, so that every shell (the `memplan` CLI, the Python package, the PyTorch
//! hooks) stands on the same code instead of repeating it.
//!
//! ```text
//!  file ──► input::read_input (by kind: graph JSON, ONNX, TFLite, CSV dialects) ──► Loaded
//!                                                   { problem, graph + analysis, tensors }
//! ```
//!
//! Errors are [`anyhow::Error`]s whose context chain names the file (and, from the readers
//! below, the line, node or buffer) and what was wrong.

pub mod input;
pub mod npu;
pub mod plan;
pub mod report;
pub mod run;
pub mod spec;
