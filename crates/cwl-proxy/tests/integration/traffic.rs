//! Real clients' recorded traffic through the proxy ([`crate::measure`]),
//! when the recordings are on this machine (`CWL_REAL_LOGS`, default
//! `/tmp/real-logs`); skipped otherwise.

use crate::measure;

use std::path::PathBuf;

fn run(name: &str) -> Option<measure::Run> {
    let root = std::env::var("CWL_REAL_LOGS").unwrap_or_else(|_| "/tmp/real-logs".into());
    let dir = PathBuf::from(root).join(name);
    match measure::load(&dir) {
        Ok(run) => Some(run),
        Err(why) => {
            eprintln!("skipped: {why}");
            None
        }
    }
}

fn budget_40k(run: &measure::Run) -> measure::Figures {
    let args = ["--budget".to_string(), "40k".to_string()];
    let forwarded = measure::forward(run, &args).expect("the traffic goes through");
    measure::measure(run, &forwarded, 40_000)
}

/// The lab's shares are rounded to six decimals: 0.0001 points.
const ROUNDING: f64 = 1e-4;

/// The content loss-free share (percent) of the best simple policy that
/// holds the budget, by the lab on the client's own log at τ 40k.
fn best_simple_holder(run: &measure::Run) -> f64 {
    let log = run
        .log
        .as_ref()
        .expect("the client's log beside its traffic");
    measure::lab(log, "40k")
        .expect("the lab replays the client's log")
        .into_iter()
        .filter(|(policy, _, over)| {
            *over == 0.0 && !["cwl", "cwm", "self-gc"].contains(&policy.as_str())
        })
        .map(|(_, loss_free, _)| loss_free)
        .fold(0.0, f64::max)
}

/// Codex CLI 0.80.0, 3 rounds, through its `shell_command` tool
/// (`codex080-3r`) and its `exec_command` one (`codex080ue-3r`): the proxy
/// keeps at least as much of what the client sent and a reply used as the
/// best simple policy that holds the budget, and its prefix breaks stay
/// within 5 points of the client's own (passes come early, and go deeper,
/// where its provider drops reasoning).
#[test]
fn codex_traffic_keeps_content_and_the_cached_prefix() {
    for name in ["codex080-3r", "codex080ue-3r"] {
        let Some(run) = run(name) else {
            continue;
        };
        let f = budget_40k(&run);
        assert!(f.at_risk > 0, "{name}");
        let best = best_simple_holder(&run);
        assert!(best > 0.0, "{name}: the lab ran");
        assert!(
            f.loss_free_pct() >= best - ROUNDING,
            "{name}: {best} {:?}",
            f.losses
        );
        assert_eq!(f.over_slack, 0, "{name}");
        assert!(
            f.proxy_break_pct() <= f.client_break_pct() + 5.0,
            "{name}: {f:?}"
        );
    }
}

/// Claude Code 2.0.77, 16 rounds with compactions: no view passes τ×1.05
/// (the files it restores after compacting are evictable), and the proxy
/// keeps as much content as the best simple policy that holds τ.
#[test]
fn claude_code_traffic_holds_the_budget_after_compacting() {
    let Some(run) = run("claude2077-16r-pct62") else {
        return;
    };
    let f = budget_40k(&run);
    assert_eq!(f.over_slack, 0, "{f:?}");
    assert!(f.max <= 42_000, "{f:?}");
    assert!(
        f.loss_free_pct() >= best_simple_holder(&run) - ROUNDING,
        "{f:?}"
    );
}
