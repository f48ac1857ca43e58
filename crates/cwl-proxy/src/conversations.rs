//! Which conversation a request continues.
//!
//! Clients resend their whole history with every request and say nothing
//! reliable about which conversation it belongs to (session headers are
//! hints at best; side requests for titles share the same system prompt).
//! A request continues the known conversation whose history is the longest
//! prefix of its messages. Prefixes are compared through a hash chain:
//! `c₁ = h(m₁)`, `cᵢ = h(cᵢ₋₁, mᵢ)`, so one map from chain hash to
//! conversation finds the longest known prefix, and a conversation grows by
//! one hash per new message.
//!
//! A request that matches only part of a conversation's history (the
//! client edited or rewound it) starts a new conversation: the engine's
//! state cannot be rewound. Conversations idle for longer than a timeout
//! leave memory, all but the hash of their whole history: a later request
//! that continues one is routed as a [`Route::Resume`], and the proxy
//! rebuilds its engine from the store.

use std::collections::VecDeque;
use std::hash::{Hash, Hasher};
use std::time::{Duration, Instant};

use rustc_hash::{FxHashMap, FxHasher};
use serde_json::Value;

/// Idle conversations remembered for resuming (8 bytes of hash and 8 of
/// id each, and the proxy's path of its session file); past this the
/// oldest are forgotten for good.
pub const MAX_DORMANT: usize = 100_000;

/// A conversation's id, unique for the proxy's lifetime.
pub type ConversationId = u64;

/// Keys left out of a message's identity: clients move them from message
/// to message between requests (Claude Code marks only the latest user
/// block for caching), so they would break every prefix.
const VOLATILE_KEYS: &[&str] = &["cache_control"];

/// The identity of one message as a client sent it: a hash of its JSON
/// with object keys in sorted order and volatile keys left out, so the
/// same message hashes the same in every request whatever the key order.
pub fn message_hash(message: &Value) -> u64 {
    let mut hasher = FxHasher::default();
    canonical(message, &mut hasher);
    hasher.finish()
}

fn canonical(value: &Value, hasher: &mut FxHasher) {
    match value {
        Value::Null => 0u8.hash(hasher),
        Value::Bool(b) => (1u8, b).hash(hasher),
        Value::Number(n) => (2u8, n.to_string()).hash(hasher),
        Value::String(s) => (3u8, s).hash(hasher),
        Value::Array(items) => {
            (4u8, items.len()).hash(hasher);
            items.iter().for_each(|item| canonical(item, hasher));
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map
                .keys()
                .filter(|key| !VOLATILE_KEYS.contains(&key.as_str()))
                .collect();
            keys.sort_unstable();
            (5u8, keys.len()).hash(hasher);
            for key in keys {
                key.hash(hasher);
                canonical(&map[key], hasher);
            }
        }
    }
}

fn chain(previous: u64, message: u64) -> u64 {
    let mut hasher = FxHasher::default();
    (previous, message).hash(&mut hasher);
    hasher.finish()
}

/// The chain hashes of a history whose messages hash to `messages`: the
/// `i`-th names its first `i + 1` messages, the same in every process.
pub fn chains(messages: &[u64]) -> Vec<u64> {
    let mut previous = 0;
    messages
        .iter()
        .map(|&message| {
            previous = chain(previous, message);
            previous
        })
        .collect()
}

/// Where a request goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// It continues a known conversation: push the messages from `known`
    /// on (the ones before were pushed by earlier requests).
    Continue {
        /// The conversation.
        id: ConversationId,
        /// How many of the request's messages the conversation already has.
        known: usize,
    },
    /// Nothing known is a prefix of it: a new conversation, every message
    /// to push.
    New {
        /// The new conversation.
        id: ConversationId,
    },
    /// It continues a conversation that left memory when idle: a new
    /// conversation, to rebuild from the stored one and go on from `known`.
    Resume {
        /// The new conversation.
        id: ConversationId,
        /// The conversation that left memory.
        from: ConversationId,
        /// How many of the request's messages the stored one holds.
        known: usize,
    },
    /// Another replica served its history last (see [`crate::heads`]):
    /// rebuild it from the shared session file and go on from `known`.
    Shared {
        /// The conversation here.
        id: ConversationId,
        /// How many of the request's messages the stored one holds.
        known: usize,
    },
    /// It shares only part of a known conversation's history (the client
    /// edited or rewound it): a new conversation, every message to push.
    Branch {
        /// The new conversation.
        id: ConversationId,
        /// The conversation it left.
        from: ConversationId,
        /// How many leading messages the two share.
        shared: usize,
    },
}

impl Route {
    /// The conversation the request goes to.
    pub fn id(&self) -> ConversationId {
        match *self {
            Route::Continue { id, .. }
            | Route::New { id }
            | Route::Resume { id, .. }
            | Route::Shared { id, .. }
            | Route::Branch { id, .. } => id,
        }
    }

    /// How many leading messages its engine already holds (once rebuilt,
    /// for a resumed conversation).
    pub fn known(&self) -> usize {
        match *self {
            Route::Continue { known, .. }
            | Route::Resume { known, .. }
            | Route::Shared { known, .. } => known,
            Route::New { .. } | Route::Branch { .. } => 0,
        }
    }
}

#[derive(Debug)]
struct Conversation {
    chain: Vec<u64>,
    last_used: Instant,
    /// The time between its last two requests (`None` after its first).
    gap: Option<Duration>,
}

/// The conversations the proxy knows, by the hash chain of their history.
#[derive(Debug)]
pub struct Conversations {
    by_chain: FxHashMap<u64, ConversationId>,
    conversations: FxHashMap<ConversationId, Conversation>,
    dormant: FxHashMap<u64, ConversationId>,
    /// Dormant entries by age, oldest first (some since resumed).
    dormant_order: VecDeque<(u64, ConversationId)>,
    next_id: ConversationId,
    idle: Duration,
    max_live: usize,
    max_dormant: usize,
}

/// The conversations [`Conversations::expire`] took out of memory.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Expired {
    /// Those that left memory; a request continuing one resumes it.
    pub left: Vec<ConversationId>,
    /// Idle ones forgotten for good, past [`MAX_DORMANT`]: a request
    /// continuing one starts a new conversation, so whatever was kept to
    /// resume them can go.
    pub forgotten: Vec<ConversationId>,
}

impl Conversations {
    /// No conversation yet; those unused for `idle` are forgotten, and
    /// past `max_live` in memory the least recently used.
    pub fn new(idle: Duration, max_live: usize) -> Self {
        Self::with_dormant(idle, max_live, MAX_DORMANT)
    }

    /// As [`Conversations::new`], remembering at most `max_dormant` idle
    /// ones for resuming.
    pub fn with_dormant(idle: Duration, max_live: usize, max_dormant: usize) -> Self {
        Conversations {
            by_chain: FxHashMap::default(),
            conversations: FxHashMap::default(),
            dormant: FxHashMap::default(),
            dormant_order: VecDeque::new(),
            next_id: 1,
            idle,
            max_live: max_live.max(1),
            max_dormant,
        }
    }

    /// Routes a request whose messages hash to `messages` (see
    /// [`message_hash`]) and records its history as the conversation's.
    pub fn route(&mut self, messages: &[u64], now: Instant) -> Route {
        let chains = chains(messages);
        let found = chains.iter().enumerate().rev().find_map(|(at, c)| {
            let id = *self.by_chain.get(c)?;
            let conversation = self.conversations.get(&id)?;
            (conversation.chain.get(at) == Some(c)).then_some((id, at + 1))
        });
        let continued =
            found.is_some_and(|(id, shared)| self.conversations[&id].chain.len() == shared);
        let resumed = if continued {
            None
        } else {
            chains
                .iter()
                .enumerate()
                .rev()
                .find_map(|(at, c)| Some((*self.dormant.get(c)?, at + 1, *c)))
                .filter(|&(_, known, _)| found.is_none_or(|(_, shared)| known >= shared))
        };
        let route = match found {
            _ if resumed.is_some() => {
                let (from, known, c) = resumed.expect("checked");
                self.dormant.remove(&c);
                Route::Resume {
                    id: self.fresh_id(),
                    from,
                    known,
                }
            }
            Some((id, shared)) if continued => Route::Continue { id, known: shared },
            Some((from, shared)) => Route::Branch {
                id: self.fresh_id(),
                from,
                shared,
            },
            None => Route::New {
                id: self.fresh_id(),
            },
        };
        let id = route.id();
        let conversation = self
            .conversations
            .entry(id)
            .or_insert_with(|| Conversation {
                chain: Vec::new(),
                last_used: now,
                gap: None,
            });
        conversation.gap = (!conversation.chain.is_empty())
            .then(|| now.saturating_duration_since(conversation.last_used));
        conversation.last_used = now;
        for &c in &chains[conversation.chain.len().min(chains.len())..] {
            self.by_chain.entry(c).or_insert(id);
            conversation.chain.push(c);
        }
        route
    }

    /// Forgets conversations unused since `now - idle`, keeping the hash
    /// of each one's whole history so a request that continues it is
    /// routed as a [`Route::Resume`], and past the most remembered, the
    /// oldest of those hashes.
    pub fn expire(&mut self, now: Instant) -> Expired {
        let idle = self.idle;
        let gone = self
            .conversations
            .iter()
            .filter(|(_, c)| now.saturating_duration_since(c.last_used) >= idle)
            .map(|(id, _)| *id)
            .collect();
        self.leave(gone)
    }

    /// Past the most kept in memory, forgets the least recently used as
    /// [`Conversations::expire`] does. Called after routing, so the
    /// conversation just routed, the most recently used, stays, and at
    /// most the most kept are in memory between requests.
    pub fn shed(&mut self) -> Expired {
        let excess = self.conversations.len().saturating_sub(self.max_live);
        if excess == 0 {
            return Expired::default();
        }
        let mut live: Vec<(Instant, ConversationId)> = self
            .conversations
            .iter()
            .map(|(id, c)| (c.last_used, *id))
            .collect();
        live.sort_unstable();
        self.leave(live[..excess].iter().map(|&(_, id)| id).collect())
    }

    fn leave(&mut self, gone: Vec<ConversationId>) -> Expired {
        let mut forgotten = Vec::new();
        for &id in &gone {
            if let Some(&last) = self.conversations[&id].chain.last() {
                self.dormant.insert(last, id);
                self.dormant_order.push_back((last, id));
                while self.dormant_order.len() > self.max_dormant
                    && let Some((oldest, of)) = self.dormant_order.pop_front()
                {
                    if self.dormant.get(&oldest) == Some(&of) {
                        self.dormant.remove(&oldest);
                        forgotten.push(of);
                    }
                }
            }
            self.forget(id);
        }
        Expired {
            left: gone,
            forgotten,
        }
    }

    /// Idle conversations remembered for resuming.
    pub fn dormant(&self) -> usize {
        self.dormant.len()
    }

    /// Forgets one conversation (its engine could not go on); a later
    /// request with its history starts a new one.
    pub fn forget(&mut self, id: ConversationId) {
        if let Some(conversation) = self.conversations.remove(&id) {
            for c in conversation.chain {
                if self.by_chain.get(&c) == Some(&id) {
                    self.by_chain.remove(&c);
                }
            }
        }
    }

    /// How long conversation `id` sat idle before its latest request,
    /// since the one before (`None` for a conversation's first request,
    /// a branch's or a resumed one's): what its strategy is told before
    /// the pass (see `cwl::Strategy::idle`).
    pub fn gap(&self, id: ConversationId) -> Option<Duration> {
        self.conversations.get(&id).and_then(|c| c.gap)
    }

    /// Conversations held in memory.
    pub fn len(&self) -> usize {
        self.conversations.len()
    }

    /// Whether none is held.
    pub fn is_empty(&self) -> bool {
        self.conversations.is_empty()
    }

    fn fresh_id(&mut self) -> ConversationId {
        let id = self.next_id;
        self.next_id += 1;
        id
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn hashes(messages: &[Value]) -> Vec<u64> {
        messages.iter().map(message_hash).collect()
    }

    fn user(text: &str) -> Value {
        json!({"role": "user", "content": [{"type": "text", "text": text}]})
    }

    fn assistant(text: &str) -> Value {
        json!({"role": "assistant", "content": [{"type": "text", "text": text}]})
    }

    #[test]
    fn a_growing_history_continues_its_conversation() {
        let mut known = Conversations::new(Duration::from_secs(60), usize::MAX);
        let now = Instant::now();
        let mut history = vec![user("fix the bug")];
        let first = known.route(&hashes(&history), now);
        assert!(matches!(first, Route::New { .. }));
        history.push(assistant("looking"));
        history.push(user("go on"));
        let next = known.route(&hashes(&history), now);
        assert_eq!(
            next,
            Route::Continue {
                id: first.id(),
                known: 1
            }
        );
        assert_eq!(next.known(), 1);
        let again = known.route(&hashes(&history), now);
        assert_eq!(
            again,
            Route::Continue {
                id: first.id(),
                known: 3
            }
        );
        assert_eq!(known.len(), 1);
    }

    #[test]
    fn key_order_and_cache_markers_do_not_change_identity() {
        let plain = json!({"role": "user", "content": [{"type": "text", "text": "hi"}]});
        let marked = json!({"content": [{"text": "hi", "type": "text",
            "cache_control": {"type": "ephemeral"}}], "role": "user"});
        assert_eq!(message_hash(&plain), message_hash(&marked));
        assert_ne!(message_hash(&plain), message_hash(&user("hello")));
        assert_ne!(
            message_hash(&json!([1, [2]])),
            message_hash(&json!([[1], 2]))
        );
    }

    #[test]
    fn an_edited_history_branches_and_both_go_on() {
        let mut known = Conversations::new(Duration::from_secs(60), usize::MAX);
        let now = Instant::now();
        let original = vec![user("a"), assistant("b"), user("c")];
        let first = known.route(&hashes(&original), now).id();
        let edited = vec![user("a"), assistant("b"), user("C, rephrased")];
        let branch = known.route(&hashes(&edited), now);
        let Route::Branch { id, from, shared } = branch else {
            panic!("{branch:?}")
        };
        assert_eq!((from, shared), (first, 2));
        assert_ne!(id, first);
        let mut longer = edited.clone();
        longer.push(assistant("d"));
        assert_eq!(
            known.route(&hashes(&longer), now),
            Route::Continue { id, known: 3 }
        );
        let mut resumed = original.clone();
        resumed.push(assistant("e"));
        assert_eq!(
            known.route(&hashes(&resumed), now),
            Route::Continue {
                id: first,
                known: 3
            }
        );
    }

    #[test]
    fn a_rewound_history_is_a_branch_not_a_continuation() {
        let mut known = Conversations::new(Duration::from_secs(60), usize::MAX);
        let now = Instant::now();
        let long = vec![user("a"), assistant("b"), user("c")];
        let first = known.route(&hashes(&long), now).id();
        let short = known.route(&hashes(&long[..1]), now);
        assert!(
            matches!(short, Route::Branch { from, shared: 1, .. } if from == first),
            "{short:?}"
        );
    }

    #[test]
    fn a_continued_conversation_knows_how_long_it_sat_idle() {
        let mut known = Conversations::new(Duration::from_secs(3_600), usize::MAX);
        let start = Instant::now();
        let mut history = vec![user("a")];
        let id = known.route(&hashes(&history), start).id();
        assert_eq!(known.gap(id), None, "a first request has no gap");
        history.push(assistant("x"));
        history.push(user("b"));
        let later = start + Duration::from_secs(301);
        assert_eq!(
            known.route(&hashes(&history), later),
            Route::Continue { id, known: 1 }
        );
        assert_eq!(known.gap(id), Some(Duration::from_secs(301)));
        history.push(assistant("y"));
        known.route(&hashes(&history), later + Duration::from_secs(2));
        assert_eq!(known.gap(id), Some(Duration::from_secs(2)));
        let branch = known.route(&hashes(&[user("a"), assistant("z")]), later);
        assert!(matches!(branch, Route::Branch { .. }), "{branch:?}");
        assert_eq!(known.gap(branch.id()), None);
        assert_eq!(known.gap(999), None);
    }

    #[test]
    fn past_the_most_in_memory_the_least_recently_used_leaves_and_resumes() {
        let mut known = Conversations::new(Duration::from_secs(3_600), 2);
        let start = Instant::now();
        let at = |s: u64| start + Duration::from_secs(s);
        let a = known.route(&hashes(&[user("a")]), at(0)).id();
        let b = known.route(&hashes(&[user("b")]), at(1)).id();
        // `a` is used again, so `b` is now the least recently used.
        known.route(&hashes(&[user("a"), assistant("x")]), at(2));
        assert_eq!(known.shed(), Expired::default(), "two fit");
        assert_eq!(known.expire(at(3)), Expired::default(), "none idle");
        let c = known.route(&hashes(&[user("c")]), at(4)).id();
        assert_eq!(known.shed().left, vec![b]);
        assert_eq!(known.len(), 2);
        let back = known.route(&hashes(&[user("b"), assistant("y")]), at(6));
        assert!(
            matches!(back, Route::Resume { from, known: 1, .. } if from == b),
            "{back:?}"
        );
        assert_ne!(a, c);
    }

    #[test]
    fn past_the_most_remembered_the_oldest_idle_ones_are_forgotten_for_good() {
        let mut known = Conversations::with_dormant(Duration::from_secs(3_600), 1, 2);
        let start = Instant::now();
        let at = |s: u64| start + Duration::from_secs(s);
        let mut left = Vec::new();
        let mut forgotten = Vec::new();
        for n in 0..5u64 {
            known.route(&hashes(&[user(&format!("c{n}"))]), at(n));
            let expired = known.shed();
            left.extend(expired.left);
            forgotten.extend(expired.forgotten);
            assert!(known.dormant() <= 2, "at most two remembered");
        }
        // c4 is live, c2 and c3 dormant, c0 and c1 forgotten.
        assert_eq!(left.len(), 4);
        assert_eq!(forgotten, left[..2]);
        assert_eq!(known.dormant(), 2);
        let old = known.route(&hashes(&[user("c0"), assistant("x")]), at(9));
        assert!(matches!(old, Route::New { .. }), "{old:?}");
        let kept = known.route(&hashes(&[user("c3"), assistant("x")]), at(9));
        assert!(
            matches!(kept, Route::Resume { from, .. } if from == left[3]),
            "{kept:?}"
        );
        // c4 and the new c0 leave. Remembering them forgets c2, and c3's
        // old place in the age order, resumed since, forgets nothing.
        let again = known.shed();
        let c4 = left[3] + 1;
        assert_eq!(again.left, vec![c4, old.id()]);
        assert_eq!(again.forgotten, vec![left[2]]);
        assert_eq!(known.dormant(), 2);
    }

    #[test]
    fn idle_conversations_are_forgotten() {
        let mut known = Conversations::new(Duration::from_secs(10), usize::MAX);
        let start = Instant::now();
        let a = known.route(&hashes(&[user("a")]), start).id();
        let b = known
            .route(&hashes(&[user("b")]), start + Duration::from_secs(8))
            .id();
        assert_eq!(known.expire(start + Duration::from_secs(12)).left, vec![a]);
        assert_eq!(known.len(), 1);
        let again = known.route(&hashes(&[user("a"), assistant("x")]), start);
        assert!(
            matches!(again, Route::Resume { from, known: 1, id } if from == a && id != a),
            "{again:?}"
        );
        known.forget(again.id());
        let fresh = known.route(&hashes(&[user("a"), assistant("x")]), start);
        assert!(
            matches!(fresh, Route::New { id } if id != again.id()),
            "resumed once only: {fresh:?}"
        );
        let still = known.route(
            &hashes(&[user("b"), assistant("y")]),
            start + Duration::from_secs(13),
        );
        assert_eq!(still, Route::Continue { id: b, known: 1 });
    }
}
