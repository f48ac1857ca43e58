//! The eviction settings every front takes (`cwl evict`, `replay`,
//! `sweep`, `proxy`; with the `clap` feature, as flags a front flattens
//! into its arguments), resolved the same way everywhere: a preset, then
//! each setting given over it.

use serde::{Deserialize, Serialize};

use crate::config::{ActOutputs, Config, PlanCalls, ResidueCap, Share};

/// Where the settings start.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum Preset {
    /// The paper's Algorithm 1 exactly ([`Config::paper`]).
    #[cfg_attr(feature = "clap", value(help = "The paper's Algorithm 1 exactly"))]
    Paper,
    /// Today's measured refinements ([`Config::default`]).
    #[cfg_attr(feature = "clap", value(help = "Today's measured refinements"))]
    #[default]
    Default,
}

impl std::str::FromStr for Preset {
    type Err = PresetError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.trim().to_ascii_lowercase().as_str() {
            "paper" => Ok(Preset::Paper),
            "default" => Ok(Preset::Default),
            _ => Err(PresetError(text.to_string())),
        }
    }
}

/// A preset name that is neither `paper` nor `default`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown preset `{0}`: expected `paper` or `default`")]
pub struct PresetError(String);

impl Preset {
    /// The preset's configuration for `budget`.
    pub fn config(self, budget: usize) -> Config {
        match self {
            Preset::Paper => Config::paper(budget),
            Preset::Default => Config::with_budget(budget),
        }
    }
}

/// Eviction settings as a front takes them: a preset and any setting
/// given over it; each `None` leaves the layer below as it is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct EngineSettings {
    /// Where the eviction settings start: `paper` is the paper's Algorithm 1
    /// exactly (low water 1, and every refinement below off or `keep`);
    /// `default` is the measured refinements. Each setting given overrides
    /// its preset [default: default].
    #[cfg_attr(feature = "clap", arg(long, value_name = "paper|default"))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preset: Option<Preset>,
    /// Where a pass over the budget stops: 0.8 or 80% evicts down to 80%
    /// of it, so the cached prefix changes in rare batches; 1 stops as soon
    /// as the prompt fits (the paper) [default: 80%].
    #[cfg_attr(feature = "clap", arg(long, value_name = "SHARE"))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub low_water: Option<Share>,
    /// The share of the budget residues of evicted episodes and the user
    /// turns of finished tasks may take before the oldest fold into one
    /// index line (`recall` brings them back); `off` keeps them all (the
    /// paper: user turns are never evicted) [default: 15%].
    #[cfg_attr(feature = "clap", arg(long, value_name = "SHARE|off", value_parser = parse_cap))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub residue_share: Option<ResidueCap>,
    /// Episodes reaching into the most recent share of the budget (0.1 or
    /// 10%) are evicted only after every older one; `off` evicts by age
    /// alone (the paper) [default: 10%].
    #[cfg_attr(feature = "clap", arg(long, value_name = "SHARE|off", value_parser = parse_cap))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_recent: Option<ResidueCap>,
    /// An old episode at least this share of whose lines a later one
    /// repeats (a file read again, a command rerun) is evicted before any
    /// other; `off` keeps the paper's order [default: 50%].
    #[cfg_attr(feature = "clap", arg(long, value_name = "SHARE|off", value_parser = parse_cap))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub superseded: Option<ResidueCap>,
    /// A tool output of more than 768 tokens at least this share of whose
    /// lines a later output repeats (a file read again after an edit, log
    /// lines a later search shows) is stubbed before anything else; `off`
    /// keeps the paper's order [default: 100%].
    #[cfg_attr(feature = "clap", arg(long, value_name = "SHARE|off", value_parser = parse_cap))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restated: Option<ResidueCap>,
    /// Unannotated answers between episodes (text without tool use) may
    /// take this share of the budget before the oldest go first, down to
    /// half of it; `off` keeps them until the acts are gone (the paper)
    /// [default: 15%].
    #[cfg_attr(feature = "clap", arg(long, value_name = "SHARE|off", value_parser = parse_cap))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer_share: Option<ResidueCap>,
    /// `stub`: before a pass removes anything, old acts are reduced to
    /// their calls (tool outputs stubbed, text beside the calls dropped),
    /// oldest first, and old episodes then go least recently used first;
    /// `keep`: the paper's order [default: stub].
    #[cfg_attr(feature = "clap", arg(long, value_name = "stub|keep"))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub act_outputs: Option<ActOutputs>,
    /// `drop`: a plan tool's call (TodoWrite, update_plan: each carries the
    /// whole plan) and its result go first once the same tool is called
    /// again; `keep`: they stay with their episode (the paper)
    /// [default: drop].
    #[cfg_attr(feature = "clap", arg(long, value_name = "drop|keep"))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plans: Option<PlanCalls>,
}

/// Reads a share that can be switched off, saying so when it cannot.
#[cfg(feature = "clap")]
fn parse_cap(text: &str) -> Result<ResidueCap, String> {
    text.parse()
        .map_err(|error: crate::config::ShareError| format!("{error}, or `off`"))
}

impl EngineSettings {
    /// These settings over `below`: each one given here wins.
    pub fn over(self, below: EngineSettings) -> EngineSettings {
        EngineSettings {
            preset: self.preset.or(below.preset),
            low_water: self.low_water.or(below.low_water),
            residue_share: self.residue_share.or(below.residue_share),
            keep_recent: self.keep_recent.or(below.keep_recent),
            superseded: self.superseded.or(below.superseded),
            restated: self.restated.or(below.restated),
            answer_share: self.answer_share.or(below.answer_share),
            act_outputs: self.act_outputs.or(below.act_outputs),
            plans: self.plans.or(below.plans),
        }
    }

    /// The configuration for `budget`: the preset's ([`Preset::Default`]
    /// when none is given), each setting given over it.
    pub fn config(&self, budget: usize) -> Config {
        self.apply(Config::with_budget(budget))
    }

    /// `base` (a front's own defaults) under these settings: a preset, when
    /// given, replaces its eviction settings (its budget, tool classes and
    /// reasoning scope stay), then each setting given replaces its own.
    pub fn apply(&self, base: Config) -> Config {
        let mut config = match self.preset {
            Some(preset) => Config {
                classes: base.classes.clone(),
                reasoning: base.reasoning,
                ..preset.config(base.budget)
            },
            None => base,
        };
        if let Some(share) = self.low_water {
            config.low_water = share;
        }
        for (given, field) in [
            (self.residue_share, &mut config.residue_share),
            (self.keep_recent, &mut config.keep_recent),
            (self.superseded, &mut config.superseded),
            (self.restated, &mut config.restated),
            (self.answer_share, &mut config.answer_share),
        ] {
            if let Some(cap) = given {
                *field = cap.0;
            }
        }
        if let Some(act_outputs) = self.act_outputs {
            config.stub_act_outputs = act_outputs.stubbed();
        }
        if let Some(plans) = self.plans {
            config.superseded_plans = plans.dropped();
        }
        config
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn share(text: &str) -> ResidueCap {
        text.parse().unwrap()
    }

    #[test]
    fn the_paper_preset_is_the_seven_settings_off() {
        let flags = EngineSettings {
            low_water: Some("1".parse().unwrap()),
            residue_share: Some(share("off")),
            keep_recent: Some(share("off")),
            superseded: Some(share("off")),
            restated: Some(share("off")),
            answer_share: Some(share("off")),
            act_outputs: Some(ActOutputs::Keep),
            plans: Some(PlanCalls::Keep),
            ..EngineSettings::default()
        };
        let preset = EngineSettings {
            preset: Some(Preset::Paper),
            ..EngineSettings::default()
        };
        assert_eq!(flags.config(50_000), Config::paper(50_000));
        assert_eq!(preset.config(50_000), Config::paper(50_000));
        assert_eq!(
            EngineSettings::default().config(50_000),
            Config::with_budget(50_000)
        );
    }

    #[test]
    fn a_setting_given_overrides_its_preset_and_the_layer_below() {
        let file = EngineSettings {
            preset: Some(Preset::Paper),
            low_water: Some("0.9".parse().unwrap()),
            ..EngineSettings::default()
        };
        let flags = EngineSettings {
            low_water: Some("0.7".parse().unwrap()),
            answer_share: Some(share("20%")),
            ..EngineSettings::default()
        };
        let config = flags.over(file).config(10_000);
        assert_eq!(config.low_water, "0.7".parse().unwrap());
        assert_eq!(config.answer_share, Some("0.2".parse().unwrap()));
        assert_eq!(config.residue_share, None, "the paper's, from the preset");
        assert_eq!(config.budget, 10_000);
    }

    #[test]
    fn a_preset_keeps_the_fronts_classes_and_reasoning() {
        let mut base = Config::with_budget(1_000).reasoning(crate::ReasoningScope::CurrentTurn);
        base.classes.set("probe", crate::ToolClass::Bulk);
        let config = EngineSettings {
            preset: Some(Preset::Paper),
            ..EngineSettings::default()
        }
        .apply(base.clone());
        assert_eq!(config.classes, base.classes);
        assert_eq!(config.reasoning, crate::ReasoningScope::CurrentTurn);
        assert_eq!(config.low_water, "1".parse().unwrap());
    }
}
