//! Conformance tests for the rules the paper leaves open, as the engine
//! settles them for sessions of any length: in-flight episodes, per-response
//! unannotated stretches, name reuse, low water, the residue cap, recall,
//! checkpoints and the evictor seam.

use std::sync::Arc;

use crate::common::{Script, bulk, counter, has_output, recount, texts, validate};
use cwl::{
    Checkpoint, Config, Context, DelimiterError, EpisodeKind, Message, OldestFirst, PaperOrder,
    RecallError, Share, delimiter_spec, recall_spec,
};
use serde_json::json;

fn push_all(context: &mut Context, messages: &[Message]) {
    for message in messages {
        context.push(message.clone()).expect("valid transcript");
    }
}

fn with(config: Config, messages: &[Message]) -> Context {
    let mut context = Context::new(config, counter(), Vec::new());
    push_all(&mut context, messages);
    context
}

fn view(context: &Context) -> Vec<Message> {
    context.view().cloned().collect()
}

fn names(report: &cwl::Report) -> Vec<&str> {
    report.episodes.iter().map(|e| e.name.as_str()).collect()
}

#[test]
fn a_trailing_unannotated_stretch_is_evictable_once_no_longer_in_flight() {
    let mut script = Script::new();
    script
        .user("task")
        .start_expl("e")
        .end_expl("learned")
        .tool("read", &bulk(300))
        .tool("bash", &bulk(300));
    let messages = script.build();
    let mut context = with(Config::paper(200), &messages);
    let report = context.enforce();
    assert_eq!(
        names(&report),
        ["e", "(unannotated #1)"],
        "the first loose response is its own closed stretch; the second is in flight"
    );
    assert!(report.deferred, "{report:?}");
    assert!(has_output(&view(&context), &bulk(300)));
    context.push(Message::assistant_text("done")).unwrap();
    let report = context.enforce();
    assert_eq!(names(&report), ["(unannotated #2)"]);
    assert!(report.budget_met);
    assert!(!has_output(&view(&context), &bulk(300)));
}

#[test]
fn a_model_that_stops_annotating_never_pins_the_session() {
    let mut script = Script::new();
    script.user("task").start_expl("e").end_expl("learned");
    for _ in 0..20 {
        script.tool("read", &bulk(200));
    }
    script.say("done");
    let mut context = with(Config::paper(1_000), &script.build());
    let report = context.enforce();
    assert!(report.budget_met, "{report:?}");
    assert!(context.tokens() <= 1_000);
    validate(&view(&context)).unwrap();
}

#[test]
fn names_are_unique_only_among_episodes_still_in_the_view() {
    let mut script = Script::new();
    script
        .user("task")
        .start_expl("find")
        .tool("grep", &bulk(300))
        .end_expl("first finding")
        .say("ok");
    let mut context = with(Config::paper(100_000), &script.build());

    // While `find` is in the view its name is taken, and the error offers a free one.
    let mut again = Script::new();
    again.start_expl("find");
    let outcomes = context.push(again.messages[0].clone()).unwrap();
    assert_eq!(
        outcomes[0].result,
        Err(DelimiterError::DuplicateName {
            name: "find".into(),
            suggestion: "find-2".into()
        })
    );
    assert!(outcomes[0].text().contains("e.g. `find-2`"));
    context.push(again.messages[1].clone()).unwrap();

    // Once it is removed, the name is free again.
    context.set_budget(40);
    context.enforce();
    assert!(context.graph().episode(0).is_removed());
    let mut reuse = Script::new();
    reuse
        .start_expl("find")
        .tool("read", &bulk(10))
        .end_expl("second finding")
        .start_act("fix", &["find"])
        .end_act();
    context.set_budget(100_000);
    for message in reuse.build() {
        let outcomes = context.push(message).unwrap();
        assert!(outcomes.iter().all(|o| !o.is_error()), "{outcomes:?}");
    }
    let graph = context.graph();
    let fix = graph.by_name("fix").unwrap();
    let dependency = graph.episode(fix).dependencies()[0];
    assert_eq!(
        graph.episode(dependency).description(),
        Some("second finding"),
        "a dependency names the most recent expl of that name"
    );
}

#[test]
fn a_pass_evicts_down_to_the_low_water_mark_then_leaves_the_view_alone() {
    let mut script = Script::new();
    script.system("sys").user("task");
    for index in 0..10 {
        script
            .start_expl(&format!("e{index}"))
            .tool("read", &bulk(100))
            .end_expl(&format!("learned {index}"));
    }
    script.say("done");
    let messages = script.build();
    let total = with(Config::paper(1_000_000), &messages).tokens();
    let budget = total - 50;
    let config = Config::paper(budget).low_water(Share::new(0.6).unwrap());
    let mut context = with(config, &messages);
    let before = view(&context);
    let report = context.enforce();
    assert!(report.budget_met);
    assert_eq!(report.floor, (budget as f64 * 0.6) as usize);
    assert!(context.tokens() <= report.floor, "{report:?}");
    assert!(report.episodes.len() > 1, "one batch, several episodes");

    let after = view(&context);
    let first = report.first_changed.expect("changed");
    assert_eq!(
        before[..first],
        after[..first],
        "the prefix before it is intact"
    );
    assert_ne!(before[first], after[first]);

    // Growth under τ changes nothing: the cached prefix holds.
    context.push(Message::user("more")).unwrap();
    context.push(Message::assistant_text("fine")).unwrap();
    let quiet = context.enforce();
    assert_eq!(quiet.first_changed, None);
    assert!(quiet.episodes.is_empty());
    assert_eq!(recount(&context), context.tokens());
}

/// A session of `tasks` finished tasks, each a user turn, one expl and one act.
fn long_session(tasks: usize) -> Vec<Message> {
    let mut script = Script::new();
    script.system("sys").user("first task");
    for task in 0..tasks {
        if task > 0 {
            script.user(&format!("task {task}: {}", "please ".repeat(20)));
        }
        script
            .start_expl(&format!("look-{task}"))
            .tool("grep", &bulk(200))
            .end_expl(&format!("task {task} lives in src/module_{task}.rs"))
            .start_act(&format!("fix-{task}"), &[&format!("look-{task}")])
            .tool("edit", &bulk(100))
            .end_act()
            .say("done");
    }
    script.build()
}

#[test]
fn residues_and_finished_user_turns_fold_past_their_share() {
    let messages = long_session(200);
    let config = Config::with_budget(3_000);
    let mut context = Context::new(config.clone(), counter(), Vec::new());
    let mut folded = 0;
    for message in &messages {
        context.push(message.clone()).unwrap();
        if matches!(message, Message::Assistant { .. }) {
            continue;
        }
        let report = context.enforce();
        folded += report.folded;
        assert!(
            report.budget_met || report.deferred,
            "τ holds at any length: {report:?}"
        );
    }
    assert!(folded > 100, "{folded}");
    let view = view(&context);
    validate(&view).unwrap();
    let all = texts(&view).join("\n");
    assert!(all.contains("[folded to save context"), "{all}");
    assert!(all.contains("older items"), "the index line is bounded too");
    // The prologue and the current task's user turn stay.
    assert_eq!(view[0], Message::system("sys"));
    assert_eq!(view[1], Message::user("first task"));
    let last_user = messages
        .iter()
        .rev()
        .find(|m| matches!(m, Message::User { .. }))
        .unwrap();
    assert!(view.contains(last_user));
    assert_eq!(recount(&context), context.tokens());
}

#[test]
fn without_the_residue_cap_user_turns_are_never_evicted_and_the_budget_is_reported_unmet() {
    let messages = long_session(200);
    let mut context = with(Config::paper(3_000), &messages);
    let report = context.enforce();
    assert!(!report.budget_met);
    assert!(!report.deferred);
    assert!(report.warnings[0].contains("budget cannot be met"));
    let users = |messages: &[Message]| {
        messages
            .iter()
            .filter(|m| matches!(m, Message::User { .. }))
            .count()
    };
    assert_eq!(users(&view(&context)), users(&messages));
}

fn recall_call(
    context: &mut Context,
    store: &mut Vec<Message>,
    id: &str,
    reference: &str,
) -> String {
    let call = Message::Assistant {
        content: vec![cwl::Block::ToolCall(cwl::ToolCall::new(
            id,
            "recall",
            json!({ "episode": reference }).to_string(),
        ))],
    };
    store.push(call.clone());
    context.push(call).unwrap();
    let (text, error) = match context.recall(&json!({ "episode": reference }).to_string(), store) {
        Ok(text) => (text, false),
        Err(error) => (error.to_string(), true),
    };
    let result = Message::tool_result(id, "recall", text.clone(), error);
    store.push(result.clone());
    context.push(result).unwrap();
    text
}

#[test]
fn recall_brings_evicted_content_back_as_a_new_expl() {
    let mut script = Script::new();
    script
        .system("sys")
        .user("task")
        .start_expl("find-auth")
        .tool("grep", "src/auth.rs:12: fn login(user: &str)")
        .end_expl("login is in src/auth.rs")
        .say("ok");
    let messages = script.build();
    let mut store = messages.clone();
    let mut context = Context::new(
        Config::paper(100_000),
        counter(),
        vec![delimiter_spec(), recall_spec()],
    );
    push_all(&mut context, &messages);

    let refused = recall_call(&mut context, &mut store, "r0", "find-auth");
    assert!(refused.contains("still in the context"), "{refused}");

    context.set_budget(context.tokens() - 20);
    context.push(Message::user("next")).unwrap();
    store.push(Message::user("next"));
    let report = context.enforce();
    assert_eq!(names(&report)[0], "find-auth");
    assert!(texts(&view(&context)).iter().any(|t| t.contains("(#0)")));
    assert!(!has_output(
        &view(&context),
        "src/auth.rs:12: fn login(user: &str)"
    ));

    context.set_budget(100_000);
    for reference in ["find-auth", "#0"] {
        let text = recall_call(
            &mut context,
            &mut store,
            &format!("r-{reference}"),
            reference,
        );
        assert!(
            text.contains("src/auth.rs:12: fn login(user: &str)"),
            "{text}"
        );
        assert!(text.contains("login is in src/auth.rs"), "{text}");
        assert!(
            !text.contains("delimiter"),
            "protocol calls stay out: {text}"
        );
    }
    let graph = context.graph();
    let recalled = graph
        .by_name("recall-find-auth-2")
        .expect("second recall named apart");
    assert_eq!(graph.episode(recalled).origin(), cwl::Origin::Recalled);

    let unknown = context.recall(r#"{"episode":"nope"}"#, &store);
    assert!(matches!(unknown, Err(RecallError::Unknown(_))));
    let bad = context.recall(r#"{"name":"x"}"#, &store);
    assert_eq!(bad, Err(RecallError::BadArguments));

    // Recalled content is an ordinary expl: it can be evicted again.
    context.push(Message::assistant_text("thanks")).unwrap();
    context.set_budget(100);
    let report = context.enforce();
    assert!(
        names(&report)
            .iter()
            .any(|n| n.starts_with("recall-find-auth")),
        "{report:?}"
    );
}

#[test]
fn a_folded_user_turn_can_be_recalled() {
    let messages = long_session(60);
    let mut store = messages.clone();
    let mut context = Context::new(Config::with_budget(2_000), counter(), vec![recall_spec()]);
    for message in &messages {
        context.push(message.clone()).unwrap();
        context.enforce();
    }
    let index = texts(&view(&context))
        .into_iter()
        .find(|t| t.starts_with("[folded"))
        .expect("index line");
    let user = index
        .split(", ")
        .find_map(|item| item.strip_prefix("user turn "))
        .expect("a folded user turn is listed")
        .trim_end_matches(']')
        .to_string();
    let text = recall_call(&mut context, &mut store, "ru", &user);
    assert!(
        text.starts_with(&format!("Recalled user turn {user}")),
        "{text}"
    );
    assert!(text.contains("please"), "{text}");
}

#[test]
fn a_checkpoint_restores_the_same_engine() {
    let messages = long_session(30);
    let (head, tail) = messages.split_at(messages.len() / 2);
    let config = Config::with_budget(2_000);
    let mut whole = Context::new(config.clone(), counter(), vec![delimiter_spec()]);
    for message in head {
        whole.push(message.clone()).unwrap();
        whole.enforce();
    }
    let saved = serde_json::to_string(&whole.checkpoint()).unwrap();
    let checkpoint: Checkpoint = serde_json::from_str(&saved).unwrap();
    assert_eq!(checkpoint.pushes(), head.len() as u64);
    let mut resumed = Context::restore(checkpoint, counter(), Arc::new(PaperOrder)).unwrap();
    assert_eq!(view(&resumed), view(&whole));
    for message in tail {
        whole.push(message.clone()).unwrap();
        resumed.push(message.clone()).unwrap();
        assert_eq!(whole.enforce(), resumed.enforce());
    }
    assert_eq!(view(&resumed), view(&whole));
    assert_eq!(resumed.tokens(), whole.tokens());

    let mut future: serde_json::Value = serde_json::from_str(&saved).unwrap();
    future["version"] = json!(99);
    let future: Checkpoint = serde_json::from_value(future).unwrap();
    let error = Context::restore(future, counter(), Arc::new(PaperOrder)).unwrap_err();
    assert!(error.to_string().contains("format 99"), "{error}");
}

/// One eviction pass over a session, and the episodes it takes first.
struct Pass {
    case: &'static str,
    messages: fn() -> Vec<Message>,
    /// The pass's settings, from the session's tokens.
    config: fn(usize) -> Config,
    /// The episodes it evicts, in order (only its first ones with `prefix`).
    evicted: &'static [&'static str],
    prefix: bool,
    why: &'static str,
    budget_met: bool,
    /// An episode, and whether it holds at most [`cwl::SMALL_TOKENS`].
    small: Option<(&'static str, bool)>,
    validate: bool,
    recount: bool,
    /// What else the pass must do, given the session's tokens.
    check: fn(&Context, &cwl::Report, usize),
}

/// A pass that checks the evicted episodes alone.
fn pass(
    case: &'static str,
    messages: fn() -> Vec<Message>,
    config: fn(usize) -> Config,
    evicted: &'static [&'static str],
    why: &'static str,
) -> Pass {
    Pass {
        case,
        messages,
        config,
        evicted,
        prefix: false,
        why,
        budget_met: false,
        small: None,
        validate: false,
        recount: false,
        check: |_, _, _| {},
    }
}

impl Pass {
    /// Runs the pass; a failure names the case.
    fn run(&self) {
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.checked()));
        if let Err(panic) = outcome {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            panic!("case `{}`: {message}", self.case);
        }
    }

    fn checked(&self) {
        let messages = (self.messages)();
        let total = with(Config::paper(1_000_000), &messages).tokens();
        let mut context = with((self.config)(total), &messages);
        if let Some((name, small)) = self.small {
            let tokens = tokens_of(&context, name);
            assert_eq!(
                tokens <= cwl::SMALL_TOKENS,
                small,
                "{name} holds {tokens} tokens"
            );
        }
        let report = context.enforce();
        let evicted = names(&report);
        let evicted = if self.prefix {
            &evicted[..self.evicted.len()]
        } else {
            &evicted[..]
        };
        assert_eq!(evicted, self.evicted, "{}", self.why);
        if self.budget_met {
            assert!(report.budget_met, "{report:?}");
        }
        if self.validate {
            validate(&view(&context)).unwrap();
        }
        if self.recount {
            assert_eq!(context.tokens(), recount(&context));
        }
        (self.check)(&context, &report, total);
    }
}

#[test]
fn each_rule_puts_its_episodes_first() {
    fn half(config: Config) -> Config {
        config.superseded(Some(Share::new(0.5).unwrap()))
    }
    fn recent(config: Config) -> Config {
        config.keep_recent(Some(Share::new(0.3).unwrap()))
    }
    fn stubbing(budget: usize) -> Config {
        Config::paper(budget).stub_act_outputs(true)
    }
    let passes = [
        pass(
            "the evictor seam, the paper's order",
            seam_session,
            |total| Config::paper(total - 10),
            &["a"],
            "",
        ),
        pass(
            "the working set, the paper's order",
            working_set_session,
            |total| Config::paper(total - 50),
            &["fresh-edit"],
            "by age alone the act goes first",
        ),
        Pass {
            budget_met: true,
            ..pass(
                "the working set kept",
                working_set_session,
                |total| recent(Config::paper(total - 50)),
                &["old"],
                "the old expl goes before the fresh act",
            )
        },
        Pass {
            prefix: true,
            ..pass(
                "the working set under a tight budget",
                working_set_session,
                |_| recent(Config::paper(100)),
                &["old", "fresh-edit"],
                "the working set goes too when nothing older is left, acts first",
            )
        },
        pass(
            "a repeated read, the paper's order",
            repeated_read_session,
            |total| Config::paper(total - 20),
            &["unrelated-edit"],
            "acts first",
        ),
        Pass {
            budget_met: true,
            validate: true,
            recount: true,
            check: |context, _, _| {
                let view = view(context);
                assert!(has_output(&view, &repeated_file()), "the newer copy stays");
                assert!(has_output(&view, &bulk(60)));
            },
            ..pass(
                "a repeated read superseded",
                repeated_read_session,
                |total| half(Config::paper(total - 20)),
                &["first-read"],
                "the repeated copy first",
            )
        },
        Pass {
            budget_met: true,
            small: Some(("peek", true)),
            validate: true,
            recount: true,
            ..pass(
                "past the floor, a superseded remnant",
                || reads_read_again(40, 6),
                |total| half(Config::paper(total - 20)),
                &["first-read", "peek"],
                "removing the first read met the budget; the peek after it is sent anew anyway",
            )
        },
        Pass {
            budget_met: true,
            small: Some(("peek", false)),
            recount: true,
            ..pass(
                "past the floor, a larger superseded episode",
                || reads_read_again(40, 80),
                |total| half(Config::paper(total - 20)),
                &["first-read"],
                "only remnants go past the floor",
            )
        },
        Pass {
            prefix: true,
            validate: true,
            recount: true,
            ..pass(
                "a copy that is gone",
                copy_gone_session,
                |total| half(Config::paper(total - 300)),
                &["rewrite", "look"],
                "the read is pinned by the act that repeats it; once the act is gone \
                 the read is the only copy and waits its turn",
            )
        },
        pass(
            "two fixes, the paper's order",
            two_fixes,
            |total| Config::paper(total - 250),
            &["first-fix"],
            "the paper removes the act",
        ),
        Pass {
            prefix: true,
            ..pass(
                "two fixes under a tight budget, the paper's order",
                two_fixes,
                |total| Config::paper(total - 900),
                &["first-fix", "second-fix"],
                "the paper removes both acts before the read they depend on",
            )
        },
        Pass {
            budget_met: true,
            validate: true,
            recount: true,
            check: |context, report, total| {
                assert!(
                    context.tokens() < total - 400,
                    "stubbing one output met the budget; the second went as well"
                );
                assert_outputs_stubbed(report);
            },
            ..pass(
                "past the floor, an old act",
                two_fixes,
                |total| stubbing(total - 100),
                &["first-fix", "second-fix"],
                "",
            )
        },
        Pass {
            budget_met: true,
            recount: true,
            check: two_fixes_stubbed,
            ..pass(
                "two fixes stubbed",
                two_fixes,
                |total| stubbing(total - 450),
                &["first-fix", "second-fix"],
                "both acts' outputs go before either act",
            )
        },
        Pass {
            budget_met: true,
            check: two_fixes_reduced,
            ..pass(
                "two fixes reduced under a tight budget",
                two_fixes,
                |total| stubbing(total - 900),
                &["first-fix", "second-fix", "look"],
                "reduced acts no longer pin the read, which goes before them",
            )
        },
        Pass {
            budget_met: true,
            recount: true,
            check: reduced_act_checks,
            ..pass(
                "a reduced act",
                reduced_act_session,
                |total| stubbing(total - 500),
                &["fix"],
                "",
            )
        },
        Pass {
            prefix: true,
            validate: true,
            check: |_, report, _| {
                let levels: Vec<cwl::Level> =
                    report.episodes[0].levels.iter().map(|l| l.level).collect();
                assert!(
                    !levels.contains(&cwl::Level::Output),
                    "more than a whole budget over: no stub pass first ({levels:?})"
                );
            },
            ..pass(
                "a catch-up pass",
                catch_up_session,
                |total| stubbing(total / 3),
                &["fix"],
                "",
            )
        },
    ];
    for pass in &passes {
        pass.run();
    }
}

/// An old expl, then an expl and the act that depends on it.
fn seam_session() -> Vec<Message> {
    let mut script = Script::new();
    script
        .user("task")
        .start_expl("old")
        .tool("read", &bulk(100))
        .end_expl("old learned")
        .start_expl("e")
        .end_expl("learned")
        .start_act("a", &["e"])
        .tool("edit", &bulk(100))
        .end_act()
        .say("done");
    script.build()
}

#[test]
fn the_evictor_seam_changes_the_order_and_nothing_else() {
    let messages = seam_session();
    let budget = with(Config::paper(1_000_000), &messages).tokens() - 10;
    let mut oldest = Context::new(Config::paper(budget), counter(), Vec::new())
        .with_evictor(Arc::new(OldestFirst));
    push_all(&mut oldest, &messages);
    assert_eq!(oldest.evictor().name(), "oldest-first");
    assert_eq!(names(&oldest.enforce()), ["old"]);
    validate(&view(&oldest)).unwrap();
}

/// A large old expl, then a small expl and a fresh act on it.
fn working_set_session() -> Vec<Message> {
    let mut script = Script::new();
    script
        .user("task")
        .start_expl("old")
        .tool("read", &bulk(400))
        .end_expl("old learned")
        .start_expl("e")
        .tool("read", &bulk(50))
        .end_expl("learned")
        .start_act("fresh-edit", &["e"])
        .tool("edit", &bulk(100))
        .end_act()
        .say("done");
    script.build()
}

/// The file [`repeated_read_session`] reads twice.
fn repeated_file() -> String {
    (0..20)
        .map(|line| format!("{line:>4}\tlet value_{line} = compute({line});\n"))
        .collect()
}

/// A listing, then a read of `file`.
fn listed_then_read<'a>(script: &'a mut Script, file: &str) -> &'a mut Script {
    script
        .user("task")
        .start_expl("look")
        .tool("ls", "src/")
        .end_expl("listed")
        .start_expl("first-read")
        .tool("read", file)
        .end_expl("read the file")
}

/// A file read, an unrelated act, then the same file read again.
fn repeated_read_session() -> Vec<Message> {
    let file = repeated_file();
    let mut script = Script::new();
    listed_then_read(&mut script, &file)
        .start_act("unrelated-edit", &["look"])
        .tool("edit", &bulk(60))
        .end_act()
        .start_expl("second-read")
        .tool("read", &file)
        .end_expl("read it again")
        .say("done");
    script.build()
}

/// Two reads and, later, one expl that reads both files again: `first`
/// lines of one file, then `second` lines of another; both older reads are
/// superseded.
fn reads_read_again(first: usize, second: usize) -> Vec<Message> {
    let first: String = (0..first)
        .map(|line| format!("{line:>4}\tlet first_{line} = compute({line});\n"))
        .collect();
    let second: String = (0..second)
        .map(|line| format!("{line:>4}\tsecond_{line}()\n"))
        .collect();
    let mut script = Script::new();
    script
        .user("task")
        .start_expl("first-read")
        .tool("read", &first)
        .end_expl("read it")
        .start_expl("peek")
        .tool("read", &second)
        .end_expl("peeked")
        .start_expl("both-again")
        .tool("read", &first)
        .tool("read", &second)
        .end_expl("read both again")
        .say("done");
    script.build()
}

/// Tokens the named episode holds.
fn tokens_of(context: &Context, name: &str) -> usize {
    let episodes = context.graph().episodes();
    episodes.iter().find(|e| e.name() == name).unwrap().tokens()
}

/// A listing, a file read, then an act that writes the same file whole.
fn copy_gone_session() -> Vec<Message> {
    let file: String = (0..20)
        .map(|line| format!("fn handler_{line}() -> Result<(), Error> {{}}\n"))
        .collect();
    let mut script = Script::new();
    listed_then_read(&mut script, &file)
        .start_act("rewrite", &["first-read"])
        .tool("write", &file)
        .end_act()
        .say("done");
    script.build()
}

/// A read of `read` tokens, then an act per fix that depends on it, each
/// an edit of its file and a test run of `run` tokens.
fn read_then_fixes(read: usize, fixes: &[(&str, &str)], run: usize) -> Vec<Message> {
    let mut script = Script::new();
    script
        .user("task")
        .start_expl("look")
        .tool("read", &bulk(read))
        .end_expl("read it");
    for (name, file) in fixes {
        script
            .start_act(name, &["look"])
            .tool("edit", &format!("edited {file}"))
            .tool("bash", &bulk(run))
            .end_act();
    }
    script.say("done");
    script.build()
}

/// A large read, then two acts that depend on it, each an edit and a
/// 300-token test run.
fn two_fixes() -> Vec<Message> {
    read_then_fixes(
        2000,
        &[("first-fix", "src/a.rs"), ("second-fix", "src/b.rs")],
        300,
    )
}

/// Asserts that every episode of the pass lost its outputs and nothing else.
fn assert_outputs_stubbed(report: &cwl::Report) {
    assert!(
        report
            .episodes
            .iter()
            .all(|e| e.levels.iter().map(|l| l.level).eq([cwl::Level::Output])),
        "{report:?}"
    );
}

/// Assistant messages of `shown` that call `tool`.
fn messages_calling(shown: &[Message], tool: &str) -> usize {
    shown
        .iter()
        .filter(|m| {
            matches!(m, Message::Assistant { content }
            if content.iter().any(|b| matches!(b, cwl::Block::ToolCall(c) if c.name == tool)))
        })
        .count()
}

/// Both acts of [`two_fixes`] stubbed: their calls stay, a stub answers each.
fn two_fixes_stubbed(context: &Context, report: &cwl::Report, _: usize) {
    assert_outputs_stubbed(report);
    let shown = view(context);
    validate(&shown).unwrap();
    assert!(!has_output(&shown, &bulk(300)), "the test runs are stubbed");
    assert!(has_output(&shown, &bulk(2000)), "the read stays");
    assert!(
        shown.iter().any(|m| matches!(m, Message::ToolResult(r)
            if r.content.contains("output evicted"))),
        "a stub answers each call"
    );
    assert_eq!(
        messages_calling(&shown, "edit"),
        2,
        "the acts' own calls stay"
    );
}

/// Both acts of [`two_fixes`] reduced and their read gone; their edits stay.
fn two_fixes_reduced(context: &Context, report: &cwl::Report, _: usize) {
    let levels: Vec<Vec<cwl::Level>> = report
        .episodes
        .iter()
        .map(|e| e.levels.iter().map(|l| l.level).collect())
        .collect();
    assert_eq!(levels[0], [cwl::Level::Output], "one entry per episode");
    assert!(levels[2].contains(&cwl::Level::Intermediate), "{levels:?}");
    let shown = view(context);
    validate(&shown).unwrap();
    assert!(!has_output(&shown, &bulk(2000)), "the read is gone");
    assert_eq!(
        messages_calling(&shown, "edit"),
        2,
        "the edits it was read for stay"
    );
    assert_eq!(context.tokens(), recount(context));
}

/// A read, then an act whose edit comes with reasoning, a progress note
/// and a test run.
fn reduced_act_session() -> Vec<Message> {
    let mut script = Script::new();
    let thinking = format!("why: {}", bulk(400));
    script
        .user("task")
        .start_expl("look")
        .tool("read", &bulk(200))
        .end_expl("read it")
        .start_act("fix", &["look"])
        .tool_with_reasoning(&thinking, "edit", "edited src/a.rs")
        .say("progress: the edit is in")
        .tool("bash", &bulk(300))
        .end_act()
        .say("done");
    script.build()
}

/// A reduced act keeps its calls and loses the words around them.
fn reduced_act_checks(context: &Context, _: &cwl::Report, _: usize) {
    let shown = view(context);
    validate(&shown).unwrap();
    let reasoning = shown.iter().any(|m| {
        matches!(m, Message::Assistant { content }
            if content.iter().any(|b| matches!(b, cwl::Block::Reasoning { .. })))
    });
    assert!(!reasoning, "the reasoning beside the edit is gone");
    assert!(!has_output(&shown, &bulk(300)), "the test run is stubbed");
    assert!(has_output(&shown, &bulk(200)), "the read stays");
    assert!(
        texts(&shown)
            .iter()
            .any(|t| t == "progress: the edit is in"),
        "a message of text alone stays whole"
    );
    assert!(messages_calling(&shown, "edit") > 0);
}

/// A small read, then an act whose test run is far over any budget.
fn catch_up_session() -> Vec<Message> {
    read_then_fixes(100, &[("fix", "src/a.rs")], 1500)
}

/// A file of `lines` numbered lines, as a reader prints it; `changed`
/// rewrites one of them.
fn numbered(lines: usize, changed: Option<usize>) -> String {
    (0..lines)
        .map(|line| match changed {
            Some(at) if at == line => format!("{line:>4}\tlet value_{line} = rewritten({line});\n"),
            _ => format!("{line:>4}\tlet value_{line} = compute_the_value({line}, &context);\n"),
        })
        .collect()
}

/// A read, an act, and a second read that repeats all of the first read
/// (`changed`: all but one line) as part of a larger episode.
fn read_twice(changed: Option<usize>) -> Vec<Message> {
    let mut script = Script::new();
    script
        .user("task")
        .start_expl("first-read")
        .tool("read", &numbered(80, None))
        .tool("grep", &bulk(400))
        .end_expl("read the file")
        .start_act("unrelated-edit", &[])
        .tool("edit", &bulk(300))
        .end_act()
        .start_expl("second-read")
        .tool("read", &numbered(120, changed))
        .end_expl("read it again")
        .say("done");
    script.build()
}

#[test]
fn an_output_a_later_one_repeats_is_stubbed_first_and_its_lines_stay() {
    let messages = read_twice(None);
    let all = with(Config::paper(1_000_000), &messages).tokens();
    let restated = Config::paper(all - 100).restated(Some(Share::new(1.0).unwrap()));
    let mut context = with(restated.clone(), &messages);
    let report = context.enforce();
    assert_eq!(names(&report), ["first-read"], "{report:?}");
    assert_eq!(report.episodes[0].levels[0].level, cwl::Level::Restated);
    assert!(report.budget_met);
    let view = view(&context);
    validate(&view).unwrap();
    assert!(
        !has_output(&view, &numbered(80, None)),
        "the older copy went"
    );
    assert!(
        has_output(&view, &numbered(120, None)),
        "the newer copy stays"
    );
    assert!(
        has_output(&view, &bulk(400)),
        "the rest of its episode stays"
    );
    assert!(has_output(&view, &bulk(300)));
    assert_eq!(context.tokens(), recount(&context));

    let mut saved = with(restated, &messages);
    let checkpoint: Checkpoint =
        serde_json::from_str(&serde_json::to_string(&saved.checkpoint()).unwrap()).unwrap();
    let mut resumed = Context::restore(checkpoint, counter(), Arc::new(PaperOrder)).unwrap();
    assert_eq!(
        resumed.enforce(),
        saved.enforce(),
        "the restored line index"
    );
}

#[test]
fn the_latest_responses_results_are_never_restated() {
    let mut script = Script::new();
    script
        .user("task")
        .start_expl("look")
        .tool("read", &bulk(900))
        .end_expl("read it");
    let mut messages = script.build();
    let call =
        |id: &str| cwl::Block::ToolCall(cwl::ToolCall::new(id, "read", r#"{"path":"src/a.rs"}"#));
    messages.push(Message::Assistant {
        content: vec![call("twice-1"), call("twice-2")],
    });
    for id in ["twice-1", "twice-2"] {
        messages.push(Message::tool_result(id, "read", numbered(80, None), false));
    }
    let all = with(Config::paper(1_000_000), &messages).tokens();
    let restated = Config::paper(all - 100).restated(Some(Share::new(1.0).unwrap()));
    let mut context = with(restated, &messages);
    let report = context.enforce();
    assert!(
        report
            .episodes
            .iter()
            .flat_map(|episode| &episode.levels)
            .all(|level| level.level != cwl::Level::Restated),
        "{report:?}"
    );
    let view = view(&context);
    assert_eq!(
        view[view.len() - 3..],
        messages[messages.len() - 3..],
        "the latest response and its results as they came"
    );
}

#[test]
fn an_output_with_one_line_not_repeated_waits_its_turn() {
    let messages = read_twice(Some(40));
    let all = with(Config::paper(1_000_000), &messages).tokens();
    let restated = |report: &cwl::Report| {
        report
            .episodes
            .iter()
            .flat_map(|episode| &episode.levels)
            .any(|level| level.level == cwl::Level::Restated)
    };
    // (the share of lines repeated that restates an output, whether it is restated)
    for (share, restates) in [(1.0, false), (0.9, true)] {
        let config = Config::paper(all - 100).restated(Some(Share::new(share).unwrap()));
        let mut context = with(config, &messages);
        let report = context.enforce();
        assert_eq!(
            restated(&report),
            restates,
            "share {share}, 79 of 80 lines repeated: {report:?}"
        );
        assert_eq!(
            has_output(&view(&context), &numbered(80, None)),
            !restates,
            "share {share}"
        );
    }
}

#[test]
fn old_episodes_go_least_recently_used_first() {
    let listing = format!("orders.py stock.py reports.py\n{}", bulk(1000));
    let notes = bulk(1100);
    let mut script = Script::new();
    script
        .user("task")
        .start_expl("listing")
        .tool("bash", &listing)
        .end_expl("the files")
        .start_expl("notes")
        .tool("read", &notes)
        .end_expl("the notes")
        .start_act("fix", &[])
        .say("Only `stock.py` needs the change.")
        .tool("edit", "edited")
        .end_act()
        .say("done");
    let messages = script.build();
    let total = with(Config::paper(1_000_000), &messages).tokens();

    let mut context = with(Config::paper(total - 600).stub_act_outputs(true), &messages);
    let report = context.enforce();
    assert!(report.budget_met, "{report:?}");
    let gone = names(&report);
    assert!(gone.contains(&"notes"), "{gone:?}");
    assert!(!gone.contains(&"listing"), "{gone:?}");
    let shown = view(&context);
    validate(&shown).unwrap();
    assert!(
        has_output(&shown, &listing),
        "the older listing the model named stays"
    );
    assert!(
        !has_output(&shown, &notes),
        "the newer notes it never named go"
    );

    let mut paper = with(Config::paper(total - 600), &messages);
    let report = paper.enforce();
    let gone = names(&report);
    assert!(
        gone.contains(&"listing"),
        "the paper's order takes the oldest: {gone:?}"
    );
}

#[test]
fn a_small_output_outlives_the_larger_episodes_around_it() {
    let listing = "orders.py stock.py reports.py audit.py events.log\n".repeat(12);
    let read = bulk(2000);
    let mut script = Script::new();
    script
        .user("task")
        .start_expl("listing")
        .tool("bash", &listing)
        .end_expl("the files")
        .start_expl("read")
        .tool("read", &read)
        .end_expl("the code")
        .start_act("fix", &[])
        .tool("edit", "edited")
        .end_act()
        .say("done");
    let messages = script.build();
    let total = with(Config::paper(1_000_000), &messages).tokens();
    let listing_tokens = counter().count(&listing);
    assert!(
        (40..cwl::SMALL_TOKENS).contains(&listing_tokens),
        "a small listing that a stub would replace: {listing_tokens}"
    );

    let mut context = with(
        Config::paper(total - 1000).stub_act_outputs(true),
        &messages,
    );
    let report = context.enforce();
    assert!(report.budget_met, "{report:?}");
    let shown = view(&context);
    validate(&shown).unwrap();
    assert!(
        has_output(&shown, &listing),
        "the older, small listing stays"
    );
    assert!(!has_output(&shown, &read), "the larger read goes first");

    let mut context = with(
        Config::paper(total - 2200).stub_act_outputs(true),
        &messages,
    );
    let report = context.enforce();
    assert!(report.budget_met, "{report:?}");
    assert!(names(&report).contains(&"listing"), "{report:?}");
    let shown = view(&context);
    validate(&shown).unwrap();
    assert!(
        shown.iter().all(|message| !matches!(message,
            Message::ToolResult(result) if result.tool_name == "bash" && result.content != listing)),
        "a small output is never stubbed, only removed with its episode"
    );
}

#[test]
fn an_expl_keeps_its_calls_while_its_outputs_are_stubbed_until_removal() {
    let mut script = Script::new();
    script
        .user(&format!("task {}", bulk(3000)))
        .start_expl("look")
        .tool("read", &bulk(2000))
        .end_expl("read it")
        .start_act("fix", &["look"])
        .tool("edit", "edited")
        .end_act()
        .say("done");
    let messages = script.build();
    let total = with(Config::paper(1_000_000), &messages).tokens();
    let reads = |shown: &[Message]| {
        shown
            .iter()
            .filter(|m| {
                matches!(m, Message::Assistant { content }
                if content.iter().any(|b| matches!(b, cwl::Block::ToolCall(c) if c.name == "read")))
            })
            .count()
    };

    let mut context = with(
        Config::paper(total - 1500).stub_act_outputs(true),
        &messages,
    );
    let report = context.enforce();
    assert!(report.budget_met, "{report:?}");
    let shown = view(&context);
    validate(&shown).unwrap();
    assert!(!has_output(&shown, &bulk(2000)), "the read's output went");
    assert_eq!(reads(&shown), 1, "its call stays: {report:?}");
    assert!(
        shown.iter().any(|m| matches!(m, Message::ToolResult(r)
            if r.tool_name == "read" && r.content.contains("output evicted"))),
        "a stub answers it"
    );
    assert_eq!(context.tokens(), recount(&context));

    let mut paper = with(Config::paper(total - 1500), &messages);
    paper.enforce();
    assert_eq!(
        reads(&view(&paper)),
        0,
        "the paper's levels take the call too"
    );
}

/// `messages` with act outputs stubbed (a pass to 1000 tokens under their
/// total), checked by `stubbed`, then squeezed 5 tokens under that: the
/// context, the levels the second pass took and the stubbed view's tokens.
fn stub_then_squeeze(
    messages: &[Message],
    stubbed: impl FnOnce(&Context),
) -> (Context, Vec<cwl::Level>, usize) {
    let total = with(Config::paper(1_000_000), messages).tokens();
    let mut context = with(Config::paper(total - 1000).stub_act_outputs(true), messages);
    assert!(context.enforce().budget_met);
    stubbed(&context);
    let stubbed_tokens = context.tokens();
    context.set_budget(stubbed_tokens - 5);
    let report = context.enforce();
    assert!(report.budget_met, "{report:?}");
    let levels = report
        .episodes
        .iter()
        .flat_map(|e| &e.levels)
        .map(|l| l.level)
        .collect();
    (context, levels, stubbed_tokens)
}

#[test]
fn an_expls_small_output_outlives_its_large_ones() {
    let listing = "orders.py stock.py reports.py audit.py events.log\n".repeat(12);
    let read = bulk(2000);
    let mut script = Script::new();
    script
        .user("task")
        .start_expl("look")
        .say("First the files, then the code.")
        .tool("bash", &listing)
        .tool("read", &read)
        .end_expl("listed and read")
        .start_act("fix", &[])
        .tool("edit", "edited")
        .end_act()
        .say("done");
    let messages = script.build();
    let calls = |shown: &[Message], name: &str| {
        shown
            .iter()
            .filter_map(|m| match m {
                Message::Assistant { content } => Some(content),
                _ => None,
            })
            .flatten()
            .filter(|b| matches!(b, cwl::Block::ToolCall(c) if c.name == name))
            .count()
    };

    let (mut context, levels, stubbed_tokens) = stub_then_squeeze(&messages, |stubbed| {
        let shown = view(stubbed);
        assert_eq!(calls(&shown, "read"), 1, "the read's call stays, stubbed");
        assert!(!has_output(&shown, &read));
    });
    assert!(levels.contains(&cwl::Level::Large), "{levels:?}");
    let shown = view(&context);
    validate(&shown).unwrap();
    assert_eq!(
        calls(&shown, "read"),
        0,
        "the stubbed read goes with its call"
    );
    assert!(
        shown
            .iter()
            .all(|m| !matches!(m, Message::ToolResult(r) if r.content.contains("output evicted"))),
        "and its stub"
    );
    assert_eq!(calls(&shown, "bash"), 1);
    assert!(has_output(&shown, &listing), "the small listing stays");
    assert!(
        texts(&shown).iter().all(|t| !t.contains("First the files")),
        "the episode's words go with its large outputs"
    );
    assert_eq!(context.tokens(), recount(&context));

    let large_tokens = context.tokens();
    context.set_budget(large_tokens - 5);
    assert!(context.enforce().budget_met);
    let shown = view(&context);
    validate(&shown).unwrap();
    assert!(!has_output(&shown, &listing), "removal takes the rest");
    assert!(
        texts(&shown)
            .iter()
            .any(|t| t.contains("[evicted expl episode `look`"))
    );

    let mut paper = with(Config::paper(stubbed_tokens - 5), &messages);
    paper.enforce();
    assert!(
        !has_output(&view(&paper), &listing),
        "the paper's levels have no such step"
    );
}

#[test]
fn an_expl_without_small_outputs_goes_from_stubs_to_removal() {
    let mut script = Script::new();
    script
        .user("task")
        .start_expl("look")
        .tool("read", &bulk(2000))
        .end_expl("read it")
        .start_act("fix", &[])
        .tool("edit", "edited")
        .end_act()
        .say("done");
    let messages = script.build();
    let (context, levels, _) = stub_then_squeeze(&messages, |_| {});
    assert_eq!(
        levels,
        [cwl::Level::Removed],
        "its delimiter answers are no small output to keep"
    );
    let shown = view(&context);
    validate(&shown).unwrap();
    assert!(
        texts(&shown)
            .iter()
            .any(|t| t.contains("[evicted expl episode `look`"))
    );
}

/// Task `task`: its prompt, a search and an edit of `tokens` each, as an
/// expl and an act that depends on it.
fn look_and_edit(script: &mut Script, task: usize, tokens: usize) -> &mut Script {
    let expl = format!("e{task}");
    script
        .user(&format!("task {task}"))
        .start_expl(&expl)
        .tool("grep", &bulk(tokens))
        .end_expl("looked")
        .start_act(&format!("a{task}"), &[&expl])
        .tool("edit", &bulk(tokens))
        .end_act()
}

/// A session of `tasks` tasks, each a look, an edit and then an answer of
/// about 400 tokens outside any episode; the first answer is followed by
/// an unannotated read.
fn answered_tasks(tasks: usize) -> Vec<Message> {
    let mut script = Script::new();
    for task in 0..tasks {
        look_and_edit(&mut script, task, 50).say(&format!("answer {task}: {}", bulk(400)));
        if task == 0 {
            script.tool("read", &format!("unannotated read {}", bulk(300)));
        }
    }
    script.build()
}

#[test]
fn answers_between_episodes_are_capped_like_residues() {
    let messages = answered_tasks(12);
    let answer = |task: usize| format!("answer {task}: {}", bulk(400));
    let held = |context: &Context, task: usize| texts(&view(context)).contains(&answer(task));
    let total = with(Config::default(), &messages).tokens();
    let budget = total * 3 / 4;
    let mut context = with(Config::with_budget(budget), &messages);
    let cap = context.config().residue_cap().expect("a cap by default");
    assert!(cap < 11 * 400, "the answers hold more than the cap");
    let report = context.enforce();
    assert!(report.budget_met, "{report:?}");
    assert!(
        !report.episodes[0].annotated
            && report
                .episodes
                .iter()
                .skip_while(|e| !e.annotated)
                .all(|e| e.annotated),
        "the answers over the cap go first: {report:?}"
    );
    assert!(!held(&context, 0) && held(&context, 11), "oldest first");
    assert!(
        has_output(&view(&context), &format!("unannotated read {}", bulk(300))),
        "an unannotated segment that used a tool still waits for the later acts"
    );
    validate(&view(&context)).expect("valid");
    assert_eq!(context.tokens(), recount(&context));

    // A pass that must go far trims them to half the cap, then goes on.
    let low = Share::new(0.3).expect("a share");
    let mut context = with(Config::with_budget(budget).low_water(low), &messages);
    let report = context.enforce();
    let kept = (0..12).filter(|&task| held(&context, task)).count();
    assert!(
        kept * 400 <= cap / 2 + 400,
        "trimmed to half the cap: {kept} answers kept, cap {cap}"
    );
    assert!(report.episodes.iter().any(|e| e.annotated), "{report:?}");

    // The paper's rule keeps every answer until the acts are gone.
    let mut paper = with(Config::paper(budget), &messages);
    let report = paper.enforce();
    let acts = report
        .episodes
        .iter()
        .take_while(|e| e.kind == EpisodeKind::Act);
    assert_eq!(acts.count(), 12, "{report:?}");
}

#[test]
fn a_recent_long_answer_stays_though_over_the_cap() {
    let mut script = Script::new();
    for task in 0..4 {
        look_and_edit(&mut script, task, 300);
    }
    let report_text = format!("report: {}", bulk(1500));
    script.say(&report_text).user("thanks").say("ok");
    let messages = script.build();
    let budget = with(Config::default(), &messages).tokens() - 300;
    let mut context = with(Config::with_budget(budget), &messages);
    assert!(context.config().answer_cap().is_some_and(|cap| cap < 1500));
    let report = context.enforce();
    assert!(report.budget_met, "{report:?}");
    assert!(
        report.episodes.iter().all(|e| e.annotated),
        "the report is in the recent working set: {report:?}"
    );
    assert!(texts(&view(&context)).contains(&report_text));
}
