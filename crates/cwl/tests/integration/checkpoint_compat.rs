//! Checkpoints written by earlier builds keep loading to the same engine:
//! `fixtures/checkpoint-v1.json` was saved halfway through [`session`] by
//! the build before the use index changed its layout in memory. Restored
//! and driven on, it must give every report and view an uninterrupted run
//! gives, and save the same state that run saves.

use std::sync::Arc;

use crate::common::{Script, counter};
use cwl::{Checkpoint, Config, Context, Message, PaperOrder, delimiter_spec};
use serde_json::Value;

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/checkpoint-v1.json"
);

/// Tasks whose outputs list paths and symbols and whose answers name some
/// of an earlier task's, so the use index holds terms and reorders clocks.
fn session() -> Vec<Message> {
    let listing = |task: usize| -> String {
        (0..16)
            .map(|line| {
                format!(
                    "src/mod_{task}/file_{line}.rs:{} handle_{line}_{task}()\n",
                    line * 7
                )
            })
            .collect()
    };
    let mut script = Script::new();
    script.system("sys").user("first task");
    for task in 0..30 {
        if task > 0 {
            script.user(&format!(
                "task {task}: look at src/mod_{}/file_3.rs",
                task / 2
            ));
        }
        script
            .start_expl(&format!("look-{task}"))
            .tool_with_reasoning(
                &format!("search for handle_3_{task}()"),
                "grep",
                &listing(task),
            )
            .tool("read", &listing(task + 100))
            .end_expl(&format!("task {task} lives in src/mod_{task}/file_1.rs"))
            .start_act(&format!("fix-{task}"), &[&format!("look-{task}")])
            .tool(
                "edit",
                &format!("edited src/mod_{task}/file_1.rs\n{}", "ok ".repeat(200)),
            )
            .tool("bash", &listing(task + 200))
            .end_act()
            .say(&format!(
                "Done; src/mod_{}/file_{}.rs next.",
                task / 3,
                task % 40
            ))
            .tool("ls", &listing(task + 300));
    }
    script.build()
}

/// The defaults of the build that saved the fixture (restated outputs, the
/// answer cap and superseded plans came after it; off, this build saves the
/// same bytes).
fn engine() -> Context {
    Context::new(
        Config::with_budget(2_500)
            .restated(None)
            .answer_share(None)
            .superseded_plans(false),
        counter(),
        vec![delimiter_spec()],
    )
}

/// The pushes the fixture was saved after.
fn head(messages: &[Message]) -> usize {
    messages.len() / 2
}

fn drive(context: &mut Context, messages: &[Message]) -> Vec<cwl::Report> {
    messages
        .iter()
        .map(|message| {
            context.push(message.clone()).expect("valid transcript");
            context.enforce()
        })
        .collect()
}

fn state(context: &Context) -> Value {
    serde_json::to_value(context.checkpoint()).expect("checkpoint")
}

#[test]
fn a_checkpoint_from_the_earlier_layout_restores_the_same_engine() {
    let messages = session();
    let (head, tail) = messages.split_at(head(&messages));
    let mut whole = engine();
    drive(&mut whole, head);
    let text = std::fs::read_to_string(FIXTURE).expect("fixture");
    let saved: Value = serde_json::from_str(&text).expect("fixture is JSON");
    assert_eq!(
        saved,
        state(&whole),
        "this build saves what the earlier one saved"
    );
    assert!(
        saved["uses"]["holders"]
            .as_object()
            .is_some_and(|terms| terms.len() > 100),
        "the fixture holds a use index worth restoring"
    );

    let checkpoint: Checkpoint = serde_json::from_str(&text).expect("fixture loads");
    let mut resumed = Context::restore(checkpoint, counter(), Arc::new(PaperOrder)).unwrap();
    assert_eq!(state(&resumed), saved, "restored as saved");
    let evicted = drive(&mut whole, tail);
    assert!(evicted.iter().filter(|report| report.evicted()).count() > 5);
    assert_eq!(drive(&mut resumed, tail), evicted);
    assert!(resumed.view().eq(whole.view()));
    assert_eq!(state(&resumed), state(&whole));
}

/// Writes the fixture with this build: run by hand with
/// `CWL_WRITE_FIXTURE=1 cargo test -p cwl --test integration checkpoint_compat:: -- --ignored`.
#[test]
#[ignore = "writes the fixture"]
fn write_fixture() {
    assert!(
        std::env::var_os("CWL_WRITE_FIXTURE").is_some(),
        "set CWL_WRITE_FIXTURE=1"
    );
    let messages = session();
    let mut context = engine();
    drive(&mut context, &messages[..head(&messages)]);
    let text = serde_json::to_string(&context.checkpoint()).unwrap();
    std::fs::write(FIXTURE, text + "\n").unwrap();
}
