//! The plot: request tokens over each session, one line per policy, the
//! budget as a dashed line and evictions as dots on the line. One panel per
//! file. SVG only: raster output would need system fonts, which the lab
//! does not load.

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
    for (panel, file) in panels.iter().zip(&report.files) {
        let requests = file.requests.max(1) as u32;
        let peak = file
            .policies
            .iter()
            .flat_map(|o| o.stats.tokens.iter().copied())
            .max()
            .unwrap_or(0)
            .max(report.budget as u32);
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
            .x_desc("model call")
            .y_desc("request tokens")
            .draw()
            .map_err(|e| draw(e.to_string()))?;
        for (i, outcome) in file.policies.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            let points: Vec<(u32, u32)> = outcome
                .stats
                .tokens
                .iter()
                .enumerate()
                .map(|(x, y)| (x as u32 + 1, *y))
                .collect();
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
            let evicted = points
                .iter()
                .zip(&outcome.stats.evictions)
                .filter(|(_, e)| **e > 0)
                .map(|(p, _)| Circle::new(*p, 2, color.filled()));
            chart
                .draw_series(evicted)
                .map_err(|e| draw(e.to_string()))?;
        }
        let budget = report.budget as u32;
        chart
            .draw_series(DashedLineSeries::new(
                vec![(1, budget), (requests + 1, budget)],
                8,
                5,
                BLACK.stroke_width(1),
            ))
            .map_err(|e| draw(e.to_string()))?
            .label(format!("budget {budget}"))
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
