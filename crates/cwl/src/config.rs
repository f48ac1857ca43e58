//! How the engine evicts: the budget, where a pass stops, how much room
//! residues may take, and the tool classes.

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::classes::ToolClasses;
use crate::reasoning::ReasoningScope;

/// The default token budget τ.
pub const DEFAULT_BUDGET: usize = 80_000;

/// The default low-water mark, as a share of τ: a pass that starts over τ
/// evicts down to it, so the cached prefix changes in rare batches. Chosen
/// from the lab's cost/retention sweep (see the README).
pub const DEFAULT_LOW_WATER: f64 = 0.8;

/// The default share of τ that residues and finished tasks' user turns may
/// take before the oldest fold into the index line.
pub const DEFAULT_RESIDUE_SHARE: f64 = 0.15;

/// The default recent working set, as a share of τ: episodes reaching into
/// the view's most recent tokens are evicted only after every older one,
/// so the model keeps its own latest edits and results (measured on real
/// logs; see the README).
pub const DEFAULT_KEEP_RECENT: f64 = 0.1;

/// Default share of an episode's lines that later episodes must repeat for
/// it to go first ([`Config::superseded`]).
pub const DEFAULT_SUPERSEDED: f64 = 0.5;

/// Default share of a tool output's lines that later outputs must repeat
/// for it to be stubbed before anything else ([`Config::restated`]): all
/// of them, so the stub loses nothing the view does not still show.
pub const DEFAULT_RESTATED: f64 = 1.0;

/// Default share of τ that unannotated answers between episodes may take
/// ([`Config::answer_share`]).
pub const DEFAULT_ANSWER_SHARE: f64 = 0.15;

/// Fewest tokens a restated output must hold to be stubbed
/// ([`Config::restated`]). Smaller ones freed too little to matter and
/// moved the next passes onto other content (measured on the lab's
/// corpora; see the README).
pub const RESTATED_MIN_TOKENS: usize = 768;

/// Tokens at or under which content is cheap to keep, when old acts are
/// reduced first ([`Config::stub_act_outputs`]): a tool output this small
/// (a file listing, a short status) is not stubbed, only removed with its
/// episode, and an episode holding this little of the view goes after the
/// larger old ones. Stubbing such outputs freed almost nothing and lost
/// the names the model quoted later (measured on real client sessions;
/// see the README).
pub const SMALL_TOKENS: usize = 256;

/// A share in (0, 1], such as a low-water mark or a residue cap.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Serialize, Deserialize)]
#[serde(try_from = "f64", into = "f64")]
pub struct Share(f64);

/// A share outside (0, 1].
#[derive(Debug, Clone, PartialEq, Error)]
#[error("invalid share `{0}`: expected a number above 0 and at most 1 (or a percentage like 75%)")]
pub struct ShareError(pub String);

impl Share {
    /// A share, if `value` is in (0, 1].
    pub fn new(value: f64) -> Result<Share, ShareError> {
        if value > 0.0 && value <= 1.0 {
            Ok(Share(value))
        } else {
            Err(ShareError(value.to_string()))
        }
    }

    /// The share as a number in (0, 1].
    pub fn get(self) -> f64 {
        self.0
    }

    /// This share of `tokens`, rounded down.
    pub fn of(self, tokens: usize) -> usize {
        (tokens as f64 * self.0).floor() as usize
    }
}

impl TryFrom<f64> for Share {
    type Error = ShareError;
    fn try_from(value: f64) -> Result<Self, Self::Error> {
        Share::new(value)
    }
}

impl From<Share> for f64 {
    fn from(share: Share) -> f64 {
        share.0
    }
}

impl std::str::FromStr for Share {
    type Err = ShareError;

    /// Reads `0.75` or `75%`.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let trimmed = text.trim();
        let invalid = || ShareError(text.to_string());
        let value = match trimmed.strip_suffix('%') {
            Some(percent) => percent.trim().parse::<f64>().map_err(|_| invalid())? / 100.0,
            None => trimmed.parse::<f64>().map_err(|_| invalid())?,
        };
        Share::new(value).map_err(|_| invalid())
    }
}

impl std::fmt::Display for Share {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}%", (self.0 * 1000.0).round() / 10.0)
    }
}

/// A share that can be switched off, as users write it: `0.15`, `15%` or
/// `off` (a residue cap, a recent working set). Saved as its share, or
/// `null` when off.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ResidueCap(pub Option<Share>);

impl std::str::FromStr for ResidueCap {
    type Err = ShareError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.trim() {
            "off" | "none" => Ok(ResidueCap(None)),
            share => share.parse().map(|share| ResidueCap(Some(share))),
        }
    }
}

impl std::fmt::Display for ResidueCap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(share) => share.fmt(f),
            None => f.write_str("off"),
        }
    }
}

/// What a pass does with old acts before it removes anything: the value of
/// `--act-outputs` ([`Config::stub_act_outputs`]).
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ActOutputs {
    /// Reduce them to their calls first (outputs stubbed, prose dropped),
    /// oldest first; then old episodes go least recently used first, and
    /// expls keep their calls until removed.
    Stub,
    /// The paper's order and levels.
    Keep,
}

/// An `--act-outputs` value that is neither `stub` nor `keep`.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("invalid act-outputs `{0}`: expected `stub` or `keep`")]
pub struct ActOutputsError(pub String);

impl ActOutputs {
    /// Whether outputs are stubbed first.
    pub fn stubbed(self) -> bool {
        self == ActOutputs::Stub
    }

    /// The value for a configuration.
    pub fn of(stubbed: bool) -> ActOutputs {
        if stubbed {
            ActOutputs::Stub
        } else {
            ActOutputs::Keep
        }
    }
}

impl std::str::FromStr for ActOutputs {
    type Err = ActOutputsError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.trim() {
            "stub" => Ok(ActOutputs::Stub),
            "keep" | "off" => Ok(ActOutputs::Keep),
            other => Err(ActOutputsError(other.to_string())),
        }
    }
}

impl std::fmt::Display for ActOutputs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ActOutputs::Stub => "stub",
            ActOutputs::Keep => "keep",
        })
    }
}

/// What a pass does with plan calls a later call of the same plan tool
/// superseded: the value of `--plans` ([`Config::superseded_plans`]).
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PlanCalls {
    /// They go first, with their results.
    Drop,
    /// They stay with their episode (the paper).
    Keep,
}

/// A `--plans` value that is neither `drop` nor `keep`.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("invalid plans `{0}`: expected `drop` or `keep`")]
pub struct PlanCallsError(pub String);

impl PlanCalls {
    /// Whether superseded plan calls go first.
    pub fn dropped(self) -> bool {
        self == PlanCalls::Drop
    }

    /// The value for a configuration.
    pub fn of(dropped: bool) -> PlanCalls {
        if dropped {
            PlanCalls::Drop
        } else {
            PlanCalls::Keep
        }
    }
}

impl std::str::FromStr for PlanCalls {
    type Err = PlanCallsError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.trim() {
            "drop" => Ok(PlanCalls::Drop),
            "keep" | "off" => Ok(PlanCalls::Keep),
            other => Err(PlanCallsError(other.to_string())),
        }
    }
}

impl std::fmt::Display for PlanCalls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            PlanCalls::Drop => "drop",
            PlanCalls::Keep => "keep",
        })
    }
}

/// How the engine evicts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Config {
    /// The token budget τ: the prompt is kept at or under it when possible.
    pub budget: usize,
    /// Where a pass that starts over τ stops, as a share of τ (1 = stop as
    /// soon as the prompt fits, the paper's rule).
    pub low_water: Share,
    /// The share of τ that residues and the user turns of finished tasks
    /// may take before the oldest fold into one index line; `None` keeps
    /// them all (the paper: user turns are never evicted).
    pub residue_share: Option<Share>,
    /// The recent working set as a share of τ: episodes reaching into the
    /// view's most recent tokens go only after all older ones; `None`
    /// evicts by age alone (the paper).
    #[serde(default)]
    pub keep_recent: Option<Share>,
    /// An old episode at least this share of whose lines a later episode
    /// still in the view repeats (a file read again, a command rerun) is
    /// evicted before any other: the view keeps the newer copy. `None`
    /// turns this off (the paper's order).
    #[serde(default)]
    pub superseded: Option<Share>,
    /// A tool output (of more than [`RESTATED_MIN_TOKENS`]) at least this share of
    /// whose lines a later output still in the view repeats (a file read
    /// again after an edit, a log slice a later search quotes) is stubbed
    /// before anything else, oldest first, whatever its episode: the view
    /// keeps the newer copy. The latest response's results are left as they
    /// came. `None` turns this off (and restores configs saved before it
    /// existed unchanged).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restated: Option<Share>,
    /// The share of τ that unannotated stretches of text and reasoning
    /// alone (an agent's answers between episodes, no tool use) may take:
    /// past it the oldest outside the recent working set go first, down to
    /// half of it. The paper keeps
    /// unannotated content until the acts are exhausted, as exploration
    /// with unknown dependents; these explored nothing, and would otherwise
    /// pile up for the whole session. `None` keeps them (the paper; and
    /// configs saved before it existed restore unchanged).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer_share: Option<Share>,
    /// Before any episode is removed, old acts are reduced to their calls
    /// (tool outputs such as test runs become a short stub, the text and
    /// reasoning beside the calls go), oldest first; a reduced act no
    /// longer protects its expls, and old episodes of both kinds then go
    /// least recently used first: the longest since the model's output
    /// last named something they hold (a path, an identifier). Expls, too,
    /// keep their calls at the bulk and intermediate levels, their outputs
    /// stubbed; only removal takes the calls. Outputs and episodes of at
    /// most [`SMALL_TOKENS`] are kept longest.
    /// `false`: the paper's order and levels.
    #[serde(default)]
    pub stub_act_outputs: bool,
    /// A plan tool's call ([`ToolClasses::is_plan`]: `TodoWrite`,
    /// `update_plan`) carries the whole plan, so once the same tool is
    /// called again the earlier call and its result go before anything
    /// else in a pass, oldest first, whatever their episode; the latest
    /// response is left as it came. `false` keeps them with their episode
    /// (the paper; and configs saved before it existed restore unchanged).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub superseded_plans: bool,
    /// Which turns' reasoning the provider keeps in the prompt it bills.
    /// Under [`ReasoningScope::CurrentTurn`] a user message takes the
    /// reasoning of earlier turns out of the view: the provider would
    /// neither show it to the model nor bill it, so the budget counts what
    /// is billed and the room goes to content the model sees. The default
    /// ([`ReasoningScope::AllTurns`]) keeps it (and configs saved before it
    /// existed restore unchanged).
    #[serde(default, skip_serializing_if = "ReasoningScope::is_all_turns")]
    pub reasoning: ReasoningScope,
    /// Which tools' calls are bulk output and which intermediate, and
    /// which tools are plan tools.
    pub classes: ToolClasses,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            budget: DEFAULT_BUDGET,
            low_water: Share(DEFAULT_LOW_WATER),
            residue_share: Some(Share(DEFAULT_RESIDUE_SHARE)),
            keep_recent: Some(Share(DEFAULT_KEEP_RECENT)),
            superseded: Some(Share(DEFAULT_SUPERSEDED)),
            restated: Some(Share(DEFAULT_RESTATED)),
            answer_share: Some(Share(DEFAULT_ANSWER_SHARE)),
            stub_act_outputs: true,
            superseded_plans: true,
            reasoning: ReasoningScope::AllTurns,
            classes: ToolClasses::default(),
        }
    }
}

impl Config {
    /// The default configuration with another budget.
    pub fn with_budget(budget: usize) -> Self {
        Config {
            budget,
            ..Config::default()
        }
    }

    /// Algorithm 1 exactly as the paper states it: stop as soon as the
    /// prompt fits, never fold residues or user turns.
    pub fn paper(budget: usize) -> Self {
        Config {
            budget,
            low_water: Share(1.0),
            residue_share: None,
            keep_recent: None,
            superseded: None,
            restated: None,
            answer_share: None,
            stub_act_outputs: false,
            superseded_plans: false,
            reasoning: ReasoningScope::AllTurns,
            classes: ToolClasses::default(),
        }
    }

    /// Sets the low-water mark.
    pub fn low_water(mut self, share: Share) -> Self {
        self.low_water = share;
        self
    }

    /// Sets the residue cap (`None`: off).
    pub fn residue_share(mut self, share: Option<Share>) -> Self {
        self.residue_share = share;
        self
    }

    /// Sets the recent working set (`None`: off).
    pub fn keep_recent(mut self, share: Option<Share>) -> Self {
        self.keep_recent = share;
        self
    }

    /// Sets the share of repeated lines that makes an episode go first
    /// (`None`: off).
    pub fn superseded(mut self, share: Option<Share>) -> Self {
        self.superseded = share;
        self
    }

    /// Sets the share of repeated lines that makes a tool output go first
    /// (`None`: off).
    pub fn restated(mut self, share: Option<Share>) -> Self {
        self.restated = share;
        self
    }

    /// Sets the share unannotated answers may take (`None`: uncapped).
    pub fn answer_share(mut self, share: Option<Share>) -> Self {
        self.answer_share = share;
        self
    }

    /// Sets whether old acts' outputs are stubbed before any removal.
    pub fn stub_act_outputs(mut self, on: bool) -> Self {
        self.stub_act_outputs = on;
        self
    }

    /// Sets whether superseded plan calls go first.
    pub fn superseded_plans(mut self, on: bool) -> Self {
        self.superseded_plans = on;
        self
    }

    /// Sets which turns' reasoning the provider keeps.
    pub fn reasoning(mut self, scope: ReasoningScope) -> Self {
        self.reasoning = scope;
        self
    }

    /// Sets the tool classes.
    pub fn classes(mut self, classes: ToolClasses) -> Self {
        self.classes = classes;
        self
    }

    /// Tokens a pass evicts down to once triggered.
    pub fn floor(&self) -> usize {
        self.low_water.of(self.budget).max(1)
    }

    /// Tokens residues may take, if capped.
    pub fn residue_cap(&self) -> Option<usize> {
        self.residue_share.map(|share| share.of(self.budget))
    }

    /// Tokens unannotated answers may take, if capped.
    pub fn answer_cap(&self) -> Option<usize> {
        self.answer_share.map(|share| share.of(self.budget))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_read_both_forms_and_reject_nonsense() {
        assert_eq!("0.75".parse::<Share>().map(Share::get), Ok(0.75));
        assert_eq!("60%".parse::<Share>().map(Share::get), Ok(0.6));
        for bad in ["", "0", "1.5", "-1", "abc", "0%", "120%"] {
            assert!(bad.parse::<Share>().is_err(), "{bad}");
        }
        assert_eq!(Share(0.75).to_string(), "75%");
        assert_eq!("off".parse::<ResidueCap>(), Ok(ResidueCap(None)));
        assert_eq!(
            "15%".parse::<ResidueCap>().map(|cap| cap.to_string()),
            Ok("15%".to_string())
        );
        assert!("2".parse::<ResidueCap>().is_err());
        assert_eq!("drop".parse::<PlanCalls>(), Ok(PlanCalls::Drop));
        assert_eq!("keep".parse::<PlanCalls>().map(|p| p.dropped()), Ok(false));
        assert_eq!(
            "sometimes".parse::<PlanCalls>().unwrap_err().to_string(),
            "invalid plans `sometimes`: expected `drop` or `keep`"
        );
        assert_eq!(PlanCalls::of(true).to_string(), "drop");
        assert_eq!("stub".parse::<ActOutputs>(), Ok(ActOutputs::Stub));
        assert_eq!("keep".parse::<ActOutputs>().map(|a| a.stubbed()), Ok(false));
        assert_eq!(
            "yes".parse::<ActOutputs>().unwrap_err().to_string(),
            "invalid act-outputs `yes`: expected `stub` or `keep`"
        );
    }

    #[test]
    fn floors_and_caps_follow_the_budget() {
        let config = Config::with_budget(80_000);
        assert_eq!(config.floor(), 64_000);
        assert_eq!(config.residue_cap(), Some(12_000));
        assert_eq!(config.answer_cap(), Some(12_000));
        let paper = Config::paper(80_000);
        assert_eq!(paper.floor(), 80_000);
        assert_eq!(paper.residue_cap(), None);
        assert_eq!(paper.answer_cap(), None);
    }
}
