//! The HTTP server: routes requests, runs history through the
//! conversation's engine, forwards the result.
//!
//! Routes: `POST /v1/messages` (Anthropic Messages, with any query
//! string), `POST /v1/chat/completions` (OpenAI Chat Completions) and
//! `POST /v1/responses` (OpenAI Responses) go through the engine;
//! `GET /health` answers 200; every other request (count_tokens, model
//! lists, unknown APIs) is forwarded unchanged, to the Anthropic
//! upstream when it is an Anthropic path or carries Anthropic headers,
//! else to the OpenAI one. Headers pass through untouched and are never
//! logged. A body the proxy cannot read is forwarded unchanged with a
//! warning; one over the size limit gets a provider-shaped 413. When an
//! Anthropic client asks for prompt caching (any `cache_control`) and
//! leaves room (fewer than four breakpoints), the proxy adds one where
//! the last eviction pass changed the view.

use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use hyper::http::{HeaderMap, Method, Request, Response, StatusCode, Uri};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use rustc_hash::FxHashMap;

use cwl::{Config, NoSidecars, Report, SidecarStore, TokenCounter};
use cwl_session::SidecarDir;
use cwl_session::strategy::StrategyName;

use crate::api::Api;
use crate::body::{Body, History};
use crate::conversations::{ConversationId, Conversations, Expired, Route};
use crate::engine::Engine;
use crate::event::{Event, Sink, Timing, warn};
use crate::heads::Heads;
use crate::identity::Identities;
use crate::live::{Conversation, Pending, Slot, lock, metered};
use crate::side::{SideCallEvent, SideCaller, run_side_calls};
use crate::store::{Log, Store};
use crate::upstream::{ProxyBody, Shape, Upstream, full};
use crate::wire::{Item, Wire, anthropic};
use cwl_provider::side::SideGate;

/// Cache breakpoints Anthropic allows in one request: the proxy adds one
/// only when the client left room.
const MAX_BREAKPOINTS: usize = 4;

/// The default largest request body: Anthropic's own limit.
pub const DEFAULT_MAX_BODY: usize = 32 * 1024 * 1024;

/// The most conversations held in memory by default. Each holds its whole
/// history and indexes (about 43 KiB for a 3k-token conversation, a few
/// MiB for a long one), so 1,000 bounds memory where 10,000 would not;
/// the rest are rebuilt from their session files when they come back.
pub const DEFAULT_MAX_CONVERSATIONS: usize = 1_000;

/// The default time after which an unused conversation leaves memory.
pub const DEFAULT_IDLE: Duration = Duration::from_secs(3600);

/// What the proxy does, as the command line set it.
pub struct Options {
    /// Where Anthropic requests go.
    pub anthropic: Upstream,
    /// Where OpenAI requests go.
    pub openai: Upstream,
    /// The engine settings of every conversation.
    pub config: Config,
    /// The strategy managing every conversation's context.
    pub strategy: StrategyName,
    /// The strategy's own settings (`--strategy-option`; null: its
    /// defaults).
    pub strategy_options: serde_json::Value,
    /// Where conversations are stored; `None`: not stored.
    pub store: Option<Store>,
    /// Largest request body accepted, in bytes.
    pub max_body: usize,
    /// Unused conversations leave memory after this long.
    pub idle: Duration,
    /// The most conversations held in memory; past it the least recently
    /// used leaves (and is rebuilt from its session when it comes back).
    pub max_conversations: usize,
    /// Called with each handled request's event.
    pub events: Option<Sink>,
    /// The model side calls ask (`None`: the client's model).
    pub planner_model: Option<String>,
    /// The longest one side call may take, whatever its strategy allows.
    pub side_timeout: Duration,
    /// The head files of a session directory shared with other replicas
    /// (`--shared-sessions`; `None`: this proxy serves alone).
    pub heads: Option<Heads>,
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Options")
            .field("anthropic", &self.anthropic)
            .field("openai", &self.openai)
            .field("budget", &self.config.budget)
            .field("strategy", &self.strategy)
            .field("store", &self.store)
            .field("max_body", &self.max_body)
            .field("planner_model", &self.planner_model)
            .field("side_timeout", &self.side_timeout)
            .finish_non_exhaustive()
    }
}

/// What the proxy holds for its conversations ([`Proxy::footprint`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Footprint {
    /// Conversations in memory, each with its engine: at most
    /// [`Options::max_conversations`].
    pub live: usize,
    /// Idle conversations remembered for resuming, a hash each: at most
    /// [`crate::conversations::MAX_DORMANT`].
    pub dormant: usize,
    /// Session files known for resuming: at most one per live or
    /// remembered conversation.
    pub stored: usize,
    /// Message identities cached: at most
    /// [`crate::identity::CAPACITY`].
    pub identities: usize,
}

struct Router {
    conversations: Conversations,
    slots: FxHashMap<ConversationId, Arc<Slot>>,
    /// Session files of stored conversations, for resuming idle ones.
    paths: FxHashMap<ConversationId, PathBuf>,
}

impl Router {
    /// Drops what was kept for conversations that left memory (their
    /// slots) or were forgotten for good (their session files' paths).
    fn drop_expired(&mut self, expired: Expired) {
        for gone in expired.left {
            self.slots.remove(&gone);
        }
        for gone in expired.forgotten {
            self.paths.remove(&gone);
        }
    }
}

/// The proxy: its options, its upstream client and its conversations.
pub struct Proxy {
    options: Options,
    client: reqwest::Client,
    counter: Arc<dyn TokenCounter>,
    identities: Identities,
    offers: crate::recall::Offers,
    /// Conversations that left memory since its pages were given back.
    freed: crate::trim::Freed,
    router: Mutex<Router>,
    /// The models' context windows, the most a reported prompt can be.
    models: cwl_provider::models::ModelTable,
}

impl std::fmt::Debug for Proxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Proxy")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl Proxy {
    /// A proxy counting tokens with `counter` (loaded here, so no request
    /// waits for it).
    pub fn new(options: Options, counter: Arc<dyn TokenCounter>) -> Result<Self, reqwest::Error> {
        let connect = options
            .anthropic
            .connect_timeout()
            .min(options.openai.connect_timeout());
        let client = reqwest::Client::builder()
            .connect_timeout(connect)
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        let (idle, max_live) = (options.idle, options.max_conversations);
        // Load the tokenizer now rather than in the first request.
        counter.count("cwl");
        Ok(Proxy {
            options,
            client,
            counter,
            identities: Identities::new(),
            offers: crate::recall::Offers::default(),
            freed: crate::trim::Freed::default(),
            models: cwl_provider::models::ModelTable::builtin(),
            router: Mutex::new(Router {
                conversations: Conversations::new(idle, max_live),
                slots: FxHashMap::default(),
                paths: FxHashMap::default(),
            }),
        })
    }

    /// Conversations held in memory.
    pub fn conversations(&self) -> usize {
        lock(&self.router).conversations.len()
    }

    /// What the proxy holds for its conversations; every part has a bound
    /// whatever the number of conversations served.
    pub fn footprint(&self) -> Footprint {
        let router = lock(&self.router);
        Footprint {
            live: router.conversations.len(),
            dormant: router.conversations.dormant(),
            stored: router.paths.len(),
            identities: self.identities.len(),
        }
    }

    /// Answers one request.
    pub async fn handle(self: Arc<Self>, request: Request<Incoming>) -> Response<ProxyBody> {
        let (parts, body) = request.into_parts();
        let path = parts.uri.path().to_string();
        if parts.method == Method::GET && path == "/health" {
            let mut response = Response::new(full(r#"{"status":"ok"}"#));
            response.headers_mut().insert(
                hyper::http::header::CONTENT_TYPE,
                hyper::http::HeaderValue::from_static("application/json"),
            );
            return response;
        }
        let anthropic = path.starts_with("/v1/messages")
            || parts.headers.contains_key("anthropic-version")
            || parts.headers.contains_key("x-api-key");
        let (upstream, shape) = if anthropic {
            (&self.options.anthropic, Shape::Anthropic)
        } else {
            (&self.options.openai, Shape::OpenAi)
        };
        let bytes = match Limited::new(body, self.options.max_body).collect().await {
            Ok(collected) => collected.to_bytes(),
            Err(error) if error.is::<http_body_util::LengthLimitError>() => {
                warn(&format!(
                    "{path}: request body over {} bytes refused (413)",
                    self.options.max_body
                ));
                return shape.error(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "request_too_large",
                    &format!(
                        "cwl proxy: request body exceeds {} bytes (--max-body)",
                        self.options.max_body
                    ),
                );
            }
            Err(error) => {
                warn(&format!("{path}: request body could not be read: {error}"));
                return shape.error(
                    StatusCode::BAD_REQUEST,
                    "invalid_request_error",
                    &format!("cwl proxy: request body could not be read: {error}"),
                );
            }
        };
        let (bytes, pending) = match Api::of(&parts.method, &path) {
            Some(api) => {
                let proxy = Arc::clone(&self);
                let original = bytes.clone();
                let side = Side {
                    runtime: tokio::runtime::Handle::current(),
                    upstream: upstream.clone(),
                    uri: parts.uri.clone(),
                    headers: parts.headers.clone(),
                };
                tokio::task::spawn_blocking(move || proxy.prepare(api, bytes, &side))
                    .await
                    .unwrap_or_else(|error| {
                        warn(&format!("{path}: {error}; request forwarded unchanged"));
                        (original, None)
                    })
            }
            None => (bytes, None),
        };
        let response = self
            .forward(
                upstream,
                parts.method,
                &parts.uri,
                &parts.headers,
                bytes,
                shape,
            )
            .await;
        match pending {
            Some(pending) if response.status().is_success() => metered(response, pending),
            _ => response,
        }
    }

    async fn forward(
        &self,
        upstream: &Upstream,
        method: Method,
        uri: &Uri,
        headers: &HeaderMap,
        body: Bytes,
        shape: Shape,
    ) -> Response<ProxyBody> {
        upstream
            .forward(&self.client, method, uri, headers, body, shape)
            .await
    }

    /// The body to send upstream: the history replaced by the engine's
    /// view, or the body unchanged (with a warning) when that cannot be.
    fn prepare(&self, api: Api, bytes: Bytes, side: &Side) -> (Bytes, Option<Pending>) {
        match self.rewrite(api, &bytes, side) {
            Ok(Some((rewritten, pending))) => (Bytes::from(rewritten), Some(pending)),
            Ok(None) => (bytes, None),
            Err(why) => {
                warn(&format!(
                    "{}: {why}; request forwarded unchanged",
                    api.name()
                ));
                (bytes, None)
            }
        }
    }

    /// The rewritten body; `None` when it goes as it is with nothing to
    /// warn about (a Responses request whose input is one string, or that
    /// continues a response stored upstream).
    fn rewrite(
        &self,
        api: Api,
        bytes: &[u8],
        side: &Side,
    ) -> Result<Option<(Vec<u8>, Pending)>, String> {
        let started = Instant::now();
        let wire = api.wire();
        let Some((body, mut items)) = history(api, bytes)? else {
            return Ok(None);
        };
        // Routing goes by the client's bytes, `recall` answers or not.
        let hashes = self.identities.of(&items);
        let chains = crate::conversations::chains(&hashes);
        let parsed = started.elapsed();
        let recall = self.recalls(wire, &body);
        let Routed {
            route,
            slot,
            resume,
            gap,
        } = self.route(&hashes, &chains);
        let stored_gap = resume.as_deref().and_then(idle_since_written);
        let mut guard = lock(&slot.0);
        let mut opened = Opened::default();
        let conversation = guard.get_or_insert_with(|| {
            let known = &mut items[..route.known()];
            let (conversation, how) = self.open(wire, &body, known, route, resume, recall);
            opened = how;
            conversation
        });
        if conversation.engine.items() > items.len() {
            return Err(format!(
                "conversation {} already holds {} messages and this request has {} (a concurrent request)",
                conversation.label,
                conversation.engine.items(),
                items.len()
            ));
        }
        let sidecars = sidecars_of(conversation);
        if recall {
            conversation.engine.restate(wire, &mut items);
        }
        let recalls = conversation.engine.recalls();
        let extended =
            conversation
                .engine
                .extend(wire, &mut items, recall.then_some(sidecars.as_ref()));
        let pushed = match extended {
            Ok(pushed) => pushed,
            Err(error) => {
                let why = format!(
                    "conversation {}: the engine cannot take this history ({error}); it is dropped",
                    conversation.label
                );
                conversation.log.note(&why);
                *guard = None;
                drop(guard);
                self.forget(route.id());
                return Err(why);
            }
        };
        conversation.log.messages(&pushed);
        self.advance_head(conversation, route, &chains);
        let caller = self.side_caller(side, api, &body);
        let side_started = Instant::now();
        let side_calls = self.side_calls(conversation, &caller, &side.runtime);
        let side_time = side_started.elapsed();
        let gap = if opened.rebuilt {
            gap.or(stored_gap)
        } else {
            gap
        };
        let report = enforce(conversation, gap, &items, &pushed);
        self.strategy_output(conversation);
        let engine = started.elapsed().saturating_sub(parsed + side_time);
        let rendering = Instant::now();
        let cache = cache_breakpoint(api, &body, &items);
        let history = conversation.engine.render(wire, &items, cache.as_ref());
        let out = with_history(wire, &body, &history, recall);
        if let Some(events) = &self.options.events {
            let mut event = Event::new(
                api.name(),
                conversation.label.clone(),
                route_name(route, opened.afresh),
                items.len(),
                pushed.len(),
                &report,
            );
            event.side_calls = side_calls;
            event.recalls = conversation.engine.recall_events(recalls);
            event.timing = Timing {
                parse_us: Timing::micros(parsed),
                engine_us: Timing::micros(engine),
                serialise_us: Timing::micros(rendering.elapsed()),
            };
            events(&event);
        }
        if !report.budget_met {
            warn_over_budget(conversation, &report);
        }
        let window = body
            .read::<String>("model")
            .and_then(|model| self.models.find(&model))
            .map(|model| usize::try_from(model.context_window).unwrap_or(usize::MAX));
        let pending = Pending {
            slot: Arc::clone(&slot),
            local: conversation.engine.counted(),
            window,
        };
        Ok(Some((out, pending)))
    }

    /// The route of a request whose history hashes to `hashes` (chain
    /// hashes `chains`), after conversations idle too long have left
    /// memory; with replicas, one another replica served last is rebuilt
    /// from the shared session directory.
    fn route(&self, hashes: &[u64], chains: &[u64]) -> Routed {
        let now = Instant::now();
        let mut router = lock(&self.router);
        let expired = router.conversations.expire(now);
        self.freed.add(expired.left.len());
        router.drop_expired(expired);
        let route = router.conversations.route(hashes, now);
        let shed = router.conversations.shed();
        self.freed.add(shed.left.len());
        router.drop_expired(shed);
        let gap = router.conversations.gap(route.id());
        let resume = match route {
            Route::Resume { from, .. } => router.paths.remove(&from),
            _ => None,
        };
        let slot = Arc::clone(router.slots.entry(route.id()).or_default());
        drop(router);
        // The shared directory is read without holding the router.
        let shared = self
            .options
            .heads
            .as_ref()
            .and_then(|heads| shared(heads, route, chains));
        match shared {
            Some((path, known)) => {
                // The copy here, if any, is behind the stored one.
                let slot: Arc<Slot> = Arc::default();
                lock(&self.router)
                    .slots
                    .insert(route.id(), Arc::clone(&slot));
                Routed {
                    route: Route::Shared {
                        id: route.id(),
                        known,
                    },
                    slot,
                    resume: Some(path),
                    gap,
                }
            }
            None => Routed {
                route,
                slot,
                resume,
                gap,
            },
        }
    }

    /// Tells the other replicas that `conversation`, routed by `route`,
    /// now holds the history `chains` names.
    fn advance_head(&self, conversation: &mut Conversation, route: Route, chains: &[u64]) {
        let (Some(heads), Some(path), Some(&head)) =
            (&self.options.heads, conversation.log.path(), chains.last())
        else {
            return;
        };
        let previous = route.known().checked_sub(1).map(|at| chains[at]);
        if let Err(error) = heads.advance(previous, head, &path) {
            let text = format!("the shared head file was not written: {error}");
            warn(&format!("conversation {}: {text}", conversation.label));
            conversation.log.note(&text);
        }
    }

    /// The conversation for a request whose slot is empty: rebuilt from
    /// the session file `resume` names when it can be, else new.
    fn open(
        &self,
        wire: &dyn Wire,
        body: &Body,
        known: &mut [Item],
        route: Route,
        resume: Option<PathBuf>,
        recall: bool,
    ) -> (Conversation, Opened) {
        let resuming = resume.is_some();
        let rebuilt = resume.and_then(|path| {
            self.resume(wire, known, &path, route, recall)
                .map_err(|why| {
                    warn(&format!(
                        "{}: cannot resume the idle conversation: {why}; it starts afresh",
                        path.display()
                    ))
                })
                .ok()
        });
        let opened = Opened {
            afresh: resuming && rebuilt.is_none(),
            rebuilt: rebuilt.is_some(),
        };
        let conversation = rebuilt.unwrap_or_else(|| self.start(wire, body, route, recall));
        if let Some(path) = conversation.log.path() {
            lock(&self.router).paths.insert(route.id(), path);
        }
        (conversation, opened)
    }

    /// Drops conversation `id` from memory and from the stored ones a
    /// request may resume.
    fn forget(&self, id: ConversationId) {
        let mut router = lock(&self.router);
        router.conversations.forget(id);
        router.slots.remove(&id);
        router.paths.remove(&id);
    }

    /// Where a request's side calls go: the client's upstream, asking the
    /// planner model or else the client's own.
    fn side_caller(&self, side: &Side, api: Api, body: &Body) -> SideCaller {
        SideCaller {
            upstream: side.upstream.clone(),
            uri: side.uri.clone(),
            headers: side.headers.clone(),
            api,
            model: self
                .options
                .planner_model
                .clone()
                .or_else(|| body.read::<String>("model"))
                .unwrap_or_default(),
        }
    }

    /// Whether this request gets `recall` (see [`crate::recall`]): the
    /// proxy's strategy can bring back what it takes out, and the client
    /// offers tools, none of its own called `recall`.
    fn recalls(&self, wire: &dyn Wire, body: &Body) -> bool {
        crate::recall::strategy_recalls(self.options.strategy, &self.options.config)
            && self.offers.offered(wire, body)
    }

    /// Runs the side calls the conversation's strategy asks for (at most
    /// [`crate::side::MAX_SIDE_CALLS`]), gives it each answer and stores it; a failed
    /// one is also noted and warned about.
    fn side_calls(
        &self,
        conversation: &mut Conversation,
        caller: &SideCaller,
        runtime: &tokio::runtime::Handle,
    ) -> Vec<SideCallEvent> {
        let strategy = self.options.strategy;
        let Conversation {
            engine,
            log,
            label,
            side_gate,
        } = conversation;
        let (events, shut) = run_side_calls(
            engine,
            side_gate,
            |request| runtime.block_on(caller.call(&self.client, request)),
            |request, result| {
                if let Err(why) = result {
                    let text = format!("{why}; the {strategy} strategy goes on without it");
                    warn(&format!("conversation {label}: {text}"));
                    log.note(&text);
                }
                log.side_call(request.id, &request.purpose, result);
            },
        );
        if let Some(text) = shut {
            warn(&format!("conversation {label}: {text}"));
            log.note(&text);
        }
        events
    }

    /// Logs what the strategy wants logged, writes its working notes and
    /// the sidecar files it folded payloads to (beside the session file),
    /// before the view pointing to them is sent; a file that cannot be
    /// written is noted.
    fn strategy_output(&self, conversation: &mut Conversation) {
        for text in conversation.engine.take_notes() {
            conversation.log.note(&text);
        }
        if let Some(notes) = conversation.engine.context().notes() {
            conversation.log.working_notes(&notes);
        }
        let sidecars = conversation.engine.take_sidecars();
        let Some(path) = conversation.log.path() else {
            return;
        };
        let dir = SidecarDir::of(&path);
        for file in sidecars {
            if let Err(error) = dir.write(&file) {
                let text = format!("sidecar {} not written: {error}", file.name);
                warn(&format!("conversation {}: {text}", conversation.label));
                conversation.log.note(&text);
            }
        }
    }

    /// A conversation rebuilt from the session at `path`, whose history
    /// is `items`; with `recall`, its `recall` results are given their
    /// stored answers.
    fn resume(
        &self,
        wire: &dyn Wire,
        items: &mut [Item],
        path: &Path,
        route: Route,
        recall: bool,
    ) -> Result<Conversation, String> {
        let (mut log, loaded) = Log::reopen(path).map_err(|e| e.to_string())?;
        let records: Vec<cwl::Record> = loaded.records.into_iter().map(|(_, r)| r).collect();
        let context = self
            .strategy(loaded.info.tools, &loaded.info.model)
            .map_err(|error| error.to_string())?;
        let engine = Engine::rebuild(context, wire, items, &records, recall)?;
        log.note(match route {
            Route::Shared { .. } => "continued here after another replica served it",
            _ => "resumed after leaving memory idle",
        });
        Ok(Conversation {
            engine,
            label: loaded.info.id,
            log,
            side_gate: SideGate::new(self.options.side_timeout),
        })
    }

    /// A new conversation for a request; with `recall`, the strategy counts
    /// the `recall` tool the proxy adds.
    fn start(&self, wire: &dyn Wire, body: &Body, route: Route, recall: bool) -> Conversation {
        let mut tools = wire.tools(body);
        if recall {
            tools.push(cwl::recall_spec());
        }
        let model = body.read::<String>("model").unwrap_or_default();
        let mut log = match &self.options.store {
            Some(store) => store
                .create(wire.provider(), &model, tools.clone())
                .unwrap_or_else(|error| {
                    warn(&format!("conversation not stored: {error}"));
                    Log::off()
                }),
            None => Log::off(),
        };
        if let Route::Branch { from, shared, .. } = route {
            log.note(&format!(
                "branch of proxy conversation {from} after {shared} messages (the client edited its history)"
            ));
        }
        let label = log.id().unwrap_or_else(|| format!("c{}", route.id()));
        let system = wire.system(body);
        if let Some(system) = &system {
            log.messages(&[cwl::Message::system(system.clone())]);
        }
        let context = self
            .strategy(tools.clone(), &model)
            .unwrap_or_else(|error| {
                warn(&format!(
                    "{error}; the conversation runs the strategy's defaults"
                ));
                self.options
                    .strategy
                    .create(self.config(&model), Arc::clone(&self.counter), tools)
            });
        let engine = Engine::new(context, system);
        Conversation {
            engine,
            log,
            label,
            side_gate: SideGate::new(self.options.side_timeout),
        }
    }

    /// A fresh strategy of the proxy's kind with its options, offering
    /// `tools`, for a conversation with `model`.
    fn strategy(
        &self,
        tools: Vec<cwl::ToolSpec>,
        model: &str,
    ) -> Result<Box<dyn cwl::Strategy>, cwl_session::strategy::OptionError> {
        self.options.strategy.create_with(
            self.config(model),
            Arc::clone(&self.counter),
            tools,
            &self.options.strategy_options,
        )
    }

    /// The engine configuration for a conversation with `model`: the
    /// proxy's, with the reasoning its provider keeps
    /// ([`cwl::ReasoningScope::of_model`]), so earlier turns' reasoning
    /// that the provider drops leaves the view and the budget counts what
    /// is billed.
    fn config(&self, model: &str) -> cwl::Config {
        self.options
            .config
            .clone()
            .reasoning(cwl::ReasoningScope::of_model(model))
    }
}

/// What a request's side calls need from its handler: the runtime to run
/// them on, and where and how the client's request goes.
struct Side {
    runtime: tokio::runtime::Handle,
    upstream: Upstream,
    uri: Uri,
    headers: HeaderMap,
}

/// The session file, and how many of the request's messages it holds,
/// of a conversation another replica served last: for a request no
/// conversation here continues, or one whose copy here another replica
/// has since taken further.
fn shared(heads: &Heads, route: Route, chains: &[u64]) -> Option<(PathBuf, usize)> {
    match route {
        Route::New { .. } | Route::Branch { .. } => heads.find(chains, 0),
        Route::Continue { known, .. } | Route::Resume { known, .. }
            if known > 0 && !heads.holds(chains[known - 1]) =>
        {
            heads.find(chains, known)
        }
        Route::Continue { .. } | Route::Resume { .. } | Route::Shared { .. } => None,
    }
}

/// Where a request goes (see [`Proxy::route`]).
struct Routed {
    route: Route,
    slot: Arc<Slot>,
    /// The session file of the idle conversation it resumes, if stored.
    resume: Option<PathBuf>,
    /// How long the conversation sat idle before this request.
    gap: Option<Duration>,
}

/// How a conversation came into memory for a request.
#[derive(Default, Clone, Copy)]
struct Opened {
    /// Its session file could not be rebuilt: it starts afresh.
    afresh: bool,
    /// It was rebuilt from its session file.
    rebuilt: bool,
}

/// A request's body and the items of its history; `None` for a Responses
/// request that goes as it is (input one string, or continuing a response
/// stored upstream).
fn history(api: Api, bytes: &[u8]) -> Result<Option<(Body, Vec<Item>)>, String> {
    let key = api.wire().history_key();
    let (body, history) =
        Body::split(bytes, key).map_err(|e| format!("body is not a JSON object ({e})"))?;
    let continues_stored = || {
        body.get("previous_response_id")
            .is_some_and(|id| id.get() != "null")
    };
    match history {
        History::Missing => Err(format!("body has no `{key}`")),
        History::Text if api == Api::OpenAiResponses => Ok(None),
        _ if api == Api::OpenAiResponses && continues_stored() => Ok(None),
        History::Items(raws) => Ok(Some((body, raws.into_iter().map(Item::new).collect()))),
        History::Text | History::Other => Err(format!("`{key}` is not an array")),
    }
}

/// How long ago the session file at `path` was last written: a
/// conversation rebuilt from it sat idle since its last request.
fn idle_since_written(path: &Path) -> Option<Duration> {
    std::fs::metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|written| written.elapsed().ok())
}

/// Where the conversation's folded payloads are, for `recall`.
fn sidecars_of(conversation: &Conversation) -> Box<dyn SidecarStore> {
    match conversation.log.path() {
        Some(path) => Box::new(SidecarDir::of(&path)),
        None => Box::new(NoSidecars),
    }
}

/// The eviction pass for this request, logged, after the idle `gap` (in
/// seconds) is noted when the engine acts on it.
fn enforce(
    conversation: &mut Conversation,
    gap: Option<Duration>,
    items: &[Item],
    pushed: &[cwl::Message],
) -> Report {
    if let Some(seconds) = gap.map(|gap| gap.as_secs())
        && conversation.engine.idle(seconds)
    {
        conversation.log.idle(seconds);
    }
    let breaks = conversation.engine.prefix_breaks(items, pushed);
    let report = conversation.engine.enforce(breaks);
    conversation.log.enforce(&report);
    report
}

/// The cache breakpoint the proxy adds: the last one the client set, in
/// an Anthropic request that leaves room for one more.
fn cache_breakpoint(api: Api, body: &Body, items: &[Item]) -> Option<serde_json::Value> {
    match api {
        Api::Anthropic => match anthropic::breakpoints(body, items) {
            (count, last) if count < MAX_BREAKPOINTS => last,
            _ => None,
        },
        _ => None,
    }
}

/// The route's name in events; a resume whose file could not be rebuilt
/// is `new`.
fn route_name(route: Route, afresh: bool) -> &'static str {
    match route {
        Route::New { .. } => "new",
        Route::Resume { .. } if afresh => "new",
        Route::Continue { .. } => "continue",
        Route::Resume { .. } => "resume",
        Route::Shared { .. } if afresh => "new",
        Route::Shared { .. } => "shared",
        Route::Branch { .. } => "branch",
    }
}

/// Warns that a view goes over the budget.
fn warn_over_budget(conversation: &Conversation, report: &Report) {
    warn(&format!(
        "conversation {}: {} tokens sent, over the budget of {} ({})",
        conversation.label,
        report.tokens_after,
        report.budget,
        report.warnings.join("; ")
    ));
}

/// The body with `history` in place of the client's, and with `recall`
/// added to its tools when the request gets it.
fn with_history(wire: &dyn Wire, body: &Body, history: &str, recall: bool) -> Vec<u8> {
    let tools = recall
        .then(|| {
            body.get("tools")
                .and_then(|t| crate::recall::with_tool(wire, t.get()))
        })
        .flatten();
    let mut fields = vec![(wire.history_key(), history)];
    if let Some(tools) = &tools {
        fields.push(("tools", tools.as_str()));
    }
    body.with_all(&fields)
}

/// Serves requests on `listener` for as long as the process runs. A
/// failed accept (no file descriptor left, a connection aborted before it
/// was taken) stops nothing: it is warned about once per burst, and the
/// next accept waits a little longer each time, up to a second, so the
/// clients already connected are served and close their sockets. Every
/// [`crate::trim::INTERVAL`] in which conversations left memory, the
/// allocator's free pages go back to the system, so the resident size
/// follows what the proxy holds.
pub async fn serve(listener: tokio::net::TcpListener, proxy: Arc<Proxy>) -> std::io::Result<()> {
    let trimmer = Arc::clone(&proxy);
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(crate::trim::INTERVAL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            if trimmer.freed.take() {
                let _ = tokio::task::spawn_blocking(crate::trim::release).await;
            }
        }
    });
    let mut backoff = AcceptBackoff::default();
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => {
                if let Some(failed) = backoff.recovered() {
                    warn(&format!(
                        "accepting connections again after {failed} failed accept(s)"
                    ));
                }
                stream
            }
            Err(error) => {
                if backoff.failed() {
                    warn(&format!(
                        "cannot accept a connection ({error}); the proxy keeps serving and retries"
                    ));
                }
                tokio::time::sleep(backoff.delay()).await;
                continue;
            }
        };
        let proxy = Arc::clone(&proxy);
        tokio::spawn(async move {
            let service = service_fn(move |request| {
                let proxy = Arc::clone(&proxy);
                async move { Ok::<_, Infallible>(proxy.handle(request).await) }
            });
            if let Err(error) = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await
            {
                tracing::debug!(%error, "client connection ended");
            }
        });
    }
}

/// The pause between failed accepts: from 10 ms, doubling up to a second,
/// and back to nothing once one succeeds.
#[derive(Debug, Default)]
struct AcceptBackoff {
    /// Accepts failed in a row.
    failures: u32,
}

impl AcceptBackoff {
    /// Counts a failed accept; true for the first of a burst (the one to
    /// warn about).
    fn failed(&mut self) -> bool {
        self.failures += 1;
        self.failures == 1
    }

    /// How long to wait before the next accept.
    fn delay(&self) -> Duration {
        let exponent = self.failures.saturating_sub(1).min(7);
        Duration::from_millis(10 << exponent).min(Duration::from_secs(1))
    }

    /// Counts a successful accept; the number of failures before it, if
    /// any.
    fn recovered(&mut self) -> Option<u32> {
        (self.failures > 0).then(|| std::mem::take(&mut self.failures))
    }
}

#[cfg(test)]
mod accept_tests {
    use super::*;

    #[test]
    fn failed_accepts_back_off_to_a_second_and_warn_once_per_burst() {
        let mut backoff = AcceptBackoff::default();
        assert_eq!(backoff.recovered(), None);
        assert!(backoff.failed(), "the first failure warns");
        assert_eq!(backoff.delay(), Duration::from_millis(10));
        assert!(!backoff.failed(), "the rest of the burst does not");
        assert_eq!(backoff.delay(), Duration::from_millis(20));
        for _ in 0..20 {
            backoff.failed();
        }
        assert_eq!(backoff.delay(), Duration::from_secs(1));
        assert_eq!(backoff.recovered(), Some(22));
        assert_eq!(backoff.recovered(), None);
        assert!(backoff.failed(), "a new burst warns again");
    }
}
