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

/// Codex CLI 0.80.0, 3 rounds: nothing the client sent and a reply used
/// is lost, and the proxy's prefix breaks stay within 5 points of the
/// client's own (passes come early where its provider drops reasoning).
#[test]
fn codex_traffic_keeps_content_and_the_cached_prefix() {
    let Some(run) = run("codex080-3r") else {
        return;
    };
    let f = budget_40k(&run);
    assert!(f.at_risk > 0);
    assert_eq!(f.loss_free, f.at_risk, "{:?}", f.losses);
    assert_eq!(f.over_slack, 0);
    assert!(f.proxy_break_pct() <= f.client_break_pct() + 5.0, "{f:?}");
}

/// Claude Code 2.0.77, 16 rounds with compactions: no view passes τ×1.05
/// (the files it restores after compacting are evictable).
#[test]
fn claude_code_traffic_holds_the_budget_after_compacting() {
    let Some(run) = run("claude2077-16r-pct62") else {
        return;
    };
    let f = budget_40k(&run);
    assert_eq!(f.over_slack, 0, "{f:?}");
    assert!(f.max <= 42_000, "{f:?}");
}
