//! Budgets as users write them: `80000`, `80k`, `1.5M` or `50%` of a
//! model's context window.

use std::fmt;
use std::str::FromStr;

use thiserror::Error;

/// A token budget: absolute, or a share of the model's context window
/// (the two ways there are; exhaustive on purpose).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Budget {
    /// A number of tokens.
    Tokens(usize),
    /// A percentage (0 < p ≤ 100) of the context window.
    Percent(f64),
}

/// A budget that could not be read or resolved.
#[derive(Debug, Clone, PartialEq, Error)]
#[non_exhaustive]
pub enum BudgetError {
    /// Not a number, `Nk`, `NM` or `N%`.
    #[error("invalid budget `{0}`: expected tokens like 80000, 80k or 1.5M, or a share like 50%")]
    Invalid(String),
    /// Zero, or a share outside (0, 100].
    #[error("invalid budget `{0}`: must be above zero (and at most 100%)")]
    OutOfRange(String),
    /// A percentage with no window to take it of.
    #[error("budget {0}% needs the model's context window (give --window TOKENS or a known model)")]
    NoWindow(f64),
}

impl FromStr for Budget {
    type Err = BudgetError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let trimmed = text.trim();
        let invalid = || BudgetError::Invalid(text.to_string());
        if let Some(percent) = trimmed.strip_suffix('%') {
            let value: f64 = percent.trim().parse().map_err(|_| invalid())?;
            if !(value > 0.0 && value <= 100.0) {
                return Err(BudgetError::OutOfRange(text.to_string()));
            }
            return Ok(Budget::Percent(value));
        }
        let (number, scale) = match trimmed.char_indices().last() {
            Some((at, 'k' | 'K')) => (&trimmed[..at], 1_000.0),
            Some((at, 'm' | 'M')) => (&trimmed[..at], 1_000_000.0),
            _ => (trimmed, 1.0),
        };
        let value: f64 = number
            .trim()
            .replace('_', "")
            .parse()
            .map_err(|_| invalid())?;
        let tokens = (value * scale).round();
        if !tokens.is_finite() || tokens < 1.0 || tokens > usize::MAX as f64 {
            return Err(BudgetError::OutOfRange(text.to_string()));
        }
        Ok(Budget::Tokens(tokens as usize))
    }
}

impl Budget {
    /// The budget in tokens, given the model's context window if known.
    pub fn resolve(self, window: Option<usize>) -> Result<usize, BudgetError> {
        match self {
            Budget::Tokens(tokens) => Ok(tokens),
            Budget::Percent(percent) => {
                let window = window.ok_or(BudgetError::NoWindow(percent))?;
                Ok(((window as f64) * percent / 100.0).floor().max(1.0) as usize)
            }
        }
    }
}

impl fmt::Display for Budget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Budget::Tokens(tokens) => write!(f, "{tokens}"),
            Budget::Percent(percent) => write!(f, "{percent}%"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_every_form() {
        assert_eq!("80000".parse(), Ok(Budget::Tokens(80_000)));
        assert_eq!("80k".parse(), Ok(Budget::Tokens(80_000)));
        assert_eq!("1.5M".parse(), Ok(Budget::Tokens(1_500_000)));
        assert_eq!(" 50% ".parse(), Ok(Budget::Percent(50.0)));
        assert_eq!("80_000".parse(), Ok(Budget::Tokens(80_000)));
    }

    #[test]
    fn rejects_nonsense() {
        for bad in ["", "k", "abc", "80kk", "-5", "0", "0%", "150%", "1e400"] {
            assert!(bad.parse::<Budget>().is_err(), "{bad}");
        }
    }

    #[test]
    fn percent_needs_a_window() {
        assert_eq!(Budget::Percent(50.0).resolve(Some(200_000)), Ok(100_000));
        assert_eq!(
            Budget::Percent(50.0).resolve(None),
            Err(BudgetError::NoWindow(50.0))
        );
        assert_eq!(Budget::Tokens(7).resolve(None), Ok(7));
    }
}
