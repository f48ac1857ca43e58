//! The replay driver: streams one session through every chosen policy,
//! turn by turn, and measures the request each would have sent at every
//! model call of the log.
//!
//! Request *k* is built from everything before the log's *k*-th assistant
//! message; that message is then the call's output, and the anchors it
//! uses are checked against the request. Events are pulled one at a time
//! and each message is counted and scanned once, shared by all policies;
//! nothing but what the policies themselves keep stays in memory.
//!
//! [`replay_with`] takes a [`Calibration`] (see [`crate::calibrate`]):
//! budgeted policies then decide against the budget converted to local
//! tokens and every request is measured in the provider's tokens.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use cwl::tokens::{MESSAGE_OVERHEAD, message_tokens};
use cwl::{Annotation, Message, TokenCounter, Usage};

use crate::calibrate::{self, Calibration, Fidelity, Measured};
use crate::judge::{self, Judge};
use crate::metrics::anchors::{AnchorId, Scope};
use crate::metrics::content::Need;
use crate::metrics::cost::{CacheRules, ModelSource, Pricing};
use crate::metrics::sent::{History, ReasoningScope};
use crate::metrics::{Call, Missed, Recorder, Stats};
use crate::policy::clear::ClearParams;
use crate::policy::{Policy, PolicyConfig, PolicyKind, Request, View, validate};
use crate::session::{OpenError, Session, SessionEvent, SessionInfo};
use crate::side::SideModel;
use crate::transcript::{Entry, Lab, Pairing, Step, Unit};
use cwl_infer::Inferrer;
use serde::Serialize;

/// What to replay and how to measure it.
#[derive(Clone)]
pub struct ReplayConfig {
    /// The policies, in report order.
    pub policies: Vec<PolicyKind>,
    /// Their parameters.
    pub policy: PolicyConfig,
    /// Prices and caching rules.
    pub pricing: Arc<Pricing>,
    /// The token counter.
    pub counter: Arc<dyn TokenCounter>,
    /// Answers the side requests strategies make (planner, summaries);
    /// [`NoModel`](crate::side::NoModel) skips them.
    pub side: Arc<dyn SideModel>,
    /// Asks a judge whether pruned requests still support the logged
    /// reply (Self-GC's no-impact rate); `None`: not measured.
    pub judge: Option<Judge>,
    /// Check every request (valid, keeps system and latest user turn, the
    /// engine within budget when it says so) and list violations. For tests.
    pub check: bool,
    /// List what each request lacked that its reply used ([`Loss`]).
    pub losses: bool,
}

impl std::fmt::Debug for ReplayConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplayConfig")
            .field("policies", &self.policies)
            .field("policy", &self.policy)
            .field("pricing", &self.pricing)
            .field("check", &self.check)
            .finish_non_exhaustive()
    }
}

/// One policy's outcome on one file.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyOutcome {
    /// The policy.
    pub kind: PolicyKind,
    /// Its measurements.
    pub stats: Stats,
    /// Why it stopped early, if it did (its stats cover the requests before).
    pub failed: Option<String>,
}

/// What one policy's request lacked that the logged reply used: the
/// evidence behind the retention figures, request by request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Loss {
    /// The model call, counted from 1 in the file.
    pub request: u64,
    /// The policy.
    #[serde(rename = "policy", serialize_with = "policy_name")]
    pub kind: PolicyKind,
    /// Anchors the reply used that had appeared earlier and that no
    /// message of the request held (the lost-anchor rate's).
    pub anchors: Vec<Lost>,
    /// Values the reply quoted from an earlier tool output that no message
    /// of the request carried in logged text.
    pub values: Vec<Lost>,
    /// Lines the reply's edits and patches must match that no message of
    /// the request carried in logged text.
    pub lines: usize,
}

/// An anchor or value a request lacked, and how far back it was shown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Lost {
    /// The anchor as the log wrote it.
    pub name: String,
    /// The model calls made before it last appeared in the transcript (0:
    /// before the first): the request it was lost at minus this is how
    /// long ago the log showed it.
    pub seen_after: u64,
}

fn policy_name<S: serde::Serializer>(kind: &PolicyKind, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(kind.name())
}

/// The replay of one file.
#[derive(Debug, Clone, PartialEq)]
pub struct FileReport {
    /// The file.
    pub path: String,
    /// Its format.
    pub format: String,
    /// The model its costs are for.
    pub model: String,
    /// The price table row that priced it (see [`crate::metrics::cost::Pricing::priced_as`]).
    pub priced_as: String,
    /// Where that model came from (set by the command line).
    pub model_source: Option<ModelSource>,
    /// Whether the model has a price (else its costs are unknown).
    pub priced: bool,
    /// The budget τ its requests were measured against.
    pub budget: usize,
    /// The context window `compact` summarizes against, in provider tokens.
    pub window: usize,
    /// Model calls replayed.
    pub requests: u64,
    /// Whether the log's agent annotated its own episodes (else the engine
    /// ran on inferred ones).
    pub annotated: bool,
    /// Compactions the original harness made (ignored by the replay).
    pub log_compactions: u64,
    /// Calls whose logged prompt was smaller than the previous call's with
    /// no compaction in between ([`crate::calibrate::prompt_dropped`]): the
    /// harness removed content from what it sent (Claude Code 2.0 clears
    /// old tool results) and logged it whole. Replays keep it; the replay
    /// of what the harness sent takes the size of each cut from the log.
    pub log_prompt_drops: u64,
    /// Bytes of log, when known.
    pub bytes: Option<u64>,
    /// Per policy, in the order asked.
    pub policies: Vec<PolicyOutcome>,
    /// What was wrong in the log or met by a policy, worked around.
    pub warnings: Vec<String>,
    /// Broken request invariants (only with [`ReplayConfig::check`]).
    pub violations: Vec<String>,
    /// What requests lacked, in request order (only with
    /// [`ReplayConfig::losses`]).
    pub losses: Vec<Loss>,
    /// How local counts were converted to the provider's.
    pub calibration: Calibration,
    /// The replayed full history against the log's own prompt sizes.
    pub fidelity: Fidelity,
}

struct Run {
    kind: PolicyKind,
    policy: Box<dyn Policy>,
    recorder: Recorder,
    failed: Option<String>,
    /// Requests that left something out, for the judge's sampling.
    pruned: u64,
}

struct Pending {
    annotations: Vec<Annotation>,
    used: Arc<[AnchorId]>,
}

/// Replays `session` (read from `path`) under `config`, counting tokens
/// locally without calibration. `tick` is called after each event, for
/// progress display.
pub fn replay(
    session: Session,
    path: &str,
    config: &ReplayConfig,
    tick: &mut dyn FnMut(),
) -> FileReport {
    replay_with(session, path, config, Calibration::identity(), tick)
}

/// Replays `session` like [`replay`], converting every request to provider
/// tokens with the calibration `measured` holds (a bare [`Calibration`]
/// will do); budgeted policies see the budget and window converted back
/// to local tokens. The report's fidelity is the one `measured` holds
/// ([`crate::calibrate::measure`]), with the costs the replay adds.
pub fn replay_with(
    session: Session,
    path: &str,
    config: &ReplayConfig,
    measured: impl Into<Measured>,
    tick: &mut dyn FnMut(),
) -> FileReport {
    let Measured {
        calibration,
        fidelity,
    } = measured.into();
    let (mut report, warnings) = replay_part(session, path, config, calibration, fidelity, tick);
    report.warnings.extend(warnings.into_iter().flatten());
    report
}

/// [`replay_with`] with the policies in `groups` parts that replay side by
/// side (on the current rayon pool): the first part reads `session`, each
/// other one the log again from `open`. For a file replayed alone on more
/// than one core. The report is the one [`replay_with`] gives, whatever
/// the number of parts. Not for judged or checked replays, whose counters
/// run across policies.
pub fn replay_split(
    session: Session,
    open: &(dyn Fn() -> Result<Session, OpenError> + Sync),
    path: &str,
    config: &ReplayConfig,
    measured: Measured,
    groups: usize,
) -> Result<FileReport, OpenError> {
    use rayon::prelude::*;
    let parts = split_policies(&config.policies, groups);
    let first = std::sync::Mutex::new(Some(session));
    let replayed: Vec<Result<Part, OpenError>> = parts
        .par_iter()
        .enumerate()
        .map(|(at, part)| {
            let config = ReplayConfig {
                policies: part.iter().map(|&at| config.policies[at]).collect(),
                ..config.clone()
            };
            let Measured {
                calibration,
                fidelity,
            } = measured;
            let opened = match at {
                0 => first.lock().unwrap_or_else(|e| e.into_inner()).take(),
                _ => None,
            };
            let session = match opened {
                Some(session) => session,
                None => open()?,
            };
            Ok(replay_part(
                session,
                path,
                &config,
                calibration,
                fidelity,
                &mut || {},
            ))
        })
        .collect();
    let mut outcomes: Vec<Option<(PolicyOutcome, Vec<String>)>> = vec![None; config.policies.len()];
    let mut merged: Option<FileReport> = None;
    let mut losses = Vec::new();
    for (part, replayed) in parts.iter().zip(replayed) {
        let (mut report, warnings) = replayed?;
        for ((&at, outcome), warnings) in part.iter().zip(report.policies.drain(..)).zip(warnings) {
            outcomes[at] = Some((outcome, warnings));
        }
        losses.append(&mut report.losses);
        merged.get_or_insert(report);
    }
    let mut report = merged.unwrap_or_else(|| unreachable!("at least one part"));
    let order = |kind: PolicyKind| config.policies.iter().position(|&k| k == kind);
    losses.sort_by_key(|loss: &Loss| (loss.request, order(loss.kind)));
    report.losses = losses;
    for (outcome, warnings) in outcomes.into_iter().flatten() {
        report.policies.push(outcome);
        report.warnings.extend(warnings);
    }
    Ok(report)
}

/// One replay's report, and each policy's own warnings apart (in policy
/// order) for the caller to place.
type Part = (FileReport, Vec<Vec<String>>);

/// The replay behind [`replay_with`] and each part of [`replay_split`].
fn replay_part(
    session: Session,
    path: &str,
    config: &ReplayConfig,
    calibration: Calibration,
    fidelity: Fidelity,
    tick: &mut dyn FnMut(),
) -> Part {
    let Session { info, events } = session;
    let mut replayer = Replayer::new(&info, path, config, calibration);
    for event in events {
        tick();
        replayer.event(event);
    }
    replayer.finish(fidelity)
}

/// The indices of `policies` in `groups` parts of about equal work, each
/// part in report order. The weights are each policy's time over a
/// replay's shared work on the real Claude Code traces: cwm 10, cwl 5,
/// self-gc 4, any other 1.
fn split_policies(policies: &[PolicyKind], groups: usize) -> Vec<Vec<usize>> {
    let weight = |kind: PolicyKind| match kind {
        PolicyKind::CWM => 10,
        PolicyKind::Cwl => 5,
        PolicyKind::Strategy(_) => 4,
        _ => 1,
    };
    let mut by_weight: Vec<usize> = (0..policies.len()).collect();
    by_weight.sort_by_key(|&at| std::cmp::Reverse(weight(policies[at])));
    let mut parts: Vec<(usize, Vec<usize>)> =
        vec![(0, Vec::new()); groups.clamp(1, policies.len().max(1))];
    for at in by_weight {
        let lightest = parts
            .iter_mut()
            .min_by_key(|(load, _)| *load)
            .unwrap_or_else(|| unreachable!("at least one part"));
        lightest.0 += weight(policies[at]);
        lightest.1.push(at);
    }
    parts
        .into_iter()
        .map(|(_, mut part)| {
            part.sort_unstable();
            part
        })
        .filter(|part| !part.is_empty())
        .collect()
}

/// The settings budgeted policies decide against: `config`'s, with the
/// budget, window and clearing amount converted to local tokens.
fn local_policy(
    config: &PolicyConfig,
    calibration: &Calibration,
    scope: ReasoningScope,
) -> PolicyConfig {
    PolicyConfig {
        budget: calibration.local_tokens(config.budget),
        window: calibration.local_tokens(config.window),
        clear: ClearParams {
            clear_at_least: calibration.local_amount(config.clear.clear_at_least),
            ..config.clear
        },
        reasoning: scope,
        ..config.clone()
    }
}

/// A recorder of requests measured in provider tokens against the budget.
fn recorder(config: &ReplayConfig, calibration: Calibration, scope: ReasoningScope) -> Recorder {
    Recorder::calibrated(
        config.policy.budget,
        Arc::clone(&config.pricing),
        calibration,
    )
    .reasoning(scope)
}

/// A report on the file at `path` with nothing replayed yet.
fn empty_report(
    info: &SessionInfo,
    path: &str,
    config: &ReplayConfig,
    calibration: Calibration,
) -> FileReport {
    FileReport {
        path: path.to_string(),
        format: info.format.clone(),
        model: config.pricing.model.clone(),
        priced_as: config.pricing.priced_as.clone(),
        model_source: None,
        priced: config.pricing.known,
        budget: config.policy.budget,
        window: config.policy.window,
        requests: 0,
        annotated: info.annotated(),
        log_compactions: 0,
        log_prompt_drops: 0,
        bytes: info.bytes,
        policies: Vec::new(),
        warnings: Vec::new(),
        violations: Vec::new(),
        losses: Vec::new(),
        calibration,
        fidelity: Fidelity::default(),
    }
}

/// What a logged assistant message tells about the call that wrote it.
struct Reply {
    /// Anchors it used.
    used: Vec<AnchorId>,
    /// Of those, the ones that had appeared earlier.
    at_risk: Vec<AnchorId>,
    output_tokens: usize,
    content: Need,
}

/// The state of one file's replay, fed one event at a time.
struct Replayer<'a> {
    config: &'a ReplayConfig,
    calibration: Calibration,
    /// The budget the policies decide against, in local tokens.
    local_budget: usize,
    lab: Lab,
    runs: Vec<Run>,
    report: FileReport,
    history: History,
    costs: CostTally,
    /// Infers episodes when the log's agent did not annotate its own.
    inferrer: Option<Inferrer>,
    pairing: Pairing,
    pending: Option<Pending>,
    last_time: Option<DateTime<Utc>>,
    cache_reads: CacheReads,
    guard: Guard,
    /// Every logged entry in order, kept only for the judge (what a
    /// request left out).
    all: Option<Vec<Arc<Entry>>>,
    judge_ids: u64,
}

impl<'a> Replayer<'a> {
    /// A replay of the session `info` describes, read from `path`, with
    /// every policy of `config` built and nothing replayed yet.
    fn new(
        info: &SessionInfo,
        path: &str,
        config: &'a ReplayConfig,
        calibration: Calibration,
    ) -> Self {
        let scope = calibration
            .reasoning_scope
            .unwrap_or_else(|| info.reasoning_scope());
        let lab = Lab::new(Arc::clone(&config.counter), &info.tools).with_reasoning(scope);
        let policy_config = local_policy(&config.policy, &calibration, scope);
        let runs = config
            .policies
            .iter()
            .map(|&kind| Run {
                kind,
                policy: kind.build_with(&policy_config, &lab, Arc::clone(&config.side)),
                recorder: recorder(config, calibration, scope),
                failed: None,
                pruned: 0,
            })
            .collect();
        Replayer {
            config,
            calibration,
            local_budget: policy_config.budget,
            lab,
            runs,
            report: empty_report(info, path, config, calibration),
            history: History::new(scope),
            costs: CostTally::new(recorder(config, calibration, scope)),
            inferrer: (!info.annotated()).then(Inferrer::new),
            pairing: Pairing::new(),
            pending: None,
            last_time: None,
            cache_reads: CacheReads::default(),
            guard: Guard {
                reasoning: scope,
                ..Guard::default()
            },
            all: config.judge.as_ref().map(|_| Vec::new()),
            judge_ids: 0,
        }
    }

    /// Takes the log's next event.
    fn event(&mut self, event: SessionEvent) {
        match event {
            SessionEvent::Warning(what) => self.report.warnings.push(what),
            SessionEvent::Compaction { .. } => {
                self.report.log_compactions += 1;
                self.cache_reads.cut();
                self.costs.cut();
            }
            SessionEvent::Message {
                message,
                timestamp,
                usage,
                cost_usd,
            } => {
                match message {
                    Message::ToolResult(result) => {
                        if let Some(inferrer) = self.inferrer.as_mut() {
                            inferrer.result(&result);
                        }
                        self.pairing.result(result)
                    }
                    Message::Assistant { .. } => {
                        self.assistant(message, timestamp, usage, cost_usd)
                    }
                    Message::User { .. } | Message::System { .. } => self.turn(message),
                }
                if timestamp.is_some() {
                    self.last_time = timestamp;
                }
            }
        }
    }

    /// A model call: measures every policy's request, then opens the step
    /// the call's message begins.
    fn assistant(
        &mut self,
        message: Message,
        timestamp: Option<DateTime<Utc>>,
        usage: Option<Usage>,
        cost_usd: Option<f64>,
    ) {
        self.close_step();
        let stripped = self
            .calibration
            .provider_amount(self.history.take_dropped());
        let changed_at = self.history.take_change();
        self.note_prompt_drop(usage, stripped);
        let reply = self.reply(&message, usage);
        let unchanged = changed_at.map(|at| {
            self.calibration
                .provider_tokens(self.lab.tools_tokens() + at) as u64
        });
        let cache_share =
            self.cache_reads
                .share(usage.as_ref(), self.config.pricing.rules, unchanged);
        let call = Call {
            time: self.last_time.or(timestamp),
            history_tokens: self.history.sent(),
            history_changed_at: changed_at,
            output_tokens: reply.output_tokens,
            at_risk: &reply.at_risk,
            content: &reply.content,
            cache_share,
        };
        self.report.requests = self.lab.called();
        self.costs.call(&call, cost_usd, self.lab.tools_tokens());
        self.request_all(&call, &message);
        let annotations = self.annotations(&message);
        self.pending = Some(Pending {
            annotations,
            used: Arc::from(reply.used),
        });
        self.pairing.begin(message);
    }

    /// Counts a call whose logged prompt shrank by more than the
    /// `stripped` provider tokens the replay dropped itself.
    fn note_prompt_drop(&mut self, usage: Option<Usage>, stripped: u64) {
        let logged = usage.map(|u| u.input_tokens).filter(|t| *t > 0);
        if let (Some(before), Some(now)) = (self.cache_reads.previous, logged)
            && calibrate::prompt_dropped(before.saturating_sub(stripped), now)
        {
            self.report.log_prompt_drops += 1;
            if self.report.log_prompt_drops == 1 {
                self.costs.cut();
            }
            self.cache_reads.cut();
        }
    }

    /// The anchors, output size and earlier content of the logged reply.
    fn reply(&mut self, message: &Message, usage: Option<Usage>) -> Reply {
        let lab = &mut self.lab;
        let used = lab.anchors_mut().extract(message, Scope::Used);
        let at_risk: Vec<AnchorId> = used
            .iter()
            .copied()
            .filter(|a| lab.anchors().was_seen(*a))
            .collect();
        let output_tokens = match usage {
            Some(u) if u.output_tokens > 0 => {
                usize::try_from(u.output_tokens).unwrap_or(usize::MAX)
            }
            _ => message_tokens(lab.counter(), message).saturating_sub(MESSAGE_OVERHEAD),
        };
        let content = Need::of(message, &at_risk, lab.seen());
        Reply {
            used,
            at_risk,
            output_tokens,
            content,
        }
    }

    /// Asks every running policy for its request at `call` and records it;
    /// `reply` is the logged message the call returned.
    fn request_all(&mut self, call: &Call<'_>, reply: &Message) {
        let number = self.report.requests;
        for run in self.runs.iter_mut().filter(|r| r.failed.is_none()) {
            run.policy.time(call.time);
            let request = match run.policy.request(&mut self.lab) {
                Ok(request) => request,
                Err(error) => {
                    run.failed = Some(error.to_string());
                    continue;
                }
            };
            if self.config.check {
                self.guard.check(
                    run.kind,
                    &request,
                    self.local_budget,
                    &self.lab,
                    number,
                    &mut self.report.violations,
                );
            }
            let missed = run.recorder.record(&request, call, self.lab.tools_tokens());
            if self.config.losses && !missed.is_empty() {
                self.report
                    .losses
                    .push(loss(&self.lab, run.kind, number, &missed));
            }
            if let (Some(judge), Some(all)) = (&self.config.judge, &self.all) {
                judge_request(judge, run, &request, all, reply, &mut self.judge_ids);
            }
        }
    }

    /// A user turn or system message: closes the open step and gives the
    /// message to every policy.
    fn turn(&mut self, message: Message) {
        self.close_step();
        let annotations = self.annotations(&message);
        let is_user = matches!(message, Message::User { .. });
        let entry = self.lab.entry(message);
        self.lab.note_logged(&entry);
        self.guard.note(&entry, is_user);
        if let Some(all) = self.all.as_mut() {
            all.push(Arc::clone(&entry));
        }
        self.history
            .push(entry.tokens(), entry.reasoning_tokens(), is_user);
        push(
            &mut self.runs,
            &Unit::Message(entry),
            &annotations,
            &mut self.lab,
        );
    }

    /// The episode annotations inferred before `message` (none when the
    /// log's agent annotated its own).
    fn annotations(&mut self, message: &Message) -> Vec<Annotation> {
        self.inferrer
            .as_mut()
            .map(|i| i.before(message))
            .unwrap_or_default()
    }

    /// Pushes the open step, if any, and adds it to the history.
    fn close_step(&mut self) {
        let (tokens, reasoning) = self.flush();
        self.history.push(tokens, reasoning, false);
    }

    /// Pushes the open step, if any; returns its tokens and, of those, its
    /// reasoning's.
    fn flush(&mut self) -> (usize, usize) {
        let done = self.pairing.finish();
        let Some(Pending { annotations, used }) = self.pending.take() else {
            return (0, 0);
        };
        let Some((assistant, results)) = done else {
            return (0, 0);
        };
        let lab = &mut self.lab;
        let assistant = lab.entry(assistant);
        lab.note_logged(&assistant);
        let results = results
            .into_iter()
            .map(|r| {
                let entry = lab.entry(r);
                lab.note_logged(&entry);
                entry
            })
            .collect::<Vec<_>>();
        if let Some(all) = self.all.as_mut() {
            all.push(Arc::clone(&assistant));
            all.extend(results.iter().cloned());
        }
        let step = Step {
            assistant,
            results,
            used,
        };
        let sizes = (step.tokens(), step.assistant.reasoning_tokens());
        push(&mut self.runs, &Unit::Step(step), &annotations, lab);
        sizes
    }

    /// Ends the replay: the report with `fidelity`, the replay's costs,
    /// its warnings and each policy's outcome; each policy's own warnings
    /// come apart.
    fn finish(mut self, fidelity: Fidelity) -> Part {
        self.flush();
        let mut report = self.report;
        let path = report.path.clone();
        report.fidelity = Fidelity {
            logged_cost_usd: self.costs.logged(),
            replayed_cost_usd: self.costs.replayed(),
            ..fidelity
        };
        let off = report.fidelity.out_of_bounds();
        if !off.is_empty() {
            report.warnings.push(format!(
                "{path}: cannot replay what the log's harness sent within the lab's bounds ({}): this file's figures are less sure",
                off.join(", ")
            ));
        }
        report.warnings.extend(self.pairing.take_warnings());
        if report.log_prompt_drops > 0 {
            report.warnings.push(format!(
                "{path}: the logged prompt shrank on {} calls without a compaction: the log's harness removed content from what it sent (Claude Code 2.0 clears old tool results) and logged it whole; every policy here replays what the log holds; the replay of what the harness sent takes the size of each cut from the call after it",
                report.log_prompt_drops
            ));
        }
        let mut warnings = Vec::new();
        for run in self.runs {
            let Run {
                kind,
                mut policy,
                recorder,
                failed,
                ..
            } = run;
            let own = policy.take_warnings().into_iter();
            warnings.push(own.map(|w| format!("{kind}: {w}")).collect());
            report.policies.push(PolicyOutcome {
                kind,
                stats: recorder.into_stats(),
                failed,
            });
        }
        (report, warnings)
    }
}

/// Request `number` of policy `kind`, which lacked `missed`, as listed.
fn loss(lab: &Lab, kind: PolicyKind, number: u64, missed: &Missed) -> Loss {
    let names = |ids: &[AnchorId]| {
        ids.iter()
            .map(|&a| Lost {
                name: lab.anchors().name(a).to_string(),
                seen_after: lab.anchors().last_seen(a).unwrap_or(0),
            })
            .collect()
    };
    Loss {
        request: number,
        kind,
        anchors: names(&missed.anchors),
        values: names(&missed.content.anchors),
        lines: missed.content.lines.len(),
    }
}

/// Asks `judge` about `request` when it left out some of `all` and it is
/// the run's turn to be judged; records the judgment.
fn judge_request(
    judge: &Judge,
    run: &mut Run,
    request: &Request,
    all: &[Arc<Entry>],
    future: &Message,
    ids: &mut u64,
) {
    let View::Pieces(pieces) = &request.view else {
        return;
    };
    let kept: std::collections::HashSet<u64> = pieces.iter().map(|p| p.id()).collect();
    let removed: Vec<&Entry> = all
        .iter()
        .filter(|e| !kept.contains(&e.id()))
        .map(|e| e.as_ref())
        .collect();
    if removed.is_empty() {
        return;
    }
    run.pruned += 1;
    if !(run.pruned - 1).is_multiple_of(judge.every.max(1)) {
        return;
    }
    *ids += 1;
    let asked = judge::request(*ids, pieces, &removed, future);
    let judgment = judge
        .model
        .answer(&asked)
        .map_err(|e| e.to_string())
        .and_then(|answer| judge::parse(&answer));
    run.recorder.judged(&judgment);
}

fn push(runs: &mut [Run], unit: &Unit, annotations: &[Annotation], lab: &mut Lab) {
    for run in runs.iter_mut().filter(|r| r.failed.is_none()) {
        if let Err(error) = run.policy.push(unit, annotations, lab) {
            run.failed = Some(error.to_string());
        }
    }
}

/// What every request must keep, for [`ReplayConfig::check`].
#[derive(Debug, Default)]
struct Guard {
    system: Option<u64>,
    latest_user: Option<u64>,
    /// Which turns' reasoning the provider counts in a request's size.
    reasoning: ReasoningScope,
}

impl Guard {
    fn note(&mut self, entry: &crate::transcript::Entry, is_user: bool) {
        if is_user {
            self.latest_user = Some(entry.id());
        } else if self.system.is_none() && self.latest_user.is_none() {
            self.system = Some(entry.id());
        }
    }

    fn check(
        &self,
        kind: PolicyKind,
        request: &Request,
        budget: usize,
        lab: &Lab,
        index: u64,
        out: &mut Vec<String>,
    ) {
        let View::Pieces(pieces) = &request.view else {
            return;
        };
        let mut fail = |what: String| out.push(format!("{kind}, request {index}: {what}"));
        if let Err(error) = validate(pieces.iter().map(|p| p.message())) {
            fail(error.to_string());
        }
        for (what, id) in [
            ("system prompt", self.system),
            ("latest user turn", self.latest_user),
        ] {
            if let Some(id) = id
                && !pieces.iter().any(|p| p.id() == id)
            {
                fail(format!("{what} missing"));
            }
        }
        let tokens = lab.tools_tokens()
            + crate::metrics::sent::sent(pieces, self.reasoning)
                .iter()
                .map(|p| p.tokens)
                .sum::<usize>();
        if request.budget_met == Some(true) && tokens > budget {
            fail(format!(
                "reported within budget but has {tokens} tokens > {budget}"
            ));
        }
    }
}

/// How much of its cached prefix the log's provider read, call by call:
/// a call's cached tokens over the previous call's prompt.
#[derive(Debug, Default)]
struct CacheReads {
    /// Whether any call read from the cache: a log where none did has no
    /// cache figures (or no cache), and reading nothing says nothing.
    seen: bool,
    /// The previous call's logged prompt (none after the log's harness
    /// compacted or cut its prompt: its next prompt is not the previous
    /// one grown).
    previous: Option<u64>,
}

impl CacheReads {
    /// The share (0 to 1) of what `rules` let it read of the previous
    /// call's prompt, or of its first `unchanged` tokens when the
    /// provider's view changed there, that the call logging `usage` read;
    /// 1 where the log does not say.
    fn share(&mut self, usage: Option<&Usage>, rules: CacheRules, unchanged: Option<u64>) -> f64 {
        let readable = self.previous.map(|before| {
            let before = before.min(unchanged.unwrap_or(u64::MAX));
            rules.readable(usize::try_from(before).unwrap_or(usize::MAX))
        });
        let share = match (usage, readable) {
            (Some(u), Some(readable)) if self.seen && readable > 0 => {
                (u.cached_input_tokens as f64 / readable as f64).min(1.0)
            }
            _ => 1.0,
        };
        self.seen |= usage.is_some_and(|u| u.cached_input_tokens > 0);
        self.previous = usage.map(|u| u.input_tokens).filter(|t| *t > 0);
        share
    }

    /// The log's harness compacted or cut its prompt: the next call's
    /// prompt is not the previous one grown.
    fn cut(&mut self) {
        self.previous = None;
    }
}

/// The log's own cost of its calls before its first compaction, against
/// what the replayed full history costs over the same calls: both only
/// when the log records the cost of every one of them.
struct CostTally {
    full: Recorder,
    logged: f64,
    complete: bool,
    calls: u64,
    /// The log compacted: the full history's cost up to then.
    closed: Option<Option<f64>>,
}

impl CostTally {
    fn new(full: Recorder) -> Self {
        CostTally {
            full,
            logged: 0.0,
            complete: true,
            calls: 0,
            closed: None,
        }
    }

    /// A model call of the log, which cost `logged` dollars if it says.
    fn call(&mut self, call: &Call<'_>, logged: Option<f64>, tools_tokens: usize) {
        if self.closed.is_some() {
            return;
        }
        let request = Request {
            view: View::Full,
            side_calls: Vec::new(),
            side: Default::default(),
            budget_met: None,
        };
        self.full.record(&request, call, tools_tokens);
        self.calls += 1;
        match logged {
            Some(cost) => self.logged += cost,
            None => self.complete = false,
        }
    }

    /// The log's harness compacted or cut its prompt: its later calls are
    /// not the full history's.
    fn cut(&mut self) {
        if self.closed.is_none() {
            self.closed = Some(self.full.stats().summary().cost_usd);
        }
    }

    fn known(&self) -> bool {
        self.complete && self.calls > 0
    }

    fn logged(&self) -> Option<f64> {
        self.known().then(|| (self.logged * 1e6).round() / 1e6)
    }

    fn replayed(&self) -> Option<f64> {
        let replayed = match self.closed {
            Some(cost) => cost,
            None => self.full.stats().summary().cost_usd,
        };
        replayed.filter(|_| self.known())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_split_into_parts_of_about_equal_work_each_in_report_order() {
        let all = PolicyKind::all();
        for groups in 1..=4 {
            let parts = split_policies(&all, groups);
            assert_eq!(parts.len(), groups);
            let mut seen: Vec<usize> = parts.iter().flatten().copied().collect();
            seen.sort_unstable();
            assert_eq!(seen, (0..all.len()).collect::<Vec<_>>(), "each policy once");
            assert!(parts.iter().all(|part| part.is_sorted()));
        }
        let two = split_policies(&all, 2);
        let holds = |kind: PolicyKind| {
            let at = all.iter().position(|&k| k == kind).unwrap();
            two.iter().position(|part| part.contains(&at)).unwrap()
        };
        assert_ne!(
            holds(PolicyKind::CWM),
            holds(PolicyKind::Cwl),
            "the heaviest apart"
        );
        assert_eq!(split_policies(&all[..1], 3).len(), 1, "no empty part");
    }
}
