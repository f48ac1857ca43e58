//! The read-only `dict` and `list` a view is made of (`frozen.py`,
//! compiled once): the objects of a view are shared between views, so a
//! caller changing one in place would change every later view; they
//! refuse change instead, and their copies are plain.

use std::ffi::CString;

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyList, PyType};

/// The two classes, compiled from `frozen.py` on first use.
struct Classes {
    dict: Py<PyType>,
    list: Py<PyType>,
}

static CLASSES: PyOnceLock<Classes> = PyOnceLock::new();

fn classes(py: Python<'_>) -> PyResult<&'static Classes> {
    CLASSES.get_or_try_init(py, || {
        let source = CString::new(include_str!("frozen.py")).expect("frozen.py holds no NUL");
        let module = PyModule::from_code(py, &source, c"cwl/_frozen.py", c"cwl._frozen")?;
        let class = |name: &str| -> PyResult<Py<PyType>> {
            Ok(module.getattr(name)?.cast_into::<PyType>()?.unbind())
        };
        Ok(Classes {
            dict: class("FrozenDict")?,
            list: class("FrozenList")?,
        })
    })
}

/// An empty read-only dict, to fill with `set_item` (the C API, which its
/// refusing Python methods do not intercept).
pub fn dict(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    Ok(classes(py)?.dict.bind(py).call0()?.cast_into::<PyDict>()?)
}

/// An empty read-only list, to fill with `append` (the C API).
pub fn list(py: Python<'_>) -> PyResult<Bound<'_, PyList>> {
    Ok(classes(py)?.list.bind(py).call0()?.cast_into::<PyList>()?)
}

/// Adds `FrozenDict` and `FrozenList` to the native module.
pub fn add(module: &Bound<'_, PyModule>) -> PyResult<()> {
    let classes = classes(module.py())?;
    module.add("FrozenDict", classes.dict.bind(module.py()))?;
    module.add("FrozenList", classes.list.bind(module.py()))?;
    Ok(())
}
