//! The `cwl_agent::cli` entry points end to end: flags, config file,
//! sessions on disk, resume, failures and the demo.

use crate::support;

use std::path::{Path, PathBuf};

use cwl::{Budget, Usage};
use cwl_agent::cli::{self, AgentArgs, DemoArgs, RunArgs, SessionsArgs};
use cwl_provider::ProviderKind;
use cwl_provider::testing::{Reply, ScriptedServer};
use support::*;

/// A runtime for the scripted server; the CLI runs on its own runtime on
/// the test's thread.
fn server(replies: Vec<Reply>) -> (tokio::runtime::Runtime, ScriptedServer) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let server = runtime.block_on(ScriptedServer::start(replies)).unwrap();
    (runtime, server)
}

fn agent_args(server: &ScriptedServer, cwd: &Path, sessions: &Path, config: &Path) -> AgentArgs {
    AgentArgs {
        provider: Some(ProviderKind::OpenAi),
        model: Some("gpt-test".into()),
        base_url: Some(format!("{}/v1", server.url())),
        cwd: Some(cwd.to_owned()),
        session_dir: Some(sessions.to_owned()),
        config: Some(config.to_owned()),
        // Never asks, even when the test runs with a terminal on stdin.
        approval: Some(cwl_agent::agent::ApprovalMode::Never),
        ..AgentArgs::default()
    }
}

fn empty_config(dir: &Path) -> PathBuf {
    let path = dir.join("config.toml");
    std::fs::write(&path, "").unwrap();
    path
}

fn answer(text_: &str) -> Reply {
    Reply::openai(&assistant(vec![text(text_)]), Usage::default())
}

#[test]
fn run_executes_every_task_in_one_session_and_resume_continues_it() {
    let (_rt, server) = server(vec![answer("one"), answer("two"), answer("three")]);
    let work = workspace();
    let sessions = tempfile::tempdir().unwrap();
    let config = empty_config(sessions.path());
    let args = RunArgs {
        agent: agent_args(&server, work.path(), sessions.path(), &config),
        tasks: vec!["second".into()],
        prompt: Some("first".into()),
    };
    cli::run_run(args).unwrap();
    let listed = cwl_session::list(sessions.path()).unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!((listed[0].tasks, listed[0].requests), (2, 2));
    assert_eq!(listed[0].model, "gpt-test");
    assert_eq!(listed[0].budget, cwl::DEFAULT_BUDGET as u64);
    assert_eq!(listed[0].first_task.as_deref(), Some("first"));
    let bodies: Vec<_> = server.requests().iter().map(|r| r.json()).collect();
    assert_eq!(user_turns(&bodies[1]), ["first", "second"]);
    assert_eq!(bodies[1]["model"], "gpt-test");

    let mut resume = agent_args(&server, work.path(), sessions.path(), &config);
    resume.cwd = None;
    resume.model = None;
    resume.resume = Some(listed[0].id[..15].to_string());
    cli::run_run(RunArgs {
        agent: resume,
        tasks: vec!["third".into()],
        prompt: None,
    })
    .unwrap();
    let listed = cwl_session::list(sessions.path()).unwrap();
    assert_eq!(listed.len(), 1, "resume appends to the same session");
    assert_eq!(listed[0].tasks, 3);
    let last = server.requests()[2].json();
    assert_eq!(user_turns(&last), ["first", "second", "third"]);
    assert_eq!(
        last["model"], "gpt-test",
        "the model comes from the session"
    );
    check_openai_request(&last);

    cli::run_sessions(SessionsArgs {
        session_dir: Some(sessions.path().to_owned()),
        config: Some(config),
        limit: 0,
        json: true,
        ..SessionsArgs::default()
    })
    .unwrap();
}

#[test]
fn a_failed_task_is_reported_with_the_resume_hint() {
    let (_rt, server) = server(vec![
        answer("ok"),
        Reply::status(400, r#"{"error":{"message":"bad request"}}"#),
    ]);
    let work = workspace();
    let sessions = tempfile::tempdir().unwrap();
    let config = empty_config(sessions.path());
    let error = cli::run_run(RunArgs {
        agent: agent_args(&server, work.path(), sessions.path(), &config),
        tasks: vec!["a".into(), "b".into(), "c".into()],
        prompt: None,
    })
    .unwrap_err();
    let text = format!("{error:#}");
    assert!(
        text.contains("task 2 of 3 failed; 1 later task(s) not run"),
        "{text}"
    );
    assert!(text.contains("bad request"), "{text}");
    assert!(text.contains("cwl run --resume"), "{text}");
    assert_eq!(
        cwl_session::list(sessions.path()).unwrap().len(),
        1,
        "the session is saved"
    );
}

#[test]
fn a_run_that_never_got_a_response_has_no_resume_hint() {
    let (_rt, server) = server(vec![Reply::status(
        400,
        r#"{"error":{"message":"bad request"}}"#,
    )]);
    let work = workspace();
    let sessions = tempfile::tempdir().unwrap();
    let config = empty_config(sessions.path());
    let error = cli::run_run(RunArgs {
        agent: agent_args(&server, work.path(), sessions.path(), &config),
        tasks: vec!["a".into()],
        prompt: None,
    })
    .unwrap_err();
    let text = format!("{error:#}");
    assert!(text.contains("task 1 of 1 failed"), "{text}");
    assert!(!text.contains("--resume"), "nothing to resume: {text}");
}

#[test]
fn the_config_file_sets_models_and_budgets() {
    let (_rt, server) = server(vec![answer("ok")]);
    let work = workspace();
    let sessions = tempfile::tempdir().unwrap();
    let config = sessions.path().join("config.toml");
    std::fs::write(
        &config,
        "budget = \"25%\"\nmax_turns = 5\n\n[[models]]\nname = \"gpt-test\"\ncontext_window = 40000\ninput_price = 1.0\noutput_price = 1.0\n",
    )
    .unwrap();
    cli::run_run(RunArgs {
        agent: agent_args(&server, work.path(), sessions.path(), &config),
        tasks: vec!["go".into()],
        prompt: None,
    })
    .unwrap();
    let listed = cwl_session::list(sessions.path()).unwrap();
    assert_eq!(listed[0].budget, 10_000, "25% of the configured 40k window");

    std::fs::write(&config, "budget = \"lots\"\n").unwrap();
    let error = cli::run_run(RunArgs {
        agent: agent_args(&server, work.path(), sessions.path(), &config),
        tasks: vec!["go".into()],
        prompt: None,
    })
    .unwrap_err();
    assert!(
        format!("{error:#}").contains("config file: budget"),
        "{error:#}"
    );

    std::fs::write(
        &config,
        "low_water = \"50%\"\nresidue_share = \"off\"\nkeep_recent = \"25%\"\nsuperseded = \"off\"\nrestated = \"90%\"\nanswer_share = \"off\"\nact_outputs = \"keep\"\n",
    )
    .unwrap();
    server.push(answer("ok"));
    cli::run_run(RunArgs {
        agent: agent_args(&server, work.path(), sessions.path(), &config),
        tasks: vec!["go".into()],
        prompt: None,
    })
    .unwrap();
    let configured = cwl_session::Settings {
        low_water: cwl::Share::new(0.5).unwrap(),
        residue_share: None,
        keep_recent: Some(cwl::Share::new(0.25).unwrap()),
        superseded: None,
        restated: Some(cwl::Share::new(0.9).unwrap()),
        answer_share: None,
        stub_act_outputs: false,
        superseded_plans: true,
        strategy: cwl_session::strategy::StrategyName::Cwl,
        strategy_options: serde_json::Value::Null,
    };
    let settings: Vec<_> = cwl_session::list(sessions.path())
        .unwrap()
        .iter()
        .map(|listed| {
            let loaded = cwl_session::read(&listed.path).unwrap();
            cwl_session::Settings::last(loaded.records.iter().map(|(_, r)| r))
        })
        .collect();
    assert!(settings.contains(&Some(configured)), "{settings:?}");
    assert!(settings.contains(&Some(cwl_session::Settings::default())));
    for (text, key) in [
        ("low_water = \"2\"", "low_water"),
        ("residue_share = \"some\"", "residue_share"),
        ("keep_recent = \"2\"", "keep_recent"),
        ("restated = \"most\"", "restated"),
        ("answer_share = \"half\"", "answer_share"),
    ] {
        std::fs::write(&config, format!("{text}\n")).unwrap();
        let error = cli::run_run(RunArgs {
            agent: agent_args(&server, work.path(), sessions.path(), &config),
            tasks: vec!["go".into()],
            prompt: None,
        })
        .unwrap_err();
        let error = format!("{error:#}");
        assert!(error.contains(&format!("config file: {key}")), "{error}");
        assert!(error.contains("invalid share"), "{error}");
    }

    std::fs::write(&config, "budgett = \"1k\"\n").unwrap();
    let error = cli::run_run(RunArgs {
        agent: agent_args(&server, work.path(), sessions.path(), &config),
        tasks: vec!["go".into()],
        prompt: None,
    })
    .unwrap_err();
    assert!(format!("{error:#}").contains("budgett"), "{error:#}");
}

/// `cwl run go` with `args`.
fn run_go(args: AgentArgs) -> anyhow::Result<()> {
    cli::run_run(RunArgs {
        agent: args,
        tasks: vec!["go".into()],
        prompt: None,
    })
}

/// The settings the last record of the only session in `sessions` fixes.
fn recorded_settings(sessions: &Path) -> cwl_session::Settings {
    let listed = cwl_session::list(sessions).unwrap();
    assert_eq!(listed.len(), 1);
    let loaded = cwl_session::read(&listed[0].path).unwrap();
    cwl_session::Settings::last(loaded.records.iter().map(|(_, r)| r)).unwrap()
}

#[test]
fn presets_and_plans_layer_flags_over_the_config_file_and_the_session() {
    let (_rt, server) = server(vec![answer("one"), answer("two")]);
    let work = workspace();
    let sessions = tempfile::tempdir().unwrap();
    let config = sessions.path().join("config.toml");
    std::fs::write(
        &config,
        "preset = \"paper\"\nlow_water = \"90%\"\nplans = \"keep\"\n",
    )
    .unwrap();
    let mut args = agent_args(&server, work.path(), sessions.path(), &config);
    args.engine.answer_share = Some("20%".parse().unwrap());
    run_go(args).unwrap();
    let paper = cwl_session::Settings::of(&cwl::Config::paper(1_000));
    let wanted = cwl_session::Settings {
        low_water: cwl::Share::new(0.9).unwrap(),
        answer_share: Some(cwl::Share::new(0.2).unwrap()),
        ..paper.clone()
    };
    assert!(!wanted.superseded_plans, "the file's plans, as the paper's");
    assert_eq!(recorded_settings(sessions.path()), wanted);

    // A resumed session keeps its own: the config file no longer counts,
    // and a flag given changes only what it names.
    std::fs::write(&config, "preset = \"default\"\n").unwrap();
    let mut resume = agent_args(&server, work.path(), sessions.path(), &config);
    resume.resume = Some(cwl_session::list(sessions.path()).unwrap()[0].id.clone());
    resume.engine.plans = Some(cwl::PlanCalls::Drop);
    cli::run_run(RunArgs {
        agent: resume,
        tasks: vec!["again".into()],
        prompt: None,
    })
    .unwrap();
    let resumed = cwl_session::Settings {
        superseded_plans: true,
        ..wanted
    };
    assert_eq!(recorded_settings(sessions.path()), resumed);

    for (text, wanted) in [
        (
            "preset = \"algorithm-1\"",
            "config file: preset: unknown preset `algorithm-1`",
        ),
        ("plans = \"forget\"", "config file: plans"),
    ] {
        std::fs::write(&config, format!("{text}\n")).unwrap();
        let args = agent_args(&server, work.path(), sessions.path(), &config);
        let error = format!("{:#}", run_go(args).unwrap_err());
        assert!(error.contains(wanted), "{error}");
    }
    assert_eq!(server.requests().len(), 2, "a bad file sends nothing");
}

#[test]
fn bad_arguments_fail_before_any_request() {
    let (_rt, server) = server(vec![]);
    let work = workspace();
    let sessions = tempfile::tempdir().unwrap();
    let config = empty_config(sessions.path());
    let run = |agent: AgentArgs| {
        cli::run_run(RunArgs {
            agent,
            tasks: vec!["x".into()],
            prompt: None,
        })
        .map_err(|e| {
            assert_eq!(cli::exit_code(&e), cli::USAGE, "{e:#}");
            format!("{e:#}")
        })
    };
    let mut args = agent_args(&server, work.path(), sessions.path(), &config);
    args.budget = Some(Budget::Tokens(100));
    assert!(run(args).unwrap_err().contains("too small"));
    let mut args = agent_args(&server, work.path(), sessions.path(), &config);
    args.cwd = Some(work.path().join("missing"));
    assert!(run(args).unwrap_err().contains("missing"));
    let mut args = agent_args(&server, work.path(), sessions.path(), &config);
    args.resume = Some("nope".into());
    assert!(run(args).unwrap_err().contains("no session `nope`"));
    let mut args = agent_args(&server, work.path(), sessions.path(), &config);
    args.max_turns = Some(0);
    assert!(run(args).unwrap_err().contains("--max-turns"));
    assert!(server.requests().is_empty());
}

#[test]
fn demo_runs_without_a_key() {
    let sessions = tempfile::tempdir().unwrap();
    cli::run_demo(DemoArgs {
        session_dir: Some(sessions.path().to_owned()),
        ..DemoArgs::default()
    })
    .unwrap();
    let listed = cwl_session::list(sessions.path()).unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].tasks, cwl_agent::demo::TASKS.len());
    assert_eq!(listed[0].provider, "scripted");
}

#[test]
fn a_session_past_the_window_is_not_advised_to_resume_as_it_is() {
    let read_all = assistant(vec![
        start("w1", "read-all", "expl", &[]),
        call("w2", "read", serde_json::json!({"path": "src/auth.rs"})),
    ]);
    let (_rt, server) = server(vec![Reply::openai(&read_all, Usage::default())]);
    let work = workspace();
    let sessions = tempfile::tempdir().unwrap();
    let config = sessions.path().join("config.toml");
    std::fs::write(
        &config,
        "[[models]]\nname = \"gpt-test\"\ncontext_window = 3000\n",
    )
    .unwrap();
    let mut args = agent_args(&server, work.path(), sessions.path(), &config);
    args.budget = Some(Budget::Tokens(2_800));
    let error = cli::run_run(RunArgs {
        agent: args,
        tasks: vec!["read everything".into()],
        prompt: None,
    })
    .unwrap_err();
    let text = format!("{error:#}");
    assert!(text.contains("the model's window allows 3000"), "{text}");
    assert!(
        text.contains("resuming this session as it is would stop the same way"),
        "{text}"
    );
    assert!(text.contains("Start a new session"), "{text}");
    assert!(text.contains("--model NAME"), "{text}");
    assert!(!text.contains("continue it with"), "{text}");
    assert_eq!(cli::exit_code(&error), cli::RUNTIME);
    assert_eq!(server.requests().len(), 1);

    // The advice holds: resuming as it is stops the same way, unsent.
    let id = cwl_session::list(sessions.path()).unwrap()[0].id.clone();
    let mut resume = agent_args(&server, work.path(), sessions.path(), &config);
    resume.resume = Some(id);
    let again = cli::run_run(RunArgs {
        agent: resume,
        tasks: vec!["go on".into()],
        prompt: None,
    })
    .unwrap_err();
    assert!(
        format!("{again:#}").contains("would stop the same way"),
        "{again:#}"
    );
    assert_eq!(server.requests().len(), 1, "nothing more was sent");
}

#[test]
fn a_gpt_5_codex_model_goes_to_the_responses_api_and_resumes_there() {
    let (_rt, server) = server(vec![
        Reply::responses(&assistant(vec![text("first")]), Usage::default()),
        Reply::responses(&assistant(vec![text("second")]), Usage::default()),
    ]);
    let work = workspace();
    let sessions = tempfile::tempdir().unwrap();
    let config = empty_config(sessions.path());
    let args = || AgentArgs {
        provider: None,
        model: Some("gpt-5.1-codex-max".into()),
        ..agent_args(&server, work.path(), sessions.path(), &config)
    };
    cli::run_run(RunArgs {
        agent: args(),
        tasks: vec!["a".into()],
        prompt: None,
    })
    .unwrap();
    let listed = cwl_session::list(sessions.path()).unwrap();
    assert_eq!(listed[0].provider, "responses");
    cli::run_run(RunArgs {
        agent: AgentArgs {
            model: None,
            resume: Some(listed[0].id.clone()),
            ..args()
        },
        tasks: vec!["b".into()],
        prompt: None,
    })
    .unwrap();
    let paths: Vec<String> = server.requests().iter().map(|r| r.path.clone()).collect();
    assert_eq!(paths, ["/v1/responses", "/v1/responses"]);
    assert_eq!(server.requests()[1].json()["model"], "gpt-5.1-codex-max");
}
