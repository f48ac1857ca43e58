//! The eviction settings a session runs with: fixed in its file, so a
//! resume replays the history with the same ones.

use cwl::{Config, Record, Share, Strategy};

use crate::strategy::{StrategyName, UnknownStrategy};

/// The eviction settings of a session (low-water mark, caps and shares,
/// act outputs and plans), and its strategy with that strategy's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// Where a pass that starts over τ stops, as a share of τ.
    pub low_water: Share,
    /// The share of τ residues may take before they fold; `None`: off.
    pub residue_share: Option<Share>,
    /// The recent working set as a share of τ; `None`: off.
    pub keep_recent: Option<Share>,
    /// The share of an episode's lines a later one must repeat for it to
    /// go first; `None`: off.
    pub superseded: Option<Share>,
    /// The share of a tool output's lines later outputs must repeat for it
    /// to be stubbed first; `None`: off.
    pub restated: Option<Share>,
    /// The share of τ unannotated answers between episodes may take before
    /// the oldest go first; `None`: off.
    pub answer_share: Option<Share>,
    /// Whether old acts' outputs are stubbed before any removal.
    pub stub_act_outputs: bool,
    /// Whether a plan tool's earlier calls go first once it is called again.
    pub superseded_plans: bool,
    /// The strategy managing the context.
    pub strategy: StrategyName,
    /// The strategy's own settings as given (null: its defaults; see
    /// [`crate::strategy::options`]).
    pub strategy_options: serde_json::Value,
}

impl Default for Settings {
    fn default() -> Self {
        Settings::of(&Config::default())
    }
}

impl Settings {
    /// The engine configuration with these settings and `budget`.
    pub fn config(&self, budget: usize) -> Config {
        Config::with_budget(budget)
            .low_water(self.low_water)
            .residue_share(self.residue_share)
            .keep_recent(self.keep_recent)
            .superseded(self.superseded)
            .restated(self.restated)
            .answer_share(self.answer_share)
            .stub_act_outputs(self.stub_act_outputs)
            .superseded_plans(self.superseded_plans)
    }

    /// The engine configuration with these settings and `budget` for a
    /// session with `model`: the reasoning its provider keeps
    /// ([`cwl::ReasoningScope::of_model`]) follows the model the session
    /// records, so a resume replays the history as it ran.
    pub fn session_config(&self, budget: usize, model: &str) -> Config {
        self.config(budget)
            .reasoning(cwl::ReasoningScope::of_model(model))
    }

    /// The settings of a CWL engine's `config`.
    pub fn of(config: &Config) -> Settings {
        Settings {
            low_water: config.low_water,
            residue_share: config.residue_share,
            keep_recent: config.keep_recent,
            superseded: config.superseded,
            restated: config.restated,
            answer_share: config.answer_share,
            stub_act_outputs: config.stub_act_outputs,
            superseded_plans: config.superseded_plans,
            strategy: StrategyName::Cwl,
            strategy_options: serde_json::Value::Null,
        }
    }

    /// The settings `strategy` runs with; `None` for a strategy this build
    /// does not name.
    pub fn of_strategy(strategy: &dyn Strategy) -> Option<Settings> {
        Some(Settings {
            strategy: strategy.name().parse().ok()?,
            ..Settings::of(strategy.config())
        })
    }

    /// The record that fixes them in the session file.
    pub fn record(&self) -> Record {
        Record::Settings {
            low_water: self.low_water,
            residue_share: self.residue_share,
            keep_recent: self.keep_recent,
            superseded: self.superseded,
            restated: self.restated,
            answer_share: self.answer_share,
            stub_act_outputs: self.stub_act_outputs,
            superseded_plans: self.superseded_plans,
            strategy: self.strategy.as_str().to_string(),
            strategy_options: self.strategy_options.clone(),
        }
    }

    /// The settings in force after `records`: the last settings record's
    /// (`None` also when it names a strategy this build does not offer;
    /// [`Settings::try_last`] says so).
    pub fn last<'a>(records: impl IntoIterator<Item = &'a Record>) -> Option<Settings> {
        Settings::try_last(records).ok().flatten()
    }

    /// The settings in force after `records`, or the strategy name of the
    /// last settings record when this build does not offer it.
    pub fn try_last<'a>(
        records: impl IntoIterator<Item = &'a Record>,
    ) -> Result<Option<Settings>, UnknownStrategy> {
        let Some(Record::Settings {
            low_water,
            residue_share,
            keep_recent,
            superseded,
            restated,
            answer_share,
            stub_act_outputs,
            superseded_plans,
            strategy,
            strategy_options,
        }) = records
            .into_iter()
            .filter(|record| matches!(record, Record::Settings { .. }))
            .last()
        else {
            return Ok(None);
        };
        Ok(Some(Settings {
            low_water: *low_water,
            residue_share: *residue_share,
            keep_recent: *keep_recent,
            superseded: *superseded,
            restated: *restated,
            answer_share: *answer_share,
            stub_act_outputs: *stub_act_outputs,
            superseded_plans: *superseded_plans,
            strategy: strategy.parse()?,
            strategy_options: strategy_options.clone(),
        }))
    }
}

impl std::fmt::Display for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "low-water {}, residue share {}, keep recent {}, superseded {}, restated {}, answer share {}, act outputs {}, plans {}",
            self.low_water,
            cwl::ResidueCap(self.residue_share),
            cwl::ResidueCap(self.keep_recent),
            cwl::ResidueCap(self.superseded),
            cwl::ResidueCap(self.restated),
            cwl::ResidueCap(self.answer_share),
            cwl::ActOutputs::of(self.stub_act_outputs),
            cwl::PlanCalls::of(self.superseded_plans)
        )?;
        if self.strategy != StrategyName::Cwl {
            write!(f, ", strategy {}", self.strategy)?;
        }
        if !self.strategy_options.is_null() {
            write!(f, " ({})", self.strategy_options)?;
        }
        Ok(())
    }
}
