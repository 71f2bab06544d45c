//! memplan's exceptions, and the one place where each library error becomes one.
//!
//! ```text
//! Exception
//! ├── MemplanError            base; raised itself only for an internal error (a bug)
//! │   ├── InputError          a problem, plan, model or option memplan cannot accept
//! │   │   ├── FormatError     text memplan reads (problem CSV, plan JSON, solution CSV)
//! │   │   └── ModelError      an ONNX or TFLite model it cannot import
//! │   └── PlanningError       a planner could not produce a plan
//! ├── OSError                 (built in) a file that cannot be read: FileNotFoundError,
//! │                           PermissionError, IsADirectoryError, …, with the path
//! ├── ValueError, OverflowError, TypeError
//!                             (built in) an argument out of range or of the wrong type,
//!                             naming the argument
//! ```
//!
//! As in polars' `PyPolarsErr`, a binding returns [`Error`] (or `PyErr`): `?` converts
//! every library error through its `From` impl below, so each error kind is mapped to an
//! exception class once, here.

use std::path::Path;

use pyo3::create_exception;
use pyo3::exceptions::{
    PyException, PyFileNotFoundError, PyOSError, PyPermissionError, PyValueError,
};
use pyo3::PyErr;

create_exception!(
    memplan,
    MemplanError,
    PyException,
    "Base class of every error memplan raises; raised itself only for an internal error."
);
create_exception!(
    memplan,
    InputError,
    MemplanError,
    "A problem, plan, model or option memplan cannot accept: the message names the file, line, buffer or node and what was wrong."
);
create_exception!(
    memplan,
    FormatError,
    InputError,
    "Text memplan reads (a problem CSV, plan JSON or solution CSV) that is malformed or does not fit its problem: the message names the source and line."
);
create_exception!(
    memplan,
    ModelError,
    InputError,
    "An ONNX or TFLite model memplan cannot import (not a model, an unsupported operator, a missing shape, …): the message names the file and node."
);
create_exception!(
    memplan,
    PlanningError,
    MemplanError,
    "A planner could not produce a plan (for example, fixed offsets that clash)."
);

/// A message for an exception: names and file contents it quotes are shown, never
/// obeyed by a terminal that prints the traceback (every control character but the line
/// breaks escaped, as the CLI prints its errors).
fn shown(message: String) -> String {
    if !message.contains(|c: char| c.is_control() && c != '\n') {
        return message;
    }
    message
        .split('\n')
        .map(|line| memplan::render::printable(line).into_owned())
        .collect::<Vec<_>>()
        .join("\n")
}

/// An error on its way to Python: already an exception.
pub struct Error(PyErr);

impl From<Error> for PyErr {
    fn from(e: Error) -> PyErr {
        e.0
    }
}

impl From<PyErr> for Error {
    fn from(e: PyErr) -> Error {
        Error(e)
    }
}

/// A result of a binding.
pub type Result<T> = std::result::Result<T, Error>;

/// `InputError(message)`.
pub fn input(message: impl Into<String>) -> Error {
    Error(InputError::new_err(shown(message.into())))
}

/// `FormatError(message)`: a file or text that is not what it claims to be.
pub fn format(message: impl Into<String>) -> Error {
    Error(FormatError::new_err(shown(message.into())))
}

/// `PlanningError(message)`: planning failed on a valid input.
pub fn planning(message: impl Into<String>) -> Error {
    Error(PlanningError::new_err(shown(message.into())))
}

/// `ValueError(message)`: an argument out of range; the message names the argument.
pub fn value(message: impl Into<String>) -> Error {
    Error(PyValueError::new_err(shown(message.into())))
}

/// `MemplanError("internal error: …")`: something that cannot happen did (a bug).
pub fn internal(message: impl std::fmt::Display) -> Error {
    Error(MemplanError::new_err(shown(format!(
        "internal error: {message}; please report this bug"
    ))))
}

/// The built-in `OSError` subclass of an I/O error reading `path`: `OSError(errno,
/// strerror, filename)`, which Python turns into `FileNotFoundError`, `PermissionError`,
/// `IsADirectoryError`, … by the errno; without an errno, by the error's kind.
pub fn os_error(e: &std::io::Error, path: &Path) -> Error {
    let filename = path.display().to_string();
    let text = e.to_string();
    Error(match e.raw_os_error() {
        Some(errno) => {
            // Rust appends " (os error N)" to strerror's text; Python prints the errno itself.
            let suffix = format!(" (os error {errno})");
            let strerror = text.strip_suffix(&suffix).unwrap_or(&text).to_string();
            PyOSError::new_err((errno, strerror, filename))
        }
        None => {
            let message = format!("{filename}: {text}");
            match e.kind() {
                std::io::ErrorKind::NotFound => PyFileNotFoundError::new_err(shown(message)),
                std::io::ErrorKind::PermissionDenied => PyPermissionError::new_err(shown(message)),
                _ => PyOSError::new_err(shown(message)),
            }
        }
    })
}

// ---- one `From` per library error type ----------------------------------------------

/// A problem that breaks a rule (empty lifetime, duplicate name, misaligned fixed offset).
impl From<memplan::ProblemError> for Error {
    fn from(e: memplan::ProblemError) -> Error {
        input(e.to_string())
    }
}

/// A problem CSV or solution CSV that cannot be read.
impl From<memplan::io::csv::CsvError> for Error {
    fn from(e: memplan::io::csv::CsvError) -> Error {
        Error(FormatError::new_err(shown(e.to_string())))
    }
}

/// A plan JSON that cannot be read.
impl From<memplan::io::json::JsonError> for Error {
    fn from(e: memplan::io::json::JsonError) -> Error {
        Error(FormatError::new_err(shown(e.to_string())))
    }
}

/// A planner name that is not one of `planners()`.
impl From<memplan::planner::UnknownPlanner> for Error {
    fn from(e: memplan::planner::UnknownPlanner) -> Error {
        input(e.to_string())
    }
}

/// A strip metric that is not one of strip's.
impl From<memplan::planner::strip::UnknownMetric> for Error {
    fn from(e: memplan::planner::strip::UnknownMetric) -> Error {
        input(e.to_string())
    }
}

/// A planner that found no plan; its internal errors are bugs.
impl From<memplan::planner::PlanError> for Error {
    fn from(e: memplan::planner::PlanError) -> Error {
        match e {
            memplan::planner::PlanError::Internal(_) => {
                Error(MemplanError::new_err(shown(e.to_string())))
            }
            _ => Error(PlanningError::new_err(shown(e.to_string()))),
        }
    }
}

/// A built-in planner's plan that fails the checker: a bug in that planner.
impl From<memplan_session::run::InvalidPlan> for Error {
    fn from(e: memplan_session::run::InvalidPlan) -> Error {
        internal(e)
    }
}

/// An ONNX file that cannot be read (OSError) or imported (ModelError).
impl From<memplan_onnx::OnnxError> for Error {
    fn from(e: memplan_onnx::OnnxError) -> Error {
        match &e {
            memplan_onnx::OnnxError::Io { path, source } => os_error(source, Path::new(path)),
            memplan_onnx::OnnxError::File(file) => match file.as_ref() {
                memplan::io::file::FileError::Io { path, source } => os_error(source, path),
                // Too large, not text, or refused in its first bytes: the content's fault.
                _ => Error(ModelError::new_err(shown(e.to_string()))),
            },
            _ => Error(ModelError::new_err(shown(
                python_words(&e).unwrap_or_else(|| e.to_string()),
            ))),
        }
    }
}

/// The message of an ONNX import error that names the CLI's `--input-shape`/`--dim`, in
/// the words of the Python arguments (`input_shapes=`, `dims=`); `None` for the others.
fn python_words(e: &memplan_onnx::OnnxError) -> Option<String> {
    use memplan_onnx::OnnxError;
    match e {
        OnnxError::SymbolicDim {
            source_name,
            input,
            dim,
            param,
            ..
        } => {
            let name = param.trim_start_matches(" ('").trim_end_matches("')");
            let or_dims = if param.is_empty() {
                String::new()
            } else {
                format!(" or dims={{{name:?}: n}}")
            };
            Some(format!(
                "{source_name}: graph input '{input}', dim {dim}{param}: the size is not a number; give it with input_shapes={{{input:?}: [d0, d1, ...]}}{or_dims}"
            ))
        }
        OnnxError::InputWithoutShape { source_name, input } => Some(format!(
            "{source_name}: graph input '{input}' has no tensor shape in the file; give it with input_shapes={{{input:?}: [d0, d1, ...]}}"
        )),
        OnnxError::UnusedOverride {
            source_name,
            option,
            name,
            what,
        } => {
            let argument = match *option {
                "input-shape" => "input_shapes",
                "dim" => "dims",
                other => other,
            };
            Some(format!("{source_name}: {argument} names '{name}', which {what}"))
        }
        _ => None,
    }
}

/// A TFLite model that cannot be imported. Its `Io` variant keeps only the message, so
/// the binding reads the file itself ([`crate::load_tflite`]) and this is a fallback.
impl From<memplan_tflite::TfliteError> for Error {
    fn from(e: memplan_tflite::TfliteError) -> Error {
        match e {
            memplan_tflite::TfliteError::Io { .. } => {
                Error(PyOSError::new_err(shown(e.to_string())))
            }
            _ => Error(ModelError::new_err(shown(e.to_string()))),
        }
    }
}

/// A graph whose analysis fails (its order, or bytes past 2^64): the content of the model
/// at `path`; an invalid problem built from a valid graph is a bug.
pub fn analysis(path: &Path, e: memplan_graph::AnalysisError) -> Error {
    match e {
        memplan_graph::AnalysisError::Problem(_) => {
            Error(MemplanError::new_err(shown(e.to_string())))
        }
        _ => Error(ModelError::new_err(shown(format!(
            "'{}': {e}",
            path.display()
        )))),
    }
}

/// An error of the library front door (`memplan_session`), a chain of contexts: an I/O
/// error reading a file anywhere in it is the built-in `OSError`; a planner that found no
/// plan `PlanningError`; a built-in planner's invalid plan a bug; a model that cannot be
/// imported `ModelError`; anything else (a spec, an option, a problem) `InputError`, with
/// the whole chain as its message.
pub fn session(e: anyhow::Error) -> Error {
    for cause in e.chain() {
        if let Some(memplan::io::file::FileError::Io { path, source }) = cause.downcast_ref() {
            return os_error(source, path);
        }
        match cause.downcast_ref::<memplan_onnx::OnnxError>() {
            Some(memplan_onnx::OnnxError::Io { path, source }) => {
                return os_error(source, Path::new(path))
            }
            Some(memplan_onnx::OnnxError::File(file)) => {
                if let memplan::io::file::FileError::Io { path, source } = file.as_ref() {
                    return os_error(source, path);
                }
            }
            _ => {}
        }
    }
    let mut message = format!("{e:#}");
    for cause in e.chain() {
        if let Some(words) = cause
            .downcast_ref::<memplan_onnx::OnnxError>()
            .and_then(python_words)
        {
            let cli = cause.to_string();
            message = message.replace(&cli, &words);
        }
    }
    for cause in e.chain() {
        if cause
            .downcast_ref::<memplan_session::run::InvalidPlan>()
            .is_some()
        {
            return internal(message);
        }
        if cause
            .downcast_ref::<memplan::planner::PlanError>()
            .is_some()
        {
            return Error(PlanningError::new_err(shown(message)));
        }
        if cause.downcast_ref::<memplan_onnx::OnnxError>().is_some()
            || cause
                .downcast_ref::<memplan_tflite::TfliteError>()
                .is_some()
        {
            return Error(ModelError::new_err(shown(message)));
        }
    }
    input(message)
}
