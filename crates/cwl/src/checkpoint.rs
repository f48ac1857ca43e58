//! Checkpoints: the engine's whole state as one serializable value, so a
//! session resumes from its last checkpoint instead of replaying every
//! push since the start. Its size follows the view and the episode list,
//! not the history.

use std::collections::HashMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::config::Config;
use crate::context::{Context, Entry, Pending};
use crate::evictor::Evictor;
use crate::fold::Residues;
use crate::graph::{EpisodeId, Graph, Origin};
use crate::message::ToolSpec;
use crate::plans::Plans;
use crate::repeats::Repeats;
use crate::tokens::TokenCounter;
use crate::uses::Uses;

/// The version of the checkpoint format.
pub const CHECKPOINT_VERSION: u32 = 1;

/// A [`Context`]'s state at one point of the session.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Checkpoint {
    version: u32,
    config: Config,
    tools: Vec<ToolSpec>,
    tools_tokens: usize,
    entries: Vec<Entry>,
    graph: Graph,
    pending: HashMap<String, Pending>,
    residues: Residues,
    #[serde(default)]
    repeats: Repeats,
    #[serde(default, skip_serializing_if = "Repeats::is_empty")]
    restated: Repeats<u64>,
    #[serde(default)]
    uses: Uses,
    #[serde(default, skip_serializing_if = "Plans::is_empty")]
    plans: Plans,
    next_seq: u64,
    total: usize,
    offset: i64,
}

/// A checkpoint that cannot be restored.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum CheckpointError {
    /// Written by another version of the format.
    #[error("checkpoint format {found} is not supported (this build reads {CHECKPOINT_VERSION})")]
    Version {
        /// The version found.
        found: u32,
    },
}

impl Checkpoint {
    /// Pushes made before the checkpoint: replay the session's messages
    /// from this position on.
    pub fn pushes(&self) -> u64 {
        self.next_seq.saturating_sub(2) / 2
    }
}

impl Context {
    /// The engine's state now.
    pub fn checkpoint(&self) -> Checkpoint {
        Checkpoint {
            version: CHECKPOINT_VERSION,
            config: self.meter.config().clone(),
            tools: self.tools.clone(),
            tools_tokens: self.tools_tokens,
            entries: self.entries.clone(),
            graph: self.graph.clone(),
            pending: self.pending.clone(),
            residues: self.residues.clone(),
            repeats: self.repeats.clone(),
            restated: self.restated.clone(),
            uses: self.uses.clone(),
            plans: self.plans.clone(),
            next_seq: self.next_seq,
            total: self.total,
            offset: self.meter.offset(),
        }
    }

    /// A context in the state `checkpoint` saved. The counter must be the
    /// one the session counted with, or later counts will not match.
    pub fn restore(
        checkpoint: Checkpoint,
        counter: Arc<dyn TokenCounter>,
        evictor: Arc<dyn Evictor>,
    ) -> Result<Context, CheckpointError> {
        if checkpoint.version != CHECKPOINT_VERSION {
            return Err(CheckpointError::Version {
                found: checkpoint.version,
            });
        }
        let mut uses = checkpoint.uses;
        for (id, episode) in checkpoint.graph.episodes().iter().enumerate() {
            if episode.origin() == Origin::Unannotated {
                uses.unlist(id as EpisodeId);
            }
        }
        Ok(Context {
            // A checkpoint keeps the offset alone; zero reads as never
            // calibrated, which changes no count.
            meter: crate::meter::Meter::restore(
                checkpoint.config,
                checkpoint.offset,
                checkpoint.offset != 0,
            ),
            counter,
            evictor,
            tools: checkpoint.tools,
            tools_tokens: checkpoint.tools_tokens,
            entries: checkpoint.entries,
            graph: checkpoint.graph,
            pending: checkpoint.pending,
            residues: checkpoint.residues,
            repeats: checkpoint.repeats,
            restated: checkpoint.restated,
            uses,
            plans: checkpoint.plans,
            next_seq: checkpoint.next_seq,
            total: checkpoint.total,
        })
    }
}
