//! Secrets end to end: `bash` runs without the provider keys and the
//! variables `env_deny` names, and the values of those variables never
//! reach the session file, the model or the terminal.

use crate::support;

use std::path::Path;
use std::process::Command;

use cwl_agent::agent::{Agent, AgentError, Event};
use cwl_agent::cli::{self, AgentArgs, RunArgs};
use cwl_agent::tools::{ToolConfig, Toolbox};
use cwl_provider::secrets::{EnvDeny, Secrets};
use cwl_provider::testing::{Reply, ScriptedServer};
use cwl_provider::{OpenAiConfig, OpenAiProvider, ProviderKind};
use serde_json::json;
use support::*;

const KEY: &str = "sk-fake-0123456789abcdefXYZ";
const TOKEN: &str = "svc-token-5550123";
const KEPT: &str = "kept-value-42";

/// The model runs `env`, echoes the variables and reads a file that holds
/// the secrets, then answers.
fn bash_script() -> Vec<Reply> {
    openai_replies(&[
        assistant(vec![
            call("c1", "bash", json!({"command": "env"})),
            call(
                "c2",
                "bash",
                json!({"command": "echo \"key=$OPENAI_API_KEY token=$MY_SERVICE_TOKEN kept=$KEEP_ME_VISIBLE\""}),
            ),
            call("c3", "read", json!({"path": "deploy.env"})),
        ]),
        assistant(vec![text("done")]),
    ])
}

/// A 401 whose body echoes the key, as some servers do.
fn echoing_401() -> Reply {
    Reply::status(
        401,
        format!(r#"{{"error":{{"message":"Incorrect API key provided: {KEY}"}}}}"#),
    )
}

fn write_secret_file(dir: &Path) {
    std::fs::write(
        dir.join("deploy.env"),
        format!("OPENAI_API_KEY={KEY}\nMY_SERVICE_TOKEN={TOKEN}\n"),
    )
    .unwrap();
}

/// Every file in `dir`, concatenated.
fn session_text(dir: &Path) -> String {
    let mut text = String::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "jsonl") {
            text.push_str(&std::fs::read_to_string(path).unwrap());
        }
    }
    assert!(!text.is_empty(), "no session file in {}", dir.display());
    text
}

fn assert_no_secret(what: &str, text: &str) {
    for secret in [KEY, TOKEN] {
        assert!(!text.contains(secret), "{what} holds a secret value");
    }
}

/// The env output and the echo of the variables: keys gone, the rest kept.
fn check_bash_outputs(env: &str, echo: &str) {
    assert!(env.contains(&format!("KEEP_ME_VISIBLE={KEPT}")), "{env}");
    assert!(env.contains("PATH="), "{env}");
    assert!(!env.contains("OPENAI_API_KEY="), "{env}");
    assert!(!env.contains("MY_SERVICE_TOKEN="), "{env}");
    assert!(
        echo.starts_with(&format!("key= token= kept={KEPT}\n")),
        "{echo}"
    );
}

#[tokio::test]
async fn bash_gets_no_keys_and_their_values_are_redacted_everywhere() {
    let overloaded = Reply::status(
        503,
        format!(r#"{{"error":{{"message":"busy, key {KEY}"}}}}"#),
    );
    let replies = [overloaded]
        .into_iter()
        .chain(bash_script())
        .chain([echoing_401()]);
    let server = ScriptedServer::start(replies).await.unwrap();
    let dir = workspace();
    write_secret_file(dir.path());
    let sessions = tempfile::tempdir().unwrap();
    let vars = [
        ("PATH", std::env::var("PATH").unwrap()),
        ("OPENAI_API_KEY", KEY.to_owned()),
        ("MY_SERVICE_TOKEN", TOKEN.to_owned()),
        ("KEEP_ME_VISIBLE", KEPT.to_owned()),
    ];
    let secrets = Secrets::from_vars(vars, &EnvDeny::default());
    let toolbox = Toolbox::new(
        dir.path(),
        ToolConfig {
            secrets,
            ..ToolConfig::default()
        },
    )
    .unwrap();
    let provider = Box::new(
        OpenAiProvider::new(
            OpenAiConfig::new(format!("{}/v1", server.url()))
                .with_api_key(KEY)
                .with_retry(fast_retry()),
        )
        .unwrap(),
    );
    let (shared, observer) = collector();
    let mut agent = Agent::create(
        provider,
        toolbox,
        options(80_000),
        sessions.path(),
        observer,
    )
    .unwrap();
    agent.run_task("look around").await.unwrap();
    let error = agent.run_task("again").await.unwrap_err();
    assert!(matches!(error, AgentError::Provider(_)));
    let error = error.to_string();
    assert_no_secret("the returned error", &error);
    assert!(
        error.contains("Incorrect API key provided: [redacted OPENAI_API_KEY]"),
        "{error}"
    );
    drop(agent);

    let results: Vec<(String, String)> = events(&shared)
        .into_iter()
        .filter_map(|e| match e {
            Event::ToolResult { id, content, .. } => Some((id, content)),
            _ => None,
        })
        .collect();
    assert_eq!(results.len(), 3);
    check_bash_outputs(&results[0].1, &results[1].1);
    let read = &results[2].1;
    assert!(
        read.contains("OPENAI_API_KEY=[redacted OPENAI_API_KEY]")
            && read.contains("MY_SERVICE_TOKEN=[redacted MY_SERVICE_TOKEN]"),
        "{read}"
    );
    let retries: Vec<String> = events(&shared)
        .into_iter()
        .filter_map(|e| match e {
            Event::Retrying { reason, .. } => Some(reason),
            _ => None,
        })
        .collect();
    assert_eq!(retries.len(), 1);
    assert!(
        retries[0].contains("busy, key [redacted OPENAI_API_KEY]"),
        "the retry reason shown is redacted: {}",
        retries[0].replace(KEY, "<KEY>")
    );
    let failures: Vec<String> = events(&shared)
        .into_iter()
        .filter_map(|e| match e {
            Event::TaskFailed { error } => Some(error),
            _ => None,
        })
        .collect();
    assert!(
        failures
            .iter()
            .any(|n| n.contains("Incorrect API key provided: [redacted OPENAI_API_KEY]")),
        "{failures:?}"
    );

    let session = session_text(sessions.path());
    assert_no_secret("the session file", &session);
    assert!(session.contains("[redacted MY_SERVICE_TOKEN]"));
    assert!(session.contains("Incorrect API key provided: [redacted OPENAI_API_KEY]"));
    assert!(
        session.contains(KEPT),
        "a variable not denied passes through"
    );

    let requests = server.requests();
    assert_eq!(requests.len(), 4);
    for request in &requests {
        assert_no_secret("a request body", &request.body);
        assert_eq!(
            request.header("authorization"),
            Some(format!("Bearer {KEY}").as_str()),
            "the key itself still authenticates the calls"
        );
    }
    assert!(requests[2].body.contains("[redacted OPENAI_API_KEY]"));
}

/// Set in the child process [`the_cli_withholds_the_process_environment_s_keys`] starts.
const CHILD_VAR: &str = "CWL_SECRETS_TEST_CHILD";

/// Runs [`cli_run_with_keys_in_the_environment`] in a child process whose
/// environment holds the keys, and checks what it printed too.
#[test]
fn the_cli_withholds_the_process_environment_s_keys() {
    let exe = std::env::current_exe().unwrap();
    let test = support::child_test(module_path!(), "cli_run_with_keys_in_the_environment");
    let output = Command::new(exe)
        .args([
            &test,
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_VAR, "1")
        .env("OPENAI_API_KEY", KEY)
        .env("MY_SERVICE_TOKEN", TOKEN)
        .env("KEEP_ME_VISIBLE", KEPT)
        .env_remove("ANTHROPIC_API_KEY")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "child failed\n--- stdout\n{stdout}\n--- stderr\n{stderr}"
    );
    assert!(
        stdout.contains("1 passed"),
        "the child test did not run: {stdout}"
    );
    assert!(
        stdout.contains("cli error: ")
            && stdout.contains("Incorrect API key provided: [redacted OPENAI_API_KEY]"),
        "the error is printed once, redacted: {stdout}"
    );
    assert!(
        !stderr.contains("Incorrect API key"),
        "not printed twice: {stderr}"
    );
    assert_no_secret("the child's stdout", &stdout);
    assert_no_secret("the child's stderr", &stderr);
}

/// `cwl run` with the keys in its own environment (only when started by
/// [`the_cli_withholds_the_process_environment_s_keys`]).
#[test]
#[ignore = "run in a child process by the_cli_withholds_the_process_environment_s_keys"]
fn cli_run_with_keys_in_the_environment() {
    if std::env::var_os(CHILD_VAR).is_none() {
        return;
    }
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let replies = bash_script().into_iter().chain([echoing_401()]);
    let server = runtime.block_on(ScriptedServer::start(replies)).unwrap();
    let work = workspace();
    write_secret_file(work.path());
    let sessions = tempfile::tempdir().unwrap();
    let config = sessions.path().join("config.toml");
    std::fs::write(&config, "").unwrap();
    let args = RunArgs {
        agent: AgentArgs {
            provider: Some(ProviderKind::OpenAi),
            model: Some("gpt-test".into()),
            base_url: Some(format!("{}/v1", server.url())),
            cwd: Some(work.path().to_owned()),
            session_dir: Some(sessions.path().to_owned()),
            config: Some(config),
            // Never asks, even when the test runs with a terminal on stdin.
            approval: Some(cwl_agent::agent::ApprovalMode::Never),
            ..AgentArgs::default()
        },
        tasks: vec!["look around".into(), "again".into()],
        prompt: None,
    };
    let error = format!("{:#}", cli::run_run(args).unwrap_err());
    assert_no_secret("the CLI's error", &error);
    assert!(error.contains("[redacted OPENAI_API_KEY]"), "{error}");
    println!("cli error: {error}");

    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    let results: Vec<String> = requests[1].json()["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(results.len(), 3);
    check_bash_outputs(&results[0], &results[1]);
    assert!(results[2].contains("[redacted MY_SERVICE_TOKEN]"));
    for request in &requests {
        assert_no_secret("a request body", &request.body);
        assert_eq!(
            request.header("authorization"),
            Some(format!("Bearer {KEY}").as_str())
        );
    }
    let session = session_text(sessions.path());
    assert_no_secret("the session file", &session);
    assert!(session.contains("Incorrect API key provided: [redacted OPENAI_API_KEY]"));
}

#[test]
fn a_bad_env_deny_pattern_stops_the_cli_with_the_file_and_the_pattern() {
    let work = workspace();
    let sessions = tempfile::tempdir().unwrap();
    let config = sessions.path().join("config.toml");
    std::fs::write(&config, "env_deny = [\"*_TOKEN\", \"API?KEY\"]\n").unwrap();
    let error = cli::run_run(RunArgs {
        agent: AgentArgs {
            provider: Some(ProviderKind::OpenAi),
            base_url: Some("http://127.0.0.1:9/v1".into()),
            cwd: Some(work.path().to_owned()),
            session_dir: Some(sessions.path().to_owned()),
            config: Some(config),
            // Never asks, even when the test runs with a terminal on stdin.
            approval: Some(cwl_agent::agent::ApprovalMode::Never),
            ..AgentArgs::default()
        },
        tasks: vec!["x".into()],
        prompt: None,
    })
    .unwrap_err();
    let text = format!("{error:#}");
    assert!(text.contains("config.toml"), "{text}");
    assert!(text.contains(r#"env_deny pattern "API?KEY""#), "{text}");
    assert!(text.contains("`*` is the only wildcard"), "{text}");
    assert!(
        std::fs::read_dir(sessions.path()).unwrap().count() == 1,
        "no session is created"
    );
}
