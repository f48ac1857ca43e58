//! The residue cap: expl residues and the user turns of finished tasks may
//! take only a share of τ; past it the oldest fold into one index line of
//! names, each recoverable with `recall`. Without it a session of a
//! thousand tasks would outgrow any budget on residues alone.

use std::collections::{BTreeSet, VecDeque};

use serde::{Deserialize, Serialize};

use crate::context::{Context, Role};
use crate::eviction::earliest;
use crate::graph::{EpisodeId, push_index};
use crate::message::{Block, Message};
use crate::tokens::MESSAGE_OVERHEAD;

/// Marks a user turn in [`Item::episode`].
const USER: EpisodeId = EpisodeId::MAX;

/// Something that may fold: a residue line or a finished task's user turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
struct Item {
    seq: u64,
    episode: EpisodeId,
    tokens: u32,
}

/// What the index line lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum Folded {
    /// An episode's residue.
    Episode(EpisodeId),
    /// A user turn, by push position.
    User(u64),
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Index {
    seq: u64,
    folded: Vec<Folded>,
    message: Message,
    tokens: usize,
    /// The labels the line shows (the newest folded items that fit) with
    /// their token counts, so a fold adds its items instead of relabelling
    /// the whole list.
    #[serde(default)]
    shown: VecDeque<(String, usize)>,
}

/// The start of the index line.
const INDEX_HEAD: &str = "[folded to save context; the `recall` tool brings any of these back: ";

/// The foldable content in the view and the index line.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct Residues {
    items: BTreeSet<Item>,
    current: Vec<Item>,
    answered: bool,
    items_tokens: usize,
    index: Option<Index>,
}

impl Residues {
    /// A user turn after the prologue: foldable once its task is finished,
    /// that is once the model has answered without a tool call and a new
    /// user turn has come.
    pub(crate) fn user_turn(&mut self, seq: u64, tokens: usize) {
        if std::mem::take(&mut self.answered) {
            for item in self.current.drain(..) {
                self.items_tokens += item.tokens as usize;
                self.items.insert(item);
            }
        }
        self.current.push(Item {
            seq,
            episode: USER,
            tokens: crate::context::clamp(tokens),
        });
    }

    /// A response without tool calls answered the task.
    pub(crate) fn task_finished(&mut self) {
        self.answered = !self.current.is_empty();
    }

    /// A residue line placed at `seq` for `episode`.
    pub(crate) fn residue(&mut self, seq: u64, episode: EpisodeId, tokens: usize) {
        let item = Item {
            seq,
            episode,
            tokens: crate::context::clamp(tokens),
        };
        self.items_tokens += item.tokens as usize;
        self.items.insert(item);
    }

    /// Tokens of foldable content and the index line.
    pub(crate) fn tokens(&self) -> usize {
        self.items_tokens + self.index.as_ref().map_or(0, |index| index.tokens)
    }

    /// Where the index line stands, once something folded.
    pub(crate) fn index_at(&self) -> Option<u64> {
        self.index.as_ref().map(|index| index.seq)
    }

    /// The index line.
    pub(crate) fn index_message(&self) -> Option<&Message> {
        self.index.as_ref().map(|index| &index.message)
    }

    /// Whether the index line lists this user turn (by push position).
    pub(crate) fn folded_user(&self, push: u64) -> bool {
        self.index
            .as_ref()
            .is_some_and(|index| index.folded.contains(&Folded::User(push)))
    }
}

impl Context {
    /// Folds the oldest residues and finished user turns while they take
    /// more than their cap, down to the low-water share of it. Returns the
    /// stream position of the first change and how many items folded.
    pub(crate) fn fold_residues(&mut self) -> Option<(u64, usize)> {
        let cap = self.meter.config().residue_cap()?;
        if self.residues.tokens() <= cap {
            return None;
        }
        let line_budget = (cap / 4).max(64);
        let target = self
            .meter
            .config()
            .low_water
            .of(cap)
            .saturating_sub(line_budget);
        let mut changed: Option<u64> = None;
        let mut folded = Vec::new();
        while self.residues.items_tokens > target {
            let Some(item) = self.residues.items.pop_first() else {
                break;
            };
            self.residues.items_tokens -= item.tokens as usize;
            self.remove_item(item);
            earliest(&mut changed, item.seq);
            folded.push(if item.episode == USER {
                Folded::User(push_index(item.seq))
            } else {
                self.graph.fold(item.episode);
                Folded::Episode(item.episode)
            });
        }
        let first = changed?;
        let count = folded.len();
        let seq = self
            .residues
            .index
            .as_ref()
            .map_or(first, |index| index.seq);
        let (mut all, mut shown) = self
            .residues
            .index
            .take()
            .map(|index| {
                self.total -= index.tokens;
                (index.folded, index.shown)
            })
            .unwrap_or_default();
        let room = line_budget.saturating_sub(self.counter.count(INDEX_HEAD) + 8);
        if shown.is_empty() && !all.is_empty() {
            shown = self.labels(&all, room);
        }
        let mut used: usize = shown.iter().map(|(_, tokens)| tokens).sum();
        for item in &folded {
            let label = self.label(*item);
            let tokens = self.counter.count(&label) + 1;
            used += tokens;
            shown.push_back((label, tokens));
            while used > room {
                let Some((_, tokens)) = shown.pop_front() else {
                    break;
                };
                used -= tokens;
            }
        }
        all.extend(folded);
        let text = index_text(all.len() - shown.len(), &shown);
        let tokens = MESSAGE_OVERHEAD + self.counter.count(&text);
        self.total += tokens;
        self.residues.index = Some(Index {
            seq,
            folded: all,
            message: Message::Assistant {
                content: vec![Block::Text { text }],
            },
            tokens,
            shown,
        });
        Some((first.min(seq), count))
    }

    /// Takes a folded item out of the view.
    fn remove_item(&mut self, item: Item) {
        let begin = self.entries.partition_point(|entry| entry.seq < item.seq);
        for entry in self.entries[begin..]
            .iter_mut()
            .take_while(|entry| entry.seq == item.seq)
        {
            let Some(message) = entry.message.as_deref_mut() else {
                continue;
            };
            match message {
                Message::User { .. } if item.episode == USER => {
                    self.total -= entry.base as usize;
                    entry.message = None;
                    return;
                }
                Message::Assistant { content } if item.episode != USER => {
                    let Some(slot) = entry.meta.iter().position(|meta| {
                        meta.role == Role::Residue && meta.owner == Some(item.episode)
                    }) else {
                        continue;
                    };
                    self.total -= entry.meta[slot].tokens as usize;
                    content.remove(slot);
                    entry.meta.remove(slot);
                    entry.altered = true;
                    self.total -= entry.drop_if_only_reasoning();
                    return;
                }
                _ => {}
            }
        }
    }

    /// How the index line names a folded item.
    fn label(&self, item: Folded) -> String {
        match item {
            Folded::Episode(id) => format!("{} #{id}", self.graph.episode(id).name()),
            Folded::User(push) => format!("user turn u{push}"),
        }
    }

    /// The labels of the newest items of `folded` that fit `room` tokens,
    /// oldest first, with their token counts.
    fn labels(&self, folded: &[Folded], room: usize) -> VecDeque<(String, usize)> {
        let mut used = 0;
        let mut shown = VecDeque::new();
        for item in folded.iter().rev() {
            let label = self.label(*item);
            let tokens = self.counter.count(&label) + 1;
            if used + tokens > room {
                break;
            }
            used += tokens;
            shown.push_front((label, tokens));
        }
        shown
    }
}

/// The index line: the shown labels and a count of the older items.
fn index_text(older: usize, shown: &VecDeque<(String, usize)>) -> String {
    let mut text = String::from(INDEX_HEAD);
    if older > 0 {
        text.push_str(&format!(
            "{older} older items (recall them by name or id); "
        ));
    }
    for (at, (label, _)) in shown.iter().enumerate() {
        if at > 0 {
            text.push_str(", ");
        }
        text.push_str(label);
    }
    text.push(']');
    text
}
