//! What checkpoints cost and save: drives the engine over the messages of a
//! session file (e.g. one from `cwl gen`) the way the agent does (enforce
//! before each model call, a checkpoint at task ends under the agent's
//! spacing rule), writes the resulting session, then times a resume from
//! its last checkpoint against a full replay and checks both give the same
//! view.
//!
//! `cargo run -p cwl-agent --example resume_cost -- SESSION.jsonl`

use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context as _, bail};
use cwl::{Context, Message, O200k, Record, TokenCounter};
use cwl_session::{SessionInfo, SessionWriter, Settings};

fn main() -> anyhow::Result<()> {
    let Some(input) = std::env::args().nth(1) else {
        bail!("usage: resume_cost SESSION.jsonl");
    };
    let loaded = cwl_session::read(input.as_ref()).with_context(|| input.clone())?;
    let budget = usize::try_from(loaded.info.budget)?;
    let settings = Settings::default();
    let counter: Arc<dyn TokenCounter> = Arc::new(O200k);
    let dir = tempfile::tempdir()?;
    let info = SessionInfo {
        id: "resume-cost".into(),
        ..loaded.info.clone()
    };
    let mut writer = SessionWriter::create(dir.path(), &info)?;
    writer.append(&settings.record())?;
    let mut context = Context::new(
        settings.config(budget),
        Arc::clone(&counter),
        info.tools.clone(),
    );
    let (mut checkpoint_end, mut checkpoint_len) = (0u64, 0u64);
    let (mut checkpoints, mut checkpoint_bytes, mut tasks, mut largest) = (0, 0u64, 0, 0u64);
    let started = Instant::now();
    for (_, record) in &loaded.records {
        let Record::Message { message, .. } = record else {
            continue;
        };
        if matches!(message, Message::User { .. }) {
            tasks += 1;
            let since = writer.written() - checkpoint_end;
            if tasks > 1 && (checkpoint_len == 0 || since >= checkpoint_len) {
                let checkpoint = context.checkpoint();
                let pushes = checkpoint.pushes();
                let before = writer.written();
                writer.append(&Record::Checkpoint {
                    pushes,
                    checkpoint: serde_json::to_value(&checkpoint)?,
                })?;
                checkpoint_end = writer.written();
                checkpoint_len = checkpoint_end - before;
                checkpoints += 1;
                checkpoint_bytes += checkpoint_len;
            }
            largest = largest.max(checkpoint_len);
        }
        if matches!(message, Message::Assistant { .. }) {
            let report = context.enforce();
            if report.evicted() || !report.budget_met {
                writer.append(&Record::Enforce {
                    budget: report.budget as u64,
                    report: serde_json::to_value(&report)?,
                })?;
            }
        }
        context.push(message.clone())?;
        writer.append(record)?;
    }
    let driven = started.elapsed();
    let path = writer.path().to_owned();
    let total = writer.written();
    drop(writer);

    let started = Instant::now();
    let reread = cwl_session::read(&path)?;
    let read = started.elapsed();
    let started = Instant::now();
    let resumed = cwl_session::replay(
        &reread,
        &path,
        Arc::clone(&counter),
        settings.config(budget),
        cwl_session::ReplayOptions::default(),
    )?;
    let from_checkpoint = started.elapsed();
    let started = Instant::now();
    let full = cwl_session::replay(
        &reread,
        &path,
        Arc::clone(&counter),
        settings.config(budget),
        cwl_session::ReplayOptions::from_start(),
    )?;
    let from_start = started.elapsed();
    if !resumed.context.view().eq(full.context.view())
        || resumed.context.tokens() != full.context.tokens()
        || !resumed.context.view().eq(context.view())
    {
        bail!("the checkpoint resume, the full replay and the live engine disagree");
    }
    println!(
        "{tasks} tasks, {} messages, session file {:.1} MB, {checkpoints} checkpoints ({:.1} MB, largest {:.0} kB; one at every task end would take about {:.1} MB)",
        loaded
            .records
            .iter()
            .filter(|(_, r)| matches!(r, Record::Message { .. }))
            .count(),
        total as f64 / 1e6,
        checkpoint_bytes as f64 / 1e6,
        largest as f64 / 1e3,
        checkpoint_bytes as f64 / checkpoints.max(1) as f64 * (tasks - 1) as f64 / 1e6,
    );
    println!(
        "driving the engine: {:.2} s; reading the file: {:.2} s; resume from checkpoint (line {:?}): {:.3} s; full replay: {:.2} s; view {} tokens, identical",
        driven.as_secs_f64(),
        read.as_secs_f64(),
        resumed.checkpoint,
        from_checkpoint.as_secs_f64(),
        from_start.as_secs_f64(),
        full.context.tokens()
    );
    Ok(())
}
