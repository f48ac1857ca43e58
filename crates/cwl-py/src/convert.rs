//! Python objects ↔ JSON values: what a message dict is to the engine.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use serde_json::{Map, Number, Value};

use crate::frozen;

/// Deepest nesting read: a self-referencing dict is refused, not followed
/// until the stack runs out.
const MAX_DEPTH: usize = 100;

/// Reads a JSON-like Python object: dict (string keys), list, tuple, str,
/// int, float, bool or None.
pub fn to_value(object: &Bound<'_, PyAny>) -> PyResult<Value> {
    read(object, 0)
}

fn read(object: &Bound<'_, PyAny>, depth: usize) -> PyResult<Value> {
    if depth > MAX_DEPTH {
        return Err(PyValueError::new_err(format!(
            "message nested deeper than {MAX_DEPTH} levels (a dict or list that contains itself?)"
        )));
    }
    if object.is_none() {
        return Ok(Value::Null);
    }
    if let Ok(flag) = object.cast::<PyBool>() {
        return Ok(Value::Bool(flag.is_true()));
    }
    if let Ok(text) = object.cast::<PyString>() {
        return Ok(Value::String(text.to_cow()?.into_owned()));
    }
    if let Ok(dict) = object.cast::<PyDict>() {
        let mut fields = Map::new();
        for (key, item) in dict.iter() {
            let key = key.cast::<PyString>().map_err(|_| {
                PyValueError::new_err(format!(
                    "dict keys must be strings, not {}",
                    type_name(&key)
                ))
            })?;
            fields.insert(key.to_cow()?.into_owned(), read(&item, depth + 1)?);
        }
        return Ok(Value::Object(fields));
    }
    if let Ok(list) = object.cast::<PyList>() {
        return list.iter().map(|item| read(&item, depth + 1)).collect();
    }
    if let Ok(tuple) = object.cast::<PyTuple>() {
        return tuple.iter().map(|item| read(&item, depth + 1)).collect();
    }
    if object.cast::<PyInt>().is_ok() {
        if let Ok(number) = object.extract::<i64>() {
            return Ok(Value::from(number));
        }
        return object
            .extract::<u64>()
            .map(Value::from)
            .map_err(|_| PyValueError::new_err("integer too large for JSON"));
    }
    if let Ok(number) = object.cast::<PyFloat>() {
        return Number::from_f64(number.value())
            .map(Value::Number)
            .ok_or_else(|| PyValueError::new_err("NaN and infinity are not JSON"));
    }
    Err(PyValueError::new_err(format!(
        "cannot read an object of type {} as JSON (expected dict, list, str, int, float, bool or None)",
        type_name(object)
    )))
}

fn type_name(object: &Bound<'_, PyAny>) -> String {
    object
        .get_type()
        .name()
        .map(|name| name.to_string())
        .unwrap_or_else(|_| "?".to_string())
}

/// The containers [`write`] makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Containers {
    /// `dict` and `list`: objects the caller owns alone.
    Plain,
    /// Read-only ones ([`crate::frozen`]): objects shared between views.
    Frozen,
}

/// Writes a JSON value as Python objects (dicts, lists, str, int, float,
/// bool, None).
pub fn to_py<'py>(py: Python<'py>, value: &Value) -> PyResult<Bound<'py, PyAny>> {
    write(py, value, Containers::Plain)
}

/// Writes a JSON value as Python objects in `containers`.
pub fn write<'py>(
    py: Python<'py>,
    value: &Value,
    containers: Containers,
) -> PyResult<Bound<'py, PyAny>> {
    Ok(match value {
        Value::Null => py.None().into_bound(py),
        Value::Bool(flag) => PyBool::new(py, *flag).to_owned().into_any(),
        Value::Number(number) => match (number.as_i64(), number.as_u64()) {
            (Some(int), _) => int.into_pyobject(py)?.into_any(),
            (None, Some(int)) => int.into_pyobject(py)?.into_any(),
            _ => number
                .as_f64()
                .unwrap_or(f64::NAN)
                .into_pyobject(py)?
                .into_any(),
        },
        Value::String(text) => PyString::new(py, text).into_any(),
        Value::Array(items) => {
            let items: Vec<Bound<'py, PyAny>> = items
                .iter()
                .map(|item| write(py, item, containers))
                .collect::<PyResult<_>>()?;
            match containers {
                Containers::Plain => PyList::new(py, items)?.into_any(),
                Containers::Frozen => {
                    let list = frozen::list(py)?;
                    for item in items {
                        list.append(item)?;
                    }
                    list.into_any()
                }
            }
        }
        Value::Object(fields) => {
            let dict = match containers {
                Containers::Plain => PyDict::new(py),
                Containers::Frozen => frozen::dict(py)?,
            };
            for (key, item) in fields {
                dict.set_item(key, write(py, item, containers)?)?;
            }
            dict.into_any()
        }
    })
}
