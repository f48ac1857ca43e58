//! `Context`: one conversation under a budget, driven from Python.

use std::str::FromStr;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::convert::{to_py, to_value};
use crate::core::{Core, Episodes, Outcome};
use crate::options::Given;
use crate::report::PyReport;
use crate::shapes::{self, Shape};
use crate::view::ViewCache;

/// A conversation kept under a token budget. Push every message as it
/// happens; before each model call, send `view()`.
#[pyclass(module = "cwl", name = "Context")]
pub struct PyContext {
    core: Core,
    cache: ViewCache,
    last: Option<cwl::Report>,
}

fn invalid(error: String) -> PyErr {
    PyValueError::new_err(error)
}

fn outcomes<'py>(py: Python<'py>, outcomes: &[Outcome]) -> PyResult<Bound<'py, PyList>> {
    let dicts = outcomes
        .iter()
        .map(|outcome| {
            let dict = PyDict::new(py);
            dict.set_item("call_id", &outcome.call_id)?;
            dict.set_item("content", &outcome.content)?;
            dict.set_item("is_error", outcome.is_error)?;
            Ok(dict)
        })
        .collect::<PyResult<Vec<_>>>()?;
    PyList::new(py, dicts)
}

impl PyContext {
    /// A pass without the GIL (other Python threads go on meanwhile); its
    /// report becomes `last_report`.
    fn pass(&mut self, py: Python<'_>) -> PyResult<&cwl::Report> {
        let core = &mut self.core;
        let report = py.detach(|| core.enforce()).map_err(invalid)?;
        Ok(self.last.insert(report))
    }
}

#[pymethods]
impl PyContext {
    #[new]
    #[pyo3(signature = (budget=None, model=None, preset="default", *, episodes="inferred", shape=None, tools=None, tokenizer="o200k", classes=None, **settings))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        budget: Option<&Bound<'_, PyAny>>,
        model: Option<&str>,
        preset: &str,
        episodes: &str,
        shape: Option<&str>,
        tools: Option<&Bound<'_, PyAny>>,
        tokenizer: &str,
        classes: Option<&Bound<'_, PyDict>>,
        settings: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let options = Given {
            budget,
            model,
            preset,
            episodes,
            shape,
            tools,
            tokenizer,
            classes,
            settings,
        }
        .read()?;
        let mut tools = options.tools;
        // The model is offered `delimiter`: its definition is in every
        // request, so it counts.
        if options.episodes == Episodes::Delimiter
            && !tools.iter().any(|tool| tool.name == cwl::DELIMITER)
        {
            tools.push(cwl::delimiter_spec());
        }
        Ok(PyContext {
            core: Core::new(
                options.config,
                options.counter,
                tools,
                options.episodes,
                options.shape,
            ),
            cache: ViewCache::default(),
            last: None,
        })
    }

    /// Appends one message (a dict in OpenAI Chat, Anthropic Messages or
    /// Responses shape). Returns the tool results to send back for the
    /// `delimiter` calls it holds: dicts with `call_id`, `content` and
    /// `is_error`. Raises ValueError, changing nothing, on a message the
    /// engine cannot take.
    fn push<'py>(
        &mut self,
        py: Python<'py>,
        message: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyList>> {
        let value = to_value(message)?;
        let pushed = self.core.push(&value).map_err(invalid)?;
        outcomes(py, &pushed)
    }

    /// Appends messages in order, as `push` does each; the error names the
    /// first one refused (those before it stay pushed). The messages are
    /// read with the GIL and pushed without it, so a long history goes in
    /// while other Python threads run.
    fn extend<'py>(
        &mut self,
        py: Python<'py>,
        messages: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyList>> {
        let mut values = Vec::new();
        let mut unread = None;
        for (index, message) in messages.try_iter()?.enumerate() {
            let value = message.and_then(|message| {
                to_value(&message).map_err(|error| invalid(format!("messages[{index}]: {error}")))
            });
            match value {
                Ok(value) => values.push(value),
                Err(error) => {
                    unread = Some(error);
                    break;
                }
            }
        }
        let core = &mut self.core;
        let pushed = py
            .detach(|| {
                let mut all = Vec::new();
                for (index, value) in values.iter().enumerate() {
                    let pushed = core
                        .push(value)
                        .map_err(|error| format!("messages[{index}]: {error}"))?;
                    all.extend(pushed);
                }
                Ok::<_, String>(all)
            })
            .map_err(invalid)?;
        match unread {
            Some(error) => Err(error),
            None => outcomes(py, &pushed),
        }
    }

    /// Enforces the budget: evicts, in the engine's fixed order, until the
    /// prompt fits. Returns what the pass did. The pass runs without the
    /// GIL, so other Python threads go on meanwhile.
    fn enforce(&mut self, py: Python<'_>) -> PyResult<PyReport> {
        Ok(PyReport::new(self.pass(py)?.clone()))
    }

    /// The messages to send, in `shape` (default: the shape pushed). With
    /// `enforce` (the default) the budget is enforced first; the report
    /// is then `last_report`. The list is new, the caller's to change; its
    /// dicts are shared between views, so they are read-only (copy one to
    /// change it).
    #[pyo3(signature = (shape=None, enforce=true))]
    fn view<'py>(
        &mut self,
        py: Python<'py>,
        shape: Option<&str>,
        enforce: bool,
    ) -> PyResult<Bound<'py, PyList>> {
        let shape = match shape {
            Some(shape) => Shape::from_str(shape).map_err(invalid)?,
            None => self.core.shape(),
        };
        if enforce {
            self.pass(py)?;
        } else {
            self.core.flush().map_err(invalid)?;
        }
        let changed = self.core.take_changed();
        self.cache.view(py, shape, self.core.context(), changed)
    }

    /// Where each message of the view comes from, in the order of
    /// `view(shape="openai")` (one entry per message of that view): the
    /// position of a pushed message the view holds unchanged (0-based,
    /// counting every message pushed, each result of an Anthropic user
    /// message apart), or None for one eviction changed or wrote (a
    /// residue, the index line). Call it after `view()`.
    fn view_sources(&self) -> Vec<Option<u64>> {
        self.core
            .context()
            .view_sources()
            .map(|(source, _)| match source {
                cwl::Source::Pushed(index) => Some(index),
                _ => None,
            })
            .collect()
    }

    /// The content of an evicted episode (by name, or an id like `#12`
    /// shown in a residue), as the `recall` tool gives it to the model:
    /// its messages' text and tool output, byte for byte.
    fn recall(&self, name: &str) -> PyResult<String> {
        self.core.recall(name).map_err(invalid)
    }

    /// The tool definitions counted with every request, in `shape`.
    #[pyo3(signature = (shape=None))]
    fn tools<'py>(&self, py: Python<'py>, shape: Option<&str>) -> PyResult<Bound<'py, PyList>> {
        let shape = match shape {
            Some(shape) => Shape::from_str(shape).map_err(invalid)?,
            None => self.core.shape(),
        };
        let tools = self
            .core
            .context()
            .tools()
            .iter()
            .map(|tool| to_py(py, &shapes::render_tool(shape, tool)))
            .collect::<PyResult<Vec<_>>>()?;
        PyList::new(py, tools)
    }

    /// The report of the last pass, if any.
    #[getter]
    fn last_report(&self) -> Option<PyReport> {
        self.last.clone().map(PyReport::new)
    }

    /// The prompt's token count now: view plus tool definitions.
    #[getter]
    fn tokens(&self) -> usize {
        self.core.context().tokens()
    }

    /// The budget.
    #[getter]
    fn budget(&self) -> usize {
        self.core.context().budget()
    }

    /// The shape views are written in by default.
    #[getter]
    fn shape(&self) -> &'static str {
        self.core.shape().name()
    }

    /// Counts: tokens, budget, messages pushed and in the view, episodes
    /// and evicted episodes, passes that changed the view, calls waiting.
    #[getter]
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let context = self.core.context();
        let episodes = context.graph().episodes();
        let stats = PyDict::new(py);
        stats.set_item("tokens", context.tokens())?;
        stats.set_item("budget", context.budget())?;
        stats.set_item("pushed", self.core.pushed())?;
        stats.set_item("view_messages", context.view().count())?;
        stats.set_item("episodes", episodes.len())?;
        stats.set_item(
            "evicted_episodes",
            episodes.iter().filter(|e| e.level().is_some()).count(),
        )?;
        stats.set_item("passes", self.core.passes())?;
        stats.set_item("pending_calls", context.pending_calls().len())?;
        Ok(stats)
    }

    fn __repr__(&self) -> String {
        let context = self.core.context();
        format!(
            "Context(tokens={}, budget={}, pushed={}, episodes={})",
            context.tokens(),
            context.budget(),
            self.core.pushed(),
            context.graph().episodes().len()
        )
    }
}
