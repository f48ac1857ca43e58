//! Prefix-cache behaviour: how much of each request repeats the previous
//! request's prefix, and what the provider bills as cache reads and writes.

use chrono::{DateTime, Utc};

use super::cost::CacheRules;
use super::sent::Sent;

/// What one request did with the cache.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheUse {
    /// Tokens of the longest prefix shared with the previous request.
    pub reused: usize,
    /// Tokens billed as cache reads.
    pub read: usize,
    /// Tokens billed as cache writes.
    pub write: usize,
    /// Tokens billed as plain input.
    pub uncached: usize,
}

impl CacheUse {
    /// A request of `total` tokens that shared `reused` with the previous
    /// one and read `read` from the cache: what `rules` bill as a write
    /// (the rest, where the provider charges for writing it) and as plain
    /// input.
    fn billed(rules: CacheRules, total: usize, reused: usize, read: usize) -> CacheUse {
        let write = match rules {
            CacheRules::Anthropic | CacheRules::OpenAiWrites if total >= rules.min_prefix() => {
                total - read
            }
            _ => 0,
        };
        CacheUse {
            reused,
            read,
            write,
            uncached: total - read - write,
        }
    }

    /// The use when the provider read only `share` (0 to 1) of what this
    /// model reads, as the log shows it did: the rest is billed as the
    /// rules bill what is not read.
    pub fn read_share(self, share: f64, rules: CacheRules) -> CacheUse {
        let read = (self.read as f64 * share.clamp(0.0, 1.0)).floor() as usize;
        let total = self.read + self.write + self.uncached;
        CacheUse::billed(rules, total, self.reused, read)
    }
}

#[derive(Debug, Clone, Default)]
enum Previous {
    #[default]
    Nothing,
    Pieces(Vec<(u64, usize)>),
    Full(usize),
}

/// A prefix cached at a breakpoint of an earlier request (Anthropic).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Breakpoint {
    /// Messages it covers.
    pieces: usize,
    /// Tokens it covers, tool definitions included.
    tokens: usize,
    /// When it was last written or read.
    used: Option<DateTime<Utc>>,
}

/// The cache as the provider would see a policy's requests.
#[derive(Debug, Clone)]
pub struct CacheModel {
    rules: CacheRules,
    previous: Previous,
    previous_time: Option<DateTime<Utc>>,
    /// Anthropic: the cached prefixes that are prefixes of the latest
    /// request, shortest first.
    breakpoints: Vec<Breakpoint>,
}

impl CacheModel {
    /// An empty cache under `rules`.
    pub fn new(rules: CacheRules) -> Self {
        CacheModel {
            rules,
            previous: Previous::Nothing,
            previous_time: None,
            breakpoints: Vec::new(),
        }
    }

    fn warm(&self, time: Option<DateTime<Utc>>) -> bool {
        match (self.previous_time, time) {
            (Some(before), Some(now)) => (now - before).num_seconds() <= self.rules.ttl_seconds(),
            _ => true,
        }
    }

    /// A request made of `pieces` (after `tools` tokens of definitions).
    pub fn pieces(
        &mut self,
        tools: usize,
        pieces: &[Sent],
        time: Option<DateTime<Utc>>,
    ) -> CacheUse {
        let total = tools + pieces.iter().map(|p| p.tokens).sum::<usize>();
        let (shared, reused) = match &self.previous {
            Previous::Pieces(previous) => {
                let shared = previous
                    .iter()
                    .zip(pieces)
                    .take_while(|((id, tokens), piece)| *id == piece.id && *tokens == piece.tokens)
                    .count();
                let tokens: usize = previous[..shared].iter().map(|(_, t)| *t).sum();
                (shared, tools + tokens)
            }
            Previous::Full(_) | Previous::Nothing => (0, 0),
        };
        let used = match self.rules {
            CacheRules::Anthropic => {
                let read = self.read_breakpoints(tools, pieces, shared, total, time);
                CacheUse::billed(self.rules, total, reused, read)
            }
            _ => self.bill(total, reused, time),
        };
        self.previous = Previous::Pieces(pieces.iter().map(|p| (p.id, p.tokens)).collect());
        self.previous_time = time.or(self.previous_time);
        used
    }

    /// Anthropic reads only a prefix cached at an earlier request's
    /// breakpoint: the end of the tools and system prompt, or the end of a
    /// whole earlier request (where clients put their sliding breakpoint).
    /// A request edited inside what the previous one sent so reads up to
    /// the last such prefix before the edit, not up to the edit. `shared`
    /// messages open both this request and the previous one. Returns the
    /// tokens read, and records this request's breakpoints.
    fn read_breakpoints(
        &mut self,
        tools: usize,
        pieces: &[Sent],
        shared: usize,
        total: usize,
        time: Option<DateTime<Utc>>,
    ) -> usize {
        let ttl = self.rules.ttl_seconds();
        let min = self.rules.min_prefix();
        let warm = |b: &Breakpoint| match (b.used, time) {
            (Some(used), Some(now)) => (now - used).num_seconds() <= ttl,
            _ => true,
        };
        self.breakpoints.retain(|b| b.pieces <= shared);
        let hit = self
            .breakpoints
            .iter()
            .rposition(|b| b.tokens >= min && warm(b));
        let read = hit.map_or(0, |i| self.breakpoints[i].tokens);
        if let Some(i) = hit {
            self.breakpoints[i].used = time.or(self.breakpoints[i].used);
        }
        let system = pieces.iter().take_while(|p| p.system).count();
        let system_tokens = tools + pieces[..system].iter().map(|p| p.tokens).sum::<usize>();
        self.cache_at(system, system_tokens, time);
        self.cache_at(pieces.len(), total, time);
        read
    }

    /// Records the prefix of `pieces` messages as written or read at `time`.
    fn cache_at(&mut self, pieces: usize, tokens: usize, time: Option<DateTime<Utc>>) {
        let at = self.breakpoints.partition_point(|b| b.pieces < pieces);
        match self.breakpoints.get_mut(at) {
            Some(b) if b.pieces == pieces => b.used = time.or(b.used),
            _ => self.breakpoints.insert(
                at,
                Breakpoint {
                    pieces,
                    tokens,
                    used: time,
                },
            ),
        }
    }

    /// A request of `total` tokens that holds the previous request whole
    /// from its start, or up to `changed_at` tokens when the provider's
    /// view of the history changed there.
    pub fn full(
        &mut self,
        total: usize,
        changed_at: Option<usize>,
        time: Option<DateTime<Utc>>,
    ) -> CacheUse {
        let reused = match self.previous {
            Previous::Full(previous) => previous.min(total).min(changed_at.unwrap_or(usize::MAX)),
            _ => 0,
        };
        let used = self.bill(total, reused, time);
        self.previous = Previous::Full(total);
        self.previous_time = time.or(self.previous_time);
        used
    }

    fn bill(&self, total: usize, reused: usize, time: Option<DateTime<Utc>>) -> CacheUse {
        let read = if self.warm(time) {
            self.rules.readable(reused)
        } else {
            0
        };
        CacheUse::billed(self.rules, total, reused, read)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::sent::{ReasoningScope, sent};
    use crate::transcript::{Entry, Lab};
    use cwl::{Estimate, Message};
    use std::sync::Arc;
    use std::sync::Arc as StdArc;

    fn all(pieces: &[Arc<Entry>]) -> Vec<Sent> {
        sent(pieces, ReasoningScope::AllTurns)
    }

    fn entries(lab: &mut Lab, n: usize) -> Vec<Arc<Entry>> {
        (0..n)
            .map(|i| lab.entry(Message::user(format!("{i:04}").repeat(1000))))
            .collect()
    }

    fn at(seconds: i64) -> Option<DateTime<Utc>> {
        DateTime::from_timestamp(1_700_000_000 + seconds, 0)
    }

    #[test]
    fn anthropic_reads_the_shared_prefix_and_writes_the_rest() {
        let mut lab = Lab::new(StdArc::new(Estimate), &[]);
        let e = entries(&mut lab, 4);
        let each = e[0].tokens();
        let mut cache = CacheModel::new(CacheRules::Anthropic);
        let first = cache.pieces(0, &all(&e[..2]), at(0));
        assert_eq!(
            first,
            CacheUse {
                reused: 0,
                read: 0,
                write: 2 * each,
                uncached: 0
            }
        );
        let second = cache.pieces(0, &all(&e[..3]), at(60));
        assert_eq!(
            second,
            CacheUse {
                reused: 2 * each,
                read: 2 * each,
                write: each,
                uncached: 0
            }
        );
        let evicted = cache.pieces(
            0,
            &all(&[e[0].clone(), e[2].clone(), e[3].clone()]),
            at(120),
        );
        assert_eq!(evicted.reused, each);
        let cold = cache.pieces(
            0,
            &all(&[e[0].clone(), e[2].clone(), e[3].clone()]),
            at(1000),
        );
        assert_eq!(
            (cold.reused, cold.read, cold.write),
            (3 * each, 0, 3 * each),
            "TTL expired"
        );
    }

    #[test]
    fn anthropic_reads_only_prefixes_cached_at_breakpoints() {
        let mut lab = Lab::new(StdArc::new(Estimate), &[]);
        let system = lab.entry(Message::system("rules ".repeat(2000)));
        let e = entries(&mut lab, 6);
        let each = e[0].tokens();
        let head = system.tokens();
        let request = |parts: &[&Arc<Entry>]| -> Vec<Arc<Entry>> {
            std::iter::once(&system)
                .chain(parts.iter().copied())
                .cloned()
                .collect()
        };
        let mut cache = CacheModel::new(CacheRules::Anthropic);
        cache.pieces(0, &all(&request(&[&e[0], &e[1]])), at(0));
        cache.pieces(0, &all(&request(&[&e[0], &e[1], &e[2]])), at(10));
        let grown = cache.pieces(0, &all(&request(&[&e[0], &e[1], &e[2], &e[3]])), at(20));
        assert_eq!(
            grown.read,
            head + 3 * each,
            "the previous request is read whole"
        );

        // An eviction inside it: the shared prefix runs to e[0], but no
        // breakpoint ended there, so only the system prompt is read.
        let edited = cache.pieces(0, &all(&request(&[&e[0], &e[2], &e[3], &e[4]])), at(30));
        assert_eq!(edited.reused, head + each);
        assert_eq!((edited.read, edited.write), (head, 4 * each));
        let next = cache.pieces(
            0,
            &all(&request(&[&e[0], &e[2], &e[3], &e[4], &e[5]])),
            at(40),
        );
        assert_eq!(
            next.read,
            head + 4 * each,
            "the edited request's end is cached"
        );

        // Dropping the last message returns to an earlier request's end.
        let back = cache.pieces(0, &all(&request(&[&e[0], &e[2], &e[3], &e[4]])), at(50));
        assert_eq!(back.read, head + 4 * each);
        let cold = cache.pieces(0, &all(&request(&[&e[0], &e[2], &e[3], &e[4]])), at(400));
        assert_eq!(cold.read, 0, "every cached prefix expired");
    }

    #[test]
    fn a_share_of_the_reads_moves_the_rest_to_writes_or_plain_input() {
        let used = CacheUse {
            reused: 9000,
            read: 8000,
            write: 1000,
            uncached: 0,
        };
        assert_eq!(used.read_share(1.0, CacheRules::Anthropic), used);
        let half = used.read_share(0.5, CacheRules::Anthropic);
        assert_eq!((half.read, half.write, half.uncached), (4000, 5000, 0));
        let plain = CacheUse {
            write: 0,
            uncached: 1000,
            ..used
        };
        let none = plain.read_share(0.0, CacheRules::Google);
        assert_eq!((none.read, none.write, none.uncached), (0, 0, 9000));
        assert_eq!(plain.read_share(1.7, CacheRules::OpenAi), plain, "clamped");
        let writes = used.read_share(0.5, CacheRules::OpenAiWrites);
        assert_eq!(
            (writes.read, writes.write, writes.uncached),
            (4000, 5000, 0),
            "what OpenAI bills as writes from GPT-5.6 on is written again"
        );
    }

    #[test]
    fn openai_reads_in_steps_and_never_writes() {
        let mut cache = CacheModel::new(CacheRules::OpenAi);
        assert_eq!(cache.full(5000, None, None).read, 0);
        let second = cache.full(6000, None, None);
        assert_eq!(second.reused, 5000);
        assert_eq!(second.read, 1024 + (5000 - 1024) / 128 * 128);
        assert_eq!(second.write, 0);
        assert_eq!(second.uncached, 6000 - second.read);
        let mut small = CacheModel::new(CacheRules::OpenAi);
        small.full(500, None, None);
        assert_eq!(
            small.full(900, None, None).read,
            0,
            "prefix under 1024 is not cached"
        );
    }

    #[test]
    fn openai_from_gpt_5_6_bills_what_it_caches() {
        let mut cache = CacheModel::new(CacheRules::OpenAiWrites);
        assert_eq!(cache.full(5000, None, None).write, 5000);
        let second = cache.full(6000, None, None);
        assert_eq!(second.read, 1024 + (5000 - 1024) / 128 * 128);
        assert_eq!((second.write, second.uncached), (6000 - second.read, 0));
    }

    #[test]
    fn google_reads_the_whole_prefix_from_2048_tokens() {
        let mut cache = CacheModel::new(CacheRules::Google);
        cache.full(5000, None, None);
        let second = cache.full(6000, None, None);
        assert_eq!(
            (second.read, second.write, second.uncached),
            (5000, 0, 1000)
        );
        let mut small = CacheModel::new(CacheRules::Google);
        small.full(2000, None, None);
        assert_eq!(small.full(2100, None, None).read, 0, "prefix under 2048");
    }

    #[test]
    fn no_rules_no_cache() {
        let mut cache = CacheModel::new(CacheRules::None);
        cache.full(5000, None, None);
        let used = cache.full(6000, None, None);
        assert_eq!(
            (used.reused, used.read, used.write, used.uncached),
            (5000, 0, 0, 6000)
        );
    }
}
