//! The plot: request tokens over each session, one line per policy, the
//! budget as a grey line and evictions as dots on the line. One panel per
//! file. SVG only: raster output would need system fonts, which the lab
//! does not load.
//!
//! Long sessions are downsampled so the file stays small whatever the
//! corpus: each line has at most [`TOTAL_POINTS`] / (files × policies)
//! points (between [`MIN_POINTS`] and [`MAX_POINTS`]), each the largest
//! request of its run of calls, so peaks over the budget stay visible; a
//! dot marks a run with an eviction. The mesh has no minor lines, and the
//! budget is one line rather than dashes, for the same reason.

use std::path::Path;

use plotters::prelude::*;

use super::ReplayReport;

/// Why the plot could not be written.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    /// An output name that is not `.svg`.
    #[error(
        "cannot plot to {0}: only .svg is supported (PNG would need system fonts, which the lab does not load); convert the SVG if you need a raster"
    )]
    Format(String),
    /// Nothing to draw.
    #[error("nothing to plot: no file was replayed")]
    Empty,
    /// Drawing or writing failed.
    #[error("cannot write plot {path}: {what}")]
    Draw {
        /// The output.
        path: String,
        /// What failed.
        what: String,
    },
}

/// Width of the image in pixels.
pub const WIDTH: u32 = 1200;
/// Height of one file's panel in pixels.
pub const PANEL_HEIGHT: u32 = 520;

/// Points drawn over all lines of a plot, at most (roughly).
pub const TOTAL_POINTS: usize = 60_000;
/// Fewest points a line is cut down to.
pub const MIN_POINTS: usize = 20;
/// Most points a line keeps.
pub const MAX_POINTS: usize = 2_000;

/// `(call, tokens, evicted)` per request, cut to at most `cap` points: the
/// calls split into `cap` runs, each drawn as its largest request and
/// marked evicted when any request of the run evicted.
pub fn downsample(tokens: &[u32], evictions: &[u32], cap: usize) -> Vec<(u32, u32, bool)> {
    let cap = cap.max(1);
    let all = tokens
        .iter()
        .zip(evictions.iter().chain(std::iter::repeat(&0)))
        .enumerate()
        .map(|(i, (t, e))| (i as u32 + 1, *t, *e > 0));
    if tokens.len() <= cap {
        return all.collect();
    }
    let run = tokens.len().div_ceil(cap);
    let points: Vec<(u32, u32, bool)> = all.collect();
    points
        .chunks(run)
        .filter_map(|chunk| {
            let top = chunk.iter().max_by_key(|p| (p.1, std::cmp::Reverse(p.0)))?;
            Some((top.0, top.1, chunk.iter().any(|p| p.2)))
        })
        .collect()
}

/// Writes the plot of `report` to `path` (which must end in `.svg`).
pub fn write_svg(report: &ReplayReport, path: &Path) -> Result<(), PlotError> {
    let is_svg = path
        .extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("svg"));
    if !is_svg {
        return Err(PlotError::Format(path.display().to_string()));
    }
    if report.files.is_empty() {
        return Err(PlotError::Empty);
    }
    let draw = |what: String| PlotError::Draw {
        path: path.display().to_string(),
        what,
    };
    let height = PANEL_HEIGHT * report.files.len() as u32;
    let root = SVGBackend::new(path, (WIDTH, height)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| draw(e.to_string()))?;
    let panels = root.split_evenly((report.files.len(), 1));
    let series = (report.files.len() * report.policies.len()).max(1);
    let cap = (TOTAL_POINTS / series).clamp(MIN_POINTS, MAX_POINTS);
    for (panel, file) in panels.iter().zip(&report.files) {
        let requests = file.requests.max(1) as u32;
        let peak = file
            .policies
            .iter()
            .flat_map(|o| o.stats.tokens.iter().copied())
            .max()
            .unwrap_or(0)
            .max(file.budget as u32);
        let top = peak + peak / 10 + 1;
        let name = Path::new(&file.path)
            .file_name()
            .map_or(file.path.clone(), |n| n.to_string_lossy().into_owned());
        let mut chart = ChartBuilder::on(panel)
            .caption(
                format!("{name}: request tokens per model call"),
                ("sans-serif", 18),
            )
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(70)
            .build_cartesian_2d(1u32..requests + 1, 0u32..top)
            .map_err(|e| draw(e.to_string()))?;
        chart
            .configure_mesh()
            .light_line_style(TRANSPARENT)
            .x_desc("model call")
            .y_desc("request tokens")
            .draw()
            .map_err(|e| draw(e.to_string()))?;
        for (i, outcome) in file.policies.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            let sampled = downsample(&outcome.stats.tokens, &outcome.stats.evictions, cap);
            let points: Vec<(u32, u32)> = sampled.iter().map(|p| (p.0, p.1)).collect();
            chart
                .draw_series(LineSeries::new(
                    points.iter().copied(),
                    color.stroke_width(1),
                ))
                .map_err(|e| draw(e.to_string()))?
                .label(outcome.kind.name())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(2))
                });
            let evicted = sampled
                .iter()
                .filter(|p| p.2)
                .map(|p| Circle::new((p.0, p.1), 2, color.filled()));
            chart
                .draw_series(evicted)
                .map_err(|e| draw(e.to_string()))?;
        }
        let budget = file.budget as u32;
        chart
            .draw_series(LineSeries::new(
                vec![(1, budget), (requests + 1, budget)],
                BLACK.mix(0.6).stroke_width(2),
            ))
            .map_err(|e| draw(e.to_string()))?
            .label(format!("budget {}", report.budget_typed))
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], BLACK));
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .border_style(BLACK)
            .background_style(WHITE.mix(0.85))
            .draw()
            .map_err(|e| draw(e.to_string()))?;
    }
    root.present().map_err(|e| draw(e.to_string()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::downsample;

    #[test]
    fn downsampling_keeps_peaks_and_evictions() {
        let tokens: Vec<u32> = (0..1000)
            .map(|i| if i == 517 { 90_000 } else { i })
            .collect();
        let mut evictions = vec![0u32; 1000];
        evictions[3] = 2;
        let points = downsample(&tokens, &evictions, 100);
        assert_eq!(points.len(), 100);
        assert!(points.contains(&(518, 90_000, false)), "the peak stays");
        assert!(points[0].2, "the run with an eviction is marked");
        assert_eq!(points.iter().filter(|p| p.2).count(), 1);
        let short = downsample(&[5, 6], &[0, 1], 100);
        assert_eq!(short, vec![(1, 5, false), (2, 6, true)]);
    }
}
