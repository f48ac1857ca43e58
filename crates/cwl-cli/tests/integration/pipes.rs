//! Commands piped into `head` end quietly when the reader goes away.

use std::process::{Command, Stdio};

#[test]
fn gen_into_a_closed_pipe_exits_cleanly() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_cwl"))
        .args([
            "gen",
            "--tasks",
            "20",
            "--tokens",
            "20M",
            "--tokenizer",
            "estimate",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn cwl");
    drop(child.stdout.take());
    let output = child.wait_with_output().expect("wait");
    assert!(output.status.success(), "{:?}", output.status);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("error"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}
