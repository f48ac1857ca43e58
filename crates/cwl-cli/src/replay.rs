//! `cwl replay` with a model: the strategies' side requests (a planner, a
//! summary) go to `--model-url` through the agent's provider layer, one
//! at a time, each cut off at its own timeout. The lab itself stays free
//! of HTTP; this module is its [`SideModel`].

use std::sync::Arc;

use anyhow::Context as _;
use cwl::SideRequest;
use cwl_lab::cli::{ModelApi, ReplayArgs, SideEndpoint};
use cwl_lab::side::{NoModel, SideError, SideModel};
use cwl_provider::side::side_call;
use cwl_provider::{AnthropicConfig, AnthropicProvider, OpenAiConfig, OpenAiProvider, Provider};

/// A model server answering side requests, synchronously.
pub struct ProviderSideModel {
    provider: Box<dyn Provider>,
    model: String,
    runtime: tokio::runtime::Runtime,
}

impl std::fmt::Debug for ProviderSideModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderSideModel")
            .field("provider", &self.provider.name())
            .field("model", &self.model)
            .finish_non_exhaustive()
    }
}

impl ProviderSideModel {
    /// A client of `endpoint`; the key comes from `OPENAI_API_KEY` or
    /// `ANTHROPIC_API_KEY` when set.
    pub fn new(endpoint: &SideEndpoint) -> anyhow::Result<Self> {
        let key = |var: &str| std::env::var(var).ok().filter(|k| !k.trim().is_empty());
        let provider: Box<dyn Provider> = match endpoint.api {
            ModelApi::Openai => {
                let mut config = OpenAiConfig::new(&endpoint.url);
                if let Some(key) = key(cwl_provider::openai::KEY_VAR) {
                    config = config.with_api_key(key);
                }
                Box::new(OpenAiProvider::new(config).context("--model-url")?)
            }
            ModelApi::Anthropic => {
                let mut config = AnthropicConfig::new(&endpoint.url);
                if let Some(key) = key(cwl_provider::anthropic::KEY_VAR) {
                    config = config.with_api_key(key);
                }
                Box::new(AnthropicProvider::new(config).context("--model-url")?)
            }
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("starting the side-request client")?;
        Ok(ProviderSideModel {
            provider,
            model: endpoint.model.clone(),
            runtime,
        })
    }
}

impl SideModel for ProviderSideModel {
    fn answer(&self, request: &SideRequest) -> Result<String, SideError> {
        self.runtime
            .block_on(side_call(self.provider.as_ref(), &self.model, request))
            .map_err(SideError::Failed)
    }
}

/// The side model `args` ask for: the server at `--model-url`, or none.
pub fn side_model(args: &ReplayArgs) -> anyhow::Result<Arc<dyn SideModel>> {
    Ok(match args.side_endpoint()? {
        Some(endpoint) => Arc::new(ProviderSideModel::new(&endpoint)?),
        None => Arc::new(NoModel),
    })
}

/// `cwl replay`: the lab's replay with the side model the arguments give.
pub fn run(args: ReplayArgs) -> anyhow::Result<()> {
    let side = side_model(&args)?;
    cwl_lab::cli::run_replay_with(args, side)
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use clap::Parser;
    use cwl::{Estimate, Message, Usage};
    use cwl_lab::policy::strategy::StrategyPolicy;
    use cwl_lab::policy::{Policy, PolicyConfig};
    use cwl_lab::side::testing::{Answers, Asking, PLANNER_PROMPT};
    use cwl_lab::transcript::{Lab, Unit};
    use cwl_provider::testing::{Reply, ScriptedServer};

    use super::*;

    #[derive(Parser)]
    struct Replay {
        #[command(flatten)]
        args: ReplayArgs,
    }

    fn args(extra: &[&str]) -> ReplayArgs {
        let mut argv = vec!["replay", "a.jsonl"];
        argv.extend_from_slice(extra);
        Replay::try_parse_from(argv).unwrap().args
    }

    fn server(replies: Vec<Reply>) -> (tokio::runtime::Runtime, ScriptedServer) {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let server = runtime.block_on(ScriptedServer::start(replies)).unwrap();
        (runtime, server)
    }

    /// An asking strategy behind the generic policy, side requests sent to
    /// `side`; three user turns, each followed by a request.
    fn ask_three_times(side: Arc<dyn SideModel>) -> (StrategyPolicy, Answers) {
        let mut lab = Lab::new(Arc::new(Estimate), &[]);
        let answers: Answers = Arc::new(Mutex::new(Vec::new()));
        let config = PolicyConfig::default();
        let context = cwl_lab::policy::cwl::context(&config, &lab);
        let strategy = Asking::new(context, 1, Arc::clone(&answers));
        let mut policy = StrategyPolicy::new("asking", Box::new(strategy), side);
        for n in 0..3 {
            let entry = lab.entry(Message::user(format!("task {n}")));
            policy.push(&Unit::Message(entry), &[], &mut lab).unwrap();
            policy.request(&mut lab).unwrap();
        }
        (policy, answers)
    }

    #[test]
    fn side_requests_go_to_the_model_url_and_come_back() {
        let plan = "<above_conversation_summary>s</above_conversation_summary><gc_plan></gc_plan>";
        let reply = || Reply::openai(&Message::assistant_text(plan), Usage::default());
        let (_runtime, server) = server(vec![
            reply(),
            Reply::status(400, r#"{"error":{"message":"bad planner"}}"#),
            reply(),
        ]);
        let endpoint = args(&["--model-url", server.url(), "--side-model", "planner-m"])
            .side_endpoint()
            .unwrap()
            .unwrap();
        let side = side_model(&args(&[
            "--model-url",
            server.url(),
            "--side-model",
            "planner-m",
        ]))
        .unwrap();
        assert_eq!(endpoint.model, "planner-m");
        let (mut policy, answers) = ask_three_times(side);
        let requests = server.requests();
        assert_eq!(requests.len(), 3, "one side request per model call");
        let body = requests[0].json();
        assert_eq!(body["model"], "planner-m");
        assert!(body["messages"].to_string().contains(PLANNER_PROMPT));
        assert!(
            body.get("tools")
                .is_none_or(|t| t.as_array().is_some_and(Vec::is_empty))
        );
        let answers = answers.lock().unwrap();
        assert_eq!(answers.len(), 3);
        assert_eq!(answers[0], (1, Ok(plan.to_string())));
        let failed = answers[1].1.as_ref().unwrap_err();
        assert!(
            failed.contains("planner call failed") && failed.contains("bad planner"),
            "{failed}"
        );
        assert_eq!(answers[2], (3, Ok(plan.to_string())));
        let warnings = policy.take_warnings();
        assert_eq!(warnings.len(), 1, "{warnings:?}");
    }

    #[test]
    fn an_anthropic_server_answers_too() {
        let reply = Reply::anthropic(&Message::assistant_text("<gc_plan/>"), Usage::default());
        let (_runtime, server) = server(vec![reply.clone(), reply.clone(), reply]);
        let side = side_model(&args(&[
            "--model-url",
            server.url(),
            "--side-model",
            "claude-x",
            "--model-api",
            "anthropic",
        ]))
        .unwrap();
        let (_, answers) = ask_three_times(side);
        assert!(server.requests()[0].path.ends_with("/messages"));
        assert_eq!(server.requests()[0].json()["model"], "claude-x");
        let answers = answers.lock().unwrap();
        assert!(
            answers
                .iter()
                .all(|(_, r)| r.as_deref() == Ok("<gc_plan/>")),
            "{answers:?}"
        );
    }

    #[test]
    fn without_a_model_url_side_requests_are_skipped_and_nothing_is_sent() {
        let (mut policy, answers) = ask_three_times(side_model(&args(&[])).unwrap());
        let answers = answers.lock().unwrap();
        assert_eq!(answers.len(), 3);
        assert!(
            answers
                .iter()
                .all(|(_, r)| r.as_ref().is_err_and(|e| e.starts_with("skipped: ")))
        );
        assert!(policy.take_warnings().is_empty());
    }

    #[test]
    fn a_model_url_needs_a_model_and_a_known_api() {
        let error = side_model(&args(&["--model-url", "http://127.0.0.1:9"])).unwrap_err();
        assert!(error.to_string().contains("--side-model"), "{error}");
        assert!(error.chain().any(cwl_lab::cli::is_usage));
        let endpoint = args(&["--model-url", "http://127.0.0.1:9", "--model", "gpt-4o"])
            .side_endpoint()
            .unwrap()
            .unwrap();
        assert_eq!(endpoint.model, "gpt-4o", "--model names it by default");
        assert_eq!(endpoint.api, ModelApi::Openai);
        let error = Replay::try_parse_from([
            "replay",
            "a",
            "--model-url",
            "http://127.0.0.1:9",
            "--side-model",
            "m",
            "--model-api",
            "gemini",
        ])
        .err()
        .unwrap();
        assert!(error.to_string().contains("gemini"), "{error}");
        let error =
            side_model(&args(&["--model-url", "not a url", "--side-model", "m"])).unwrap_err();
        assert!(format!("{error:#}").contains("--model-url"), "{error:#}");
        assert!(
            Replay::try_parse_from(["replay", "a", "--side-model", "m"]).is_err(),
            "--side-model needs --model-url"
        );
    }
}
