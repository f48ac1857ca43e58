//! The keyword arguments `Context(...)` and `evict(...)` share, read into
//! the engine's configuration the way `cwl evict` reads its flags.

use std::str::FromStr;
use std::sync::Arc;

use cwl::{
    ActOutputs, Budget, Config, EngineSettings, Estimate, O200k, PlanCalls, Preset, ReasoningScope,
    ResidueCap, Share, TokenCounter, ToolClass, ToolSpec,
};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyString};

use crate::convert::to_value;
use crate::core::Episodes;
use crate::shapes::{self, Shape};

/// The settings `**settings` may name.
pub const SETTINGS: &[&str] = &[
    "low_water",
    "residue_share",
    "keep_recent",
    "superseded",
    "restated",
    "answer_share",
    "act_outputs",
    "plans",
];

/// Everything a conversation or a pass is built from.
pub struct Options {
    /// Budget, preset, settings, tool classes and reasoning scope.
    pub config: Config,
    /// How tokens are counted.
    pub counter: Arc<dyn TokenCounter>,
    /// The tools offered (they count toward the prompt).
    pub tools: Vec<ToolSpec>,
    /// Where episodes come from.
    pub episodes: Episodes,
    /// The caller's shape, if given.
    pub shape: Option<Shape>,
}

/// The arguments as given, before reading.
pub struct Given<'a, 'py> {
    /// `budget`: tokens as an int or text (`80000`, `"80k"`); `None`:
    /// [`cwl::DEFAULT_BUDGET`].
    pub budget: Option<&'a Bound<'py, PyAny>>,
    /// `model`: sets the reasoning scope, as `cwl evict --model`.
    pub model: Option<&'a str>,
    /// `preset`: `default` or `paper`.
    pub preset: &'a str,
    /// `episodes`: `delimiter` or `inferred`.
    pub episodes: &'a str,
    /// `shape`: `openai`, `anthropic` or `responses`.
    pub shape: Option<&'a str>,
    /// `tools`: definitions in any shape.
    pub tools: Option<&'a Bound<'py, PyAny>>,
    /// `tokenizer`: `o200k` or `estimate`.
    pub tokenizer: &'a str,
    /// `classes`: tool name → `bulk` or `intermediate`.
    pub classes: Option<&'a Bound<'py, PyDict>>,
    /// The other keyword arguments: [`SETTINGS`].
    pub settings: Option<&'a Bound<'py, PyDict>>,
}

fn invalid(what: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(what.to_string())
}

impl Given<'_, '_> {
    /// Reads every argument; the error names the one at fault.
    pub fn read(&self) -> PyResult<Options> {
        let budget = match self.budget.filter(|budget| !budget.is_none()) {
            Some(budget) => read_budget(budget)?,
            None => cwl::DEFAULT_BUDGET,
        };
        let preset = Preset::from_str(self.preset).map_err(invalid)?;
        let mut settings = read_settings(self.settings)?;
        settings.preset = Some(preset);
        let mut config = settings.config(budget);
        if let Some(model) = self.model {
            config = config.reasoning(ReasoningScope::of_model(model));
        }
        for (name, class) in read_classes(self.classes)? {
            config.classes.set(&name, class);
        }
        let episodes = Episodes::from_str(self.episodes).map_err(invalid)?;
        let shape = self
            .shape
            .map(Shape::from_str)
            .transpose()
            .map_err(invalid)?;
        Ok(Options {
            config,
            counter: counter(self.tokenizer)?,
            tools: read_tools(self.tools)?,
            episodes,
            shape,
        })
    }
}

/// Tokens as an int or as text like `"80k"`; at least one.
fn read_budget(budget: &Bound<'_, PyAny>) -> PyResult<usize> {
    if budget.cast::<PyBool>().is_ok() {
        return Err(invalid("budget must be a number of tokens, not a bool"));
    }
    let text = if budget.cast::<PyString>().is_ok() {
        budget.extract::<String>()?
    } else {
        let tokens: i64 = budget.extract().map_err(|_| {
            invalid("budget must be a number of tokens (an int, or text like \"80k\")")
        })?;
        tokens.to_string()
    };
    match Budget::from_str(&text) {
        Ok(Budget::Tokens(tokens)) => Ok(tokens),
        Ok(Budget::Percent(_)) => Err(invalid(format!(
            "budget `{text}`: a share needs the model's window; give tokens"
        ))),
        Err(error) => Err(invalid(format!(
            "{error} (the budget is a number of tokens, at least 1)"
        ))),
    }
}

/// `low_water=0.8`, `residue_share="off"`, `plans="keep"`...: each is
/// read as the `cwl evict` flag of the same name reads its text.
fn read_settings(given: Option<&Bound<'_, PyDict>>) -> PyResult<EngineSettings> {
    let mut settings = EngineSettings::default();
    let Some(given) = given else {
        return Ok(settings);
    };
    for (key, value) in given.iter() {
        let key: String = key.extract()?;
        let text = if value.is_none() || value.cast::<PyBool>().is_ok_and(|b| !b.is_true()) {
            "off".to_string()
        } else {
            value.str()?.to_cow()?.into_owned()
        };
        let bad = |error: String| invalid(format!("{key}={text}: {error}"));
        let cap = || ResidueCap::from_str(&text).map_err(|e| bad(format!("{e}, or `off`")));
        match key.as_str() {
            "low_water" => {
                settings.low_water = Some(Share::from_str(&text).map_err(|e| bad(e.to_string()))?)
            }
            "residue_share" => settings.residue_share = Some(cap()?),
            "keep_recent" => settings.keep_recent = Some(cap()?),
            "superseded" => settings.superseded = Some(cap()?),
            "restated" => settings.restated = Some(cap()?),
            "answer_share" => settings.answer_share = Some(cap()?),
            "act_outputs" => {
                settings.act_outputs =
                    Some(ActOutputs::from_str(&text).map_err(|e| bad(e.to_string()))?);
            }
            "plans" => {
                settings.plans = Some(PlanCalls::from_str(&text).map_err(|e| bad(e.to_string()))?)
            }
            _ => {
                return Err(invalid(format!(
                    "unknown setting `{key}` (expected one of: {})",
                    SETTINGS.join(", ")
                )));
            }
        }
    }
    Ok(settings)
}

fn read_classes(given: Option<&Bound<'_, PyDict>>) -> PyResult<Vec<(String, ToolClass)>> {
    let Some(given) = given else {
        return Ok(Vec::new());
    };
    given
        .iter()
        .map(|(name, class)| {
            let name: String = name.extract()?;
            let class: String = class.extract()?;
            match class.as_str() {
                "bulk" => Ok((name, ToolClass::Bulk)),
                "intermediate" => Ok((name, ToolClass::Intermediate)),
                other => Err(invalid(format!(
                    "classes[{name:?}]: unknown class `{other}` (expected bulk or intermediate)"
                ))),
            }
        })
        .collect()
}

/// Tool definitions in any shape.
pub fn read_tools(given: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<ToolSpec>> {
    let Some(given) = given.filter(|tools| !tools.is_none()) else {
        return Ok(Vec::new());
    };
    let mut tools = Vec::new();
    for (index, tool) in given.try_iter()?.enumerate() {
        let value = to_value(&tool?)?;
        tools
            .push(shapes::parse_tool(&value).map_err(|e| invalid(format!("tools[{index}]: {e}")))?);
    }
    Ok(tools)
}

/// The token counter named `tokenizer`.
pub fn counter(tokenizer: &str) -> PyResult<Arc<dyn TokenCounter>> {
    match tokenizer {
        "o200k" => Ok(Arc::new(O200k::new())),
        "estimate" => Ok(Arc::new(Estimate)),
        other => Err(invalid(format!(
            "unknown tokenizer `{other}` (expected o200k or estimate)"
        ))),
    }
}
