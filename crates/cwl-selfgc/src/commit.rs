//! When to commit an accepted plan: the paper's cache-aware rule.
//!
//! Committing changes the view and so breaks part of the provider's
//! prefix cache. The benefit is about
//! `N_future · (C − C′) − L_cache_break − L_GC`: the cost saved on each
//! future request, less the cache rewrite and the planner's own call. The
//! paper's deployment found immediate commit worth it once the plan prunes
//! at least 30% of the view; below that the plan waits for the next task
//! boundary or the cache's expiry, when the prefix breaks anyway.

/// The pruning rate from which a plan is committed at once (the paper's
/// operating point; a policy, not a constant of nature).
pub const DEFAULT_COMMIT_PRUNE: f64 = 0.3;

/// The terms of the commit benefit, in one currency (dollars or tokens).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CommitCosts {
    /// Requests expected to reuse the committed view.
    pub future_requests: f64,
    /// Input cost of one request before the commit (C).
    pub cost_before: f64,
    /// Input cost of one request after it (C′).
    pub cost_after: f64,
    /// What rewriting the broken part of the cache costs once.
    pub cache_break: f64,
    /// What the garbage collection cost (the planner call).
    pub gc: f64,
}

impl CommitCosts {
    /// `N_future · (C − C′) − L_cache_break − L_GC`.
    pub fn benefit(&self) -> f64 {
        self.future_requests * (self.cost_before - self.cost_after) - self.cache_break - self.gc
    }
}

/// What to do with an accepted plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Commit {
    /// Commit at this safe turn boundary.
    Now,
    /// Keep it pending until the next task boundary or cache expiry.
    Pending,
}

/// The default rule: commit now when the plan prunes at least
/// `threshold` of the view, or when the prefix breaks anyway (a task
/// boundary, or the cache expired); otherwise keep it pending.
pub fn decide(prune: f64, threshold: f64, prefix_breaks_anyway: bool) -> Commit {
    if prefix_breaks_anyway || prune >= threshold {
        Commit::Now
    } else {
        Commit::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rule_and_the_benefit() {
        assert_eq!(decide(0.35, DEFAULT_COMMIT_PRUNE, false), Commit::Now);
        assert_eq!(decide(0.3, DEFAULT_COMMIT_PRUNE, false), Commit::Now);
        assert_eq!(decide(0.1, DEFAULT_COMMIT_PRUNE, false), Commit::Pending);
        assert_eq!(decide(0.1, DEFAULT_COMMIT_PRUNE, true), Commit::Now);
        let costs = CommitCosts {
            future_requests: 10.0,
            cost_before: 1.0,
            cost_after: 0.6,
            cache_break: 1.5,
            gc: 0.5,
        };
        assert!((costs.benefit() - 2.0).abs() < 1e-9);
        let few = CommitCosts {
            future_requests: 2.0,
            ..costs
        };
        assert!(
            few.benefit() < 0.0,
            "too few requests left to pay the cache back"
        );
    }
}
