//! What every strategy measures its prompt against: the configuration in
//! force (τ among it) and the provider's calibration of the local count.
//! One type, so no strategy keeps its own copy of these accessors.

use crate::config::Config;

/// The most a reported prompt size may exceed the local count by (as a
/// multiple) and still calibrate it: tokenizers differ by tens of percent,
/// not by twice.
pub const MAX_REPORTED_RATIO: usize = 2;

/// Why a provider's `reported` prompt size must not calibrate a local
/// count of `local`, if it must not: it is more than
/// [`MAX_REPORTED_RATIO`] times the count, or above `window`, the model's
/// context window. One wrong `usage` would otherwise make every later
/// pass evict for good what still fits.
pub fn untrusted_report(local: usize, reported: usize, window: Option<usize>) -> Option<String> {
    if reported > local.saturating_mul(MAX_REPORTED_RATIO) {
        return Some(format!(
            "the provider reported a prompt of {reported} tokens for one counted as {local} here (more than {MAX_REPORTED_RATIO}×); not used to calibrate"
        ));
    }
    window.filter(|&window| reported > window).map(|window| {
        format!(
            "the provider reported a prompt of {reported} tokens, more than the model's window of {window}; not used to calibrate"
        )
    })
}

/// The configuration in force and the calibration of the local count.
#[derive(Debug, Clone, PartialEq)]
pub struct Meter {
    config: Config,
    offset: i64,
    calibrated: bool,
}

impl Meter {
    /// A meter for `config`, not yet calibrated.
    pub fn new(config: Config) -> Self {
        Meter {
            config,
            offset: 0,
            calibrated: false,
        }
    }

    /// A meter as saved: `offset` is in force, and `calibrated` says
    /// whether a provider's report set it.
    pub fn restore(config: Config, offset: i64, calibrated: bool) -> Self {
        Meter {
            config,
            offset,
            calibrated,
        }
    }

    /// The configuration in force.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The configuration, to change a setting for later passes.
    pub fn config_mut(&mut self) -> &mut Config {
        &mut self.config
    }

    /// The budget τ.
    pub fn budget(&self) -> usize {
        self.config.budget
    }

    /// Changes the budget for later passes.
    pub fn set_budget(&mut self, budget: usize) {
        self.config.budget = budget;
    }

    /// The calibration offset in force: provider count minus local count.
    pub fn offset(&self) -> i64 {
        self.offset
    }

    /// Whether a provider's report has calibrated the count.
    pub fn calibrated(&self) -> bool {
        self.calibrated
    }

    /// Calibrates with the provider's figure for a request counted as
    /// `local` tokens; the difference applies from now on.
    pub fn calibrate(&mut self, local: usize, reported: usize) {
        self.offset = reported as i64 - local as i64;
        self.calibrated = true;
    }

    /// A local count of `counted` tokens as the provider would count it.
    pub fn tokens(&self, counted: usize) -> usize {
        crate::tokens::calibrated(counted, self.offset)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calibration_shifts_every_later_count_and_never_below_zero() {
        let mut meter = Meter::new(Config::with_budget(1_000));
        assert_eq!((meter.tokens(500), meter.calibrated()), (500, false));
        meter.calibrate(500, 650);
        assert_eq!(meter.offset(), 150);
        assert_eq!(meter.tokens(100), 250);
        meter.calibrate(500, 100);
        assert_eq!(meter.tokens(300), 0, "a negative offset stops at zero");
        assert!(meter.calibrated());
        meter.set_budget(2_000);
        assert_eq!(meter.budget(), 2_000);
        assert_eq!(meter.config().budget, 2_000);
        let saved = Meter::restore(meter.config().clone(), meter.offset(), true);
        assert_eq!(saved, meter);
    }
}

#[cfg(test)]
mod trust_tests {
    use super::*;

    #[test]
    fn a_report_past_twice_the_count_or_the_window_is_untrusted() {
        assert_eq!(untrusted_report(1_000, 2_000, None), None);
        assert_eq!(untrusted_report(1_000, 900, Some(1_000)), None);
        let twice = untrusted_report(1_000, 2_001, None).unwrap();
        assert!(twice.contains("2001") && twice.contains("1000"), "{twice}");
        let window = untrusted_report(1_000, 1_500, Some(1_200)).unwrap();
        assert!(window.contains("window of 1200"), "{window}");
        assert!(untrusted_report(0, 1, None).is_some());
    }
}
