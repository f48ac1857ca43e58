//! The cwl agent harness: model providers, tools, the agent loop and the
//! session store, with context managed by the [`cwl`] engine.

pub mod provider;
pub mod tools;
