//! Committed baselines (`benches/baselines/<bench>.txt`, one `name value`
//! line a figure): a bench compares what it measured with them and says
//! loudly, and exits with status 1, when a figure is more than twice its
//! baseline. `CWL_BENCH_BASELINE=write` records the figures as the new
//! baseline instead.

use std::path::PathBuf;

/// How much worse than its baseline a figure may be.
const TOLERANCE: f64 = 2.0;

fn path(bench: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("benches/baselines")
        .join(format!("{bench}.txt"))
}

/// Compares `figures` (lower is better) with `bench`'s baseline, or
/// writes them as the baseline; exits with status 1 on a regression.
pub fn check(bench: &str, figures: &[(String, f64)]) {
    let path = path(bench);
    if std::env::var("CWL_BENCH_BASELINE").as_deref() == Ok("write") {
        let text: String = figures
            .iter()
            .map(|(name, value)| format!("{name} {value:.1}\n"))
            .collect();
        match std::fs::write(&path, text) {
            Ok(()) => println!("baseline written to {}", path.display()),
            Err(error) => println!("baseline not written to {}: {error}", path.display()),
        }
        return;
    }
    let Ok(text) = std::fs::read_to_string(&path) else {
        println!("no baseline at {}: nothing compared", path.display());
        return;
    };
    let mut regressions = 0;
    for line in text.lines() {
        let Some((name, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let Ok(baseline) = value.parse::<f64>() else {
            continue;
        };
        let Some((_, now)) = figures.iter().find(|(figure, _)| figure == name) else {
            println!("baseline figure `{name}` was not measured");
            continue;
        };
        if *now > TOLERANCE * baseline {
            regressions += 1;
            println!(
                "REGRESSION: {name} is {now:.1}, more than {TOLERANCE}× its baseline {baseline:.1} ({})",
                path.display()
            );
        }
    }
    if regressions > 0 {
        std::process::exit(1);
    }
    println!("within {TOLERANCE}× of the baseline in {}", path.display());
}
