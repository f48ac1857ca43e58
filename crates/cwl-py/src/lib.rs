//! Python bindings of the CWL engine: the `cwl` Python package's native
//! module, `cwl._cwl`, built by maturin (abi3, Python 3.9 and later).
//!
//! The shape conversions ([`shapes`]), the conversation ([`core`]) and the
//! one-shot pass ([`oneshot`]) are plain Rust, tested by `cargo test`; the
//! rest is the thin pyo3 layer that `pytest` tests
//! (`crates/cwl-py/tests`). Every error the engine reports reaches Python
//! as a `ValueError` carrying its message.

pub mod core;
pub mod oneshot;
pub mod shapes;

mod context;
mod convert;
mod frozen;
mod objects;
mod options;
mod report;
mod view;

use std::str::FromStr;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::context::PyContext;
use crate::convert::{to_py, to_value};
use crate::options::Given;
use crate::report::PyReport;
use crate::shapes::Shape;

fn read_shape(shape: &str) -> PyResult<Shape> {
    Shape::from_str(shape).map_err(PyValueError::new_err)
}

/// The `delimiter` tool definition to offer the model, in `shape`.
#[pyfunction]
#[pyo3(signature = (shape="openai"))]
fn delimiter_tool<'py>(py: Python<'py>, shape: &str) -> PyResult<Bound<'py, PyAny>> {
    to_py(
        py,
        &shapes::render_tool(read_shape(shape)?, &cwl::delimiter_spec()),
    )
}

/// The `recall` tool definition to offer the model, in `shape`.
#[pyfunction]
#[pyo3(signature = (shape="openai"))]
fn recall_tool<'py>(py: Python<'py>, shape: &str) -> PyResult<Bound<'py, PyAny>> {
    to_py(
        py,
        &shapes::render_tool(read_shape(shape)?, &cwl::recall_spec()),
    )
}

/// Tokens in `text` as the engine counts them.
#[pyfunction]
#[pyo3(signature = (text, tokenizer="o200k"))]
fn count_tokens(text: &str, tokenizer: &str) -> PyResult<usize> {
    Ok(options::counter(tokenizer)?.count(text))
}

/// One eviction pass over a whole transcript, like `cwl evict`: returns
/// `{"messages": view, "report": Report}`, the view in the input's shape.
/// `messages` is a list of messages, or a request dict with `messages`
/// (and `tools`, `model`) as `cwl evict` reads it.
#[pyfunction]
#[pyo3(signature = (messages, budget=None, model=None, preset="default", *, episodes="delimiter", shape=None, tools=None, tokenizer="o200k", classes=None, **settings))]
#[allow(clippy::too_many_arguments)]
fn evict<'py>(
    py: Python<'py>,
    messages: &Bound<'py, PyAny>,
    budget: Option<&Bound<'py, PyAny>>,
    model: Option<&str>,
    preset: &str,
    episodes: &str,
    shape: Option<&str>,
    tools: Option<&Bound<'py, PyAny>>,
    tokenizer: &str,
    classes: Option<&Bound<'py, PyDict>>,
    settings: Option<&Bound<'py, PyDict>>,
) -> PyResult<Bound<'py, PyDict>> {
    let (messages, tools, model) = match messages.cast::<PyDict>() {
        Ok(request) => {
            let list = request
                .get_item("messages")?
                .ok_or_else(|| PyValueError::new_err("input has no `messages` list"))?;
            let model = match model {
                Some(model) => Some(model.to_string()),
                None => request
                    .get_item("model")?
                    .map(|m| m.extract())
                    .transpose()?,
            };
            (list, tools.cloned().or(request.get_item("tools")?), model)
        }
        Err(_) => (messages.clone(), tools.cloned(), model.map(str::to_string)),
    };
    let options = Given {
        budget,
        model: model.as_deref(),
        preset,
        episodes,
        shape,
        tools: tools.as_ref(),
        tokenizer,
        classes,
        settings,
    }
    .read()?;
    let values: Vec<serde_json::Value> = messages
        .try_iter()
        .map_err(|_| PyValueError::new_err("messages must be a list of message dicts"))?
        .enumerate()
        .map(|(index, message)| {
            to_value(&message?)
                .map_err(|error| PyValueError::new_err(format!("messages[{index}]: {error}")))
        })
        .collect::<PyResult<_>>()?;
    // The pass is the engine's alone: other Python threads run meanwhile.
    let evicted = py
        .detach(|| {
            oneshot::evict(
                &values,
                options.tools,
                options.config,
                options.counter,
                options.episodes,
                options.shape,
            )
        })
        .map_err(PyValueError::new_err)?;
    let refs: Vec<&cwl::Message> = evicted.messages.iter().collect();
    let view = shapes::render(evicted.shape, &refs)
        .iter()
        .map(|value| to_py(py, value))
        .collect::<PyResult<Vec<_>>>()?;
    let out = PyDict::new(py);
    out.set_item("messages", PyList::new(py, view)?)?;
    out.set_item("report", PyReport::new(evicted.report))?;
    Ok(out)
}

/// The native module.
#[pymodule]
fn _cwl(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add("__version__", env!("CARGO_PKG_VERSION"))?;
    frozen::add(module)?;
    module.add_class::<PyContext>()?;
    module.add_class::<PyReport>()?;
    module.add_function(wrap_pyfunction!(evict, module)?)?;
    module.add_function(wrap_pyfunction!(delimiter_tool, module)?)?;
    module.add_function(wrap_pyfunction!(recall_tool, module)?)?;
    module.add_function(wrap_pyfunction!(count_tokens, module)?)?;
    Ok(())
}
