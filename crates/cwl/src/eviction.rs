//! The eviction pass: Algorithm 1 of the CWL paper.

use crate::classes::ToolClass;
use crate::context::{Context, Entry, Meta, Role, clamp};
use crate::graph::{EpisodeId, Level};
use crate::message::{Block, Message};
use crate::protocol::EpisodeKind;
use crate::report::{EpisodeReport, LevelReport, Report};
use crate::tokens::MESSAGE_OVERHEAD;

impl Context {
    /// Enforces the budget: while the prompt is over it, strips the oldest
    /// eligible episode (acts first) level by level, re-checking after each.
    ///
    /// Call before every model call. A no-op when the prompt fits.
    pub fn enforce(&mut self) -> Report {
        let budget = self.config.budget;
        let mut report = Report {
            tokens_before: self.tokens(),
            tokens_after: 0,
            budget,
            budget_met: true,
            deferred: false,
            episodes: Vec::new(),
            warnings: Vec::new(),
        };
        'pass: while self.tokens() > budget {
            let Some(target) = self.graph.next_target() else {
                report.budget_met = false;
                let over = self.tokens() - budget;
                if self.graph.waiting_on_response() {
                    report.deferred = true;
                    report.warnings.push(format!(
                        "budget exceeded by {over} tokens until the next response: what can go next reaches into the latest response, which is sent unmodified"
                    ));
                } else {
                    report.warnings.push(format!(
                        "budget cannot be met: {over} tokens remain over the budget of {budget} and nothing left is evictable (prologue, user turns, the active episode, or expl episodes that a remaining act depends on)"
                    ));
                }
                break;
            };
            let episode = self.graph.episode(target);
            let mut touched = EpisodeReport {
                name: episode.name().to_string(),
                kind: episode.kind(),
                annotated: episode.is_annotated(),
                levels: Vec::new(),
            };
            while let Some(level) = self.graph.next_level(target) {
                let removed = self.strip(target, level);
                self.graph.mark(target, level);
                touched.levels.push(removed);
                if self.tokens() <= budget {
                    report.episodes.push(touched);
                    break 'pass;
                }
            }
            report.episodes.push(touched);
        }
        if report.evicted() {
            self.entries.retain(|entry| entry.message.is_some());
        }
        report.tokens_after = self.tokens();
        report
    }

    /// Removes what `level` covers from episode `target`.
    fn strip(&mut self, target: EpisodeId, level: Level) -> LevelReport {
        let episode = self.graph.episode(target);
        let (first, last) = (episode.first_seq, episode.last_seq);
        let start_call = episode.start_call.clone();
        let residue = match (episode.kind(), episode.description()) {
            (EpisodeKind::Expl, Some(description)) if level == Level::Removed => Some(format!(
                "[evicted expl episode `{}`: {description}]",
                episode.name()
            )),
            _ => None,
        };
        let mut removed = LevelReport {
            level,
            tokens: 0,
            tool_calls: 0,
            blocks: 0,
        };
        let before = self.total;
        let begin = self.entries.partition_point(|entry| entry.seq < first);
        let mut residue_placed = false;
        for index in begin..self.entries.len() {
            if self.entries[index].seq > last {
                break;
            }
            let entry = &mut self.entries[index];
            let Some(message) = entry.message.as_mut() else {
                continue;
            };
            match message {
                Message::Assistant { content } => {
                    for slot in (0..content.len()).rev() {
                        let meta = entry.meta[slot];
                        if meta.owner != Some(target) || !covers(level, meta.role) {
                            continue;
                        }
                        self.total -= meta.tokens as usize;
                        if let Block::ToolCall(call) = &content[slot] {
                            if let Some(pending) = self.pending.get_mut(&call.id) {
                                pending.evicted = true;
                            }
                            if start_call.as_deref() == Some(call.id.as_str())
                                && let Some(text) = residue.clone()
                            {
                                let tokens = self.counter.count(&text);
                                self.total += tokens;
                                content[slot] = Block::Text { text };
                                entry.meta[slot] = Meta {
                                    owner: Some(target),
                                    role: Role::Residue,
                                    tokens: clamp(tokens),
                                };
                                residue_placed = true;
                                removed.blocks += 1;
                                continue;
                            }
                        }
                        match meta.role {
                            Role::Call(_) => removed.tool_calls += 1,
                            _ => removed.blocks += 1,
                        }
                        content.remove(slot);
                        entry.meta.remove(slot);
                    }
                    let only_reasoning = content
                        .iter()
                        .all(|block| matches!(block, Block::Reasoning { .. }));
                    if only_reasoning {
                        removed.blocks += content.len();
                        self.total -= entry
                            .meta
                            .iter()
                            .map(|meta| meta.tokens as usize)
                            .sum::<usize>();
                        self.total -= entry.base as usize;
                        entry.message = None;
                    }
                }
                Message::ToolResult(_) => {
                    let meta = entry.meta[0];
                    if meta.owner == Some(target) && covers(level, meta.role) {
                        self.total -= meta.tokens as usize + entry.base as usize;
                        entry.message = None;
                    }
                }
                Message::System { .. } | Message::User { .. } => {}
            }
        }
        if let Some(text) = residue.filter(|_| !residue_placed) {
            self.insert_residue(first, target, text);
        }
        removed.tokens = before.saturating_sub(self.total);
        removed
    }

    /// Places an out-of-band episode's residue where the episode began.
    fn insert_residue(&mut self, seq: u64, owner: EpisodeId, text: String) {
        let tokens = self.counter.count(&text);
        self.total += MESSAGE_OVERHEAD + tokens;
        let at = self.entries.partition_point(|entry| entry.seq <= seq);
        self.entries.insert(
            at,
            Entry {
                seq,
                message: Some(Message::Assistant {
                    content: vec![Block::Text { text }],
                }),
                meta: vec![Meta {
                    owner: Some(owner),
                    role: Role::Residue,
                    tokens: clamp(tokens),
                }],
                base: clamp(MESSAGE_OVERHEAD),
            },
        );
    }
}

/// Whether a strip level removes content of this role.
fn covers(level: Level, role: Role) -> bool {
    match level {
        Level::Reasoning => role == Role::Reasoning,
        Level::Bulk => role == Role::Call(ToolClass::Bulk),
        Level::Intermediate => role == Role::Call(ToolClass::Intermediate),
        Level::Removed => role != Role::Residue,
    }
}
