//! `write` and `edit` replace files by temp file + rename: hard links that
//! share a file with a path outside the workspace are replaced, never
//! written through, and permissions are kept.

#![cfg(unix)]

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use cwl::ToolCall;
use cwl_agent::tools::{ExecContext, ToolConfig, ToolOutput, Toolbox};
use serde_json::{Value, json};

async fn call(tb: &Toolbox, name: &str, args: Value) -> ToolOutput {
    let call = ToolCall {
        id: "c1".into(),
        name: name.into(),
        arguments: args.to_string(),
    };
    tb.execute(&call, &ExecContext::default()).await
}

fn mode(path: &Path) -> u32 {
    fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

/// Names in `dir`, sorted: no temp file may be left behind.
fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// A workspace with `link.txt` hard-linked to `outside/secret.txt`.
fn linked() -> (tempfile::TempDir, tempfile::TempDir, Toolbox) {
    let work = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("secret.txt");
    fs::write(&secret, "outside line one\noutside line two\n").unwrap();
    fs::hard_link(&secret, work.path().join("link.txt")).unwrap();
    assert_eq!(fs::metadata(&secret).unwrap().nlink(), 2);
    let tb = Toolbox::new(work.path(), ToolConfig::default()).unwrap();
    (work, outside, tb)
}

#[tokio::test]
async fn write_through_a_hard_link_leaves_the_outside_file_unchanged() {
    let (work, outside, tb) = linked();
    let out = call(
        &tb,
        "write",
        json!({"path": "link.txt", "content": "new\n"}),
    )
    .await;
    assert!(!out.is_error, "{}", out.content);
    assert!(
        out.content.contains("overwrote `link.txt`"),
        "{}",
        out.content
    );
    let secret = outside.path().join("secret.txt");
    assert_eq!(
        fs::read_to_string(&secret).unwrap(),
        "outside line one\noutside line two\n"
    );
    assert_eq!(
        fs::metadata(&secret).unwrap().nlink(),
        1,
        "the link was replaced"
    );
    assert_eq!(
        fs::read_to_string(work.path().join("link.txt")).unwrap(),
        "new\n"
    );
    assert_eq!(names(work.path()), ["link.txt"]);
}

#[tokio::test]
async fn edit_through_a_hard_link_leaves_the_outside_file_unchanged() {
    let (work, outside, tb) = linked();
    let out = call(
        &tb,
        "edit",
        json!({"path": "link.txt", "old_text": "line two", "new_text": "line 2"}),
    )
    .await;
    assert!(!out.is_error, "{}", out.content);
    assert_eq!(
        fs::read_to_string(outside.path().join("secret.txt")).unwrap(),
        "outside line one\noutside line two\n"
    );
    assert_eq!(
        fs::read_to_string(work.path().join("link.txt")).unwrap(),
        "outside line one\noutside line 2\n"
    );
    assert_eq!(names(work.path()), ["link.txt"]);
}

#[tokio::test]
async fn write_and_edit_keep_the_permissions_of_the_file_they_replace() {
    let work = tempfile::tempdir().unwrap();
    let tb = Toolbox::new(work.path(), ToolConfig::default()).unwrap();
    let script = work.path().join("run.sh");
    fs::write(&script, "#!/bin/sh\necho hi\n").unwrap();
    fs::set_permissions(&script, fs::Permissions::from_mode(0o751)).unwrap();
    let out = call(
        &tb,
        "write",
        json!({"path": "run.sh", "content": "#!/bin/sh\necho bye\n"}),
    )
    .await;
    assert!(!out.is_error, "{}", out.content);
    assert_eq!(mode(&script), 0o751);

    fs::set_permissions(&script, fs::Permissions::from_mode(0o640)).unwrap();
    let out = call(
        &tb,
        "edit",
        json!({"path": "run.sh", "old_text": "bye", "new_text": "again"}),
    )
    .await;
    assert!(!out.is_error, "{}", out.content);
    assert_eq!(mode(&script), 0o640);
    assert_eq!(
        fs::read_to_string(&script).unwrap(),
        "#!/bin/sh\necho again\n"
    );
}

#[tokio::test]
async fn a_new_file_gets_the_mode_a_plain_create_gives() {
    let work = tempfile::tempdir().unwrap();
    let tb = Toolbox::new(work.path(), ToolConfig::default()).unwrap();
    let plain = work.path().join("plain.txt");
    fs::write(&plain, "x").unwrap();
    let out = call(&tb, "write", json!({"path": "sub/new.txt", "content": "x"})).await;
    assert!(!out.is_error, "{}", out.content);
    assert_eq!(mode(&work.path().join("sub/new.txt")), mode(&plain));
    assert_eq!(names(&work.path().join("sub")), ["new.txt"]);
}

#[tokio::test]
async fn a_read_only_file_is_treated_as_a_direct_write_would_be() {
    let work = tempfile::tempdir().unwrap();
    let tb = Toolbox::new(work.path(), ToolConfig::default()).unwrap();
    let locked = work.path().join("locked.txt");
    fs::write(&locked, "keep\n").unwrap();
    fs::set_permissions(&locked, fs::Permissions::from_mode(0o444)).unwrap();
    // Root may write a read-only file; anyone else may not.
    let writable = fs::OpenOptions::new().write(true).open(&locked).is_ok();
    let out = call(
        &tb,
        "write",
        json!({"path": "locked.txt", "content": "new\n"}),
    )
    .await;
    if writable {
        assert!(!out.is_error, "{}", out.content);
        assert_eq!(fs::read_to_string(&locked).unwrap(), "new\n");
    } else {
        assert!(out.is_error, "{}", out.content);
        assert!(
            out.content.contains("cannot write `locked.txt`"),
            "{}",
            out.content
        );
        assert_eq!(fs::read_to_string(&locked).unwrap(), "keep\n");
    }
    assert_eq!(mode(&locked), 0o444);
    assert_eq!(names(work.path()), ["locked.txt"]);
}

#[tokio::test]
async fn a_symlink_inside_the_workspace_still_writes_its_target() {
    let work = tempfile::tempdir().unwrap();
    let tb = Toolbox::new(work.path(), ToolConfig::default()).unwrap();
    fs::write(work.path().join("real.txt"), "old\n").unwrap();
    std::os::unix::fs::symlink("real.txt", work.path().join("alias.txt")).unwrap();
    let out = call(
        &tb,
        "write",
        json!({"path": "alias.txt", "content": "new\n"}),
    )
    .await;
    assert!(!out.is_error, "{}", out.content);
    assert!(
        fs::symlink_metadata(work.path().join("alias.txt"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(
        fs::read_to_string(work.path().join("real.txt")).unwrap(),
        "new\n"
    );
    assert_eq!(names(work.path()), ["alias.txt", "real.txt"]);
}
