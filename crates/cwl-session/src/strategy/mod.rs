//! Which strategy manages a session's context (`--strategy`, the config
//! key `strategy`, the session's settings record): built new or restored
//! from a checkpoint behind the engine's [`cwl::Strategy`] seam, with its
//! own settings ([`options`]).

pub mod options;

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use cwl::{Checkpoint, Config, Context, PaperOrder, Strategy, TokenCounter, ToolSpec};
use cwl_cwm::Cwm;
use cwl_selfgc::SelfGc;
use serde::Deserialize;

pub use options::{OptionError, Resolved, parse_pairs};

/// A strategy this build offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum StrategyName {
    /// Context Window Lifecycle: episodes, evicted in the paper's order.
    #[default]
    Cwl,
    /// The context-window manager: pressure zones, lowest-scored content
    /// evicted first ([`cwl_cwm::Cwm`]).
    Cwm,
    /// Self-GC: a side-channel planner folds, masks and prunes indexed
    /// objects, rehearsed and committed at turn boundaries
    /// ([`cwl_selfgc::SelfGc`]).
    SelfGc,
}

/// A `--strategy` value (or recorded name) this build does not offer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown strategy `{0}` (choices: {choices})", choices = StrategyName::choices())]
pub struct UnknownStrategy(pub String);

impl StrategyName {
    /// Every strategy, the default first.
    pub const ALL: [StrategyName; 3] = [StrategyName::Cwl, StrategyName::Cwm, StrategyName::SelfGc];

    /// Its name as `--strategy` spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            StrategyName::Cwl => "cwl",
            StrategyName::Cwm => cwl_cwm::strategy::NAME,
            StrategyName::SelfGc => cwl_selfgc::strategy::NAME,
        }
    }

    /// The names, comma-separated, for help and errors.
    pub fn choices() -> String {
        StrategyName::ALL
            .iter()
            .map(|name| name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// A new, empty strategy of this kind offering `tools`, with its
    /// defaults.
    pub fn create(
        self,
        config: Config,
        counter: Arc<dyn TokenCounter>,
        tools: Vec<ToolSpec>,
    ) -> Box<dyn Strategy> {
        let defaults = self.resolve(&serde_json::Value::Null);
        Resolved::build(
            defaults.expect("every strategy's defaults resolve"),
            config,
            counter,
            tools,
        )
    }

    /// A new, empty strategy of this kind offering `tools`, with its own
    /// settings `options` (see [`options`]; null: the defaults).
    pub fn create_with(
        self,
        config: Config,
        counter: Arc<dyn TokenCounter>,
        tools: Vec<ToolSpec>,
        options: &serde_json::Value,
    ) -> Result<Box<dyn Strategy>, OptionError> {
        Ok(Resolved::build(
            self.resolve(options)?,
            config,
            counter,
            tools,
        ))
    }

    /// The strategy saved as `state` (a checkpoint this kind wrote); the
    /// counter must be the one the session counted with.
    pub fn restore(
        self,
        state: &serde_json::Value,
        counter: Arc<dyn TokenCounter>,
    ) -> Result<Box<dyn Strategy>, String> {
        match self {
            StrategyName::Cwl => {
                let checkpoint = Checkpoint::deserialize(state).map_err(|e| e.to_string())?;
                let context = Context::restore(checkpoint, counter, Arc::new(PaperOrder))
                    .map_err(|e| e.to_string())?;
                Ok(Box::new(context))
            }
            StrategyName::Cwm => Ok(Box::new(Cwm::restore(state, counter)?)),
            StrategyName::SelfGc => Ok(Box::new(SelfGc::restore(state, counter)?)),
        }
    }
}

impl Resolved {
    fn build(
        self,
        config: Config,
        counter: Arc<dyn TokenCounter>,
        tools: Vec<ToolSpec>,
    ) -> Box<dyn Strategy> {
        match self {
            Resolved::Cwl => Box::new(Context::new(config, counter, tools)),
            Resolved::Cwm(options) => {
                Box::new(Cwm::new(config, counter, tools).with_compression(*options))
            }
            Resolved::SelfGc(options) => {
                Box::new(SelfGc::with_options(config, counter, tools, options))
            }
        }
    }
}

/// An independent copy of `strategy` (saved and restored), for previews
/// such as "what would an eviction pass do now" that must not change the
/// session; `counter` must be the one it counts with.
pub fn copy(
    strategy: &dyn Strategy,
    counter: Arc<dyn TokenCounter>,
) -> Result<Box<dyn Strategy>, String> {
    let name: StrategyName = strategy
        .name()
        .parse()
        .map_err(|e: UnknownStrategy| e.to_string())?;
    let saved = strategy.save().map_err(|e| e.to_string())?;
    name.restore(&saved.state, counter)
}

impl FromStr for StrategyName {
    type Err = UnknownStrategy;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        StrategyName::ALL
            .into_iter()
            .find(|strategy| strategy.as_str() == name)
            .ok_or_else(|| UnknownStrategy(name.to_string()))
    }
}

impl fmt::Display for StrategyName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use cwl::{Estimate, Message};

    use super::*;

    #[test]
    fn names_round_trip_and_unknown_ones_list_the_choices() {
        for name in StrategyName::ALL {
            assert_eq!(name.as_str().parse::<StrategyName>(), Ok(name));
        }
        let error = "foo".parse::<StrategyName>().unwrap_err().to_string();
        assert_eq!(error, "unknown strategy `foo` (choices: cwl, cwm, self-gc)");
    }

    #[test]
    fn each_strategy_restores_what_it_saved() {
        for name in StrategyName::ALL {
            let counter: Arc<dyn TokenCounter> = Arc::new(Estimate);
            let mut strategy =
                name.create(Config::with_budget(500), Arc::clone(&counter), Vec::new());
            strategy.push(Message::system("system")).unwrap();
            strategy.push(Message::user("task")).unwrap();
            let saved = strategy.save().unwrap();
            let restored = name.restore(&saved.state, Arc::clone(&counter)).unwrap();
            assert_eq!(restored.name(), name.as_str());
            assert!(restored.view().eq(strategy.view()));
            assert_eq!(restored.tokens(), strategy.tokens());
            let mut copied = copy(strategy.as_ref(), Arc::clone(&counter)).unwrap();
            copied.push(Message::user("only in the copy")).unwrap();
            assert_eq!(copied.view().count(), strategy.view().count() + 1);
            for other in StrategyName::ALL.into_iter().filter(|&o| o != name) {
                assert!(
                    other.restore(&saved.state, Arc::new(Estimate)).is_err(),
                    "{other} refuses what {name} saved"
                );
            }
        }
    }
}
