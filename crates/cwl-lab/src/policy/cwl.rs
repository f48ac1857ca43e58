//! `cwl`: the engine itself ([`cwl::Context`]), driven through the generic
//! [`StrategyPolicy`]: fed the log message by message and enforcing the
//! budget before every model call. Logs whose agent annotated its work are
//! replayed as they are; for the others the replay passes inferred
//! episodes ([`cwl_infer`]), applied out of band so they cost no tokens.

use std::sync::Arc;

use cwl::Context;

use super::PolicyConfig;
use super::strategy::StrategyPolicy;
use crate::side::SideModel;
use crate::transcript::Lab;

/// The engine at `config`'s budget and settings, offering the replayed
/// session's tools.
pub fn context(config: &PolicyConfig, lab: &Lab) -> Context {
    Context::new(config.engine(), lab.counter_arc(), lab.tools().to_vec())
}

/// The engine as a policy, its (never made) side requests answered by
/// `side`.
pub fn policy(config: &PolicyConfig, lab: &Lab, side: Arc<dyn SideModel>) -> StrategyPolicy {
    StrategyPolicy::new("cwl", Box::new(context(config, lab)), side)
}
