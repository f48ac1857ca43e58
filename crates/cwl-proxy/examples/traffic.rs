//! Measures `cwl proxy` on a real client's recorded traffic.
//!
//! ```sh
//! cargo run --release -p cwl-proxy --example traffic -- /tmp/real-logs/codex080-12r --budget 40k
//! ```
//!
//! Sends every request of a run of `scripts/real-clients/run.sh` (its
//! `<client>-direct/upstream/`), in order, through an in-process proxy to
//! a local upstream that reports usage as the scripted upstream did, and
//! prints, over the main requests: forwarded tokens against τ, prefix
//! breaks against the client's own, content loss-free in the lab's sense
//! and, with the client's log beside it, the lab's policies on that log.
//! Arguments after the run directory go to the proxy as `cwl proxy`
//! flags (`--budget` among them); `--no-lab` skips the lab and
//! `--losses` lists the requests that lost content, `--breaks` those that
//! broke the forwarded prefix; `--replicas N` sends request `k` to replica
//! `k % N` of N proxies sharing a session directory (`--shared-sessions`).

#[path = "../tests/integration/measure/mod.rs"]
mod measure;

use std::path::PathBuf;

use measure::Figures;

fn main() -> Result<(), String> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut flag = |name: &str| {
        let at = args.iter().position(|a| a == name);
        at.map(|at| args.remove(at)).is_some()
    };
    let (no_lab, losses, breaks) = (flag("--no-lab"), flag("--losses"), flag("--breaks"));
    let passes = flag("--passes");
    let replicas = match args.iter().position(|a| a == "--replicas") {
        Some(at) if at + 1 < args.len() => {
            let n = args.remove(at + 1);
            args.remove(at);
            n.parse::<usize>()
                .map_err(|_| format!("--replicas {n}: not a number"))?
        }
        Some(_) => return Err("--replicas needs a number".into()),
        None => 1,
    };
    if args.is_empty() {
        return Err("usage: traffic RUN_DIR [--no-lab] [--losses] [cwl proxy flags]".into());
    }
    let dir = PathBuf::from(args.remove(0));
    let budget = args
        .iter()
        .position(|a| a == "--budget")
        .and_then(|at| args.get(at + 1))
        .cloned()
        .unwrap_or_else(|| "80k".into());
    let tau: usize = parse_tokens(&budget)?;
    let run = measure::load(&dir)?;
    eprintln!(
        "{}: {} requests, reasoning items count {} tokens each",
        run.dir.display(),
        run.requests.len(),
        run.reasoning
    );
    let forwarded = measure::forward_through(&run, &args, replicas)?;
    if let Ok(dump) = std::env::var("TRAFFIC_DUMP") {
        std::fs::create_dir_all(&dump).map_err(|e| e.to_string())?;
        for (k, forwarded) in forwarded.iter().enumerate() {
            if let Some(body) = &forwarded.body {
                std::fs::write(format!("{dump}/{k:03}.json"), body).map_err(|e| e.to_string())?;
            }
        }
    }
    let f = measure::measure(&run, &forwarded, tau);
    print(&run, &f, tau);
    if losses {
        for (k, lines, values) in &f.losses {
            println!("  request {k:03}: lost {lines} lines and values {values:?}");
        }
    }
    if passes {
        for (k, forwarded) in forwarded.iter().enumerate() {
            let verbose = std::env::var("TRAFFIC_EVENTS").is_ok();
            if let Some(e) = forwarded
                .event
                .as_ref()
                .filter(|e| verbose || !e.evicted.is_empty())
            {
                println!(
                    "  request {k:03} ({}, {}): pass {} → {} tokens, {} evicted: {}",
                    e.conversation,
                    e.route,
                    e.tokens_before,
                    e.tokens_after,
                    e.evicted.len(),
                    e.evicted.join(", ")
                );
            }
        }
    }
    if breaks {
        for (k, own, at, of) in &f.breaks {
            let own = if *own { " (the client's too)" } else { "" };
            println!("  request {k:03}: prefix broken at item {at} of {of}{own}");
        }
    }
    if let (Some(log), false) = (&run.log, no_lab) {
        println!("lab on {} (budget {budget}):", log.display());
        for (policy, loss_free, over) in measure::lab(log, &budget)? {
            println!("  {policy:<16} content loss-free {loss_free:5.1}%  >budget {over:5.1}%");
        }
    }
    Ok(())
}

fn print(run: &measure::Run, f: &Figures, tau: usize) {
    println!("run {}", run.dir.display());
    println!(
        "  main requests {}; forwarded tokens mean {:.0}, max {} (max where the floor fits {})",
        f.requests, f.mean, f.max, f.max_fitting
    );
    println!(
        "  over τ={tau}: {} ({:.1}%); over τ×1.05: {} ({:.1}%), of which the client's user turns and latest turn fit: {}",
        f.over,
        Figures::pct(f.over, f.requests),
        f.over_slack,
        Figures::pct(f.over_slack, f.requests),
        f.over_slack_fitting
    );
    println!(
        "  prefix breaks: proxy {}/{} ({:.1}%), client's own {} ({:.1}%)",
        f.proxy_breaks,
        f.compared,
        f.proxy_break_pct(),
        f.client_breaks,
        f.client_break_pct()
    );
    println!(
        "  content loss-free (of what the client sent): proxy {}/{} ({:.1}%); the client's own requests against the whole transcript {}/{} ({:.1}%)",
        f.loss_free,
        f.at_risk,
        f.loss_free_pct(),
        f.client_loss_free,
        f.client_at_risk,
        Figures::pct(f.client_loss_free, f.client_at_risk)
    );
}

/// `40k`, `40000`, `1.5M` as tokens.
fn parse_tokens(text: &str) -> Result<usize, String> {
    let lower = text.trim().to_ascii_lowercase();
    let (number, scale) = match lower.strip_suffix('k') {
        Some(n) => (n, 1e3),
        None => match lower.strip_suffix('m') {
            Some(n) => (n, 1e6),
            None => (lower.as_str(), 1.0),
        },
    };
    number
        .parse::<f64>()
        .map(|n| (n * scale).round() as usize)
        .map_err(|_| format!("--budget {text}: not a number of tokens"))
}
