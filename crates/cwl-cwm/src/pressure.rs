//! Context pressure: how full the window is, and how fast it fills.
//!
//! Four zones by utilisation (green below 50%, yellow below 75%, orange
//! below 90%, red above; configurable), a velocity (the mean of tokens
//! added per turn over the last five turns), a spike when that velocity
//! passes three times its exponential moving average, and an estimate of
//! the turns left before red. A count the provider reported is preferred
//! to the client's own estimate.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

/// How full the window is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Zone {
    /// No intervention needed.
    Green,
    /// Prepare: which blocks would go, what is the burn rate.
    Yellow,
    /// Evict low-priority content.
    Orange,
    /// Evict or compact now; the next call risks overflow.
    Red,
}

/// The utilisation at which each zone above green begins.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Thresholds {
    /// Yellow from here (default 0.50).
    pub yellow: f64,
    /// Orange from here (default 0.75).
    pub orange: f64,
    /// Red from here (default 0.90).
    pub red: f64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            yellow: 0.50,
            orange: 0.75,
            red: 0.90,
        }
    }
}

impl Thresholds {
    /// Thresholds in increasing order inside (0, 1], or `None`.
    pub fn new(yellow: f64, orange: f64, red: f64) -> Option<Self> {
        (0.0 < yellow && yellow < orange && orange < red && red <= 1.0).then_some(Thresholds {
            yellow,
            orange,
            red,
        })
    }

    /// The zone of a utilisation.
    pub fn zone(&self, utilisation: f64) -> Zone {
        if utilisation >= self.red {
            Zone::Red
        } else if utilisation >= self.orange {
            Zone::Orange
        } else if utilisation >= self.yellow {
            Zone::Yellow
        } else {
            Zone::Green
        }
    }
}

/// Where a reading's token count came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// The provider's own count (ground truth).
    ModelReported,
    /// The client's tokenizer.
    ClientEstimated,
}

/// One measurement, taken before a model call.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Reading {
    /// Tokens in the window.
    pub tokens: usize,
    /// The window's size.
    pub max_tokens: usize,
    /// `tokens / max_tokens`.
    pub utilisation: f64,
    /// Its zone.
    pub zone: Zone,
    /// Mean tokens added per turn over the recent window.
    pub velocity: f64,
    /// Turns until the red zone at that velocity (`None`: not growing).
    pub turns_until_red: Option<f64>,
    /// Where `tokens` came from.
    pub source: Source,
    /// What this reading changed.
    pub events: Vec<PressureEvent>,
}

/// Something a reading noticed.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum PressureEvent {
    /// The zone changed.
    ZoneChange {
        /// The zone before.
        from: Zone,
        /// The zone now.
        to: Zone,
    },
    /// Velocity passed the spike multiple of its baseline.
    VelocitySpike {
        /// This turn's velocity.
        velocity: f64,
        /// The moving-average baseline before it.
        baseline: f64,
    },
}

/// The pressure monitor of one window.
#[derive(Debug, Clone)]
pub struct Monitor {
    max_tokens: usize,
    thresholds: Thresholds,
    window: usize,
    spike: f64,
    history: VecDeque<usize>,
    zone: Zone,
    baseline: f64,
}

/// Turns the velocity is averaged over.
pub const DEFAULT_VELOCITY_WINDOW: usize = 5;
/// A velocity this many times its baseline is a spike.
pub const DEFAULT_SPIKE: f64 = 3.0;
/// Weight of the newest velocity in the baseline's moving average.
pub const BASELINE_ALPHA: f64 = 0.3;

impl Monitor {
    /// A monitor of a `max_tokens` window with the default thresholds,
    /// velocity window and spike multiple.
    pub fn new(max_tokens: usize) -> Self {
        Monitor {
            max_tokens: max_tokens.max(1),
            thresholds: Thresholds::default(),
            window: DEFAULT_VELOCITY_WINDOW,
            spike: DEFAULT_SPIKE,
            history: VecDeque::new(),
            zone: Zone::Green,
            baseline: 0.0,
        }
    }

    /// Other zone thresholds.
    pub fn with_thresholds(mut self, thresholds: Thresholds) -> Self {
        self.thresholds = thresholds;
        self
    }

    /// Another velocity window (turns, at least 1) and spike multiple.
    pub fn with_velocity(mut self, window: usize, spike: f64) -> Self {
        self.window = window.max(1);
        self.spike = spike;
        self
    }

    /// Takes a reading before the next model call: `tokens` is the
    /// client's count, `reported` the provider's when it gave one.
    pub fn measure(&mut self, tokens: usize, reported: Option<usize>) -> Reading {
        let (tokens, source) = match reported {
            Some(reported) => (reported, Source::ModelReported),
            None => (tokens, Source::ClientEstimated),
        };
        let utilisation = tokens as f64 / self.max_tokens as f64;
        let zone = self.thresholds.zone(utilisation);
        let velocity = self.velocity(tokens);
        let red = (self.max_tokens as f64 * self.thresholds.red) as usize;
        let turns_until_red =
            (velocity > 0.0).then(|| red.saturating_sub(tokens) as f64 / velocity);
        let mut events = Vec::new();
        if zone != self.zone {
            events.push(PressureEvent::ZoneChange {
                from: self.zone,
                to: zone,
            });
        }
        if self.baseline > 0.0 && velocity > self.baseline * self.spike {
            events.push(PressureEvent::VelocitySpike {
                velocity,
                baseline: self.baseline,
            });
        }
        self.baseline = if self.baseline > 0.0 {
            BASELINE_ALPHA * velocity + (1.0 - BASELINE_ALPHA) * self.baseline
        } else {
            velocity
        };
        self.history.push_back(tokens);
        if self.history.len() > self.window {
            self.history.pop_front();
        }
        self.zone = zone;
        Reading {
            tokens,
            max_tokens: self.max_tokens,
            utilisation,
            zone,
            velocity,
            turns_until_red,
            source,
            events,
        }
    }

    /// Mean growth per turn over the recent readings and this one; zero
    /// until two readings exist (as the document's monitor does).
    fn velocity(&self, tokens: usize) -> f64 {
        if self.history.len() < 2 {
            return 0.0;
        }
        let recent: Vec<f64> = self.history.iter().map(|&t| t as f64).collect();
        let mut deltas: Vec<f64> = recent.windows(2).map(|w| w[1] - w[0]).collect();
        deltas.push(tokens as f64 - recent[recent.len() - 1]);
        deltas.iter().sum::<f64>() / deltas.len() as f64
    }

    /// The zone of the latest reading.
    pub fn zone(&self) -> Zone {
        self.zone
    }

    /// Forgets the readings, for a new task.
    pub fn reset(&mut self) {
        self.history.clear();
        self.zone = Zone::Green;
        self.baseline = 0.0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_documents_ten_turns() {
        let mut monitor = Monitor::new(128_000);
        let counts = [
            5_000, 8_000, 12_000, 18_000, 28_000, 45_000, 68_000, 90_000, 105_000, 118_000,
        ];
        let readings: Vec<Reading> = counts.iter().map(|&t| monitor.measure(t, None)).collect();
        let zones: Vec<Zone> = readings.iter().map(|r| r.zone).collect();
        use Zone::*;
        assert_eq!(
            zones,
            [
                Green, Green, Green, Green, Green, Green, Yellow, Yellow, Orange, Red
            ]
        );
        assert_eq!(
            readings[1].velocity, 0.0,
            "one earlier reading: no velocity yet"
        );
        assert_eq!(readings[2].velocity, 3_500.0, "(3000 + 4000) / 2");
        let last = &readings[9];
        assert!((last.velocity - 18_000.0).abs() < 1e-9, "{}", last.velocity);
        assert_eq!(last.turns_until_red, Some(0.0));
        assert_eq!(
            readings[6].events.first(),
            Some(&PressureEvent::ZoneChange {
                from: Green,
                to: Yellow
            })
        );
        assert!(readings.iter().all(|r| r.source == Source::ClientEstimated));
    }

    #[test]
    fn a_spike_and_the_reported_count() {
        let mut monitor = Monitor::new(100_000);
        for t in [1_000, 2_000, 3_000, 4_000, 5_000] {
            monitor.measure(t, None);
        }
        let spike = monitor.measure(40_000, None);
        assert!(
            spike
                .events
                .iter()
                .any(|e| matches!(e, PressureEvent::VelocitySpike { .. })),
            "{spike:?}"
        );
        let reading = monitor.measure(10, Some(41_000));
        assert_eq!(
            (reading.tokens, reading.source),
            (41_000, Source::ModelReported)
        );
        monitor.reset();
        assert_eq!(monitor.measure(0, None).velocity, 0.0);
        assert!(Thresholds::new(0.5, 0.4, 0.9).is_none());
        assert_eq!(
            Thresholds::new(0.3, 0.6, 0.8).unwrap().zone(0.7),
            Zone::Orange
        );
    }
}
