//! Project instruction files reach the prompt only as UTF-8 text; a file
//! that is not is refused with a note the user sees and the session keeps.

use crate::support;

use cwl::{Record, Usage};
use cwl_agent::agent::Event;
use cwl_provider::testing::Reply;
use support::*;

fn answer(text_: &str) -> Reply {
    Reply::openai(&assistant(vec![text(text_)]), Usage::default())
}

/// The system messages of the first request.
fn system_messages(s: &Scripted) -> Vec<String> {
    s.server.requests()[0].json()["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "system")
        .map(|m| m["content"].as_str().unwrap().to_string())
        .collect()
}

fn notes(s: &Scripted) -> Vec<String> {
    events(&s.shared)
        .into_iter()
        .filter_map(|e| match e {
            Event::Note { text } => Some(text),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_binary_agents_md_is_refused_with_a_note_and_claude_md_still_loads() {
    let work = workspace();
    let mut binary: Vec<u8> = (0..=255u8).cycle().take(10_000).collect();
    binary.splice(0..0, b"\x89PNG\r\n".iter().copied());
    std::fs::write(work.path().join("AGENTS.md"), &binary).unwrap();
    std::fs::write(work.path().join("CLAUDE.md"), "Always run cargo fmt.").unwrap();
    let server = cwl_provider::testing::ScriptedServer::start(vec![answer("done")])
        .await
        .unwrap();
    let sessions = tempfile::tempdir().unwrap();
    let (agent, shared) = openai_agent(&server, work.path(), sessions.path(), options(20_000));
    let mut s = Scripted {
        agent,
        shared,
        sessions,
        dir: work,
        server,
    };
    s.agent.run_task("go").await.unwrap();

    let expected = "AGENTS.md was not loaded as project instructions: it is not UTF-8 text (invalid byte at offset 0); save it as UTF-8 to use it";
    assert_eq!(notes(&s), [expected]);
    let system = system_messages(&s);
    assert_eq!(system.len(), 2, "system prompt and CLAUDE.md only");
    assert_eq!(
        system[1],
        "Project instructions from CLAUDE.md:\n\nAlways run cargo fmt."
    );
    assert!(
        !system
            .iter()
            .any(|m| m.contains("instructions from AGENTS.md"))
    );
    let loaded = cwl_session::read(&s.agent.session_path()).unwrap();
    assert!(
        loaded
            .records
            .iter()
            .any(|(_, r)| matches!(r, Record::Note { text, .. } if text == expected)),
        "the note is in the session file"
    );
}

#[tokio::test]
async fn a_utf8_agents_md_is_loaded_without_a_note() {
    let work = workspace();
    std::fs::write(work.path().join("AGENTS.md"), "Réponds en français. ✓").unwrap();
    let server = cwl_provider::testing::ScriptedServer::start(vec![answer("fait")])
        .await
        .unwrap();
    let sessions = tempfile::tempdir().unwrap();
    let (agent, shared) = openai_agent(&server, work.path(), sessions.path(), options(20_000));
    let mut s = Scripted {
        agent,
        shared,
        sessions,
        dir: work,
        server,
    };
    s.agent.run_task("go").await.unwrap();
    assert!(notes(&s).is_empty(), "{:?}", notes(&s));
    let system = system_messages(&s);
    assert_eq!(
        system[1],
        "Project instructions from AGENTS.md:\n\nRéponds en français. ✓"
    );
}
