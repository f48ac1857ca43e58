//! `--help` explains the eviction settings of every command that takes them.

use std::process::Command;

fn help(command: &str) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_cwl"))
        .args([command, "--help"])
        .output()
        .expect("run cwl");
    assert!(output.status.success(), "cwl {command} --help failed");
    String::from_utf8(output.stdout).expect("UTF-8 help")
}

#[test]
fn run_chat_and_evict_explain_low_water_and_residue_share() {
    for command in ["run", "chat", "evict"] {
        let text = help(command);
        assert!(
            text.contains("--low-water <SHARE>"),
            "cwl {command}:\n{text}"
        );
        assert!(
            text.contains("evicts down to 80%"),
            "cwl {command}:\n{text}"
        );
        assert!(
            text.contains("--residue-share <SHARE|off>"),
            "cwl {command}:\n{text}"
        );
        assert!(text.contains("index line"), "cwl {command}:\n{text}");
        assert!(
            text.contains("--keep-recent <SHARE|off>") && text.contains("by age alone"),
            "cwl {command}:\n{text}"
        );
    }
}

#[test]
fn the_top_level_help_lists_the_exit_statuses() {
    let output = Command::new(env!("CARGO_BIN_EXE_cwl"))
        .arg("--help")
        .output()
        .expect("run cwl");
    assert!(output.status.success());
    let text = String::from_utf8(output.stdout).expect("UTF-8 help");
    for says in [
        "Exit status: 0 success",
        "1 a runtime failure",
        "2 a usage",
        "130 interrupted",
    ] {
        assert!(text.contains(says), "{says:?} in:\n{text}");
    }
}

#[test]
fn no_command_off_a_terminal_is_a_usage_error_and_chat_has_plain() {
    let output = Command::new(env!("CARGO_BIN_EXE_cwl"))
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run cwl");
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("a command is required (with none, cwl opens `cwl chat` on a terminal)"),
        "{stderr}"
    );
    let text = help("chat");
    assert!(text.contains("--plain"), "{text}");
    assert!(text.contains("full-screen UI"), "{text}");
}
