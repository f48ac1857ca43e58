//! `cwl sweep`: the low-water mark's trade-off, measured. The engine is
//! replayed once per low-water value over the same logs and the baselines
//! once, so the cost of each setting can be read against what it keeps:
//! a table, JSON, and a cost-versus-retention plot.

use std::io::Write;
use std::path::Path;

use anyhow::bail;
use clap::Args;
use cwl::Share;
use plotters::prelude::*;
use serde::Serialize;

use crate::cli::{ReplayArgs, replay_files};
use crate::metrics::{Stats, Summary};
use crate::policy::PolicyKind;
use crate::report::ReplayReport;

/// Arguments of `cwl sweep`: those of `cwl replay` (its `--policy` lists
/// the baselines to compare with) and the low-water values to try.
#[derive(Debug, Args)]
#[command(
    about = "Replay the engine at several low-water marks and the baselines once: cost against retention, to choose --low-water",
    long_about = "Replay the engine (policy `cwl`) over the logs once per low-water value and every other policy of --policy once, and report each run's aggregate: request tokens, share over budget, view changes (the share of requests that broke the previous request's prefix), cost and retention (anchors and content). Replays are calibrated and priced as `cwl replay`'s. --plot draws cost against each retention metric: the engine's curve, one point per low-water value, and one point per baseline."
)]
pub struct SweepArgs {
    /// Low-water values to try, as shares of the budget.
    #[arg(
        long,
        value_name = "LIST",
        value_delimiter = ',',
        default_value = "0.5,0.6,0.7,0.75,0.8,0.85,0.9,1"
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

/// Replays the logs as `cwl replay` would (calibrated, each log priced by
/// its own model unless `--model`), with `policies` and `low_water`.
fn aggregate(
    args: &ReplayArgs,
    policies: String,
    low_water: Share,
) -> anyhow::Result<(ReplayReport, Vec<(PolicyKind, Stats)>)> {
    let mut args = args.clone();
    args.policy = policies;
    args.engine.low_water = Some(low_water);
    let (report, _) = replay_files(&args)?;
    if let Some(skipped) = report.skipped.first() {
        bail!("cannot replay {}: {}", skipped.path, skipped.why);
    }
    let aggregate = report.aggregate();
    Ok((report, aggregate))
}

/// The rows of a sweep, with the budget as typed and the model costs are
/// for (`None`: each log's own).
#[derive(Debug, Clone, PartialEq)]
pub struct Sweep {
    /// The engine's rows in the order of `--points`, then the baselines'.
    pub rows: Vec<SweepRow>,
    /// The budget as the user typed it.
    pub budget: String,
    /// The model every cost is for, when one was given.
    pub model: Option<String>,
}

/// Runs the sweep and prints it (table, or JSON with `--json`).
pub fn run_sweep(args: SweepArgs) -> anyhow::Result<()> {
    let Sweep {
        rows,
        budget,
        model,
    } = sweep(&args)?;
    let model = model.unwrap_or_else(|| "each log's own model".to_string());
    let mut out = std::io::stdout().lock();
    if args.replay.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&rows)?)?;
    } else {
        write!(out, "{}", render(&rows, &budget, &model))?;
    }
    out.flush()?;
    if let Some(path) = &args.replay.plot {
        write_svg(&rows, path)?;
    }
    Ok(())
}

/// `--losses` given to `cwl sweep`, whose report has no requests to list.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--losses lists the requests of one replay: give it to `cwl replay`, not `cwl sweep`")]
pub struct LossesInSweep;

/// Replays the engine at each low-water point and the baselines once.
pub fn sweep(args: &SweepArgs) -> anyhow::Result<Sweep> {
    if args.points.is_empty() {
        bail!("--points needs at least one low-water value");
    }
    if args.replay.losses {
        return Err(LossesInSweep.into());
    }
    let baselines: Vec<&str> = PolicyKind::parse_list(&args.replay.policy)?
        .into_iter()
        .filter(|kind| *kind != PolicyKind::Cwl)
        .map(PolicyKind::name)
        .collect();
    let mut rows = Vec::new();
    let mut header = None;
    for &point in &args.points {
        eprintln!("sweep: cwl at low water {point}");
        let (report, aggregate) = aggregate(&args.replay, "cwl".into(), point)?;
        header.get_or_insert_with(|| (report.budget_typed.clone(), report.model.clone()));
        for (_, stats) in aggregate {
            rows.push(SweepRow {
                policy: "cwl".into(),
                low_water: Some(point.get()),
                summary: stats.summary(),
            });
        }
    }
    if !baselines.is_empty() {
        eprintln!("sweep: {} baselines", baselines.len());
        let (_, aggregate) = aggregate(
            &args.replay,
            baselines.join(","),
            args.replay.engine.config(0).low_water,
        )?;
        for (kind, stats) in aggregate {
            rows.push(SweepRow {
                policy: kind.name().into(),
                low_water: None,
                summary: stats.summary(),
            });
        }
    }
    let (budget, model) = header.unwrap_or_default();
    Ok(Sweep {
        rows,
        budget,
        model,
    })
}

/// The sweep as a table.
pub fn render(rows: &[SweepRow], budget: &str, model: &str) -> String {
    let mut out = format!(
        "low-water sweep (budget {budget}, costs for {model})\n{:<16} {:>9} {:>9} {:>8} {:>9} {:>10} {:>7} {:>10} {:>10}\n",
        "policy",
        "low water",
        "mean",
        ">budget",
        "view chg",
        "cost $",
        "lost",
        "loss-free",
        "content"
    );
    for row in rows {
        let s = &row.summary;
        out.push_str(&format!(
            "{:<16} {:>9} {:>9.0} {:>7.1}% {:>8.1}% {:>10} {:>6.1}% {:>9.1}% {:>9.1}%\n",
            row.policy,
            row.low_water
                .map_or_else(|| "-".to_string(), |w| format!("{w:.2}")),
            s.tokens_mean,
            s.over_budget_share * 100.0,
            s.view_changes * 100.0,
            s.cost_usd
                .map_or_else(|| "unknown".to_string(), |c| format!("{c:.2}")),
            s.lost_anchor_rate * 100.0,
            s.loss_free_share * 100.0,
            s.content_loss_free_share * 100.0,
        ));
    }
    out
}

/// Draws cost (x) against retention (y), one panel for the anchor metric
/// and one for the content metric: the engine's points joined in
/// low-water order and labelled with their value, baselines as dots.
pub fn write_svg(rows: &[SweepRow], path: &Path) -> anyhow::Result<()> {
    let draw = |what: String| anyhow::anyhow!("cannot write plot {}: {what}", path.display());
    if rows.is_empty() {
        bail!("nothing to plot");
    }
    if rows.iter().any(|r| r.summary.cost_usd.is_none()) {
        bail!("cannot plot cost: the model has no price (give it with --model or --price)");
    }
    let root = SVGBackend::new(path, (1200, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| draw(e.to_string()))?;
    let panels = root.split_evenly((1, 2));
    let metrics: [(&str, Metric); 2] = [
        ("loss-free requests (anchors), %", |s| {
            s.loss_free_share * 100.0
        }),
        ("loss-free requests (content), %", |s| {
            s.content_loss_free_share * 100.0
        }),
    ];
    for (panel, (label, metric)) in panels.iter().zip(metrics) {
        panel_svg(panel, rows, label, metric).map_err(draw)?;
    }
    root.present().map_err(|e| draw(e.to_string()))?;
    Ok(())
}

/// A retention figure of a summary, in percent.
type Metric = fn(&Summary) -> f64;

fn panel_svg(
    panel: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    rows: &[SweepRow],
    label: &str,
    metric: Metric,
) -> Result<(), String> {
    let err = |e: &dyn std::fmt::Display| e.to_string();
    let cost = |r: &SweepRow| r.summary.cost_usd.unwrap_or_default();
    let kept = |r: &SweepRow| metric(&r.summary);
    let (x_min, x_max) = bounds(rows.iter().map(cost));
    let (y_min, y_max) = bounds(rows.iter().map(kept));
    let mut chart = ChartBuilder::on(panel)
        .caption(format!("cost against {label}"), ("sans-serif", 16))
        .margin(14)
        .x_label_area_size(40)
        .y_label_area_size(56)
        .build_cartesian_2d(x_min..x_max, y_min..y_max)
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .x_desc("cost in US dollars (lower is better)")
        .y_desc(label)
        .draw()
        .map_err(|e| err(&e))?;
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
        .map_err(|e| err(&e))?
        .label("cwl by low-water mark")
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], blue.stroke_width(2)));
    chart
        .draw_series(engine.iter().enumerate().map(|(i, &(x, y, w))| {
            let below = if i % 2 == 0 { -14 } else { 6 };
            EmptyElement::at((x, y))
                + Circle::new((0, 0), 4, blue.filled())
                + Text::new(format!("{w:.2}"), (4, below), ("sans-serif", 12))
        }))
        .map_err(|e| err(&e))?;
    let grey = RGBColor(110, 110, 110);
    chart
        .draw_series(rows.iter().filter(|r| r.low_water.is_none()).map(|r| {
            EmptyElement::at((cost(r), kept(r)))
                + Circle::new((0, 0), 4, grey.filled())
                + Text::new(r.policy.clone(), (6, 4), ("sans-serif", 12))
        }))
        .map_err(|e| err(&e))?;
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .border_style(BLACK)
        .background_style(WHITE.mix(0.85))
        .draw()
        .map_err(|e| err(&e))?;
    Ok(())
}

fn bounds(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (low, high) = values.fold((f64::MAX, f64::MIN), |(l, h), v| (l.min(v), h.max(v)));
    let pad = ((high - low) * 0.08).max(0.5);
    (low - pad, high + pad)
}
