//! A scripted stand-in for a strategy's side model, for replays that show
//! what the model-driven parts do mechanically (`cwl replay --model-url`).
//! It is not a model and its figures measure this script:
//!
//! - a Self-GC planner request (the planner contract) is answered with a
//!   plan that folds every tool result it shows but the latest
//!   [`KEEP_RECENT`];
//! - any other side request (cwm's summaries, notes, compaction) is
//!   answered with the first [`GIST_WORDS`] words of its last message.
//!
//! Run: `cargo run --release -p cwl-agent --features testing --example
//! scripted_side_model`, then give the printed URL to `cwl replay
//! --model-url URL --side-model NAME` (NAME prices the side calls).

use cwl::{Message, Usage};
use cwl_provider::testing::{RecordedRequest, Reply, ScriptedServer};

/// Tool results a plan leaves alone, newest first.
const KEEP_RECENT: usize = 6;

/// Words of a summary answer.
const GIST_WORDS: usize = 40;

/// What only the planner contract says.
const PLANNER: &str = "context garbage collector";

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let server = ScriptedServer::start([]).await?;
    server.answer_side(|request| Some(answer(request)));
    println!("{}", server.url());
    eprintln!(
        "scripted side model (not a model) at {}; Ctrl-C stops it",
        server.url()
    );
    tokio::signal::ctrl_c().await?;
    Ok(())
}

fn answer(request: &RecordedRequest) -> Reply {
    let text = last_content(request);
    let answer = if request.body.contains(PLANNER) {
        plan(&request.body)
    } else {
        text.split_whitespace()
            .take(GIST_WORDS)
            .collect::<Vec<_>>()
            .join(" ")
    };
    Reply::openai(&Message::assistant_text(answer), Usage::default())
}

/// Folds every `function:<tool>:<n>` id the request shows but the newest.
fn plan(body: &str) -> String {
    let mut ids: Vec<&str> = Vec::new();
    for (at, _) in body.match_indices("function:") {
        let id = &body[at..];
        let end = id
            .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, ':' | '_' | '-')))
            .unwrap_or(id.len());
        let id = &id[..end];
        if id
            .rsplit(':')
            .next()
            .is_some_and(|n| n.parse::<u64>().is_ok())
            && !ids.contains(&id)
        {
            ids.push(id);
        }
    }
    let keep = ids.len().saturating_sub(KEEP_RECENT);
    format!(
        "<above_conversation_summary>Scripted: older tool results folded.</above_conversation_summary>\n<gc_plan>\n<fold kind=\"function\" reason=\"stable_artifact\">\n{}\n</fold>\n</gc_plan>",
        ids[..keep].join("\n")
    )
}

/// The last message's text of an OpenAI request body.
fn last_content(request: &RecordedRequest) -> String {
    request.json()["messages"]
        .as_array()
        .and_then(|messages| messages.last())
        .and_then(|message| message["content"].as_str())
        .unwrap_or_default()
        .to_string()
}
