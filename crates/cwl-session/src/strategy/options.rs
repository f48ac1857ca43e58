//! A strategy's own settings (`--strategy-option KEY=VALUE`, the config
//! table `strategy_options`): Self-GC's trigger and commit shares, the
//! context-window manager's cascade and component budgets. Given as JSON
//! over the strategy's defaults; unknown names and bad values are refused
//! with what was wrong, before a session starts.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use cwl_cwm::Cascade;
use cwl_cwm::CompressionOptions;
use cwl_selfgc::strategy::SelfGcOptions;

use super::StrategyName;

/// Options a strategy refused, or a `KEY=VALUE` that is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("strategy option: {0}")]
pub struct OptionError(pub String);

/// A strategy's settings resolved over its defaults.
#[derive(Debug, Clone, PartialEq)]
pub enum Resolved {
    /// CWL takes none (its settings are the engine flags).
    Cwl,
    /// The context-window manager's compression and budgets.
    Cwm(Box<CompressionOptions>),
    /// Self-GC's tunables.
    SelfGc(SelfGcOptions),
}

/// `KEY=VALUE` pairs as one JSON object: a dotted key nests
/// (`cascade.prepare=0.4`), a value that reads as JSON is that
/// (`0.4`, `true`, `[6,4,65,12,8,5]`), anything else a string.
pub fn parse_pairs(pairs: &[String]) -> Result<Value, OptionError> {
    let mut root = Map::new();
    for pair in pairs {
        let (key, value) = pair
            .split_once('=')
            .ok_or_else(|| OptionError(format!("`{pair}` is not KEY=VALUE")))?;
        let value =
            serde_json::from_str(value).unwrap_or_else(|_| Value::String(value.to_string()));
        let mut at = &mut root;
        let mut parts = key.split('.').peekable();
        while let Some(part) = parts.next() {
            if part.is_empty() {
                return Err(OptionError(format!("`{key}` has an empty name")));
            }
            if parts.peek().is_none() {
                at.insert(part.to_string(), value.clone());
                break;
            }
            let next = at
                .entry(part.to_string())
                .or_insert_with(|| Value::Object(Map::new()));
            at = next
                .as_object_mut()
                .ok_or_else(|| OptionError(format!("`{key}`: `{part}` is a value, not a group")))?;
        }
    }
    Ok(if root.is_empty() {
        Value::Null
    } else {
        Value::Object(root)
    })
}

impl StrategyName {
    /// `given` (null: the defaults) resolved over this strategy's defaults.
    pub fn resolve(self, given: &Value) -> Result<Resolved, OptionError> {
        match self {
            StrategyName::Cwl => match given {
                Value::Null => Ok(Resolved::Cwl),
                Value::Object(map) if map.is_empty() => Ok(Resolved::Cwl),
                _ => Err(OptionError(
                    "cwl takes no strategy options (its settings are --low-water, --keep-recent, --superseded, --restated, --act-outputs...)".into(),
                )),
            },
            StrategyName::Cwm => {
                let options: CompressionOptions = overlay(self, given)?;
                Cascade::new(
                    options.cascade.prepare,
                    options.cascade.active,
                    options.cascade.emergency,
                )
                .map_err(|error| OptionError(format!("cwm: {error}")))?;
                let zones = options.zones;
                if cwl_cwm::Thresholds::new(zones.yellow, zones.orange, zones.red).is_none() {
                    return Err(OptionError(format!(
                        "cwm: zones must rise within (0, 1]: yellow {} < orange {} < red {}",
                        zones.yellow, zones.orange, zones.red
                    )));
                }
                cwl_cwm::Allocation::new(options.allocation.0)
                    .map_err(|error| OptionError(format!("cwm: allocation: {error}")))?;
                Ok(Resolved::Cwm(Box::new(options)))
            }
            StrategyName::SelfGc => {
                let options: SelfGcOptions = overlay(self, given)?;
                for (name, share) in [
                    ("trigger", options.trigger),
                    ("regrowth", options.regrowth),
                    ("min_prune", options.min_prune),
                    ("commit_prune", options.commit_prune),
                ] {
                    if !(share > 0.0 && share <= 1.0) {
                        return Err(OptionError(format!(
                            "self-gc: {name} {share} must be a share in (0, 1]"
                        )));
                    }
                }
                if options.planner_timeout_ms == 0 {
                    return Err(OptionError(
                        "self-gc: planner_timeout_ms must be above 0".into(),
                    ));
                }
                if options.cache_ttl_s == 0 {
                    return Err(OptionError(
                        "self-gc: cache_ttl_s must be above 0 (the provider cache's lifetime in seconds)".into(),
                    ));
                }
                Ok(Resolved::SelfGc(options))
            }
        }
    }
}

/// `given` laid over the defaults of `T`; a name the defaults lack is
/// refused with the names they have.
fn overlay<T: Default + Serialize + DeserializeOwned>(
    strategy: StrategyName,
    given: &Value,
) -> Result<T, OptionError> {
    let mut merged = serde_json::to_value(T::default())
        .map_err(|error| OptionError(format!("{strategy}: {error}")))?;
    match given {
        Value::Null => {}
        Value::Object(_) => lay(&mut merged, given, strategy, "")?,
        other => {
            return Err(OptionError(format!(
                "{strategy}: options must be a table of names, not {other}"
            )));
        }
    }
    serde_json::from_value(merged).map_err(|error| OptionError(format!("{strategy}: {error}")))
}

fn lay(
    base: &mut Value,
    given: &Value,
    strategy: StrategyName,
    path: &str,
) -> Result<(), OptionError> {
    let (Value::Object(base), Value::Object(given)) = (&mut *base, given) else {
        *base = given.clone();
        return Ok(());
    };
    for (name, value) in given {
        let full = if path.is_empty() {
            name.clone()
        } else {
            format!("{path}.{name}")
        };
        let Some(slot) = base.get_mut(name) else {
            let mut names: Vec<&str> = base.keys().map(String::as_str).collect();
            names.sort_unstable();
            return Err(OptionError(format!(
                "{strategy} has no option `{full}` (it has: {})",
                names.join(", ")
            )));
        };
        lay(slot, value, strategy, &full)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pairs(items: &[&str]) -> Result<Value, OptionError> {
        parse_pairs(&items.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn pairs_nest_by_dots_and_read_json_values() {
        assert_eq!(pairs(&[]).unwrap(), Value::Null);
        assert_eq!(
            pairs(&["trigger=0.4", "cascade.prepare=0.3", "name=fast model"]).unwrap(),
            json!({"trigger": 0.4, "cascade": {"prepare": 0.3}, "name": "fast model"})
        );
        assert!(pairs(&["trigger"]).unwrap_err().0.contains("KEY=VALUE"));
        assert!(
            pairs(&["a=1", "a.b=2"])
                .unwrap_err()
                .0
                .contains("not a group")
        );
        assert!(pairs(&[".x=1"]).unwrap_err().0.contains("empty name"));
    }

    #[test]
    fn options_lay_over_the_defaults_and_bad_ones_say_why() {
        let Resolved::SelfGc(options) = StrategyName::SelfGc
            .resolve(&json!({"trigger": 0.5}))
            .unwrap()
        else {
            panic!("self-gc")
        };
        assert_eq!(options.trigger, 0.5);
        assert_eq!(options.regrowth, SelfGcOptions::default().regrowth);

        let Resolved::Cwm(options) = StrategyName::Cwm
            .resolve(&json!({"cascade": {"prepare": 0.4}, "summarise_over": 800}))
            .unwrap()
        else {
            panic!("cwm")
        };
        assert_eq!(options.cascade.prepare, 0.4);
        assert_eq!(options.cascade.active, Cascade::default().active);
        assert_eq!(options.summarise_over, 800);

        let error = StrategyName::SelfGc
            .resolve(&json!({"trigger": 2.0}))
            .unwrap_err();
        assert!(error.0.contains("trigger 2 must be a share"), "{error}");
        let Resolved::SelfGc(options) = StrategyName::SelfGc
            .resolve(&json!({"cache_ttl_s": 60}))
            .unwrap()
        else {
            panic!("self-gc")
        };
        assert_eq!(options.cache_ttl_s, 60);
        let error = StrategyName::SelfGc
            .resolve(&json!({"cache_ttl_s": 0}))
            .unwrap_err();
        assert!(error.0.contains("cache_ttl_s must be above 0"), "{error}");
        let error = StrategyName::SelfGc
            .resolve(&json!({"cache_ttl_s": -5}))
            .unwrap_err();
        assert!(error.0.contains("self-gc"), "{error}");
        let error = StrategyName::SelfGc
            .resolve(&json!({"cache_ttl_s": "soon"}))
            .unwrap_err();
        assert!(error.0.contains("self-gc"), "{error}");
        let error = StrategyName::SelfGc
            .resolve(&json!({"trigr": 0.5}))
            .unwrap_err();
        assert!(
            error.0.contains("no option `trigr`") && error.0.contains("trigger"),
            "{error}"
        );
        let error = StrategyName::Cwm
            .resolve(&json!({"cascade": {"prepare": 0.9}}))
            .unwrap_err();
        assert!(error.0.contains("must rise"), "{error}");
        let error = StrategyName::Cwm
            .resolve(&json!({"cascade": {"prepar": 0.4}}))
            .unwrap_err();
        assert!(error.0.contains("`cascade.prepar`"), "{error}");
        let Resolved::Cwm(options) = StrategyName::Cwm
            .resolve(&json!({"zones": {"orange": 0.6}}))
            .unwrap()
        else {
            panic!("cwm")
        };
        assert_eq!(options.zones.orange, 0.6);
        let error = StrategyName::Cwm
            .resolve(&json!({"zones": {"orange": 0.95}}))
            .unwrap_err();
        assert!(error.0.contains("zones must rise"), "{error}");
        let error = StrategyName::Cwm
            .resolve(&json!({"summarise_over": "lots"}))
            .unwrap_err();
        assert!(error.0.starts_with("cwm: "), "{error}");
        assert!(StrategyName::Cwl.resolve(&json!({"x": 1})).is_err());
        assert_eq!(
            StrategyName::Cwl.resolve(&Value::Null).unwrap(),
            Resolved::Cwl
        );
    }
}
