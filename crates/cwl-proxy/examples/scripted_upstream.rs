//! A scripted model server on loopback for checking `cwl proxy` with real
//! clients (Claude Code, Codex CLI): it speaks Anthropic Messages and
//! OpenAI Responses (streaming or not) and drives one long, tool-using
//! session in each client's own tool shapes. Used by
//! `scripts/real-clients/run.sh`.
//!
//! ```sh
//! cargo run --release -p cwl-proxy --example scripted_upstream -- init-repo DIR
//! cargo run --release -p cwl-proxy --example scripted_upstream -- serve \
//!     --listen 127.0.0.1:18731 --repo DIR --log-dir LOG
//! ```
//!
//! `init-repo` writes the project the session works on (eight Python
//! modules of about 3k tokens each, a 600-line log, a test). `serve`
//! answers each request with the next step of the script: the step is read
//! from the request itself (the id of the latest tool result, which the
//! proxy never evicts), so retries and evicted history do not derail it.
//! Requests without the client's tools (titles, summaries) get a short
//! text; `count_tokens` gets the count below; `HEAD /` (Claude Code's
//! connectivity probe) gets 200.
//!
//! Reported usage: each response's input tokens are the o200k count of
//! what the request holds as text — system prompt or instructions, tool
//! definitions as JSON, message texts, tool-call names and arguments, tool
//! outputs, thinking and reasoning-summary text — plus 4 per message and 3
//! per tool call (the engine's overheads). Every turn carries reasoning
//! (Claude: a thinking block with a signature; Codex: a reasoning item with
//! `encrypted_content`); that opaque part is not counted, as providers
//! bill reasoning by its own tokens, not its ciphertext. Every request is written to `LOG/NNN-API.json` and
//! summarised in `LOG/requests.jsonl` (step, tokens, whether the latest
//! assistant turn is the one this server sent, whether the tool result it
//! answers reports an error or a non-zero exit code).
//!
//! With `SCRIPTED_RECALL=1` in its environment (for `cwl proxy --strategy
//! self-gc`; `scripts/real-clients/recall.sh`), it also answers Self-GC's
//! planner calls with a plan folding every result but the latest six, and
//! once a request shows a fold pointer (`[folded as ID; …]`) and holds no
//! `recall` call yet, it calls `recall` on that id in place of the next
//! step (id `toolu_cwl_recall_NNN` or `call_cwl_recall_NNN`, NNN the step
//! it stands for), then goes on with that step; the result the request
//! after carries is logged (`recall` in `requests.jsonl`) and written to
//! `LOG/recall-result.txt`. Without it nothing changes.
//!
//! `tap --listen ADDR --to URL --log-dir DIR` records each request body a
//! client sends (`DIR/NNN-client.json`) and relays it to `URL`, the
//! response streamed back; `check-turns TAP_DIR UPSTREAM_DIR` then checks,
//! for every request the upstream received, that the latest assistant turn
//! and everything after it are byte for byte what the client sent.

use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use cwl::TokenCounter;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::http::{Request, Response, StatusCode};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};

const MODULES: [&str; 8] = [
    "orders",
    "stock",
    "pricing",
    "shipping",
    "billing",
    "customers",
    "reports",
    "audit",
];
const FUNCTIONS: usize = 40;
const LOG_LINES: usize = 600;

/// One step of the scripted session, before it is put in a client's shape.
enum Step {
    Shell(String, &'static str),
    Read(String),
    Edit(String, String, String),
    Write(String, String),
    Done(String),
}

fn module_path(module: &str) -> String {
    format!("src/inventory/{module}.py")
}

fn limit(index: usize) -> usize {
    4000 + index * 500
}

fn module_source(index: usize) -> String {
    let module = MODULES[index];
    let upper = module.to_uppercase();
    let mut out = format!(
        "\"\"\"The {module} records of the inventory: parsing, checks and totals.\"\"\"\n\n\
         LIMIT_{upper} = {}\n\n",
        limit(index)
    );
    for k in 0..FUNCTIONS {
        out.push_str(&format!(
            "def parse_{module}_record_{k}(line):\n    \
             \"\"\"Parse record kind {k} of {module}: split fields, convert amounts, check bounds.\"\"\"\n    \
             fields = line.split(\",\")\n    \
             amount = int(fields[1]) * {m} + {k}\n    \
             if amount > LIMIT_{upper}:\n        \
             raise ValueError(\"{module} record {k} over limit: %d\" % amount)\n    \
             return {{\"kind\": {k}, \"id\": fields[0], \"amount\": amount, \"source\": \"{module}\"}}\n\n\n",
            m = k % 7 + 2,
        ));
    }
    out.push_str(&format!(
        "def total(records):\n    \"\"\"Sum of the amounts of {module} records.\"\"\"\n    \
         return sum(r[\"amount\"] for r in records)\n"
    ));
    out
}

fn events_log() -> String {
    (0..LOG_LINES)
        .map(|i| {
            let module = MODULES[i % MODULES.len()];
            let verdict = if i % 13 == 0 { "rejected" } else { "accepted" };
            format!(
                "2026-11-24T10:{:02}:{:02}Z INFO {module} record {} {verdict} id={}-{:06} amount={}\n",
                i / 60,
                i % 60,
                i % FUNCTIONS,
                &module[..3].to_uppercase(),
                i * 37,
                (i * 7919) % 9000
            )
        })
        .collect()
}

fn init_repo(dir: &Path) -> std::io::Result<()> {
    let write = |path: &str, text: &str| -> std::io::Result<()> {
        let path = dir.join(path);
        std::fs::create_dir_all(path.parent().expect("a file path has a parent"))?;
        std::fs::write(path, text)
    };
    for (index, module) in MODULES.iter().enumerate() {
        write(&module_path(module), &module_source(index))?;
    }
    write("src/inventory/__init__.py", "")?;
    write("data/events.log", &events_log())?;
    write(
        "README.md",
        "# inventory\n\nParsers and totals for the inventory records.\n",
    )?;
    write(
        "tests/test_totals.py",
        "import sys\nimport unittest\n\nsys.path.insert(0, \"src\")\n\n\
         from inventory import orders\n\n\n\
         class Totals(unittest.TestCase):\n    \
         def test_total(self):\n        \
         self.assertEqual(orders.total([{\"amount\": 2}, {\"amount\": 3}]), 5)\n\n\n\
         if __name__ == \"__main__\":\n    unittest.main()\n",
    )
}

const SUMMARY_PY: &str = "\"\"\"One line per module: its limit, read from the modules themselves.\"\"\"\n\n\
from inventory import audit, billing, customers, orders, pricing, reports, shipping, stock\n\n\
MODULES = [orders, stock, pricing, shipping, billing, customers, reports, audit]\n\n\n\
def limits():\n    \"\"\"The limit constant of every module, by module name.\"\"\"\n    \
out = {}\n    for module in MODULES:\n        \
name = module.__name__.rsplit(\".\", 1)[1]\n        \
out[name] = getattr(module, \"LIMIT_\" + name.upper())\n    return out\n\n\n\
def describe():\n    \"\"\"A printable summary of the limits.\"\"\"\n    \
return \"\\n\".join(\"%s: %d\" % item for item in sorted(limits().items()))\n";

/// The whole session, the same for every client.
fn script() -> Vec<Step> {
    use Step::*;
    let mut steps = vec![Shell(
        "git log --oneline -5 && ls -R src data tests".into(),
        "Show history and files",
    )];
    for module in MODULES {
        steps.push(Read(module_path(module)));
    }
    steps.push(Shell(
        "grep -rn 'def parse_' src | head -120".into(),
        "List the parser functions",
    ));
    steps.push(Shell("grep -rn 'LIMIT_' src".into(), "Find the limits"));
    steps.push(Shell(
        "head -250 data/events.log".into(),
        "Show the start of the log",
    ));
    steps.push(Shell(
        "grep -c rejected data/events.log; grep rejected data/events.log | head -40".into(),
        "Count rejected records",
    ));
    for (index, module) in MODULES.iter().enumerate().take(2) {
        let upper = module.to_uppercase();
        steps.push(Edit(
            module_path(module),
            format!("LIMIT_{upper} = {}", limit(index)),
            format!("LIMIT_{upper} = {}", limit(index) * 2),
        ));
    }
    steps.push(Shell(
        "python3 -m py_compile src/inventory/*.py && echo compiled".into(),
        "Compile the modules",
    ));
    steps.push(Read(module_path("orders")));
    for module in MODULES {
        steps.push(Edit(
            module_path(module),
            "    return sum(r[\"amount\"] for r in records)".into(),
            "    return sum(r[\"amount\"] for r in records if r[\"amount\"] > 0)".into(),
        ));
        if module == "pricing" {
            steps.push(Shell(
                "python3 -m unittest discover -s tests -v 2>&1 | tail -20".into(),
                "Run the tests",
            ));
        }
    }
    steps.push(Write("src/inventory/summary.py".into(), SUMMARY_PY.into()));
    steps.push(Shell(
        "PYTHONPATH=src python3 -c 'from inventory import summary; print(summary.describe())'"
            .into(),
        "Print the limits summary",
    ));
    steps.push(Shell(
        "tail -200 data/events.log".into(),
        "Show the end of the log",
    ));
    steps.push(Read(module_path("billing")));
    steps.push(Shell("git diff --stat".into(), "Show the diff summary"));
    steps.push(Shell(
        "git diff src/inventory/orders.py src/inventory/stock.py".into(),
        "Show the limit changes",
    ));
    steps.push(Read("README.md".into()));
    steps.push(Edit(
        "README.md".into(),
        "Parsers and totals for the inventory records.\n".into(),
        "Parsers and totals for the inventory records.\n\n\
         Totals skip non-positive amounts; `inventory.summary` lists the limits.\n"
            .into(),
    ));
    steps.push(Shell(
        "python3 -m unittest discover -s tests 2>&1 | tail -3 && git status --short".into(),
        "Run the tests and show the status",
    ));
    steps.push(Done(
        "Done: the orders and stock limits are doubled, every total skips non-positive \
         amounts, `src/inventory/summary.py` prints the limits, and the README says so."
            .into(),
    ));
    steps
}

/// Length of each turn's opaque reasoning: a thinking signature or an
/// `encrypted_content`.
const SIGNATURE_BYTES: usize = 1600;

/// The reasoning text of a step (thinking, or a reasoning summary).
fn thought(step: &Step, index: usize) -> String {
    match step {
        Step::Done(_) => format!("Step {index}: every scripted change is made; time to report."),
        _ => format!(
            "Step {index}: the next thing to do is: {}",
            narration(step, index).to_lowercase()
        ),
    }
}

/// `len` base64 characters, the same for the same `seed`: stands in for a
/// thinking signature or encrypted reasoning, which clients send back as
/// they got them.
fn opaque(seed: usize, len: usize) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut state = (seed as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            ALPHABET[(state % 64) as usize] as char
        })
        .collect()
}

fn narration(step: &Step, index: usize) -> String {
    match step {
        Step::Shell(_, what) => format!("Step {index}: {what}."),
        Step::Read(path) => format!("Step {index}: reading {path}."),
        Step::Edit(path, _, _) => format!("Step {index}: editing {path}."),
        Step::Write(path, _) => format!("Step {index}: writing {path}."),
        Step::Done(text) => text.clone(),
    }
}

/// Claude Code's tool call for a step: (name, input).
fn claude_call(step: &Step, repo: &Path) -> Option<(&'static str, Value)> {
    let abs = |path: &str| repo.join(path).display().to_string();
    Some(match step {
        Step::Shell(cmd, what) => ("Bash", json!({"command": cmd, "description": what})),
        Step::Read(path) => ("Read", json!({"file_path": abs(path)})),
        Step::Edit(path, old, new) => (
            "Edit",
            json!({"file_path": abs(path), "old_string": old, "new_string": new}),
        ),
        Step::Write(path, content) => {
            ("Write", json!({"file_path": abs(path), "content": content}))
        }
        Step::Done(_) => return None,
    })
}

fn patch_lines(text: &str, prefix: char) -> String {
    text.lines().map(|l| format!("{prefix}{l}\n")).collect()
}

/// Codex CLI's call for a step: `exec_command` with a shell command
/// (edits as `apply_patch` heredocs, which Codex runs itself).
fn codex_call(step: &Step) -> Option<Value> {
    let cmd = match step {
        Step::Shell(cmd, _) => cmd.clone(),
        Step::Read(path) => format!("cat -n {path}"),
        Step::Edit(path, old, new) => format!(
            "apply_patch <<'PATCH'\n*** Begin Patch\n*** Update File: {path}\n@@\n{}{}*** End Patch\nPATCH",
            patch_lines(old, '-'),
            patch_lines(new, '+')
        ),
        Step::Write(path, content) => format!(
            "apply_patch <<'PATCH'\n*** Begin Patch\n*** Add File: {path}\n{}*** End Patch\nPATCH",
            patch_lines(content, '+')
        ),
        Step::Done(_) => return None,
    };
    Some(json!({"cmd": cmd}))
}

fn text_of(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Array(items) => items
            .iter()
            .map(|item| match item {
                Value::String(s) => s.clone(),
                other => other
                    .get("text")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// Input tokens of an Anthropic Messages request, as documented above.
fn anthropic_tokens(body: &Value) -> usize {
    let count = |text: &str| cwl::O200k.count(text);
    let mut total = body.get("system").map_or(0, |s| count(&text_of(s)));
    if let Some(tools) = body.get("tools") {
        total += count(&tools.to_string());
    }
    for message in body["messages"].as_array().into_iter().flatten() {
        total += 4;
        let content = &message["content"];
        if let Some(text) = content.as_str() {
            total += count(text);
            continue;
        }
        for block in content.as_array().into_iter().flatten() {
            total += match block["type"].as_str().unwrap_or_default() {
                "text" => count(block["text"].as_str().unwrap_or_default()),
                "thinking" => count(block["thinking"].as_str().unwrap_or_default()),
                "tool_use" => {
                    3 + count(block["name"].as_str().unwrap_or_default())
                        + count(&block["input"].to_string())
                }
                "tool_result" => count(&text_of(&block["content"])),
                _ => 0,
            };
        }
    }
    total
}

/// Input tokens of an OpenAI Responses request, as documented above.
fn responses_tokens(body: &Value) -> usize {
    let count = |text: &str| cwl::O200k.count(text);
    let mut total = body
        .get("instructions")
        .map_or(0, |s| count(s.as_str().unwrap_or_default()));
    if let Some(tools) = body.get("tools") {
        total += count(&tools.to_string());
    }
    let input = &body["input"];
    if let Some(text) = input.as_str() {
        return total + 4 + count(text);
    }
    for item in input.as_array().into_iter().flatten() {
        total += match item["type"].as_str().unwrap_or("message") {
            "message" => 4 + count(&text_of(&item["content"])),
            "function_call" => {
                3 + count(item["name"].as_str().unwrap_or_default())
                    + count(item["arguments"].as_str().unwrap_or_default())
            }
            "function_call_output" => count(&text_of(&item["output"])),
            "reasoning" => count(&text_of(&item["summary"])),
            _ => count(&item.to_string()),
        };
    }
    total
}

/// Whether a Codex command output reports a non-zero exit code.
fn failed_exit(output: &str) -> bool {
    output.lines().any(|line| {
        ["Process exited with code ", "Exit code: "]
            .iter()
            .filter_map(|prefix| line.strip_prefix(prefix))
            .any(|code| code.trim().parse::<i64>().is_ok_and(|code| code != 0))
    })
}

/// The step a request asks for: one past the latest tool result's step,
/// or 0 when the request does not end with a tool result.
fn next_step(last_ids: &[String], prefix: &str) -> usize {
    last_ids
        .iter()
        .filter_map(|id| id.strip_prefix(prefix)?.parse::<usize>().ok())
        .max()
        .map_or(0, |step| step + 1)
}

struct Server {
    repo: PathBuf,
    log_dir: PathBuf,
    script: Vec<Step>,
    seq: AtomicUsize,
    /// Whether to plan folds and call `recall` (`SCRIPTED_RECALL=1`).
    recall: bool,
}

/// What Self-GC's planner prompt says, to recognise it.
const PLANNER: &str = "context garbage collector";

/// A Self-GC plan folding every function object the planner prompt (a
/// request body, its quotes escaped) tags but the latest six.
fn fold_plan(prompt: &str) -> String {
    let mut ids: Vec<(u64, String)> = prompt
        .replace("\\\"", "\"")
        .split("<turn id=\"function:")
        .skip(1)
        .filter_map(|rest| {
            let id = &rest[..rest.find('"')?];
            let n = id.rsplit(':').next()?.parse().ok()?;
            Some((n, id.to_string()))
        })
        .collect();
    ids.sort();
    ids.dedup();
    let keep = ids.len().saturating_sub(6);
    let lines: Vec<&str> = ids[..keep].iter().map(|(_, id)| id.as_str()).collect();
    format!(
        "<above_conversation_summary>\nThe inventory session so far.\n</above_conversation_summary>\n\
         <gc_plan>\n<fold kind=\"function\" reason=\"stable_artifact\">\n{}\n</fold>\n</gc_plan>",
        lines.join("\n")
    )
}

/// The first id a fold pointer in `text` names.
fn folded_id(text: &str) -> Option<String> {
    let rest = &text[text.find("[folded as ")? + "[folded as ".len()..];
    Some(rest[..rest.find(';')?].to_string())
}

/// The step a `recall` call stands for, from its result's id.
fn recall_step(ids: &[String], prefix: &str) -> Option<usize> {
    ids.iter()
        .find_map(|id| id.strip_prefix(prefix)?.parse().ok())
}

struct Reply {
    status: StatusCode,
    content_type: &'static str,
    body: String,
}

fn sse(events: &[Value]) -> String {
    events
        .iter()
        .map(|event| {
            format!(
                "event: {}\ndata: {event}\n\n",
                event["type"].as_str().unwrap_or("message")
            )
        })
        .collect()
}

impl Server {
    fn log(&self, api: &str, raw: &[u8], summary: Value) {
        let seq = self.seq.fetch_add(1, Ordering::SeqCst);
        let _ = std::fs::write(self.log_dir.join(format!("{seq:03}-{api}.json")), raw);
        let mut line = json!({"seq": seq, "api": api});
        if let (Some(line), Some(summary)) = (line.as_object_mut(), summary.as_object()) {
            line.extend(summary.clone());
        }
        use std::io::Write;
        if let Ok(mut file) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_dir.join("requests.jsonl"))
        {
            let _ = writeln!(file, "{line}");
        }
    }

    /// Logs the result a `recall` call got back (written whole to
    /// `recall-result.txt`); returns its summary for `requests.jsonl`.
    fn recalled(&self, content: &str, is_error: bool) -> Value {
        let _ = std::fs::write(self.log_dir.join("recall-result.txt"), content);
        let client_error = ["No such tool", "unsupported call"]
            .iter()
            .any(|t| content.contains(t));
        json!({"bytes": content.len(), "is_error": is_error, "client_error": client_error,
               "first_line": content.lines().next().unwrap_or_default()})
    }

    fn anthropic(&self, path: &str, raw: &[u8]) -> Reply {
        let Ok(body) = serde_json::from_slice::<Value>(raw) else {
            self.log("anthropic", raw, json!({"path": path, "error": "not JSON"}));
            return Reply {
                status: StatusCode::BAD_REQUEST,
                content_type: "application/json",
                body: json!({"type": "error", "error": {"type": "invalid_request_error", "message": "body is not JSON"}}).to_string(),
            };
        };
        let tokens = anthropic_tokens(&body);
        if path.contains("count_tokens") {
            self.log(
                "anthropic",
                raw,
                json!({"path": path, "kind": "count_tokens", "input_tokens": tokens}),
            );
            return Reply {
                status: StatusCode::OK,
                content_type: "application/json",
                body: json!({"input_tokens": tokens}).to_string(),
            };
        }
        let messages = body["messages"].as_array().cloned().unwrap_or_default();
        let mut tool_error = false;
        let mut recall = None;
        let main = body["tools"]
            .as_array()
            .is_some_and(|t| t.iter().any(|t| t["name"] == "Bash"));
        let (step, latest_ok) = if main {
            let last_ids: Vec<String> = messages
                .last()
                .and_then(|m| m["content"].as_array())
                .into_iter()
                .flatten()
                .filter(|b| b["type"] == "tool_result")
                .filter_map(|b| b["tool_use_id"].as_str().map(String::from))
                .collect();
            let recalled = self
                .recall
                .then(|| recall_step(&last_ids, "toolu_cwl_recall_"))
                .flatten();
            if recalled.is_some() {
                let result = messages
                    .last()
                    .and_then(|m| m["content"].as_array())
                    .into_iter()
                    .flatten()
                    .find(|b| {
                        b["tool_use_id"]
                            .as_str()
                            .is_some_and(|id| id.starts_with("toolu_cwl_recall_"))
                    })
                    .cloned()
                    .unwrap_or(Value::Null);
                recall =
                    Some(self.recalled(&text_of(&result["content"]), result["is_error"] == true));
            }
            let step = recalled
                .max(Some(next_step(&last_ids, "toolu_cwl_")))
                .unwrap_or(0);
            tool_error = messages
                .last()
                .and_then(|m| m["content"].as_array())
                .into_iter()
                .flatten()
                .any(|b| b["type"] == "tool_result" && b["is_error"] == true);
            let latest_ok = (step > 0 && recalled.is_none()).then(|| {
                let expected = claude_call(&self.script[step - 1], &self.repo);
                let assistant = messages.iter().rev().find(|m| m["role"] == "assistant");
                let call = assistant
                    .and_then(|m| m["content"].as_array())
                    .into_iter()
                    .flatten()
                    .find(|b| b["type"] == "tool_use");
                match (expected, call) {
                    (Some((name, input)), Some(call)) => {
                        call["name"] == name
                            && call["id"] == format!("toolu_cwl_{:03}", step - 1)
                            && input.as_object().is_some_and(|fields| {
                                fields.iter().all(|(k, v)| call["input"][k] == *v)
                            })
                    }
                    _ => false,
                }
            });
            (Some(step.min(self.script.len() - 1)), latest_ok)
        } else {
            (None, None)
        };
        self.log(
            "anthropic",
            raw,
            json!({"path": path, "kind": if main {"main"} else {"side"}, "model": body["model"],
                   "step": step, "messages": messages.len(), "input_tokens": tokens,
                   "latest_turn_ok": latest_ok, "tool_error": tool_error, "recall": recall}),
        );
        let asks_recall = step.and_then(|step| {
            let called = messages.iter().any(|m| {
                m["content"].as_array().is_some_and(|c| {
                    c.iter()
                        .any(|b| b["type"] == "tool_use" && b["name"] == "recall")
                })
            });
            let id =
                (self.recall && !called).then(|| folded_id(&String::from_utf8_lossy(raw)))??;
            Some((step, id))
        });
        let mut content = Vec::new();
        let stop_reason;
        match step {
            Some(step) if asks_recall.is_some() => {
                let (_, id) = asks_recall.as_ref().expect("checked");
                content
                    .push(json!({"type": "text", "text": format!("Step {step}: recalling {id}.")}));
                content.push(
                    json!({"type": "tool_use", "id": format!("toolu_cwl_recall_{step:03}"),
                    "name": "recall", "input": {"episode": id}}),
                );
                stop_reason = "tool_use";
            }
            Some(step) => {
                let current = &self.script[step];
                content.push(
                    json!({"type": "thinking", "thinking": thought(current, step),
                    "signature": opaque(step, SIGNATURE_BYTES)}),
                );
                content.push(json!({"type": "text", "text": narration(current, step)}));
                match claude_call(current, &self.repo) {
                    Some((name, input)) => {
                        content.push(json!({"type": "tool_use", "id": format!("toolu_cwl_{step:03}"), "name": name, "input": input}));
                        stop_reason = "tool_use";
                    }
                    None => stop_reason = "end_turn",
                }
            }
            None => {
                let text = if self.recall && String::from_utf8_lossy(raw).contains(PLANNER) {
                    fold_plan(&String::from_utf8_lossy(raw))
                } else {
                    "Scripted inventory session".to_string()
                };
                content.push(json!({"type": "text", "text": text}));
                stop_reason = "end_turn";
            }
        }
        // Claude Code joins the blocks of responses with the same id.
        let id = match &asks_recall {
            Some((step, _)) => format!("msg_cwl_recall_{step:03}"),
            None => format!("msg_cwl_{:03}", step.unwrap_or(999)),
        };
        let model = body["model"]
            .as_str()
            .unwrap_or("claude-scripted")
            .to_string();
        let usage_out = 20 * content.len();
        if body["stream"] != true {
            return Reply {
                status: StatusCode::OK,
                content_type: "application/json",
                body: json!({"id": id, "type": "message", "role": "assistant", "model": model,
                             "content": content, "stop_reason": stop_reason, "stop_sequence": null,
                             "usage": {"input_tokens": tokens, "output_tokens": usage_out}})
                .to_string(),
            };
        }
        let mut events = vec![
            json!({"type": "message_start", "message": {"id": id, "type": "message",
            "role": "assistant", "model": model, "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": tokens, "output_tokens": 1}}}),
        ];
        for (index, block) in content.iter().enumerate() {
            if block["type"] == "thinking" {
                events.push(json!({"type": "content_block_start", "index": index, "content_block": {"type": "thinking", "thinking": ""}}));
                events.push(json!({"type": "content_block_delta", "index": index, "delta": {"type": "thinking_delta", "thinking": block["thinking"]}}));
                events.push(json!({"type": "content_block_delta", "index": index, "delta": {"type": "signature_delta", "signature": block["signature"]}}));
            } else if block["type"] == "text" {
                events.push(json!({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}));
                events.push(json!({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": block["text"]}}));
            } else {
                events.push(
                    json!({"type": "content_block_start", "index": index, "content_block":
                    {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}}),
                );
                let input = block["input"].to_string();
                let cut = input
                    .char_indices()
                    .nth(input.chars().count() / 2)
                    .map_or(0, |(i, _)| i);
                for part in [&input[..cut], &input[cut..]] {
                    events.push(json!({"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": part}}));
                }
            }
            events.push(json!({"type": "content_block_stop", "index": index}));
        }
        events.push(json!({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": null}, "usage": {"output_tokens": usage_out}}));
        events.push(json!({"type": "message_stop"}));
        Reply {
            status: StatusCode::OK,
            content_type: "text/event-stream",
            body: sse(&events),
        }
    }

    fn responses(&self, path: &str, raw: &[u8]) -> Reply {
        let Ok(body) = serde_json::from_slice::<Value>(raw) else {
            self.log("responses", raw, json!({"path": path, "error": "not JSON"}));
            return Reply {
                status: StatusCode::BAD_REQUEST,
                content_type: "application/json",
                body: json!({"error": {"type": "invalid_request_error", "message": "body is not JSON"}}).to_string(),
            };
        };
        let tokens = responses_tokens(&body);
        let input = body["input"].as_array().cloned().unwrap_or_default();
        let mut tool_error = false;
        let mut recall = None;
        let main = body["tools"]
            .as_array()
            .is_some_and(|t| t.iter().any(|t| t["name"] == "exec_command"));
        let (step, latest_ok) = if main {
            let tail: Vec<String> = input
                .iter()
                .rev()
                .take_while(|item| item["type"] != "message" || item["role"] != "user")
                .filter(|item| item["type"] == "function_call_output")
                .filter_map(|item| item["call_id"].as_str().map(String::from))
                .collect();
            let recalled = self
                .recall
                .then(|| {
                    // Only when the recall's output is the latest item.
                    let last = input.last()?["call_id"].as_str()?.to_string();
                    recall_step(&[last], "call_cwl_recall_")
                })
                .flatten();
            if recalled.is_some() {
                let result = input
                    .iter()
                    .rev()
                    .find(|item| {
                        item["call_id"]
                            .as_str()
                            .is_some_and(|id| id.starts_with("call_cwl_recall_"))
                            && item["type"] == "function_call_output"
                    })
                    .cloned()
                    .unwrap_or(Value::Null);
                recall = Some(self.recalled(&text_of(&result["output"]), false));
            }
            let step = recalled
                .max(Some(next_step(&tail, "call_cwl_")))
                .unwrap_or(0);
            tool_error = input
                .last()
                .filter(|item| item["type"] == "function_call_output")
                .is_some_and(|item| failed_exit(&text_of(&item["output"])));
            let latest_ok = (step > 0 && recalled.is_none()).then(|| {
                let call = input
                    .iter()
                    .rev()
                    .find(|item| item["type"] == "function_call");
                match (codex_call(&self.script[step - 1]), call) {
                    (Some(arguments), Some(call)) => {
                        call["name"] == "exec_command"
                            && call["call_id"] == format!("call_cwl_{:03}", step - 1)
                            && call["arguments"]
                                .as_str()
                                .and_then(|a| serde_json::from_str::<Value>(a).ok())
                                == Some(arguments)
                    }
                    _ => false,
                }
            });
            (Some(step.min(self.script.len() - 1)), latest_ok)
        } else {
            (None, None)
        };
        self.log(
            "responses",
            raw,
            json!({"path": path, "kind": if main {"main"} else {"side"}, "model": body["model"],
                   "step": step, "items": input.len(), "input_tokens": tokens,
                   "latest_turn_ok": latest_ok, "tool_error": tool_error, "recall": recall}),
        );
        let asks_recall = step.and_then(|_| {
            let called = input
                .iter()
                .any(|item| item["type"] == "function_call" && item["name"] == "recall");
            (self.recall && !called).then(|| folded_id(&String::from_utf8_lossy(raw)))?
        });
        let suffix = match (step, &asks_recall) {
            (Some(s), Some(_)) => format!("recall_{s:03}"),
            (Some(s), None) => format!("{s:03}"),
            (None, _) => "side".to_string(),
        };
        let mut output = Vec::new();
        let text = match (step, &asks_recall) {
            (Some(step), Some(id)) => format!("Step {step}: recalling {id}."),
            (Some(step), None) => narration(&self.script[step], step),
            (None, _) if self.recall && String::from_utf8_lossy(raw).contains(PLANNER) => {
                fold_plan(&String::from_utf8_lossy(raw))
            }
            (None, _) => "Scripted inventory session".into(),
        };
        if let (Some(step), None) = (step, &asks_recall) {
            output.push(
                json!({"type": "reasoning", "id": format!("rs_cwl_{suffix}"),
                "summary": [{"type": "summary_text", "text": thought(&self.script[step], step)}],
                "encrypted_content": opaque(step, SIGNATURE_BYTES)}),
            );
        }
        output.push(json!({"type": "message", "id": format!("msg_cwl_{suffix}"), "role": "assistant",
            "status": "completed", "content": [{"type": "output_text", "text": text, "annotations": []}]}));
        if let Some(id) = &asks_recall {
            output.push(
                json!({"type": "function_call", "id": format!("fc_cwl_{suffix}"),
                "call_id": format!("call_cwl_{suffix}"), "name": "recall",
                "arguments": json!({"episode": id}).to_string(), "status": "completed"}),
            );
        } else if let Some(arguments) = step.and_then(|s| codex_call(&self.script[s])) {
            output.push(
                json!({"type": "function_call", "id": format!("fc_cwl_{suffix}"),
                "call_id": format!("call_cwl_{suffix}"), "name": "exec_command",
                "arguments": arguments.to_string(), "status": "completed"}),
            );
        }
        let id = format!("resp_cwl_{suffix}");
        let usage = json!({"input_tokens": tokens, "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 20 * output.len(), "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": tokens + 20 * output.len()});
        let response = json!({"id": id, "object": "response", "status": "completed",
            "model": body["model"], "output": output, "usage": usage});
        if body["stream"] != true {
            return Reply {
                status: StatusCode::OK,
                content_type: "application/json",
                body: response.to_string(),
            };
        }
        let mut events = vec![json!({"type": "response.created", "response": {"id": id,
            "object": "response", "status": "in_progress", "output": []}})];
        for (index, item) in output.iter().enumerate() {
            events.push(
                json!({"type": "response.output_item.added", "output_index": index, "item": item}),
            );
            if item["type"] == "message" {
                events.push(
                    json!({"type": "response.output_text.delta", "output_index": index,
                    "item_id": item["id"], "content_index": 0, "delta": text}),
                );
            }
            events.push(
                json!({"type": "response.output_item.done", "output_index": index, "item": item}),
            );
        }
        events.push(json!({"type": "response.completed", "response": response}));
        Reply {
            status: StatusCode::OK,
            content_type: "text/event-stream",
            body: sse(&events),
        }
    }

    fn handle(&self, method: &str, path: &str, raw: &[u8]) -> Reply {
        if method == "POST" && path.starts_with("/v1/messages") {
            self.anthropic(path, raw)
        } else if method == "POST" && path.starts_with("/v1/responses") {
            self.responses(path, raw)
        } else if path == "/" && matches!(method, "HEAD" | "GET") {
            self.log(
                "other",
                raw,
                json!({"path": path, "method": method, "kind": "probe"}),
            );
            Reply {
                status: StatusCode::OK,
                content_type: "text/plain",
                body: String::new(),
            }
        } else {
            self.log("other", raw, json!({"path": path, "method": method}));
            Reply {
                status: StatusCode::NOT_FOUND,
                content_type: "application/json",
                body: json!({"error": {"type": "not_found", "message": format!("no scripted answer for {method} {path}")}}).to_string(),
            }
        }
    }
}

async fn serve(listener: tokio::net::TcpListener, server: Arc<Server>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            return;
        };
        let server = server.clone();
        tokio::spawn(async move {
            let service = service_fn(move |request: Request<Incoming>| {
                let server = server.clone();
                async move {
                    let method = request.method().to_string();
                    let path = request
                        .uri()
                        .path_and_query()
                        .map_or("/".to_string(), |p| p.to_string());
                    let raw = request
                        .into_body()
                        .collect()
                        .await
                        .map(|b| b.to_bytes())
                        .unwrap_or_default();
                    let reply = server.handle(&method, &path, &raw);
                    let mut response = Response::new(Full::new(Bytes::from(reply.body)));
                    *response.status_mut() = reply.status;
                    response.headers_mut().insert(
                        "content-type",
                        reply.content_type.parse().expect("a valid header"),
                    );
                    Ok::<_, Infallible>(response)
                }
            });
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

fn usage() -> String {
    "usage: scripted_upstream init-repo DIR | serve --listen ADDR --repo DIR --log-dir DIR \
     | tap --listen ADDR --to URL --log-dir DIR | check-turns TAP_DIR UPSTREAM_DIR"
        .into()
}

/// Flags as `--name value` pairs.
fn flags(args: &[String], names: &[&str]) -> Result<Vec<String>, String> {
    let mut values = vec![None; names.len()];
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let value = it.next().ok_or(format!("{flag} needs a value"))?.clone();
        let at = names
            .iter()
            .position(|n| n == flag)
            .ok_or_else(|| format!("unknown flag {flag}; {}", usage()))?;
        values[at] = Some(value);
    }
    values
        .into_iter()
        .zip(names)
        .map(|(v, n)| v.ok_or(format!("{n} is required; {}", usage())))
        .collect()
}

type TapBody =
    http_body_util::combinators::BoxBody<Bytes, Box<dyn std::error::Error + Send + Sync>>;

async fn tap_one(
    request: Request<Incoming>,
    to: Arc<String>,
    log_dir: Arc<PathBuf>,
    seq: Arc<AtomicUsize>,
    client: reqwest::Client,
) -> Response<TapBody> {
    use futures_util::TryStreamExt;
    let (parts, body) = request.into_parts();
    let path = parts
        .uri
        .path_and_query()
        .map_or("/".to_string(), |p| p.to_string());
    let raw = body
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let n = seq.fetch_add(1, Ordering::SeqCst);
    let _ = std::fs::write(log_dir.join(format!("{n:03}-client.json")), &raw);
    {
        use std::io::Write;
        if let Ok(mut file) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log_dir.join("requests.jsonl"))
        {
            let _ = writeln!(
                file,
                "{}",
                json!({"seq": n, "method": parts.method.as_str(), "path": path})
            );
        }
    }
    let mut out = client
        .request(parts.method, format!("{to}{path}"))
        .body(raw);
    for (name, value) in &parts.headers {
        if !matches!(
            name.as_str(),
            "host" | "content-length" | "connection" | "transfer-encoding"
        ) {
            out = out.header(name, value);
        }
    }
    let error = |status: StatusCode, text: String| {
        let mut response = Response::new(
            Full::new(Bytes::from(text))
                .map_err(|never| match never {})
                .boxed(),
        );
        *response.status_mut() = status;
        response
    };
    let upstream = match out.send().await {
        Ok(upstream) => upstream,
        Err(e) => {
            return error(
                StatusCode::BAD_GATEWAY,
                format!("tap: {to} unreachable: {e}"),
            );
        }
    };
    let mut response = Response::builder().status(upstream.status());
    if let Some(headers) = response.headers_mut() {
        for (name, value) in upstream.headers() {
            if !matches!(name.as_str(), "connection" | "transfer-encoding") {
                headers.append(name, value.clone());
            }
        }
    }
    let stream = upstream
        .bytes_stream()
        .map_ok(hyper::body::Frame::data)
        .map_err(|e| -> Box<dyn std::error::Error + Send + Sync> { Box::new(e) });
    response
        .body(http_body_util::StreamBody::new(stream).boxed())
        .unwrap_or_else(|e| error(StatusCode::BAD_GATEWAY, format!("tap: {e}")))
}

async fn tap(listener: tokio::net::TcpListener, to: String, log_dir: PathBuf) {
    let (to, log_dir) = (Arc::new(to), Arc::new(log_dir));
    let seq = Arc::new(AtomicUsize::new(0));
    let client = reqwest::Client::new();
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            return;
        };
        let (to, log_dir, seq, client) = (to.clone(), log_dir.clone(), seq.clone(), client.clone());
        tokio::spawn(async move {
            let service = service_fn(move |request| {
                let (to, log_dir, seq, client) =
                    (to.clone(), log_dir.clone(), seq.clone(), client.clone());
                async move { Ok::<_, Infallible>(tap_one(request, to, log_dir, seq, client).await) }
            });
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// The raw history items of a request body (`messages` or `input`), or
/// `None` when it has none.
fn raw_history(text: &str) -> Option<Vec<&serde_json::value::RawValue>> {
    let fields: std::collections::BTreeMap<String, &serde_json::value::RawValue> =
        serde_json::from_str(text).ok()?;
    let history = fields.get("messages").or_else(|| fields.get("input"))?;
    serde_json::from_str(history.get()).ok()
}

/// Index where the latest assistant turn of a client's request starts:
/// the last assistant
/// message (Anthropic), or the first of the output items (assistant
/// messages, calls, reasoning) before the trailing call outputs (Responses).
fn latest_turn(items: &[&serde_json::value::RawValue]) -> usize {
    let parsed: Vec<Value> = items
        .iter()
        .map(|raw| serde_json::from_str(raw.get()).unwrap_or(Value::Null))
        .collect();
    let anthropic = parsed.iter().all(|v| v.get("type").is_none());
    if anthropic {
        return parsed
            .iter()
            .rposition(|v| v["role"] == "assistant")
            .unwrap_or(0);
    }
    let output = |v: &Value| match v["type"].as_str() {
        Some("message") => v["role"] == "assistant",
        Some(kind) => !kind.ends_with("_output"),
        None => false,
    };
    let mut at = parsed.len();
    while at > 0
        && parsed[at - 1]["type"]
            .as_str()
            .is_some_and(|k| k.ends_with("_output"))
    {
        at -= 1;
    }
    while at > 0 && output(&parsed[at - 1]) {
        at -= 1;
    }
    at
}

fn check_turns(tap_dir: &Path, upstream_dir: &Path) -> Result<(), String> {
    let bodies = |dir: &Path, suffixes: &[&str]| -> Result<Vec<(String, String)>, String> {
        let mut names: Vec<PathBuf> = std::fs::read_dir(dir)
            .map_err(|e| format!("cannot read {}: {e}", dir.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| suffixes.iter().any(|s| p.to_string_lossy().ends_with(s)))
            .collect();
        names.sort();
        Ok(names
            .iter()
            .filter_map(|p| Some((p.display().to_string(), std::fs::read_to_string(p).ok()?)))
            .collect())
    };
    let client = bodies(tap_dir, &["-client.json"])?;
    let upstream = bodies(upstream_dir, &["-anthropic.json", "-responses.json"])?;
    let by_last: std::collections::HashMap<String, &String> = client
        .iter()
        .filter_map(|(_, body)| Some((raw_history(body)?.last()?.get().to_string(), body)))
        .collect();
    let (mut compared, mut identical, mut unmatched) = (0, 0, 0);
    let mut changed = Vec::new();
    for (name, body) in &upstream {
        let Some(items) = raw_history(body) else {
            continue;
        };
        let Some(last) = items.last() else { continue };
        let Some(sent) = by_last.get(last.get()).and_then(|b| raw_history(b)) else {
            unmatched += 1;
            continue;
        };
        let turn = sent.len() - latest_turn(&sent);
        compared += 1;
        let same = items.len() >= turn
            && items[items.len() - turn..]
                .iter()
                .zip(&sent[sent.len() - turn..])
                .all(|(x, y)| x.get() == y.get());
        if same {
            identical += 1;
        } else {
            changed.push(name.clone());
        }
    }
    println!(
        "{}",
        json!({"upstream_requests": upstream.len(), "compared": compared,
               "latest_turn_byte_identical": identical, "unmatched": unmatched,
               "changed": changed})
    );
    if identical == compared {
        Ok(())
    } else {
        Err(format!(
            "{} requests changed the latest turn",
            compared - identical
        ))
    }
}

#[tokio::main]
async fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("init-repo") => {
            let dir = args.get(1).ok_or_else(usage)?;
            init_repo(Path::new(dir))
                .map_err(|e| format!("cannot write the repository in {dir}: {e}"))
        }
        Some("check-turns") => {
            let (Some(tap_dir), Some(upstream_dir)) = (args.get(1), args.get(2)) else {
                return Err(usage());
            };
            check_turns(Path::new(tap_dir), Path::new(upstream_dir))
        }
        Some("tap") => {
            let values = flags(&args[1..], &["--listen", "--to", "--log-dir"])?;
            let (listen, to, log_dir) = (
                &values[0],
                values[1].trim_end_matches('/'),
                PathBuf::from(&values[2]),
            );
            std::fs::create_dir_all(&log_dir)
                .map_err(|e| format!("cannot create {}: {e}", log_dir.display()))?;
            let listener = tokio::net::TcpListener::bind(listen)
                .await
                .map_err(|e| format!("cannot listen on {listen}: {e}"))?;
            let address = listener.local_addr().map_err(|e| e.to_string())?;
            println!("tap on http://{address} to {to}");
            tap(listener, to.to_string(), log_dir).await;
            Ok(())
        }
        Some("serve") => {
            let values = flags(&args[1..], &["--listen", "--repo", "--log-dir"])?;
            let (listen, repo, log_dir) = (
                &values[0],
                PathBuf::from(&values[1]),
                PathBuf::from(&values[2]),
            );
            std::fs::create_dir_all(&log_dir)
                .map_err(|e| format!("cannot create {}: {e}", log_dir.display()))?;
            let listener = tokio::net::TcpListener::bind(listen)
                .await
                .map_err(|e| format!("cannot listen on {listen}: {e}"))?;
            let address = listener.local_addr().map_err(|e| e.to_string())?;
            let script = script();
            println!(
                "scripted upstream on http://{address} ({} steps)",
                script.len()
            );
            let server = Arc::new(Server {
                repo,
                log_dir,
                script,
                seq: AtomicUsize::new(0),
                recall: std::env::var("SCRIPTED_RECALL").is_ok_and(|v| v == "1"),
            });
            serve(listener, server).await;
            Ok(())
        }
        _ => Err(usage()),
    }
}
