//! One writer per session: a second writer refuses with the holder's pid,
//! the file stays valid with every record of the first, and the lock goes
//! when its holder does (dropped, or killed with SIGKILL).

use crate::support;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use cwl::{Message, Record, Usage};
use cwl_agent::agent::Agent;
use cwl_agent::cli::{self, AgentArgs, RunArgs};
use cwl_agent::tools::{ToolConfig, Toolbox};
use cwl_provider::ProviderKind;
use cwl_provider::testing::{Reply, ScriptedServer};
use cwl_session::{SessionError, SessionWriter};
use support::*;

/// Set in the helper process that holds a session's lock.
const HOLDER_ENV: &str = "CWL_TEST_LOCK_HOLDER";

fn answer(text_: &str) -> Reply {
    Reply::openai(&assistant(vec![text(text_)]), Usage::default())
}

/// Every line of the file parses as a record; the user turns, in order.
fn valid_user_turns(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap();
    assert!(text.ends_with('\n'), "the file ends with a whole line");
    let mut users = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let record: Record = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("line {} is not a record ({e}): {line}", i + 1));
        if let Record::Message {
            message: Message::User { content },
            ..
        } = record
            && !content.starts_with("<status>")
        {
            users.push(content);
        }
    }
    let loaded = cwl_session::read(path).unwrap();
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    users
}

fn resume(server: &ScriptedServer, dir: &Path, path: &Path) -> Result<Agent, String> {
    let (_, observer) = collector();
    let toolbox = Toolbox::new(dir, ToolConfig::default()).unwrap();
    Agent::resume(openai(server), toolbox, options(20_000), path, observer)
        .map_err(|e| e.to_string())
}

#[tokio::test]
async fn a_second_writer_refuses_and_the_first_loses_nothing() {
    let mut s = Scripted::start(
        vec![answer("one"), answer("two"), answer("three")],
        options(20_000),
    )
    .await;
    s.agent.run_task("first").await.unwrap();
    let path = s.agent.session_path();
    let id = s.agent.session_id();
    let pid_file = cwl_session::pid_path(&path);
    assert_eq!(
        std::fs::read_to_string(&pid_file).unwrap().trim(),
        std::process::id().to_string()
    );
    let before = std::fs::read(&path).unwrap();

    let error = resume(&s.server, s.dir.path(), &path).unwrap_err();
    assert!(
        error.contains(&format!(
            "session {id} is in use by pid {}",
            std::process::id()
        )),
        "{error}"
    );
    assert_eq!(
        std::fs::read(&path).unwrap(),
        before,
        "the refused writer wrote nothing"
    );
    let listed = cwl_session::list(s.sessions.path()).unwrap();
    assert_eq!(listed.len(), 1, "listing works while the session is locked");
    assert_eq!(listed[0].tasks, 1);

    s.agent.run_task("second").await.unwrap();
    assert_eq!(valid_user_turns(&path), ["first", "second"]);

    let Scripted {
        agent,
        server,
        dir,
        sessions,
        ..
    } = s;
    drop(agent);
    assert!(!pid_file.exists(), "the pid file goes with its writer");
    let mut later = resume(&server, dir.path(), &path).expect("the lock was released");
    later.run_task("third").await.unwrap();
    drop(later);
    assert_eq!(valid_user_turns(&path), ["first", "second", "third"]);
    assert_eq!(server.remaining(), 0);
    drop(sessions);
}

#[test]
fn a_concurrent_cwl_run_resume_fails_with_the_pid_and_writes_nothing() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let server = runtime
        .block_on(ScriptedServer::start(vec![answer("one"), answer("two")]))
        .unwrap();
    let work = workspace();
    let sessions = tempfile::tempdir().unwrap();
    let config = sessions.path().join("config.toml");
    std::fs::write(&config, "").unwrap();
    let args = || AgentArgs {
        provider: Some(ProviderKind::OpenAi),
        model: Some("gpt-test".into()),
        base_url: Some(format!("{}/v1", server.url())),
        cwd: Some(work.path().to_owned()),
        session_dir: Some(sessions.path().to_owned()),
        config: Some(config.clone()),
        // Never asks, even when the test runs with a terminal on stdin.
        approval: Some(cwl_agent::agent::ApprovalMode::Never),
        ..AgentArgs::default()
    };
    cli::run_run(RunArgs {
        agent: args(),
        tasks: vec!["first".into()],
        prompt: None,
    })
    .unwrap();
    let listed = cwl_session::list(sessions.path()).unwrap();
    let (id, path) = (listed[0].id.clone(), listed[0].path.clone());
    let resume_args = || {
        let mut agent = args();
        agent.resume = Some(id.clone());
        RunArgs {
            agent,
            tasks: vec!["second".into()],
            prompt: None,
        }
    };

    let (holder, _) = SessionWriter::reopen(&path).unwrap();
    let before = std::fs::read(&path).unwrap();
    let error = format!("{:#}", cli::run_run(resume_args()).unwrap_err());
    assert!(
        error.contains(&format!(
            "session {id} is in use by pid {}",
            std::process::id()
        )),
        "{error}"
    );
    assert_eq!(std::fs::read(&path).unwrap(), before);
    assert_eq!(server.remaining(), 1, "the refused run called no model");

    drop(holder);
    cli::run_run(resume_args()).unwrap();
    assert_eq!(valid_user_turns(&path), ["first", "second"]);
}

/// Not a test on its own: the process
/// [`the_lock_is_released_when_its_holder_is_killed`] starts to hold a lock.
#[test]
#[ignore = "helper process for the_lock_is_released_when_its_holder_is_killed"]
fn lock_holder_process() {
    let path = PathBuf::from(std::env::var(HOLDER_ENV).expect("run by the kill test only"));
    let (_writer, _) = SessionWriter::reopen(&path).unwrap();
    println!("locked");
    std::thread::sleep(std::time::Duration::from_secs(60));
}

#[test]
fn the_lock_is_released_when_its_holder_is_killed() {
    let dir = tempfile::tempdir().unwrap();
    let info = cwl_session::SessionInfo {
        id: "s-kill".into(),
        timestamp: cwl_session::now(),
        cwd: dir.path().display().to_string(),
        provider: "openai".into(),
        model: "gpt-test".into(),
        budget: 4000,
        tools: vec![cwl::delimiter_spec()],
    };
    let path = SessionWriter::create(dir.path(), &info)
        .unwrap()
        .path()
        .to_owned();
    let test = support::child_test(module_path!(), "lock_holder_process");
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", &test, "--ignored", "--nocapture"])
        .env(HOLDER_ENV, &path)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let locked = BufReader::new(stdout)
        .lines()
        .map_while(Result::ok)
        .any(|line| line.contains("locked"));
    assert!(locked, "the helper process took the lock");

    match SessionWriter::reopen(&path) {
        Err(SessionError::InUse { id, pid }) => {
            assert_eq!((id.as_str(), pid), ("s-kill", Some(child.id())));
        }
        other => panic!("expected InUse, got {other:?}"),
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let (mut writer, loaded) = SessionWriter::reopen(&path).expect("kill -9 released the lock");
    assert_eq!(loaded.info.id, "s-kill");
    assert_eq!(
        std::fs::read_to_string(cwl_session::pid_path(&path))
            .unwrap()
            .trim(),
        std::process::id().to_string(),
        "the stale pid file is taken over"
    );
    writer
        .append(&Record::Note {
            timestamp: None,
            text: "after".into(),
        })
        .unwrap();
    drop(writer);
    assert_eq!(cwl_session::read(&path).unwrap().records.len(), 1);
}
