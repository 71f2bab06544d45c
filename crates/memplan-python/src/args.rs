//! Integer arguments read at the boundary, naming the argument in every error.
//!
//! pyo3 names an argument only in the `TypeError`s of its own conversions: a negative
//! `size` or an `offset` of 2**64 would raise an `OverflowError` that does not say which
//! argument it was. The readers here are used through `#[pyo3(from_py_with = …)]` (one
//! named wrapper per argument, [`named!`]): a value of the wrong type (float, str, None
//! where None is not allowed) is a `TypeError` (pyo3 prefixes `argument 'x': `), an int
//! out of range an `OverflowError` that starts with `argument 'x': ` and gives the range.

use std::collections::BTreeMap;

use pyo3::exceptions::{PyOverflowError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyString};

fn type_name(value: &Bound<'_, PyAny>) -> String {
    value
        .get_type()
        .name()
        .map_or_else(|_| "?".to_string(), |n| n.to_string())
}

fn shown(value: &Bound<'_, PyAny>) -> String {
    let text = value
        .repr()
        .map_or_else(|_| "?".to_string(), |r| r.to_string());
    if text.chars().count() > 40 {
        text.chars().take(40).collect::<String>() + "…"
    } else {
        text
    }
}

/// `what` followed by a space, when it is not empty.
fn at(what: &str) -> String {
    if what.is_empty() {
        String::new()
    } else {
        format!("{what} ")
    }
}

/// `what` then `more`: the path of an element (`item 3`, `['x'] item 3`).
fn join(what: &str, more: String) -> String {
    at(what) + &more
}

/// An unsigned int from 0 to `max`; `what` is where it is in the argument (`item 3`),
/// empty for the argument itself.
fn uint_in(value: &Bound<'_, PyAny>, what: &str, max: u64) -> PyResult<u64> {
    let range = || {
        PyOverflowError::new_err(format!(
            "{}must be an int from 0 to {max}, not {}",
            at(what),
            shown(value)
        ))
    };
    match value.extract::<u64>() {
        Ok(v) if v <= max => Ok(v),
        Ok(_) => Err(range()),
        Err(e) if e.is_instance_of::<PyTypeError>(value.py()) => Err(PyTypeError::new_err(
            format!("{}must be an int, not {}", at(what), type_name(value)),
        )),
        Err(_) => Err(range()),
    }
}

/// A list (any iterable but str/bytes) of elements read by `item`.
fn list<T>(
    value: &Bound<'_, PyAny>,
    what: &str,
    mut item: impl FnMut(&Bound<'_, PyAny>, &str) -> PyResult<T>,
) -> PyResult<Vec<T>> {
    let not_a_list = || {
        PyTypeError::new_err(format!(
            "{}must be a list of ints, not {}",
            at(what),
            type_name(value)
        ))
    };
    if value.is_instance_of::<PyString>() || value.is_instance_of::<PyBytes>() {
        return Err(not_a_list());
    }
    let iter = value.try_iter().map_err(|_| not_a_list())?;
    let mut out = Vec::with_capacity(value.len().unwrap_or(0));
    for (i, element) in iter.enumerate() {
        out.push(item(&element?, &join(what, format!("item {i}")))?);
    }
    Ok(out)
}

/// A dict of str keys, each value read by `item`.
fn mapping<T>(
    value: &Bound<'_, PyAny>,
    mut item: impl FnMut(&Bound<'_, PyAny>, &str) -> PyResult<T>,
) -> PyResult<BTreeMap<String, T>> {
    let dict = value.cast::<PyDict>().map_err(|_| {
        PyTypeError::new_err(format!(
            "must be a dict with str keys, not {}",
            type_name(value)
        ))
    })?;
    let mut out = BTreeMap::new();
    for (key, element) in dict.iter() {
        let key: String = key.extract().map_err(|_| {
            PyTypeError::new_err(format!("keys must be str, not {}", type_name(&key)))
        })?;
        let read = item(&element, &format!("[{key:?}]"))?;
        out.insert(key, read);
    }
    Ok(out)
}

/// The argument named in an error: a TypeError gets pyo3's `argument 'x': ` prefix from
/// the caller; the others (OverflowError) carry it themselves.
fn named_error(name: &str, e: PyErr, py: Python<'_>) -> PyErr {
    if e.is_instance_of::<PyTypeError>(py) {
        e
    } else {
        PyErr::from_type(
            e.get_type(py),
            format!("argument '{name}': {}", e.value(py)),
        )
    }
}

/// An argument read by `read`, `None` passed through when `optional`; errors name it.
fn argument<T>(
    value: &Bound<'_, PyAny>,
    name: &str,
    read: impl FnOnce(&Bound<'_, PyAny>) -> PyResult<T>,
) -> PyResult<T> {
    read(value).map_err(|e| named_error(name, e, value.py()))
}

fn opt<T>(
    value: &Bound<'_, PyAny>,
    name: &str,
    read: impl FnOnce(&Bound<'_, PyAny>) -> PyResult<T>,
) -> PyResult<Option<T>> {
    if value.is_none() {
        Ok(None)
    } else {
        argument(value, name, read).map(Some)
    }
}

/// An unsigned int argument from 0 to `max`.
pub fn uint(value: &Bound<'_, PyAny>, name: &str, max: u64) -> PyResult<u64> {
    argument(value, name, |v| uint_in(v, "", max))
}

/// `None`, or an unsigned int argument from 0 to `max`.
pub fn opt_uint(value: &Bound<'_, PyAny>, name: &str, max: u64) -> PyResult<Option<u64>> {
    opt(value, name, |v| uint_in(v, "", max))
}

/// A list of unsigned ints (`u64`).
pub fn uints(value: &Bound<'_, PyAny>, name: &str) -> PyResult<Vec<u64>> {
    argument(value, name, |v| {
        list(v, "", |e, what| uint_in(e, what, u64::MAX))
    })
}

/// `None`, or a list of unsigned ints.
pub fn opt_uints(value: &Bound<'_, PyAny>, name: &str) -> PyResult<Option<Vec<u64>>> {
    opt(value, name, |v| {
        list(v, "", |e, what| uint_in(e, what, u64::MAX))
    })
}

/// `None`, or a list of unsigned ints or `None`s.
pub fn opt_opt_uints(value: &Bound<'_, PyAny>, name: &str) -> PyResult<Option<Vec<Option<u64>>>> {
    opt(value, name, |v| {
        list(v, "", |e, what| {
            if e.is_none() {
                Ok(None)
            } else {
                uint_in(e, what, u64::MAX).map(Some)
            }
        })
    })
}

/// `None`, or a dict `{str: int}`.
pub fn opt_dims(value: &Bound<'_, PyAny>, name: &str) -> PyResult<Option<BTreeMap<String, u64>>> {
    opt(value, name, |v| {
        mapping(v, |e, what| uint_in(e, what, u64::MAX))
    })
}

/// `None`, or a dict `{str: [int, …]}`.
pub fn opt_shapes(
    value: &Bound<'_, PyAny>,
    name: &str,
) -> PyResult<Option<BTreeMap<String, Vec<u64>>>> {
    opt(value, name, |v| {
        mapping(v, |e, what| list(e, what, |d, at| uint_in(d, at, u64::MAX)))
    })
}

/// Named readers for `#[pyo3(from_py_with = …)]`: `fn reader(&Bound<PyAny>) ->
/// PyResult<T>` for the argument `"name"`.
macro_rules! named {
    ($($reader:ident: $t:ty = $how:ident($name:literal $(, $max:expr)?);)*) => {
        $(
            pub fn $reader(value: &Bound<'_, PyAny>) -> PyResult<$t> {
                named!(@call $how, value, $name $(, $max)?)
            }
        )*
    };
    (@call uint, $value:ident, $name:literal, $max:expr) => {
        uint($value, $name, $max as u64).map(|v| v as _)
    };
    (@call opt_uint, $value:ident, $name:literal, $max:expr) => {
        opt_uint($value, $name, $max as u64).map(|v| v.map(|v| v as _))
    };
    (@call $how:ident, $value:ident, $name:literal) => {
        $how($value, $name)
    };
}

named! {
    size: u64 = uint("size", u64::MAX);
    start: u64 = uint("start", u64::MAX);
    end: u64 = uint("end", u64::MAX);
    alignment: u64 = uint("alignment", u64::MAX);
    offset: Option<u64> = opt_uint("offset", u64::MAX);
    seed: u64 = uint("seed", u64::MAX);
    threads: usize = uint("threads", usize::MAX);
    max_iters: Option<u32> = opt_uint("max_iters", u32::MAX);
    max_reads: Option<u64> = opt_uint("max_reads", u64::MAX);
    sizes: Vec<u64> = uints("sizes");
    starts: Vec<u64> = uints("starts");
    ends: Vec<u64> = uints("ends");
    alignments: Option<Vec<u64>> = opt_uints("alignments");
    offsets: Option<Vec<Option<u64>>> = opt_opt_uints("offsets");
    input_shapes: Option<BTreeMap<String, Vec<u64>>> = opt_shapes("input_shapes");
    dims: Option<BTreeMap<String, u64>> = opt_dims("dims");
}

/// `check`'s `plan` given as offsets: a list of unsigned ints; every error names `plan`
/// (it is read in the function's body, where pyo3 adds no prefix).
pub fn plan_offsets(value: &Bound<'_, PyAny>) -> PyResult<Vec<u64>> {
    list(value, "", |e, what| uint_in(e, what, u64::MAX)).map_err(|e| {
        let py = value.py();
        PyErr::from_type(
            e.get_type(py),
            format!(
                "argument 'plan': a PlanResult or a list of offsets: {}",
                e.value(py)
            ),
        )
    })
}
