//! `Report`: what a pass did, as Python sees it.

use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::convert::to_py;

/// What an eviction pass did: tokens before and after, whether the budget
/// is met, and per episode the levels applied.
#[pyclass(module = "cwl", name = "Report", frozen)]
pub struct PyReport {
    report: cwl::Report,
}

impl PyReport {
    /// Wraps the engine's report.
    pub fn new(report: cwl::Report) -> Self {
        PyReport { report }
    }
}

#[pymethods]
impl PyReport {
    /// Counted prompt tokens before the pass.
    #[getter]
    fn tokens_before(&self) -> usize {
        self.report.tokens_before
    }

    /// Counted prompt tokens after the pass.
    #[getter]
    fn tokens_after(&self) -> usize {
        self.report.tokens_after
    }

    /// The budget.
    #[getter]
    fn budget(&self) -> usize {
        self.report.budget
    }

    /// The low-water mark a pass evicts down to.
    #[getter]
    fn floor(&self) -> usize {
        self.report.floor
    }

    /// Whether the prompt now fits the budget.
    #[getter]
    fn budget_met(&self) -> bool {
        self.report.budget_met
    }

    /// Whether the budget is missed only until the next model response.
    #[getter]
    fn deferred(&self) -> bool {
        self.report.deferred
    }

    /// Index in the view of the first message the pass changed, or None.
    #[getter]
    fn first_changed(&self) -> Option<usize> {
        self.report.first_changed
    }

    /// Residues and user turns folded into the index line.
    #[getter]
    fn folded(&self) -> usize {
        self.report.folded
    }

    /// Tokens the pass removed.
    #[getter]
    fn tokens_removed(&self) -> usize {
        self.report.tokens_removed()
    }

    /// Whether the pass changed the view.
    #[getter]
    fn evicted(&self) -> bool {
        self.report.evicted()
    }

    /// Anything the caller should know.
    #[getter]
    fn warnings(&self) -> Vec<String> {
        self.report.warnings.clone()
    }

    /// The episodes touched: name, kind, annotated, levels.
    #[getter]
    fn episodes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let episodes = serde_json::to_value(&self.report.episodes)
            .map_err(|error| pyo3::exceptions::PyValueError::new_err(error.to_string()))?;
        to_py(py, &episodes)
    }

    /// The report as a dict, as `cwl evict` writes it.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let value = serde_json::to_value(&self.report)
            .map_err(|error| pyo3::exceptions::PyValueError::new_err(error.to_string()))?;
        Ok(to_py(py, &value)?.cast_into::<PyDict>()?)
    }

    fn __repr__(&self) -> String {
        format!(
            "Report(tokens_before={}, tokens_after={}, budget={}, budget_met={}, episodes={})",
            self.report.tokens_before,
            self.report.tokens_after,
            self.report.budget,
            if self.report.budget_met {
                "True"
            } else {
                "False"
            },
            self.report.episodes.len()
        )
    }
}
