//! What `cwl bench` reports: per arm, the pass rate, tokens and cost per
//! task, the largest prompt and the evictions; the prompt curve of both
//! arms as an SVG plot.

use serde::Serialize;

use crate::agent::status::human_tokens;

/// One arm's figures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Arm {
    /// `one-session` (every task in one CWL session) or `fresh` (each task
    /// in a session of its own).
    pub name: &'static str,
    /// Tasks run.
    pub tasks: usize,
    /// Tasks whose check passed.
    pub passed: usize,
    /// `passed / tasks`.
    pub pass_rate: f64,
    /// Model calls.
    pub requests: usize,
    /// Prompt tokens, as the provider reported them.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Prompt tokens per task.
    pub input_tokens_per_task: f64,
    /// Cost in US dollars, `null` when the model's prices are unknown.
    pub cost_usd: Option<f64>,
    /// Cost per task, `null` when unknown.
    pub cost_per_task_usd: Option<f64>,
    /// The largest request, in the engine's calibrated tokens.
    pub peak_prompt_tokens: usize,
    /// Eviction passes that changed the view.
    pub eviction_passes: usize,
    /// Tokens those passes removed.
    pub tokens_evicted: usize,
    /// Each model call's request size, in order.
    pub prompt_curve: Vec<usize>,
    /// The task numbers (1-based) whose check failed.
    pub failed_tasks: Vec<usize>,
}

/// The whole report (`report.json`, and `--json` on stdout).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// The suite's name.
    pub suite: String,
    /// The model.
    pub model: String,
    /// The budget τ in tokens.
    pub budget: usize,
    /// The one-session arm, then the fresh one.
    pub arms: Vec<Arm>,
    /// The one-session arm's cost over the fresh arm's (`null` when either
    /// is unknown or the fresh arm cost nothing).
    pub cost_ratio: Option<f64>,
    /// The one-session arm's prompt tokens over the fresh arm's.
    pub input_ratio: Option<f64>,
}

impl Report {
    /// The report of two arms.
    pub fn new(suite: String, model: String, budget: usize, arms: Vec<Arm>) -> Report {
        let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) if b > 0.0 => Some(a / b),
            _ => None,
        };
        let cost_ratio = ratio(arms[0].cost_usd, arms[1].cost_usd);
        let input_ratio = ratio(
            Some(arms[0].input_tokens as f64),
            Some(arms[1].input_tokens as f64),
        );
        Report {
            suite,
            model,
            budget,
            arms,
            cost_ratio,
            input_ratio,
        }
    }

    /// The report as a table.
    pub fn table(&self) -> String {
        let mut out = format!(
            "cwl bench: {} · model {} · τ {}\n\n",
            self.suite,
            self.model,
            human_tokens(self.budget)
        );
        out.push_str("| arm | passed | requests | prompt tokens / task | cost / task | peak prompt | eviction passes | evicted |\n");
        out.push_str("|---|---:|---:|---:|---:|---:|---:|---:|\n");
        for arm in &self.arms {
            let cost = arm
                .cost_per_task_usd
                .map_or("unknown".to_string(), |c| format!("${c:.4}"));
            out.push_str(&format!(
                "| {} | {}/{} ({:.0}%) | {} | {} | {cost} | {} | {} | {} |\n",
                arm.name,
                arm.passed,
                arm.tasks,
                arm.pass_rate * 100.0,
                arm.requests,
                human_tokens(arm.input_tokens_per_task.round() as usize),
                human_tokens(arm.peak_prompt_tokens),
                arm.eviction_passes,
                human_tokens(arm.tokens_evicted),
            ));
        }
        if let Some(ratio) = self.cost_ratio {
            out.push_str(&format!(
                "\none session costs {ratio:.2}× the fresh sessions"
            ));
            if let Some(input) = self.input_ratio {
                out.push_str(&format!(" (prompt tokens {input:.2}×)"));
            }
            out.push('\n');
        }
        out
    }

    /// The prompt curve of both arms, model call by model call, with τ.
    pub fn svg(&self) -> String {
        let (width, height, margin) = (720.0, 360.0, 48.0);
        let calls = self
            .arms
            .iter()
            .map(|arm| arm.prompt_curve.len())
            .max()
            .unwrap_or(1)
            .max(2);
        let peak = self
            .arms
            .iter()
            .flat_map(|arm| arm.prompt_curve.iter().copied())
            .chain([self.budget])
            .max()
            .unwrap_or(1)
            .max(1) as f64
            * 1.1;
        let x = |i: usize| margin + (width - 2.0 * margin) * i as f64 / (calls - 1) as f64;
        let y = |tokens: f64| height - margin - (height - 2.0 * margin) * tokens / peak;
        let mut svg = format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" viewBox=\"0 0 {width} {height}\" font-family=\"sans-serif\" font-size=\"12\">\n\
             <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
             <text x=\"{margin}\" y=\"20\">prompt tokens per model call: {}</text>\n",
            escape(&self.suite)
        );
        let tau = y(self.budget as f64);
        svg.push_str(&format!(
            "<line x1=\"{margin}\" y1=\"{tau:.1}\" x2=\"{:.1}\" y2=\"{tau:.1}\" stroke=\"#999\" stroke-dasharray=\"4 4\"/>\n\
             <text x=\"{:.1}\" y=\"{:.1}\" fill=\"#666\">τ {}</text>\n",
            width - margin,
            width - margin - 60.0,
            tau - 4.0,
            human_tokens(self.budget)
        ));
        for (arm, color) in self.arms.iter().zip(["#1f77b4", "#ff7f0e"]) {
            let points: Vec<String> = arm
                .prompt_curve
                .iter()
                .enumerate()
                .map(|(i, &tokens)| format!("{:.1},{:.1}", x(i), y(tokens as f64)))
                .collect();
            svg.push_str(&format!(
                "<polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"1.5\" points=\"{}\"/>\n",
                points.join(" ")
            ));
        }
        for (row, (arm, color)) in self.arms.iter().zip(["#1f77b4", "#ff7f0e"]).enumerate() {
            svg.push_str(&format!(
                "<text x=\"{margin}\" y=\"{:.1}\" fill=\"{color}\">{}: {}/{} passed, peak {}</text>\n",
                height - 26.0 + 14.0 * row as f64,
                arm.name,
                arm.passed,
                arm.tasks,
                human_tokens(arm.peak_prompt_tokens)
            ));
        }
        svg.push_str("</svg>\n");
        svg
    }
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}
