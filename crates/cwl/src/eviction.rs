//! The eviction pass: Algorithm 1 of the CWL paper.

use crate::classes::ToolClass;
use crate::config::{RESTATED_MIN_TOKENS, SMALL_TOKENS};
use crate::context::{Context, Entry, Meta, Role, clamp};
use crate::graph::{EpisodeId, Level};
use crate::message::{Block, Message};
use crate::protocol::EpisodeKind;
use crate::reasoning::ReasoningScope;
use crate::report::{EpisodeReport, LevelReport, Report};
use crate::tokens::MESSAGE_OVERHEAD;

/// What an act's tool result becomes at [`Level::Output`].
pub(crate) const OUTPUT_STUB: &str = "[output evicted; its effects are in the workspace]";

/// What a tool output becomes when a later output repeats it
/// ([`crate::Config::restated`]).
pub(crate) const RESTATED_STUB: &str = "[output evicted; a later output shows it again]";

impl Context {
    /// Enforces the budget. When the prompt is over τ, drops the plan
    /// calls a later call of the same plan tool superseded
    /// ([`crate::Config::superseded_plans`]), stubs the tool outputs a
    /// later output repeats ([`crate::Config::restated`]), takes the
    /// reasoning of episodes that ended before the recent working set,
    /// oldest first, when the provider keeps only the current turn's
    /// ([`crate::Config::reasoning`]: it treats reasoning as scratch that a
    /// new user turn discards, so old reasoning goes before content), then
    /// strips candidate episodes in the evictor's order (the paper's:
    /// oldest act, else oldest expl), level by level, down to the low-water
    /// mark, then takes the steps the evictor offers after the pass's first
    /// change ([`crate::Evictor::after_floor`]), and folds residues past
    /// their cap; a prompt within τ is left alone, so the view changes in
    /// rare batches.
    ///
    /// Call before every model call.
    pub fn enforce(&mut self) -> Report {
        let budget = self.meter.budget();
        let mut report = Report {
            tokens_before: self.tokens(),
            tokens_after: 0,
            budget,
            floor: self.meter.config().floor().min(budget),
            budget_met: true,
            deferred: false,
            first_changed: None,
            folded: 0,
            episodes: Vec::new(),
            warnings: Vec::new(),
        };
        if self.tokens() <= budget {
            report.tokens_after = self.tokens();
            return report;
        }
        let evictor = std::sync::Arc::clone(&self.evictor);
        let recent = self.recent_start();
        let mut changed: Option<u64> = None;
        // A catch-up pass (more than a whole budget over its floor: a long
        // transcript evicted at once) removes nearly every old act anyway;
        // stubbing their outputs first would only double the work.
        let stub = self.meter.config().stub_act_outputs
            && self.tokens().saturating_sub(report.floor) <= budget;
        let stub_tokens = if stub {
            self.counter.count(OUTPUT_STUB)
        } else {
            0
        };
        let restated_stub_tokens = match self.meter.config().restated {
            Some(_) => self.counter.count(RESTATED_STUB),
            None => 0,
        };
        let mut reported: std::collections::HashMap<EpisodeId, usize> = Default::default();
        let mut residues_grew = true;
        let mut text_cap = self.meter.config().answer_cap();
        // Kept current through the pass rather than summed at every step.
        let mut loose = self.graph.loose_text_tokens();
        loop {
            if residues_grew && let Some((seq, count)) = self.fold_residues() {
                earliest(&mut changed, seq);
                report.folded += count;
            }
            let floor_reached = self.tokens() <= report.floor;
            if !floor_reached && let Some((owner, removed, seq)) = self.drop_superseded_plan() {
                earliest(&mut changed, seq);
                self.graph
                    .change_tracking_loose(owner, &mut loose, |g| g.shrink(owner, removed.tokens));
                push_level(&mut report, &mut reported, &self.graph, owner, removed);
                continue;
            }
            if !floor_reached
                && let Some((owner, removed, seq)) = self.stub_restated(restated_stub_tokens)
            {
                earliest(&mut changed, seq);
                self.graph
                    .change_tracking_loose(owner, &mut loose, |g| g.shrink(owner, removed.tokens));
                push_level(&mut report, &mut reported, &self.graph, owner, removed);
                continue;
            }
            if !floor_reached
                && self.meter.config().reasoning == ReasoningScope::CurrentTurn
                && let Some(target) = self.graph.oldest_reasoning_before(recent)
            {
                // No stub size: only reasoning blocks go, calls and outputs stay.
                let (removed, seq) = self.strip(target, Level::Reasoning, 0);
                self.graph.change_tracking_loose(target, &mut loose, |g| {
                    g.drop_reasoning(target, removed.tokens)
                });
                if let Some(seq) = seq {
                    earliest(&mut changed, seq);
                }
                if removed.tokens > 0 {
                    push_level(&mut report, &mut reported, &self.graph, target, removed);
                }
                continue;
            }
            debug_assert_eq!(loose, self.graph.loose_text_tokens());
            let candidates = self.graph.candidates_with_recent(
                recent,
                &self.repeats,
                &self.uses,
                stub,
                text_cap.is_some_and(|cap| loose > cap),
            );
            debug_assert_eq!(
                candidates.least_recently_used().collect::<Vec<_>>(),
                candidates.least_recently_used_by_sorting()
            );
            let target = if floor_reached {
                changed.and_then(|seq| evictor.after_floor(candidates, seq))
            } else {
                evictor.select(candidates)
            };
            let Some(target) = target else {
                break;
            };
            if self.graph.is_loose_text(target) {
                // Trimmed once past the cap, then down to half of it, so the
                // front of the prompt changes in rare batches.
                text_cap = self.meter.config().answer_cap().map(|cap| cap / 2);
            }
            let episode = self.graph.episode(target);
            let levels = evictor.levels(episode.kind());
            let Some(level) = self.graph.next_level(target, levels, stub) else {
                break;
            };
            let (removed, seq) = match level {
                Level::Large => self.strip_large(target),
                _ => self.strip(target, level, stub_tokens),
            };
            if let Some(seq) = seq {
                earliest(&mut changed, seq);
            }
            self.graph.change_tracking_loose(target, &mut loose, |g| {
                g.mark(target, level, removed.tokens)
            });
            residues_grew = level == Level::Removed;
            if level == Level::Removed {
                if let Some(share) = self.meter.config().superseded {
                    self.repeats.removed(target, share);
                }
                self.uses.removed(target);
            }
            if matches!(level, Level::Output | Level::Large) && removed.tokens == 0 {
                continue;
            }
            push_level(&mut report, &mut reported, &self.graph, target, removed);
        }
        if self.tokens() > budget {
            report.budget_met = false;
            let over = self.tokens() - budget;
            if self.graph.waiting_on_response() && self.graph.in_flight_tokens() >= over {
                report.deferred = true;
                report.warnings.push(format!(
                    "budget exceeded by {over} tokens until the next response: what can go next reaches into the latest response, which is sent unmodified"
                ));
            } else {
                report.warnings.push(format!(
                    "budget cannot be met: {over} tokens remain over the budget of {budget} and nothing left is evictable (prologue, user turns, the active episode, or expl episodes that a remaining act depends on)"
                ));
            }
        }
        if let Some(seq) = changed {
            self.entries.retain(|entry| entry.message.is_some());
            let before = self.entries.partition_point(|entry| entry.seq < seq);
            let index_before = self.residues.index_at().is_some_and(|at| at < seq);
            report.first_changed = Some(before + usize::from(index_before));
        }
        report.tokens_after = self.tokens();
        report
    }

    /// The stream position where the view's most recent `keep_recent`
    /// tokens begin (`u64::MAX` when the working set is off).
    fn recent_start(&self) -> u64 {
        let Some(keep) = self
            .meter
            .config()
            .keep_recent
            .map(|share| share.of(self.meter.budget()))
        else {
            return u64::MAX;
        };
        let mut sum = 0usize;
        for entry in self.entries.iter().rev() {
            sum +=
                entry.base as usize + entry.meta.iter().map(|m| m.tokens as usize).sum::<usize>();
            if sum >= keep {
                return entry.seq;
            }
        }
        0
    }

    /// Removes what `level` covers from episode `target`; also returns the
    /// stream position of the first message it changed. Act outputs become
    /// [`OUTPUT_STUB`], which counts `stub_tokens`; the act's text and
    /// reasoning go where a call of the same message stays.
    fn strip(
        &mut self,
        target: EpisodeId,
        level: Level,
        stub_tokens: usize,
    ) -> (LevelReport, Option<u64>) {
        let episode = self.graph.episode(target);
        let (first, last) = (episode.first_seq, episode.last_seq);
        let start_call = episode.start_call.clone();
        let episode_kind = episode.kind();
        let residue = match (episode_kind, episode.description()) {
            (EpisodeKind::Expl, Some(description)) if level == Level::Removed => Some(format!(
                "[evicted expl episode `{}` (#{target}): {description}]",
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
        // With act outputs stubbed, an expl's reads and searches keep their
        // calls (the paths and patterns the model repeats) until removal.
        let keep_expl_calls = stub_tokens > 0
            && episode_kind == EpisodeKind::Expl
            && matches!(level, Level::Bulk | Level::Intermediate);
        let before = self.total;
        let begin = self.entries.partition_point(|entry| entry.seq < first);
        let mut residue_placed = false;
        let mut changed: Option<u64> = None;
        let mut outputs_gone = Vec::new();
        for index in begin..self.entries.len() {
            if self.entries[index].seq > last {
                break;
            }
            let entry = &mut self.entries[index];
            let Some(message) = entry.message.as_deref_mut() else {
                continue;
            };
            match message {
                Message::Assistant { content } => {
                    let blocks = content.len();
                    let mut placed_here = false;
                    let reduce = level == Level::Output
                        && content
                            .iter()
                            .any(|block| matches!(block, Block::ToolCall(_)));
                    for slot in (0..content.len()).rev() {
                        let meta = entry.meta[slot];
                        let prose = reduce && matches!(meta.role, Role::Text | Role::Reasoning);
                        if meta.owner != Some(target) || !(prose || covers(level, meta.role)) {
                            continue;
                        }
                        if keep_expl_calls && matches!(meta.role, Role::Call(_)) {
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
                                self.residues.residue(entry.seq, target, tokens);
                                residue_placed = true;
                                placed_here = true;
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
                    let touched = content.len() != blocks || placed_here;
                    if touched {
                        changed.get_or_insert(entry.seq);
                        entry.altered = true;
                    }
                    if touched {
                        let left = content.len();
                        let freed = entry.drop_if_only_reasoning();
                        if freed > 0 {
                            removed.blocks += left;
                            self.total -= freed;
                        }
                    }
                }
                Message::ToolResult(_) if level == Level::Output || keep_expl_calls => {
                    let meta = entry.meta[0];
                    let applies = level == Level::Output || covers(level, meta.role);
                    if applies
                        && meta.owner == Some(target)
                        && meta.tokens as usize > (2 * stub_tokens).max(SMALL_TOKENS)
                    {
                        self.total -= entry.stub_result(OUTPUT_STUB, stub_tokens);
                        removed.blocks += 1;
                        changed.get_or_insert(entry.seq);
                        outputs_gone.push(entry.seq);
                    }
                }
                Message::ToolResult(_) => {
                    let meta = entry.meta[0];
                    if meta.owner == Some(target) && covers(level, meta.role) {
                        self.total -= meta.tokens as usize + entry.base as usize;
                        entry.message = None;
                        changed.get_or_insert(entry.seq);
                        outputs_gone.push(entry.seq);
                    }
                }
                Message::System { .. } | Message::User { .. } => {}
            }
        }
        if let Some(text) = residue.filter(|_| !residue_placed) {
            self.insert_residue(first, target, text);
            earliest(&mut changed, first);
        }
        if let Some(share) = self.meter.config().restated {
            for seq in outputs_gone {
                self.restated.removed(seq, share);
            }
        }
        removed.tokens = before.saturating_sub(self.total);
        (removed, changed)
    }

    /// Stubs the oldest tool output that later outputs still in the view
    /// repeat ([`crate::Config::restated`]), if one is large enough to be
    /// worth it and answers an earlier response than the latest; returns
    /// its episode, what went and its stream position. The stub counts
    /// `stub_tokens`.
    fn stub_restated(&mut self, stub_tokens: usize) -> Option<(EpisodeId, LevelReport, u64)> {
        let share = self.meter.config().restated?;
        let worth = RESTATED_MIN_TOKENS.max(2 * stub_tokens);
        let frontier = self.graph.frontier();
        let (index, owner) = self.restated.superseded().find_map(|seq| {
            if seq > frontier {
                return None;
            }
            let index = self.entries.partition_point(|entry| entry.seq < seq);
            let entry = self.entries.get(index).filter(|entry| entry.seq == seq)?;
            let Some(Message::ToolResult(_)) = entry.message.as_deref() else {
                return None;
            };
            let meta = entry.meta[0];
            (meta.tokens as usize > worth).then_some((index, meta.owner?))
        })?;
        let entry = &mut self.entries[index];
        let freed = entry.stub_result(RESTATED_STUB, stub_tokens);
        self.total -= freed;
        let seq = entry.seq;
        self.restated.removed(seq, share);
        let removed = LevelReport {
            level: Level::Restated,
            tokens: freed,
            tool_calls: 0,
            blocks: 1,
        };
        Some((owner, removed, seq))
    }

    /// [`Level::Plan`]: removes the oldest superseded plan call still in
    /// the view ([`crate::Config::superseded_plans`]) and its result, if it
    /// answers an earlier response than the latest; returns its episode,
    /// what went and its stream position. Calls that left with their
    /// episode are skipped.
    fn drop_superseded_plan(&mut self) -> Option<(EpisodeId, LevelReport, u64)> {
        let frontier = self.graph.frontier();
        loop {
            if self.plans.oldest()?.seq >= frontier {
                return None;
            }
            let call = self.plans.take_oldest()?;
            let index = self.entries.partition_point(|entry| entry.seq < call.seq);
            let Some(entry) = self
                .entries
                .get_mut(index)
                .filter(|entry| entry.seq == call.seq)
            else {
                continue;
            };
            let Some(Message::Assistant { content }) = entry.message.as_deref_mut() else {
                continue;
            };
            let Some(slot) = content
                .iter()
                .position(|block| matches!(block, Block::ToolCall(c) if c.id == call.id))
            else {
                continue;
            };
            let Some(owner) = entry.meta[slot].owner else {
                continue;
            };
            let before = self.total;
            self.total -= entry.meta[slot].tokens as usize;
            content.remove(slot);
            entry.meta.remove(slot);
            entry.altered = true;
            self.total -= entry.drop_if_only_reasoning();
            let mut removed = LevelReport {
                level: Level::Plan,
                tokens: 0,
                tool_calls: 1,
                blocks: 0,
            };
            match self.pending.get_mut(&call.id) {
                Some(pending) => pending.evicted = true,
                None => {
                    let answer = self.entries[index + 1..].iter_mut().find(|entry| {
                        matches!(entry.message.as_deref(),
                            Some(Message::ToolResult(result)) if result.call_id == call.id)
                    });
                    if let Some(answer) = answer {
                        self.total -= answer.meta[0].tokens as usize + answer.base as usize;
                        answer.message = None;
                        removed.blocks = 1;
                        if let Some(share) = self.meter.config().restated {
                            self.restated.removed(answer.seq, share);
                        }
                    }
                }
            }
            removed.tokens = before.saturating_sub(self.total);
            return Some((owner, removed, call.seq));
        }
    }

    /// [`Level::Large`]: removes the calls of an expl whose outputs were
    /// stubbed, their stubs and the episode's text, so what it still holds
    /// is its small outputs with their calls; an expl with no small tool
    /// output left (its `delimiter` answers do not count) is not touched
    /// (removal comes next).
    fn strip_large(&mut self, target: EpisodeId) -> (LevelReport, Option<u64>) {
        let mut removed = LevelReport {
            level: Level::Large,
            tokens: 0,
            tool_calls: 0,
            blocks: 0,
        };
        let episode = self.graph.episode(target);
        let (first, last) = (episode.first_seq, episode.last_seq);
        let begin = self.entries.partition_point(|entry| entry.seq < first);
        let owned = |entry: &Entry| entry.seq <= last;
        let mut stubbed = std::collections::HashSet::new();
        let mut kept = false;
        for entry in self.entries[begin..].iter().take_while(|e| owned(e)) {
            if let Some(Message::ToolResult(result)) = entry.message.as_deref()
                && entry.meta[0].owner == Some(target)
                && matches!(entry.meta[0].role, Role::Call(_))
            {
                if result.content == OUTPUT_STUB || result.content == RESTATED_STUB {
                    stubbed.insert(result.call_id.clone());
                } else {
                    kept = true;
                }
            }
        }
        if stubbed.is_empty() || !kept {
            return (removed, None);
        }
        let before = self.total;
        let mut changed = None;
        for entry in self.entries[begin..].iter_mut().take_while(|e| owned(e)) {
            let Some(message) = entry.message.as_deref_mut() else {
                continue;
            };
            match message {
                Message::Assistant { content } => {
                    let blocks = content.len();
                    for slot in (0..content.len()).rev() {
                        let meta = entry.meta[slot];
                        let goes = meta.owner == Some(target)
                            && match &content[slot] {
                                Block::ToolCall(call) => stubbed.contains(&call.id),
                                _ => matches!(meta.role, Role::Text | Role::Reasoning),
                            };
                        if goes {
                            if let Block::ToolCall(call) = &content[slot]
                                && let Some(pending) = self.pending.get_mut(&call.id)
                            {
                                pending.evicted = true;
                            }
                            match meta.role {
                                Role::Call(_) => removed.tool_calls += 1,
                                _ => removed.blocks += 1,
                            }
                            self.total -= meta.tokens as usize;
                            content.remove(slot);
                            entry.meta.remove(slot);
                        }
                    }
                    if content.len() != blocks {
                        changed.get_or_insert(entry.seq);
                        entry.altered = true;
                        self.total -= entry.drop_if_only_reasoning();
                    }
                }
                Message::ToolResult(result)
                    if entry.meta[0].owner == Some(target) && stubbed.contains(&result.call_id) =>
                {
                    self.total -= entry.meta[0].tokens as usize + entry.base as usize;
                    entry.message = None;
                    removed.blocks += 1;
                    changed.get_or_insert(entry.seq);
                }
                _ => {}
            }
        }
        removed.tokens = before.saturating_sub(self.total);
        (removed, changed)
    }

    /// Places an out-of-band episode's residue where the episode began (an
    /// odd stream position, between pushes: `view_sources` relies on it).
    fn insert_residue(&mut self, seq: u64, owner: EpisodeId, text: String) {
        debug_assert!(seq % 2 == 1, "out-of-band residues sit between pushes");
        let tokens = self.counter.count(&text);
        self.total += MESSAGE_OVERHEAD + tokens;
        self.residues.residue(seq, owner, MESSAGE_OVERHEAD + tokens);
        let at = self.entries.partition_point(|entry| entry.seq <= seq);
        self.entries.insert(
            at,
            Entry {
                seq,
                message: Some(Box::new(Message::Assistant {
                    content: vec![Block::Text { text }],
                })),
                meta: vec![Meta {
                    owner: Some(owner),
                    role: Role::Residue,
                    tokens: clamp(tokens),
                }],
                base: clamp(MESSAGE_OVERHEAD),
                altered: false,
            },
        );
    }
}

/// Adds what `level` removed from `target` to the pass's report, under the
/// episode's row.
fn push_level(
    report: &mut Report,
    reported: &mut std::collections::HashMap<EpisodeId, usize>,
    graph: &crate::graph::Graph,
    target: EpisodeId,
    removed: LevelReport,
) {
    match reported.get(&target) {
        Some(&at) => report.episodes[at].levels.push(removed),
        None => {
            let episode = graph.episode(target);
            reported.insert(target, report.episodes.len());
            report.episodes.push(EpisodeReport {
                name: episode.name().to_string(),
                kind: episode.kind(),
                annotated: episode.is_annotated(),
                levels: vec![removed],
            });
        }
    }
}

/// Whether a strip level removes content of this role.
fn covers(level: Level, role: Role) -> bool {
    match level {
        Level::Restated | Level::Plan | Level::Output | Level::Large => false,
        Level::Reasoning => role == Role::Reasoning,
        Level::Bulk => role == Role::Call(ToolClass::Bulk),
        Level::Intermediate => role == Role::Call(ToolClass::Intermediate),
        Level::Removed => role != Role::Residue,
    }
}

/// Lowers `changed` to `seq`: the earliest history position a pass altered.
pub(crate) fn earliest(changed: &mut Option<u64>, seq: u64) {
    *changed = Some(changed.map_or(seq, |c| c.min(seq)));
}
