//! Maps the engine's view back to the lab's entries by position, never by
//! content, so that two identical messages (a repeated "continue") stay two
//! messages with their own identities.
//!
//! The engine's view is the sequence of messages it was given, in order,
//! from which eviction only removes messages, rewrites an assistant
//! message (blocks dropped, a start call replaced by its residue) or
//! inserts a residue message. [`Mirror`] keeps the lab entries of the last
//! view plus the messages pushed since, in the engine's order, and aligns
//! the next view against them:
//!
//! 1. Messages with a key are placed first: an assistant message with tool
//!    calls by its first call id, a tool result by its call id. Call ids
//!    are unique in a session, so these cannot be confused.
//! 2. Messages without a key (system, user, text-only assistant) are
//!    aligned with the old entries between their keyed neighbours by an
//!    order-preserving matching that maximizes a score: 2 for an equal
//!    message, 1 for an assistant message that is the old one with blocks
//!    dropped (a rewrite). So of several identical messages the ones kept
//!    are matched in order, and a message whose tool calls were evicted
//!    is not taken for a later identical text that would leave the
//!    messages between (a user turn) unmatched. Common runs at both ends
//!    are matched first, so a view that only grew costs linear time.
//!
//! A matched message that is unchanged keeps its entry; a rewritten one
//! becomes a new entry carrying the logged content of the blocks it kept
//! ([`Lab::derived`]); an unmatched one (a residue) is written text
//! ([`Lab::written`]). Entries passed over were evicted.

use std::sync::Arc;

use cwl::{Block, Message};

use crate::transcript::{Entry, Lab};

/// The lab entries of the engine's view, in the engine's order.
#[derive(Debug, Default)]
pub struct Mirror {
    entries: Vec<Arc<Entry>>,
}

impl Mirror {
    /// An empty mirror.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records a message given to the engine (appended at the end of its view).
    pub fn push(&mut self, entry: Arc<Entry>) {
        self.entries.push(entry);
    }

    /// The entries of `view`, the engine's current view: the same entries
    /// for messages it kept unchanged, new ones for what it wrote or
    /// rewrote. The mirror then holds exactly these.
    pub fn align<'a>(
        &mut self,
        view: impl IntoIterator<Item = &'a Message>,
        lab: &mut Lab,
    ) -> Vec<Arc<Entry>> {
        let view: Vec<&Message> = view.into_iter().collect();
        let old = std::mem::take(&mut self.entries);
        let mut origin = place_keyed(&view, &old);
        let mut index = 0;
        let mut old_from = 0;
        while index < view.len() {
            if let Some(j) = origin[index] {
                old_from = j + 1;
                index += 1;
                continue;
            }
            let gap_end = (index..view.len())
                .find(|&i| origin[i].is_some())
                .unwrap_or(view.len());
            let old_end = origin
                .get(gap_end)
                .copied()
                .flatten()
                .unwrap_or(old.len())
                .max(old_from);
            align_gap(
                &view[index..gap_end],
                &old[old_from..old_end],
                &mut origin[index..gap_end],
                old_from,
            );
            index = gap_end;
        }
        let out: Vec<Arc<Entry>> = view
            .iter()
            .zip(&origin)
            .map(|(message, j)| match j {
                Some(j) if old[*j].message() == *message => Arc::clone(&old[*j]),
                Some(j) => lab.derived((*message).clone(), &old[*j]),
                None => lab.written((*message).clone()),
            })
            .collect();
        self.entries.clone_from(&out);
        out
    }
}

/// Largest gap (view × old messages) aligned exactly; past it, in order.
const MAX_CELLS: usize = 1 << 22;

/// The key of a message: its first call id (assistant) or its call id
/// (tool result); none for the rest.
fn key(message: &Message) -> Option<&str> {
    match message {
        Message::Assistant { content } => content.iter().find_map(|b| match b {
            Block::ToolCall(call) => Some(call.id.as_str()),
            _ => None,
        }),
        Message::ToolResult(result) => Some(result.call_id.as_str()),
        Message::System { .. } | Message::User { .. } => None,
    }
}

/// Whether `entry` is the one a view message keyed `id` came from.
fn holds_key(entry: &Message, view: &Message, id: &str) -> bool {
    match (entry, view) {
        (Message::Assistant { .. }, Message::Assistant { .. }) => {
            entry.tool_calls().any(|c| c.id == id)
        }
        (Message::ToolResult(result), Message::ToolResult(_)) => result.call_id == id,
        _ => false,
    }
}

/// The old position of every keyed view message, found by a forward scan
/// since both sequences share their order; `None` for the others.
fn place_keyed(view: &[&Message], old: &[Arc<Entry>]) -> Vec<Option<usize>> {
    let mut from = 0;
    view.iter()
        .map(|message| {
            let id = key(message)?;
            let j = (from..old.len()).find(|&j| holds_key(old[j].message(), message, id))?;
            from = j + 1;
            Some(j)
        })
        .collect()
}

/// How well view message `v` matches old message `o`: 2 when equal, 1 when
/// `v` is `o` with blocks dropped (an eviction level's rewrite), else 0.
fn score(v: &Message, o: &Message) -> u8 {
    if v == o {
        return 2;
    }
    match (v, o) {
        (Message::Assistant { content: kept }, Message::Assistant { content: was }) => {
            let mut rest = was.iter();
            u8::from(kept.iter().all(|b| rest.any(|w| w == b)))
        }
        _ => 0,
    }
}

/// Aligns a run of unkeyed view messages with the old entries between the
/// keyed neighbours (`old` starts at `offset`), writing each one's origin.
/// The alignment maximizes the summed [`score`] (an order-preserving
/// matching), so a rewritten message is not taken for a later identical
/// one when that would leave the messages between unmatched.
fn align_gap(view: &[&Message], old: &[Arc<Entry>], origin: &mut [Option<usize>], offset: usize) {
    let mut head = 0;
    while head < view.len() && head < old.len() && old[head].message() == view[head] {
        origin[head] = Some(offset + head);
        head += 1;
    }
    let mut tail = 0;
    while tail < view.len() - head
        && tail < old.len() - head
        && old[old.len() - 1 - tail].message() == view[view.len() - 1 - tail]
    {
        origin[view.len() - 1 - tail] = Some(offset + old.len() - 1 - tail);
        tail += 1;
    }
    let view_mid = &view[head..view.len() - tail];
    let old_mid = &old[head..old.len() - tail];
    let (n, m) = (view_mid.len(), old_mid.len());
    if n == 0 || m == 0 {
        return;
    }
    let origin_mid = &mut origin[head..head + n];
    let base = offset + head;
    if n.saturating_mul(m) > MAX_CELLS {
        let mut next = 0;
        for (i, v) in view_mid.iter().enumerate() {
            if let Some(j) = (next..m).find(|&j| old_mid[j].message() == *v) {
                origin_mid[i] = Some(base + j);
                next = j + 1;
            }
        }
        return;
    }
    let width = m + 1;
    let mut best = vec![0u32; (n + 1) * width];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            let s = u32::from(score(view_mid[i], old_mid[j].message()));
            let take = if s > 0 {
                s + best[(i + 1) * width + j + 1]
            } else {
                0
            };
            best[i * width + j] = take
                .max(best[(i + 1) * width + j])
                .max(best[i * width + j + 1]);
        }
    }
    let (mut i, mut j) = (0, 0);
    while i < n && j < m {
        let s = u32::from(score(view_mid[i], old_mid[j].message()));
        if s > 0 && best[i * width + j] == s + best[(i + 1) * width + j + 1] {
            origin_mid[i] = Some(base + j);
            i += 1;
            j += 1;
        } else if best[i * width + j] == best[(i + 1) * width + j] {
            i += 1;
        } else {
            j += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cwl::{Estimate, ToolCall};

    fn ids(entries: &[Arc<Entry>]) -> Vec<u64> {
        entries.iter().map(|e| e.id()).collect()
    }

    fn mirror(lab: &mut Lab, messages: &[Message]) -> (Mirror, Vec<Arc<Entry>>) {
        let mut mirror = Mirror::new();
        let entries: Vec<Arc<Entry>> = messages.iter().map(|m| lab.entry(m.clone())).collect();
        for e in &entries {
            mirror.push(Arc::clone(e));
        }
        (mirror, entries)
    }

    fn step(id: &str, text: &str) -> Message {
        Message::Assistant {
            content: vec![
                Block::Text { text: text.into() },
                Block::ToolCall(ToolCall::new(id, "read", "{}")),
            ],
        }
    }

    #[test]
    fn identical_messages_keep_their_own_entries() {
        let mut lab = Lab::new(Arc::new(Estimate), &[]);
        let messages = [
            Message::system("s"),
            Message::user("continue"),
            Message::assistant_text("ok"),
            Message::user("continue"),
            Message::assistant_text("ok"),
        ];
        let (mut mirror, entries) = mirror(&mut lab, &messages);
        let view = mirror.align(messages.iter(), &mut lab);
        assert_eq!(ids(&view), ids(&entries));
        let again = mirror.align(messages.iter(), &mut lab);
        assert_eq!(ids(&again), ids(&entries));
    }

    #[test]
    fn removed_rewritten_and_inserted_messages() {
        let mut lab = Lab::new(Arc::new(Estimate), &[]);
        let messages = [
            Message::user("go"),
            step("a", "look"),
            Message::tool_result("a", "read", "x", false),
            Message::assistant_text("same"),
            step("b", "look"),
            Message::tool_result("b", "read", "y", false),
            Message::assistant_text("same"),
        ];
        let (mut mirror, entries) = mirror(&mut lab, &messages);
        let residue = Message::assistant_text("[evicted expl episode `e`: read]");
        let rewritten = Message::Assistant {
            content: vec![Block::ToolCall(ToolCall::new("b", "read", "{}"))],
        };
        let view = [
            messages[0].clone(),
            residue.clone(),
            rewritten.clone(),
            messages[5].clone(),
            messages[6].clone(),
        ];
        let got = mirror.align(view.iter(), &mut lab);
        assert_eq!(got[0].id(), entries[0].id());
        assert!(
            entries.iter().all(|e| e.id() != got[1].id()),
            "residue is new"
        );
        assert!(
            entries.iter().all(|e| e.id() != got[2].id()),
            "rewrite is new"
        );
        assert_eq!(got[3].id(), entries[5].id());
        assert_eq!(
            got[4].id(),
            entries[6].id(),
            "the kept `same` is the later one, after the keyed step"
        );
        let again = mirror.align(view.iter(), &mut lab);
        assert_eq!(ids(&again), ids(&got), "a stable view keeps its entries");
    }
}
