//! Context policies: given the transcript so far, what request would have
//! been sent at each model call.
//!
//! Every policy implements [`Policy`]. The replay appends the transcript
//! one [`Unit`] at a time and, at every model call of the log, asks each
//! policy for the request it would have built. Policies keep state across
//! requests (what they folded, pruned, summarized, evicted).
//!
//! Families, one module each:
//! - [`cwl`]: the engine, annotated or with inferred episodes;
//! - [`strategy`]: any engine strategy ([`::cwl::Strategy`]) driven through
//!   the replay, the `cwl` policy and those of [`strategies`] (`cwm`);
//! - [`full`]: `none`, the whole history;
//! - [`truncate`]: recency truncation keeping the system and first user turn;
//! - [`mask`]: observation masking of old tool outputs;
//! - [`compact`]: modeled LLM summarization;
//! - [`clear`]: Anthropic's server-side tool-result clearing;
//! - [`selfgc`]: the Self-GC paper's heuristic baselines;
//! - [`scorer`]: the context-window-manager design's eviction scorers, one
//!   at a time (the manager itself is the `cwm` strategy).

pub mod clear;
pub mod compact;
pub mod cwl;
pub mod full;
pub mod mask;
pub mod scorer;
pub mod selfgc;
pub mod strategies;
pub mod strategy;
pub mod truncate;
mod view;
pub mod work;

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use ::cwl::Annotation;

use crate::side::{NoModel, SideModel};
use crate::transcript::{Entry, Lab, Unit};

pub use view::{ViewError, validate, validate_entries};

/// The request a policy built for one model call.
#[derive(Debug, Clone)]
pub struct Request {
    /// The prompt's messages.
    pub view: View,
    /// Extra model calls the policy made before this one (a compaction's
    /// summary call), costed like requests.
    pub side_calls: Vec<SideCall>,
    /// The side requests a strategy asked for before this request, by
    /// outcome (answered ones are also in `side_calls`).
    pub side: SideTally,
    /// For policies that enforce the budget and say so (the engine):
    /// whether the request fits it.
    pub budget_met: Option<bool>,
}

impl Request {
    /// A plain request made of `pieces`.
    pub fn pieces(pieces: Vec<Arc<Entry>>) -> Self {
        Request {
            view: View::Pieces(pieces),
            side_calls: Vec::new(),
            side: SideTally::default(),
            budget_met: None,
        }
    }
}

/// Side requests a strategy asked for before one request, by outcome.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SideTally {
    /// Answered by the replay's model (costed as side calls).
    pub answered: u32,
    /// Sent and failed (an error or a timeout).
    pub failed: u32,
    /// Not sent: the replay has no model.
    pub skipped: u32,
}

/// The messages of a request.
#[derive(Debug, Clone)]
pub enum View {
    /// The messages, in order.
    Pieces(Vec<Arc<Entry>>),
    /// The whole transcript so far, append-only, never materialized per
    /// request in a long session: its size is the call's
    /// [`crate::metrics::Call::history_tokens`].
    Full,
}

/// A model call a policy makes besides the agent's own.
#[derive(Debug, Clone)]
pub struct SideCall {
    /// Its prompt.
    pub input: Vec<Arc<Entry>>,
    /// Tokens it generates.
    pub output_tokens: usize,
}

/// A context policy, replayed turn by turn.
pub trait Policy {
    /// The policy's name as given on the command line.
    fn name(&self) -> &'static str;

    /// Appends a unit of transcript. `annotations` are the inferred episode
    /// boundaries that precede it (empty for annotated logs); policies other
    /// than the engine ignore them.
    fn push(
        &mut self,
        unit: &Unit,
        annotations: &[Annotation],
        lab: &mut Lab,
    ) -> Result<(), PolicyError>;

    /// Builds the request for the next model call.
    fn request(&mut self, lab: &mut Lab) -> Result<Request, PolicyError>;

    /// When the next request was made, by the log's own timestamps
    /// (`None`: the log gives none), told before [`Policy::request`];
    /// policies that keep no clock ignore it.
    fn time(&mut self, at: Option<chrono::DateTime<chrono::Utc>>) {
        let _ = at;
    }

    /// Problems met and worked around since the last call (rejected
    /// annotations...), for the report.
    fn take_warnings(&mut self) -> Vec<String> {
        Vec::new()
    }
}

/// A policy that cannot go on with this transcript.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("policy `{policy}`: {what}")]
pub struct PolicyError {
    /// The policy.
    pub policy: &'static str,
    /// What went wrong.
    pub what: String,
}

/// The policies the lab knows, in report order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PolicyKind {
    /// The CWL engine.
    Cwl,
    /// The full history.
    None,
    /// Recency truncation.
    Truncate,
    /// Observation masking.
    Mask,
    /// Modeled LLM summarization.
    Compact,
    /// Anthropic's server-side tool-result clearing.
    ClearToolUses,
    /// Self-GC: chronological folding of the oldest turns.
    OldestTurn,
    /// Self-GC: greedy tool-output pruning.
    ToolPrune,
    /// Self-GC: masking, then pruning, of tool outputs.
    ToolMaskPrune,
    /// Self-GC: tool-output pruning, then chronological folding.
    Hybrid,
    /// Context-window-manager: oldest first.
    Fifo,
    /// Context-window-manager: least recently referenced first.
    Lru,
    /// Context-window-manager: weighted multi-signal priority.
    Priority,
    /// Context-window-manager: per-type time to live.
    Type,
    /// Context-window-manager: weighted composite of the four scorers.
    Weighted,
    /// An engine strategy of [`strategies::STRATEGIES`], by name
    /// (`cwm`), replayed through [`strategy::StrategyPolicy`].
    Strategy(&'static str),
}

impl PolicyKind {
    /// The lab's own policies, in report order.
    const LAB: [PolicyKind; 15] = [
        PolicyKind::Cwl,
        PolicyKind::None,
        PolicyKind::Truncate,
        PolicyKind::Mask,
        PolicyKind::Compact,
        PolicyKind::ClearToolUses,
        PolicyKind::OldestTurn,
        PolicyKind::ToolPrune,
        PolicyKind::ToolMaskPrune,
        PolicyKind::Hybrid,
        PolicyKind::Fifo,
        PolicyKind::Lru,
        PolicyKind::Priority,
        PolicyKind::Type,
        PolicyKind::Weighted,
    ];

    /// The context-window manager (`cwl_cwm::Cwm`).
    pub const CWM: PolicyKind = PolicyKind::Strategy(cwl_cwm::strategy::NAME);

    /// Every policy, in report order: the lab's own, then every strategy of
    /// [`strategies::STRATEGIES`].
    pub fn all() -> Vec<PolicyKind> {
        PolicyKind::LAB
            .into_iter()
            .chain(
                strategies::STRATEGIES
                    .iter()
                    .map(|entry| PolicyKind::Strategy(entry.name)),
            )
            .collect()
    }

    /// Every policy's name, in report order, comma-separated.
    pub fn names() -> String {
        PolicyKind::all()
            .iter()
            .map(|kind| kind.name())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            PolicyKind::Cwl => "cwl",
            PolicyKind::None => "none",
            PolicyKind::Truncate => "truncate",
            PolicyKind::Mask => "mask",
            PolicyKind::Compact => "compact",
            PolicyKind::ClearToolUses => "clear-tool-uses",
            PolicyKind::OldestTurn => "oldest-turn",
            PolicyKind::ToolPrune => "tool-prune",
            PolicyKind::ToolMaskPrune => "tool-mask-prune",
            PolicyKind::Hybrid => "hybrid",
            PolicyKind::Fifo => "fifo",
            PolicyKind::Lru => "lru",
            PolicyKind::Priority => "priority",
            PolicyKind::Type => "type",
            PolicyKind::Weighted => "weighted",
            PolicyKind::Strategy(name) => name,
        }
    }

    /// Parses a comma-separated list (`all` for every policy), keeping the
    /// given order and dropping repeats.
    pub fn parse_list(list: &str) -> Result<Vec<PolicyKind>, UnknownPolicy> {
        let mut out = Vec::new();
        for name in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let kinds: Vec<PolicyKind> = if name == "all" {
                PolicyKind::all()
            } else {
                vec![name.parse()?]
            };
            for kind in kinds {
                if !out.contains(&kind) {
                    out.push(kind);
                }
            }
        }
        if out.is_empty() {
            return Err(UnknownPolicy(list.to_string()));
        }
        Ok(out)
    }

    /// Builds the policy; a strategy's side requests are skipped.
    pub fn build(self, config: &PolicyConfig, lab: &Lab) -> Box<dyn Policy> {
        self.build_with(config, lab, Arc::new(NoModel))
    }

    /// Builds the policy, a strategy's side requests answered by `side`.
    pub fn build_with(
        self,
        config: &PolicyConfig,
        lab: &Lab,
        side: Arc<dyn SideModel>,
    ) -> Box<dyn Policy> {
        match self {
            PolicyKind::Cwl => Box::new(cwl::policy(config, lab, side)),
            PolicyKind::None => Box::new(full::Full),
            PolicyKind::Truncate => Box::new(truncate::Truncate::new(config, lab)),
            PolicyKind::Mask => Box::new(mask::Mask::new(config)),
            PolicyKind::Compact => Box::new(compact::Compact::new(config, lab)),
            PolicyKind::ClearToolUses => Box::new(clear::ClearToolUses::new(config)),
            PolicyKind::OldestTurn => Box::new(selfgc::SelfGc::new(
                selfgc::Variant::OldestTurn,
                config,
                lab,
            )),
            PolicyKind::ToolPrune => {
                Box::new(selfgc::SelfGc::new(selfgc::Variant::ToolPrune, config, lab))
            }
            PolicyKind::ToolMaskPrune => Box::new(selfgc::SelfGc::new(
                selfgc::Variant::ToolMaskPrune,
                config,
                lab,
            )),
            PolicyKind::Hybrid => {
                Box::new(selfgc::SelfGc::new(selfgc::Variant::Hybrid, config, lab))
            }
            PolicyKind::Fifo => Box::new(scorer::Scored::new(scorer::Scorer::Fifo, config, lab)),
            PolicyKind::Lru => Box::new(scorer::Scored::new(scorer::Scorer::Lru, config, lab)),
            PolicyKind::Priority => {
                Box::new(scorer::Scored::new(scorer::Scorer::Priority, config, lab))
            }
            PolicyKind::Type => Box::new(scorer::Scored::new(scorer::Scorer::Type, config, lab)),
            PolicyKind::Weighted => {
                Box::new(scorer::Scored::new(scorer::Scorer::Weighted, config, lab))
            }
            PolicyKind::Strategy(name) => {
                let build = strategies::find(name)
                    .map(|entry| entry.build)
                    .expect("a strategy policy names an entry of STRATEGIES");
                Box::new(strategy::StrategyPolicy::new(
                    name,
                    build(config, lab),
                    side,
                ))
            }
        }
    }
}

impl fmt::Display for PolicyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A policy name the lab does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown policy `{0}` (expected `all` or a comma-separated list of: {names})", names = PolicyKind::names())]
pub struct UnknownPolicy(pub String);

impl FromStr for PolicyKind {
    type Err = UnknownPolicy;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        PolicyKind::all()
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| UnknownPolicy(s.to_string()))
    }
}

/// The parameters of the policies.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyConfig {
    /// The token budget τ every budgeted policy aims at (prompt incl. tools).
    pub budget: usize,
    /// The model's context window, for `compact`'s trigger.
    pub window: usize,
    /// `mask`: tool outputs of the last this many steps stay whole.
    pub mask_turns: usize,
    /// `compact`'s model.
    pub compact: compact::CompactParams,
    /// `clear-tool-uses`' settings (its trigger is the budget).
    pub clear: clear::ClearParams,
    /// `cwl`: the engine's eviction settings (a preset and the settings
    /// given over it), resolved at the policy's budget by [`Self::engine`].
    pub settings: ::cwl::EngineSettings,
    /// `cwl`: which turns' reasoning the log's provider bills; the engine
    /// takes earlier turns' out of the view when the provider drops them
    /// ([`::cwl::Config::reasoning`]), as an agent that knows its provider
    /// does. Set from the log, not from the command line.
    pub reasoning: ::cwl::ReasoningScope,
}

impl PolicyConfig {
    /// The engine configuration the `cwl` policy runs under: its settings
    /// at the budget, with default tool classes.
    pub fn engine(&self) -> ::cwl::Config {
        self.settings.config(self.budget).reasoning(self.reasoning)
    }

    /// The engine configuration a baseline strategy (`cwm`, `self-gc`) runs
    /// under: the defaults at the policy budget. The `cwl:` settings tune
    /// the engine under test only; a baseline that moved with them would
    /// be a different baseline at every setting.
    pub fn baseline_engine(&self) -> ::cwl::Config {
        ::cwl::Config::with_budget(self.budget).reasoning(self.reasoning)
    }
}

impl Default for PolicyConfig {
    fn default() -> Self {
        PolicyConfig {
            budget: ::cwl::DEFAULT_BUDGET,
            window: 200_000,
            mask_turns: mask::DEFAULT_TURNS,
            compact: compact::CompactParams::default(),
            clear: clear::ClearParams::default(),
            settings: ::cwl::EngineSettings::default(),
            reasoning: ::cwl::ReasoningScope::AllTurns,
        }
    }
}

/// Tokens of a request made of `pieces` (tool definitions included), as
/// the provider bills them now ([`Lab::billed`]).
pub fn pieces_tokens(lab: &Lab, pieces: &[Arc<Entry>]) -> usize {
    lab.tools_tokens() + pieces.iter().map(|p| lab.billed(p)).sum::<usize>()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_lists() {
        let all = PolicyKind::parse_list("all").unwrap();
        assert_eq!(all, PolicyKind::all());
        assert!(all.contains(&PolicyKind::CWM));
        assert_eq!(all.len(), 15 + strategies::STRATEGIES.len());
        assert_eq!(
            PolicyKind::parse_list("mask, cwl,mask").unwrap(),
            vec![PolicyKind::Mask, PolicyKind::Cwl]
        );
        let err = PolicyKind::parse_list("cwl,bogus").unwrap_err();
        assert!(err.to_string().contains("bogus"));
        assert!(PolicyKind::parse_list(" , ").is_err());
        assert!(err.to_string().contains(", cwm"), "{err}");
        for kind in PolicyKind::all() {
            assert_eq!(kind.name().parse::<PolicyKind>().unwrap(), kind);
        }
    }
}
