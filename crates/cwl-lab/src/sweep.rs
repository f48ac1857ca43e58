//! `cwl sweep`: the low-water mark's trade-off, measured. The engine is
//! replayed once per low-water value over the same logs and the baselines
//! once, so the cost of each setting can be read against what it keeps:
//! a table, JSON, and a cost-versus-retention plot.

use std::io::Write;
use std::path::Path;

use anyhow::{Context as _, bail};
use clap::Args;
use cwl::Share;
use plotters::prelude::*;
use serde::Serialize;

use crate::cli::ReplayArgs;
use crate::metrics::{Stats, Summary};
use crate::policy::PolicyKind;
use crate::replay::{ReplayConfig, replay};
use crate::report::ReplayReport;
use crate::session::Session;

/// Arguments of `cwl sweep`: those of `cwl replay` (its `--policy` lists
/// the baselines to compare with) and the low-water values to try.
#[derive(Debug, Args)]
#[command(
    about = "Replay the engine at several low-water marks and the baselines once: cost against retention, to choose --low-water",
    long_about = "Replay the engine (policy `cwl`) over the logs once per low-water value and every other policy of --policy once, and report each run's aggregate: request tokens, share over budget, view changes (evictions per request), cost and retention. --plot draws cost against loss-free share: the engine's curve, one point per low-water value, and one point per baseline."
)]
pub struct SweepArgs {
    /// Low-water values to try, as shares of the budget.
    #[arg(
        long,
        value_name = "LIST",
        value_delimiter = ',',
        default_value = "0.5,0.6,0.7,0.75,0.8,0.9,1"
    )]
    pub points: Vec<Share>,
    /// The logs and replay settings, as for `cwl replay`.
    #[command(flatten)]
    pub replay: ReplayArgs,
}

/// One run of the sweep: the engine at a low-water mark, or a baseline.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SweepRow {
    /// `cwl` or the baseline's name.
    pub policy: String,
    /// The low-water share, for the engine.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub low_water: Option<f64>,
    /// The aggregate over all files.
    #[serde(flatten)]
    pub summary: Summary,
}

fn aggregate(
    files: &[std::path::PathBuf],
    config: &ReplayConfig,
) -> anyhow::Result<Vec<(PolicyKind, Stats)>> {
    let mut reports = Vec::new();
    for path in files {
        let shown = path.display().to_string();
        let session = Session::open(path).with_context(|| format!("cannot replay {shown}"))?;
        reports.push(replay(session, &shown, config, &mut || {}));
    }
    let report = ReplayReport {
        budget: config.policy.budget,
        budget_typed: config.policy.budget.to_string(),
        model: Some(config.pricing.model.clone()),
        policies: config.policies.clone(),
        files: reports,
        skipped: Vec::new(),
    };
    Ok(report.aggregate())
}

/// Runs the sweep and prints it (table, or JSON with `--json`).
pub fn run_sweep(args: SweepArgs) -> anyhow::Result<()> {
    if args.points.is_empty() {
        bail!("--points needs at least one low-water value");
    }
    let base = args.replay.config()?;
    let mut rows = Vec::new();
    for &point in &args.points {
        let mut config = base.clone();
        config.policies = vec![PolicyKind::Cwl];
        config.policy.low_water = point;
        eprintln!("sweep: cwl at low water {point}");
        for (_, stats) in aggregate(&args.replay.files, &config)? {
            rows.push(SweepRow {
                policy: "cwl".into(),
                low_water: Some(point.get()),
                summary: stats.summary(),
            });
        }
    }
    let mut config = base.clone();
    config.policies.retain(|kind| *kind != PolicyKind::Cwl);
    if !config.policies.is_empty() {
        eprintln!("sweep: {} baselines", config.policies.len());
        for (kind, stats) in aggregate(&args.replay.files, &config)? {
            rows.push(SweepRow {
                policy: kind.name().into(),
                low_water: None,
                summary: stats.summary(),
            });
        }
    }
    let mut out = std::io::stdout().lock();
    if args.replay.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&rows)?)?;
    } else {
        write!(
            out,
            "{}",
            render(&rows, base.policy.budget, &base.pricing.model)
        )?;
    }
    out.flush()?;
    if let Some(path) = &args.replay.plot {
        write_svg(&rows, path)?;
    }
    Ok(())
}

/// The sweep as a table.
pub fn render(rows: &[SweepRow], budget: usize, model: &str) -> String {
    let mut out = format!(
        "low-water sweep (budget {budget}, costs for {model})\n{:<16} {:>9} {:>9} {:>8} {:>10} {:>10} {:>9} {:>10}\n",
        "policy", "low water", "mean", ">budget", "evict/req", "cost $", "lost", "loss-free"
    );
    for row in rows {
        let s = &row.summary;
        out.push_str(&format!(
            "{:<16} {:>9} {:>9.0} {:>7.1}% {:>10.2} {:>10} {:>8.1}% {:>9.1}%\n",
            row.policy,
            row.low_water
                .map_or_else(|| "-".to_string(), |w| format!("{w:.2}")),
            s.tokens_mean,
            s.over_budget_share * 100.0,
            s.evictions,
            s.cost_usd
                .map_or_else(|| "unknown".to_string(), |c| format!("{c:.2}")),
            s.lost_anchor_rate * 100.0,
            s.loss_free_share * 100.0,
        ));
    }
    out
}

/// Draws cost (x) against loss-free share (y): the engine's points joined
/// in low-water order and labelled with their value, baselines as dots.
pub fn write_svg(rows: &[SweepRow], path: &Path) -> anyhow::Result<()> {
    let draw = |what: String| anyhow::anyhow!("cannot write plot {}: {what}", path.display());
    if rows.is_empty() {
        bail!("nothing to plot");
    }
    if rows.iter().any(|r| r.summary.cost_usd.is_none()) {
        bail!("cannot plot cost: the model has no price (give it with --price)");
    }
    let cost = |r: &SweepRow| r.summary.cost_usd.unwrap_or_default();
    let kept = |r: &SweepRow| r.summary.loss_free_share * 100.0;
    let (x_min, x_max) = bounds(rows.iter().map(cost));
    let (y_min, y_max) = bounds(rows.iter().map(kept));
    let root = SVGBackend::new(path, (1000, 640)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| draw(e.to_string()))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "cost against retention: cwl by low-water mark, and the baselines",
            ("sans-serif", 20),
        )
        .margin(16)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(x_min..x_max, y_min..y_max)
        .map_err(|e| draw(e.to_string()))?;
    chart
        .configure_mesh()
        .x_desc("cost in US dollars (lower is better)")
        .y_desc("loss-free requests, % (higher is better)")
        .draw()
        .map_err(|e| draw(e.to_string()))?;
    let engine: Vec<(f64, f64, f64)> = rows
        .iter()
        .filter_map(|r| r.low_water.map(|w| (cost(r), kept(r), w)))
        .collect();
    let blue = RGBColor(31, 119, 180);
    chart
        .draw_series(LineSeries::new(
            engine.iter().map(|&(x, y, _)| (x, y)),
            blue.stroke_width(2),
        ))
        .map_err(|e| draw(e.to_string()))?;
    chart
        .draw_series(engine.iter().map(|&(x, y, w)| {
            EmptyElement::at((x, y))
                + Circle::new((0, 0), 4, blue.filled())
                + Text::new(format!("cwl {w:.2}"), (6, -12), ("sans-serif", 13))
        }))
        .map_err(|e| draw(e.to_string()))?;
    let grey = RGBColor(110, 110, 110);
    chart
        .draw_series(rows.iter().filter(|r| r.low_water.is_none()).map(|r| {
            EmptyElement::at((cost(r), kept(r)))
                + Circle::new((0, 0), 4, grey.filled())
                + Text::new(r.policy.clone(), (6, 4), ("sans-serif", 13))
        }))
        .map_err(|e| draw(e.to_string()))?;
    root.present().map_err(|e| draw(e.to_string()))?;
    Ok(())
}

fn bounds(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (low, high) = values.fold((f64::MAX, f64::MIN), |(l, h), v| (l.min(v), h.max(v)));
    let pad = ((high - low) * 0.08).max(0.5);
    (low - pad, high + pad)
}
