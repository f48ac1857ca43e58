//! Side calls: model calls a context strategy asks for beside the main
//! loop (a planner, a summary). Each runs through the session's provider
//! without tools and is cut off at its timeout; a call that fails or times
//! out is answered with the reason, which the strategy must take as
//! "change nothing". A [`SideGate`] bounds what side calls that give
//! nothing may cost a session: each waits at most its cap, a stalled one
//! makes the next model calls skip side calls (doubling), and once failed
//! calls have taken [`STALL_ALLOWANCE`] caps in all, the session makes no
//! more.

use std::time::Duration;

use cwl::{Block, Message, SideCalls, SideRequest};

use crate::{Provider, Request};

/// Side calls run before one model call at most: a strategy that keeps
/// asking cannot hold the loop up longer than this many timeouts.
pub const MAX_SIDE_CALLS: usize = 4;

/// The longest one side call waits by default, in `cwl run`, `chat` and
/// `proxy`.
pub const DEFAULT_SIDE_TIMEOUT: Duration = Duration::from_secs(20);

/// How many caps' worth of waiting failed side calls may cost one session
/// (or one proxied conversation) in all: with the default cap, 60 s.
pub const STALL_ALLOWANCE: u32 = 3;

/// The most model calls a session skips side calls for after a stall.
const MAX_BACKOFF: u32 = 64;

/// What side calls may still cost a session, and the back-off after a
/// stalled one: the guard that keeps a planner that never answers from
/// holding the agent or a proxied conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SideGate {
    cap: Duration,
    stall_left: Duration,
    skip: u32,
    backoff: u32,
}

impl SideGate {
    /// A gate whose calls wait at most `cap` each, and whose failed calls
    /// may take [`STALL_ALLOWANCE`] × `cap` in all.
    pub fn new(cap: Duration) -> Self {
        SideGate {
            cap,
            stall_left: cap.saturating_mul(STALL_ALLOWANCE),
            skip: 0,
            backoff: 1,
        }
    }

    /// Starts one model call's round of side calls: whether any may run
    /// (not while backing off, nor once the allowance is spent).
    pub fn open(&mut self) -> bool {
        if self.skip > 0 {
            self.skip -= 1;
            return false;
        }
        !self.stall_left.is_zero()
    }

    /// The timeout of a call whose strategy asks for `wanted`.
    pub fn timeout(&self, wanted: Duration) -> Duration {
        wanted.min(self.cap).min(self.stall_left)
    }

    /// Records a call that waited `waited` of its `timeout` and answered
    /// (`ok`) or not. Returns whether the round may go on, and when this
    /// call spent the last of the allowance, the note to log.
    pub fn record(
        &mut self,
        waited: Duration,
        timeout: Duration,
        ok: bool,
    ) -> (bool, Option<String>) {
        if ok {
            self.backoff = 1;
            return (true, None);
        }
        let was_open = !self.stall_left.is_zero();
        self.stall_left = self.stall_left.saturating_sub(waited);
        let stalled = waited >= timeout;
        if stalled {
            self.skip = self.backoff;
            self.backoff = (self.backoff * 2).min(MAX_BACKOFF);
        }
        let note = (was_open && self.stall_left.is_zero()).then(|| {
            format!(
                "side calls are off for the rest of this session: failed ones took {}s in all",
                self.cap.saturating_mul(STALL_ALLOWANCE).as_secs_f64()
            )
        });
        (!stalled && !self.stall_left.is_zero(), note)
    }
}

/// The provider request of a side call: its messages to `model`, no tools,
/// no cache breakpoint, no reasoning setting.
pub fn request_of<'a>(model: &'a str, request: &'a SideRequest) -> Request<'a> {
    Request {
        model,
        messages: &request.messages,
        tools: &[],
        max_output_tokens: request.max_output_tokens,
        cache_breakpoint: None,
        reasoning: None,
    }
}

/// Runs `request` through `provider` for `model`, never waiting longer
/// than its timeout: the model's text, or why there is none.
pub async fn side_call(
    provider: &dyn Provider,
    model: &str,
    request: &SideRequest,
) -> Result<String, String> {
    let call = request_of(model, request);
    match tokio::time::timeout(request.timeout, provider.complete(&call)).await {
        Err(_) => Err(format!(
            "the {} call timed out after {:.1}s",
            request.purpose,
            request.timeout.as_secs_f64()
        )),
        Ok(Err(error)) => Err(format!("the {} call failed: {error}", request.purpose)),
        Ok(Ok(response)) => match response.message {
            Message::Assistant { content } => Ok(content
                .iter()
                .filter_map(|block| match block {
                    Block::Text { text } => Some(text.as_str()),
                    _ => None,
                })
                .collect::<Vec<_>>()
                .join("")),
            _ => Ok(String::new()),
        },
    }
}

/// Runs the side calls `strategy` asks for (at most [`MAX_SIDE_CALLS`],
/// as `gate` allows) and gives it each answer; returns what was asked and
/// answered, in order, for the session file, and the gate's note when it
/// shut.
pub async fn run_side_calls(
    provider: &dyn Provider,
    model: &str,
    strategy: &mut dyn SideCalls,
    gate: &mut SideGate,
) -> (Vec<(SideRequest, Result<String, String>)>, Option<String>) {
    let mut done = Vec::new();
    let mut shut = None;
    if !gate.open() {
        return (done, shut);
    }
    for _ in 0..MAX_SIDE_CALLS {
        let Some(mut request) = strategy.side_request() else {
            break;
        };
        request.timeout = gate.timeout(request.timeout);
        let started = std::time::Instant::now();
        let result = side_call(provider, model, &request).await;
        let (go_on, note) = gate.record(started.elapsed(), request.timeout, result.is_ok());
        shut = shut.or(note);
        strategy.side_result(request.id, result.clone());
        done.push((request, result));
        if !go_on {
            break;
        }
    }
    (done, shut)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use cwl::{Strategy, Usage};

    use super::*;
    use crate::testing::asking::Asking;
    use crate::testing::{Reply, ScriptedServer};
    use crate::{OpenAiConfig, OpenAiProvider, RetryPolicy};

    fn provider(server: &ScriptedServer) -> OpenAiProvider {
        OpenAiProvider::new(
            OpenAiConfig::new(format!("{}/v1", server.url())).with_retry(RetryPolicy::none()),
        )
        .unwrap()
    }

    #[tokio::test]
    async fn answers_errors_and_hangs_each_come_back_and_a_stall_backs_off() {
        let ok = |text: &str| Reply::openai(&Message::assistant_text(text), Usage::default());
        let server = ScriptedServer::start([
            ok("fold u1"),
            Reply::status(500, r#"{"error":{"message":"boom"}}"#),
            ok("two"),
            ok("three"),
            Reply::Silence,
            ok("after one skipped round"),
            Reply::Silence,
            Reply::Silence,
            ok("after two skipped rounds"),
        ])
        .await
        .unwrap();
        let provider = provider(&server);
        let mut strategy = Asking::new(12, Duration::from_millis(300));
        strategy.context.push(Message::user("go")).unwrap();
        let view: Vec<Message> = Strategy::view(&strategy).cloned().collect();
        let mut gate = SideGate::new(Duration::from_secs(1));
        let mut rounds = Vec::new();
        for _ in 0..9 {
            let (done, shut) = run_side_calls(&provider, "m", &mut strategy, &mut gate).await;
            assert_eq!(shut, None, "0.9s of 3s spent");
            rounds.push(done.len());
        }
        assert_eq!(
            rounds,
            [MAX_SIDE_CALLS, 1, 0, 2, 0, 1, 0, 0, MAX_SIDE_CALLS],
            "four a round at most; a stall ends its round and skips one round, \
             two after a second stall in a row, one again after an answer"
        );
        let answers = strategy.answers.lock().unwrap().clone();
        assert_eq!(answers[0], (1, Ok("fold u1".to_string())));
        assert!(
            matches!(&answers[1], (2, Err(e)) if e.starts_with("the planner call failed") && e.contains("boom")),
            "{answers:?}"
        );
        assert_eq!(
            answers[4],
            (5, Err("the planner call timed out after 0.3s".to_string()))
        );
        assert_eq!(answers[5], (6, Ok("after one skipped round".to_string())));
        assert_eq!(answers[8], (9, Ok("after two skipped rounds".to_string())));
        assert!(strategy.asked.is_empty(), "all twelve asked");
        assert!(
            Strategy::view(&strategy).cloned().eq(view),
            "side calls leave the view alone"
        );
        let sent = server.requests()[0].json();
        assert_eq!(sent["model"], "m");
        assert_eq!(sent["messages"][0]["content"], "plan 1");
        assert!(sent.get("tools").is_none(), "side calls offer no tools");
    }

    #[test]
    fn a_gate_caps_each_wait_and_shuts_once_failures_took_three_caps() {
        let cap = Duration::from_secs(20);
        let mut gate = SideGate::new(cap);
        assert_eq!(gate.timeout(Duration::from_secs(60)), cap);
        assert_eq!(gate.timeout(Duration::from_secs(5)), Duration::from_secs(5));
        // Fast failures cost what they took, and do not back off.
        assert!(gate.open());
        assert_eq!(
            gate.record(Duration::from_secs(1), cap, false),
            (true, None)
        );
        let mut waited = Duration::from_secs(1);
        let mut skipped = 0;
        let mut note = None;
        for _ in 0..20 {
            if !gate.open() {
                skipped += 1;
                continue;
            }
            let timeout = gate.timeout(Duration::from_secs(60));
            waited += timeout;
            let (go_on, shut) = gate.record(timeout, timeout, false);
            assert!(!go_on, "a stall ends the round");
            if shut.is_some() {
                note = shut;
                break;
            }
        }
        assert_eq!(waited, cap * STALL_ALLOWANCE, "60 s in all, never more");
        assert_eq!(skipped, 1 + 2, "backed off one round, then two");
        assert_eq!(
            note.as_deref(),
            Some("side calls are off for the rest of this session: failed ones took 60s in all")
        );
        for _ in 0..100 {
            assert!(!gate.open(), "shut for good");
        }
        // An answer resets the back-off, not the allowance.
        let mut gate = SideGate::new(cap);
        gate.record(cap, cap, false);
        assert!(!gate.open());
        assert!(gate.open());
        gate.record(Duration::from_secs(2), cap, true);
        gate.record(cap, cap, false);
        assert!(!gate.open(), "one round skipped again, not two");
        assert!(gate.open());
        assert_eq!(gate.timeout(cap), cap);
        gate.record(cap, cap, false);
        assert_eq!(gate.timeout(cap), Duration::ZERO);
    }
}
