//! What every strategy measures its prompt against: the configuration in
//! force (τ among it) and the provider's calibration of the local count.
//! One type, so no strategy keeps its own copy of these accessors.

use crate::config::Config;

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
