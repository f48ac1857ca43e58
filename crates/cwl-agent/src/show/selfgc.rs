//! The health part of `cwl sessions show` for a Self-GC session: its own
//! figures (see `cwl_selfgc::SelfGcMetrics`), which are not cwm's.

use serde_json::Value;

use crate::agent::status::human_tokens;

fn percent(value: &Value) -> String {
    value
        .as_f64()
        .map_or_else(|| "-".to_string(), |v| format!("{:.0}%", v * 100.0))
}

fn tokens(value: &Value) -> String {
    value
        .as_u64()
        .map_or_else(|| "-".to_string(), |v| human_tokens(v as usize))
}

/// The lines of Self-GC's figures `health`, as `metrics()` gave them.
pub(super) fn render(health: &Value) -> String {
    let plans = &health["plans"];
    let rejected = &plans["rejected"];
    let failures = &health["planner_failures"];
    let actions = &health["actions"];
    let prune = &health["prune"];
    let mut out = String::from("health\n");
    out.push_str(&format!(
        "  utilisation   {} of the budget (zone {}; the planner is asked from {} tokens)\n",
        percent(&health["utilisation"]),
        health["zone"].as_str().unwrap_or("-"),
        tokens(&health["trigger_tokens"]),
    ));
    out.push_str(&format!(
        "  prune         last commit {}, cumulative {} (view {} of {} transcript tokens)\n",
        if prune["last"].is_null() {
            "none yet".to_string()
        } else {
            percent(&prune["last"])
        },
        percent(&prune["cumulative"]),
        tokens(&prune["view_tokens"]),
        tokens(&prune["transcript_tokens"]),
    ));
    let pending = match plans["pending_prune"].as_f64() {
        Some(share) => format!("1 pending, {:.0}%", share * 100.0),
        None => "0 pending".to_string(),
    };
    out.push_str(&format!(
        "  plans         {} asked, {} answered: {} accepted ({} committed, {} superseded, {pending}), {} refused ({} no target, {} too little)\n",
        plans["asked"],
        plans["answered"],
        plans["accepted"],
        plans["committed"],
        plans["superseded"],
        rejected["total"],
        rejected["no_target"],
        rejected["too_little"],
    ));
    if plans["unclassified"].as_u64().is_some_and(|n| n > 0) {
        out.push_str(&format!(
            "                {} earlier answers changed nothing (saved without their reason)\n",
            plans["unclassified"]
        ));
    }
    out.push_str(&format!(
        "  planner       {} gave no plan ({} timed out, {} failed, {} malformed), {} in a row\n",
        failures["total"],
        failures["timeout"],
        failures["error"],
        failures["malformed"],
        failures["in_a_row"],
    ));
    out.push_str(&format!(
        "  actions       {} folds, {} masks, {} prunes by plans; {} backstop prunes in {} passes\n",
        actions["folds"],
        actions["masks"],
        actions["prunes"],
        actions["backstop_prunes"],
        health["backstop_passes"],
    ));
    out.push_str(&format!(
        "  sidecars      {} files, {} bytes; {} recalls served\n",
        health["sidecars"], health["sidecar_bytes"], health["recalls_served"],
    ));
    let alerts: Vec<&str> = health["alerts"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if alerts.is_empty() {
        out.push_str("  alerts        none\n");
    }
    for alert in alerts {
        out.push_str(&format!("  alert         {alert}\n"));
    }
    out
}
