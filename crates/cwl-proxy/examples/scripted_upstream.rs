//! A scripted model server on loopback for checking `cwl proxy` with real
//! clients (Claude Code, Codex CLI): it speaks Anthropic Messages and
//! OpenAI Responses (streaming or not) and drives one long, tool-using
//! session in each client's own tool shapes (Codex CLI's `exec_command`,
//! or the `shell_command` or `shell` tool of older versions, and its
//! custom `apply_patch` tool for edits where it offers one). Used by
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
//! bill reasoning by its own tokens, not its ciphertext. A request counts
//! only the reasoning after its latest user message, as the models the
//! clients ask for here do: OpenAI's before GPT-5.6 drop earlier turns'
//! reasoning items, and Anthropic's before Opus 4.5 and Sonnet 4.6
//! (`run.sh` asks for Claude Sonnet 4.5) strip earlier turns' thinking. With
//! `SCRIPTED_REASONING=N`, each Claude thinking block is about N tokens of
//! text, and each Responses reasoning item stands for N reasoning tokens:
//! the reply's usage reports them (in
//! `output_tokens_details.reasoning_tokens`, which Codex logs), and a
//! request counts them for each reasoning item it counts. Every request is
//! written to `LOG/NNN-API.json` and
//! summarised in `LOG/requests.jsonl` (step, tokens, whether the latest
//! assistant turn is the one this server sent, whether the tool result it
//! answers reports an error or a non-zero exit code).
//!
//! With `SCRIPTED_ROUNDS=N` (1 to 40; 1 when unset: the session above)
//! the session goes on for N rounds: after the first, each round continues
//! the task differently (re-reads a module whole and others in slices,
//! greps, shows a log slice, looks up a record quoted from a round long
//! before, edits two parsers of one module, compiles, tests, diffs, now
//! and then notes the round in the README), about 16 model calls a round,
//! before the final answer. With `SCRIPTED_PROMPTS=1` as well, each round
//! after the first waits for its own user prompt (`Go on with round N.`):
//! the request that would start it is answered with a short end-of-turn
//! text instead, so a client resumed with that prompt writes one log with
//! a user turn a round, as a person's session has;
//! `check-edits DIR` (same environment) checks that every scripted edit
//! is in the repository. Long sessions make clients compact: a request
//! asking for a summary (Claude Code's summarising prompt, or a Codex
//! history ending in a user message, or `/responses/compact`) gets one
//! that ends with `Resume at scripted step N`, and a request holding no
//! result of this server's calls resumes at the furthest of that marker,
//! the furthest step any request asked for and its own latest result, so
//! a compaction neither restarts nor repeats the script. A compaction
//! makes Claude Code forget which files it read (and its Edit refuses a
//! file not read), so an edit of a file not read, edited or written since
//! is preceded by a `Read` of it (id `toolu_cwl_reread_NNN`).
//! `requests.jsonl` logs compaction requests as kind `compaction` and
//! marks `resumed` requests.
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
//! With `SCRIPTED_PLANS=N`, every Nth step's call comes with a plan call
//! after it (Claude Code: `TodoWrite`, id `toolu_plan_NNN`, its items in
//! the shape the client's schema lists) or before it (Codex CLI:
//! `update_plan`, call id `call_plan_NNN`), when the client offers that
//! tool (Claude Code up to 2.0, Codex CLI up to about 0.60): the whole
//! plan each time, the steps around this one done, in progress or
//! pending, as agents rewrite their todo lists. Without it, or when the
//! client offers no such tool, nothing changes.
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

#[path = "support/usage.rs"]
mod usage;

use usage::{anthropic_tokens, responses_tokens, text_of, user_turn};

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
    Shell(String, String),
    Read(String),
    /// A slice of a file: path, first line (1-based), lines.
    ReadRange(String, usize, usize),
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

/// The record id on line `i` (0-based) of the events log.
fn log_id(i: usize) -> String {
    let module = MODULES[i % MODULES.len()];
    format!("{}-{:06}", &module[..3].to_uppercase(), i * 37)
}

/// The amount on line `i` (0-based) of the events log.
fn log_amount(i: usize) -> usize {
    (i * 7919) % 9000
}

fn events_log() -> String {
    (0..LOG_LINES)
        .map(|i| {
            let module = MODULES[i % MODULES.len()];
            let verdict = if i % 13 == 0 { "rejected" } else { "accepted" };
            format!(
                "2026-11-24T10:{:02}:{:02}Z INFO {module} record {} {verdict} id={} amount={}\n",
                i / 60,
                i % 60,
                i % FUNCTIONS,
                log_id(i),
                log_amount(i)
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

/// The whole session of `rounds` rounds, the same for every client.
fn script(rounds: usize) -> Vec<Step> {
    use Step::*;
    let mut steps = vec![Shell(
        "git log --oneline -5 && ls -R src data tests".into(),
        "Show history and files".into(),
    )];
    for module in MODULES {
        steps.push(Read(module_path(module)));
    }
    steps.push(Shell(
        "grep -rn 'def parse_' src | head -120".into(),
        "List the parser functions".into(),
    ));
    steps.push(Shell(
        "grep -rn 'LIMIT_' src".into(),
        "Find the limits".into(),
    ));
    steps.push(Shell(
        "head -250 data/events.log".into(),
        "Show the start of the log".into(),
    ));
    steps.push(Shell(
        "grep -c rejected data/events.log; grep rejected data/events.log | head -40".into(),
        "Count rejected records".into(),
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
        "Compile the modules".into(),
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
                "Run the tests".into(),
            ));
        }
    }
    steps.push(Write("src/inventory/summary.py".into(), SUMMARY_PY.into()));
    steps.push(Shell(
        "PYTHONPATH=src python3 -c 'from inventory import summary; print(summary.describe())'"
            .into(),
        "Print the limits summary".into(),
    ));
    steps.push(Shell(
        "tail -200 data/events.log".into(),
        "Show the end of the log".into(),
    ));
    steps.push(Read(module_path("billing")));
    steps.push(Shell(
        "git diff --stat".into(),
        "Show the diff summary".into(),
    ));
    steps.push(Shell(
        "git diff src/inventory/orders.py src/inventory/stock.py".into(),
        "Show the limit changes".into(),
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
        "Run the tests and show the status".into(),
    ));
    let mut done: String =
        "Done: the orders and stock limits are doubled, every total skips non-positive \
         amounts, `src/inventory/summary.py` prints the limits, and the README says so."
            .into();
    for round in 2..=rounds {
        steps.extend(round_steps(round));
    }
    if rounds > 1 {
        let edits = steps
            .iter()
            .filter(|s| matches!(s, Edit(_, old, _) if old.contains("Parse record kind")))
            .count();
        done.push_str(&format!(
            " Over {} more rounds {edits} parser docstrings now say how amounts are scaled.",
            rounds - 1
        ));
    }
    steps.push(Done(done));
    steps
}

/// Most rounds a session may have: keeps every step id below 1000 and
/// every (module, record kind) a round edits distinct.
const MAX_ROUNDS: usize = 40;

/// The step each round from the second starts at, with the round.
fn round_starts(rounds: usize) -> Vec<(usize, usize)> {
    // The first round's steps, without the final answer.
    let mut start = script(1).len() - 1;
    (2..=rounds)
        .map(|round| {
            let at = (start, round);
            start += round_steps(round).len();
            at
        })
        .collect()
}

/// The prompt that starts round `round` when rounds wait for prompts
/// (`SCRIPTED_PROMPTS=1`): what `scripts/real-clients/run.sh` sends.
fn round_prompt(round: usize) -> String {
    format!("{ROUND_PROMPT}{round}.")
}

/// What the session answers when round `round` waits for its prompt.
fn round_done(round: usize) -> String {
    format!(
        "Round {} is done; round {round} comes next when you ask for it.",
        round - 1
    )
}

/// How every round prompt begins.
const ROUND_PROMPT: &str = "Go on with round ";

/// Lines of the events log a round shows.
const SLICE_LINES: usize = 60;

/// The first line (1-based) of the events log slice round `round` shows.
fn slice_start(round: usize) -> usize {
    (round * 47) % (LOG_LINES - SLICE_LINES) + 1
}

/// The line (1-based) of `def parse_*_record_{k}` in a module as
/// `init-repo` writes it.
fn def_line(k: usize) -> usize {
    5 + 9 * k
}

/// The module round `round` (2 or more) reads and edits.
fn edited_module(round: usize) -> usize {
    (3 * round) % MODULES.len()
}

/// Round `round` (2 or more) of the session: the same task continued,
/// differently each round. It re-reads modules (one whole, two in slices
/// whose lines differ from round to round), greps,
/// reads a slice of the log and looks up a record seen rounds earlier,
/// edits two parsers of one module (docstrings, or a helper added before
/// a parser), compiles and tests, shows diffs and sometimes notes the
/// round in the README. Every edit applies to the repository as the
/// earlier rounds left it: the (module, kind) pairs edited are distinct
/// for up to `MAX_ROUNDS` rounds.
fn round_steps(round: usize) -> Vec<Step> {
    let plan = Round::of(round);
    let mut steps = vec![
        plan.review(),
        Step::Read(module_path(plan.ma)),
        plan.search(),
        plan.slice_of_mb(),
        plan.log_slice(),
        plan.log_query(),
        plan.module_records(),
        plan.lookup(),
        docstring_edit(plan.ma, plan.k1, round),
        plan.second_edit(),
        plan.compile(),
        plan.slice_of_mc(),
        plan.check(),
        Step::Shell(
            format!("git diff {}", module_path(plan.ma)),
            format!("Show the changes to {}", plan.ma),
        ),
        Step::ReadRange(module_path(plan.ma), def_line(plan.k1), 12),
    ];
    steps.extend(plan.readme_note());
    steps.extend(plan.limits_check());
    steps
}

/// What round `r` works on: the module it edits (`ma`), two others it
/// reads in slices (`mb`, `mc`), and parser kinds (`k1` and `k2` get
/// docstrings, `k3` a helper).
struct Round {
    r: usize,
    ma: &'static str,
    mb: &'static str,
    mc: &'static str,
    k1: usize,
    k2: usize,
    k3: usize,
}

impl Round {
    fn of(r: usize) -> Round {
        let n = MODULES.len();
        let a = edited_module(r);
        Round {
            r,
            ma: MODULES[a],
            mb: MODULES[(a + 1 + (r + 3) % 7) % n],
            mc: MODULES[(a + 1 + r % 7) % n],
            k1: (7 * r + 3) % FUNCTIONS,
            k2: (7 * r + 23) % FUNCTIONS,
            k3: (7 * r + 13) % FUNCTIONS,
        }
    }

    /// The round's first look at where the work stands.
    fn review(&self) -> Step {
        let r = self.r;
        match r % 3 {
            0 => Step::Shell("git diff --stat".into(), "See what changed so far".into()),
            1 => Step::Shell(
                "git status --short && git log --oneline -1".into(),
                "Check the working tree".into(),
            ),
            _ => Step::Shell(
                format!(
                    "git diff {} | head -80",
                    module_path(MODULES[edited_module(r - 1)])
                ),
                "Look at the previous round's changes".into(),
            ),
        }
    }

    /// A grep through the sources.
    fn search(&self) -> Step {
        let (r, mc) = (self.r, self.mc);
        let pc = module_path(mc);
        match r % 4 {
            0 => Step::Shell(
                format!("grep -n 'def parse_{mc}_record_' {pc} | head -{}", 12 + r),
                format!("List the {mc} parsers"),
            ),
            1 => Step::Shell(
                format!("grep -n 'raise ValueError' {pc} | head -15"),
                format!("Find the bound checks of {mc}"),
            ),
            2 => Step::Shell(
                format!(
                    "grep -rn 'amount = int(fields\\[1\\]) \\* {}' src | head -30",
                    2 + r % 7
                ),
                format!("Find the parsers that scale amounts by {}", 2 + r % 7),
            ),
            _ => Step::Shell(
                "grep -rn 'Parse record kind' src | grep -v 'split fields' | head -40".into(),
                "List the parser docstrings documented so far".into(),
            ),
        }
    }

    /// A slice of module `mb`.
    fn slice_of_mb(&self) -> Step {
        let r = self.r;
        let offset = 1 + (r * 37) % 250;
        Step::ReadRange(module_path(self.mb), offset, 40 + (r % 3) * 20)
    }

    /// The round's slice of the events log.
    fn log_slice(&self) -> Step {
        let start = slice_start(self.r);
        Step::Shell(
            format!(
                "sed -n '{start},{}p' data/events.log",
                start + SLICE_LINES - 1
            ),
            format!("Show log lines {start} to {}", start + SLICE_LINES - 1),
        )
    }

    /// A count or filter over the whole events log.
    fn log_query(&self) -> Step {
        let mc = self.mc;
        match self.r % 3 {
            0 => Step::Shell(
                format!(
                    "grep -c '{mc} record' data/events.log; grep '{mc} record .* rejected' data/events.log | head -12"
                ),
                format!("Count the {mc} records and show the rejected ones"),
            ),
            1 => Step::Shell(
                "awk '{split($NF, a, \"=\"); if (a[2] + 0 > 8500) print}' data/events.log | head -25"
                    .into(),
                "Show the records with amounts over 8500".into(),
            ),
            _ => Step::Shell(
                "cut -d' ' -f3,6 data/events.log | sort | uniq -c | sort -rn | head -16".into(),
                "Count the verdicts by module".into(),
            ),
        }
    }

    /// The log's records of module `mb`.
    fn module_records(&self) -> Step {
        let mb = self.mb;
        Step::Shell(
            format!(
                "grep -n '{mb} record' data/events.log | head -{}",
                30 + (self.r % 4) * 10
            ),
            format!("Show the {mb} records of the log"),
        )
    }

    /// A record shown many steps earlier, quoted from memory and looked up.
    fn lookup(&self) -> Step {
        let r = self.r;
        let (line, seen) = match r % 3 {
            0 if r >= 6 => (
                slice_start(r - 4) - 1 + (r * 13) % SLICE_LINES,
                format!("log lines shown in round {}", r - 4),
            ),
            2 => (
                13 * ((r * 7) % 40),
                "the rejected records listed in round 1".into(),
            ),
            _ => (
                (r * 37) % 250,
                "the start of the log shown in round 1".into(),
            ),
        };
        Step::Shell(
            format!("grep -n 'id={}' data/events.log", log_id(line)),
            format!(
                "Look up {} again: amount {} in {seen}",
                log_id(line),
                log_amount(line)
            ),
        )
    }

    /// The second edit of module `ma`: a docstring in even rounds, else a
    /// helper.
    fn second_edit(&self) -> Step {
        if self.r.is_multiple_of(2) {
            docstring_edit(self.ma, self.k2, self.r)
        } else {
            helper_edit(self.ma, self.k3, self.r)
        }
    }

    fn compile(&self) -> Step {
        let ma = self.ma;
        Step::Shell(
            format!(
                "python3 -m py_compile {} && echo compiled {ma}",
                module_path(ma)
            ),
            format!("Compile {ma}"),
        )
    }

    /// A slice of module `mc`.
    fn slice_of_mc(&self) -> Step {
        let r = self.r;
        // A slice, not the whole file: Claude Code answers a read that
        // repeats the file's last read (same lines, file unchanged) with a
        // stub.
        Step::ReadRange(module_path(self.mc), 1 + (r * 29) % 120, 240 + (r % 5) * 10)
    }

    /// The tests in even rounds, else the new helper tried.
    fn check(&self) -> Step {
        let (ma, k3) = (self.ma, self.k3);
        if self.r.is_multiple_of(2) {
            Step::Shell(
                "python3 -m unittest discover -s tests -v 2>&1 | tail -8".into(),
                "Run the tests".into(),
            )
        } else {
            Step::Shell(
                format!(
                    "PYTHONPATH=src python3 -c 'from inventory import {ma}; print({ma}.{ma}_amount_{k3}(\"X1,5\"))'"
                ),
                format!("Try the new helper {ma}_amount_{k3}"),
            )
        }
    }

    /// Every third round: the README read and the round noted in it.
    fn readme_note(&self) -> Vec<Step> {
        let (r, ma, k1) = (self.r, self.ma, self.k1);
        if !r.is_multiple_of(3) {
            return Vec::new();
        }
        let anchor = "Totals skip non-positive amounts; `inventory.summary` lists the limits.\n";
        vec![
            Step::Read("README.md".into()),
            Step::Edit(
                "README.md".into(),
                anchor.into(),
                format!(
                    "{anchor}Round {r}: the `{ma}` parsers of kinds {k1} and {} document their scaling.\n",
                    if r.is_multiple_of(2) {
                        self.k2
                    } else {
                        self.k3
                    }
                ),
            ),
        ]
    }

    /// Now and then: the limits looked up again, quoting their first values.
    fn limits_check(&self) -> Option<Step> {
        (self.r % 4 == 2).then(|| {
            Step::Shell(
                "grep -n 'LIMIT_[A-Z]* = ' src/inventory/*.py".into(),
                format!(
                    "Check the limits again: orders was {} and stock {} before round 1 doubled them",
                    limit(0),
                    limit(1)
                ),
            )
        })
    }
}

/// Round `round`'s edit of the docstring of `parse_{module}_record_{k}`.
fn docstring_edit(module: &str, k: usize, round: usize) -> Step {
    let upper = module.to_uppercase();
    Step::Edit(
        module_path(module),
        format!(
            "    \"\"\"Parse record kind {k} of {module}: split fields, convert amounts, check bounds.\"\"\""
        ),
        format!(
            "    \"\"\"Parse record kind {k} of {module} (round {round}): fields are id,amount; \
             the amount is scaled by {} and offset by {k}, at most LIMIT_{upper}.\"\"\"",
            k % 7 + 2
        ),
    )
}

/// Round `round`'s helper `{module}_amount_{k}`, added before
/// `parse_{module}_record_{k}`.
fn helper_edit(module: &str, k: usize, round: usize) -> Step {
    let def = format!("def parse_{module}_record_{k}(line):");
    Step::Edit(
        module_path(module),
        def.clone(),
        format!(
            "def {module}_amount_{k}(line):\n    \
             \"\"\"The amount of a kind-{k} {module} record (added in round {round}).\"\"\"\n    \
             return parse_{module}_record_{k}(line)[\"amount\"]\n\n\n{def}"
        ),
    )
}

/// The rounds a server was asked for: `SCRIPTED_ROUNDS`, 1 when unset.
fn rounds_from_env() -> Result<usize, String> {
    parse_rounds(std::env::var("SCRIPTED_ROUNDS").ok().as_deref())
}

/// The rounds `SCRIPTED_ROUNDS` asks for (`None`: unset, 1).
fn parse_rounds(text: Option<&str>) -> Result<usize, String> {
    let Some(text) = text else {
        return Ok(1);
    };
    text.trim()
        .parse::<usize>()
        .ok()
        .filter(|n| (1..=MAX_ROUNDS).contains(n))
        .ok_or(format!(
            "SCRIPTED_ROUNDS must be a whole number from 1 to {MAX_ROUNDS}, not {text:?}"
        ))
}

/// Checks that every edit and write of the script is in the repository
/// `dir`: each line an edit adds (a line of its new text that its old
/// text lacks) is a line of the file, and a written file holds what was
/// written. Prints a JSON verdict.
fn check_edits(dir: &Path, rounds: usize) -> Result<(), String> {
    let mut missing = Vec::new();
    let mut checked = 0;
    for (index, step) in script(rounds).iter().enumerate() {
        let (path, expected): (&String, Vec<&str>) = match step {
            Step::Edit(path, old, new) => (
                path,
                new.lines()
                    .filter(|l| !old.lines().any(|o| o == *l))
                    .collect(),
            ),
            Step::Write(path, content) => (path, content.lines().collect()),
            _ => continue,
        };
        checked += 1;
        let text = std::fs::read_to_string(dir.join(path)).unwrap_or_default();
        if expected
            .iter()
            .any(|line| !text.lines().any(|l| l == *line))
        {
            missing.push(format!("step {index}: {path}"));
        }
    }
    println!(
        "{}",
        json!({"rounds": rounds, "edits_checked": checked, "missing": missing})
    );
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} scripted edits are not in {}",
            missing.len(),
            dir.display()
        ))
    }
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

/// A Claude thinking block's text: the step's thought, then, with
/// `SCRIPTED_REASONING=N`, deliberation up to about N tokens (Claude's
/// thinking is text the client logs, so it is as long as it counts).
fn thinking(step: &Step, index: usize, tokens: usize) -> String {
    const DELIBERATION: &str = " Before acting I check which files this step touches, what the earlier steps changed there, and whether the command can fail.";
    let mut text = thought(step, index);
    let each = cwl::O200k.count(DELIBERATION).max(1);
    let have = cwl::O200k.count(&text);
    for _ in 0..tokens.saturating_sub(have).div_ceil(each) {
        text.push_str(DELIBERATION);
    }
    text
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
        Step::ReadRange(path, from, lines) => format!(
            "Step {index}: reading lines {from} to {} of {path}.",
            from + lines - 1
        ),
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
        Step::ReadRange(path, from, lines) => (
            "Read",
            json!({"file_path": abs(path), "offset": from, "limit": lines}),
        ),
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

/// The shell tool a Codex CLI request offers: `exec_command` (current
/// versions), `shell_command` with a command line (versions about 0.60 to
/// 0.100) or `shell` with an argument vector (versions up to about 0.30,
/// which also write their rollouts without the envelope).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CodexShell {
    Exec,
    Command,
    Argv,
}

impl CodexShell {
    /// The shell tool among a request's tools, if any.
    fn offered(tools: &Value) -> Option<CodexShell> {
        let tools = tools.as_array()?;
        let has = |name: &str| tools.iter().any(|t| t["name"] == name);
        if has("exec_command") {
            Some(CodexShell::Exec)
        } else if has("shell_command") {
            Some(CodexShell::Command)
        } else if has("shell") {
            Some(CodexShell::Argv)
        } else {
            None
        }
    }

    fn name(self) -> &'static str {
        match self {
            CodexShell::Exec => "exec_command",
            CodexShell::Command => "shell_command",
            CodexShell::Argv => "shell",
        }
    }

    /// The call's arguments for a step, in this tool's shape.
    fn arguments(self, step: &Step) -> Option<Value> {
        let call = codex_call(step)?;
        Some(match self {
            CodexShell::Exec => call,
            CodexShell::Command => json!({"command": call["cmd"]}),
            CodexShell::Argv => json!({"command": ["bash", "-lc", call["cmd"]]}),
        })
    }
}

/// Codex CLI's call for a step: `exec_command` with a shell command
/// (edits as `apply_patch` heredocs, which Codex runs itself, when it
/// offers no custom `apply_patch` tool: [`codex_patch`]).
fn codex_call(step: &Step) -> Option<Value> {
    let cmd = match step {
        Step::Shell(cmd, _) => cmd.clone(),
        Step::Read(path) => format!("cat -n {path}"),
        Step::ReadRange(path, from, lines) => {
            format!("nl -ba {path} | sed -n '{from},{}p'", from + lines - 1)
        }
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

/// Whether a Codex CLI request offers `apply_patch` as a freeform custom
/// tool (Codex CLI about 0.50 on): edits then go through it, as a real
/// model's do, rather than as shell heredocs.
fn offers_patch_tool(tools: &Value) -> bool {
    tools.as_array().is_some_and(|tools| {
        tools
            .iter()
            .any(|t| t["type"] == "custom" && t["name"] == "apply_patch")
    })
}

/// The patch of a step that edits or writes a file, for `apply_patch`.
fn codex_patch(step: &Step) -> Option<String> {
    match step {
        Step::Edit(path, old, new) => Some(format!(
            "*** Begin Patch\n*** Update File: {path}\n@@\n{}{}*** End Patch",
            patch_lines(old, '-'),
            patch_lines(new, '+')
        )),
        Step::Write(path, content) => Some(format!(
            "*** Begin Patch\n*** Add File: {path}\n{}*** End Patch",
            patch_lines(content, '+')
        )),
        _ => None,
    }
}

/// Whether a Responses input item is a tool's output (a function's or a
/// custom tool's).
fn is_output(item: &Value) -> bool {
    item["type"] == "function_call_output" || item["type"] == "custom_tool_call_output"
}

/// Whether a Codex command output reports a non-zero exit code: in a
/// header line, or (the `shell` tool) as JSON `metadata.exit_code`.
fn failed_exit(output: &str) -> bool {
    if let Ok(value) = serde_json::from_str::<Value>(output)
        && let Some(code) = value["metadata"]["exit_code"].as_i64()
    {
        return code != 0;
    }
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

/// The file a step reads, edits or writes.
fn step_path(step: &Step) -> Option<&str> {
    match step {
        Step::Read(path)
        | Step::ReadRange(path, _, _)
        | Step::Edit(path, _, _)
        | Step::Write(path, _) => Some(path),
        Step::Shell(..) | Step::Done(_) => None,
    }
}

/// The latest step whose result `ids` (a request's tool-result ids) hold.
fn latest_result<'a>(ids: impl Iterator<Item = &'a str>, prefix: &str) -> Option<usize> {
    ids.filter_map(|id| id.strip_prefix(prefix)?.parse::<usize>().ok())
        .max()
}

/// Adds to a `requests.jsonl` line whether the request resumed after a
/// compaction and which step a re-read stood for (only when so, so that
/// a session without compaction logs as before).
fn mark_resume(summary: &mut Value, resumed: bool, reread: Option<usize>) {
    if let Some(fields) = summary.as_object_mut() {
        if resumed {
            fields.insert("resumed".into(), json!(true));
        }
        if let Some(step) = reread {
            fields.insert("reread".into(), json!(step));
        }
    }
}

struct Server {
    repo: PathBuf,
    log_dir: PathBuf,
    script: Vec<Step>,
    seq: AtomicUsize,
    /// Whether to plan folds and call `recall` (`SCRIPTED_RECALL=1`).
    recall: bool,
    /// Per round from the second, the step it starts at, when each round
    /// waits for its own prompt (`SCRIPTED_PROMPTS=1`); empty otherwise.
    prompted_rounds: Vec<(usize, usize)>,
    /// Every how many steps the step's call comes with a plan call, when
    /// the client offers a plan tool (`SCRIPTED_PLANS=N`; 0: never).
    plans: usize,
    /// Reasoning tokens each Responses reasoning item stands for
    /// (`SCRIPTED_REASONING=N`; 0 when unset).
    reasoning: usize,
    /// The furthest step any request asked for: where a request that holds
    /// no result of this server's calls (after a client's compaction)
    /// resumes.
    progress: AtomicUsize,
    /// Summaries written for clients' compactions so far.
    compactions: AtomicUsize,
    /// The files Claude Code read, edited or wrote since its latest
    /// compaction (`None` before any): a compaction makes it forget them.
    touched: std::sync::Mutex<Option<std::collections::HashSet<String>>>,
}

/// What Claude Code's summarising (compaction) request asks.
const CLAUDE_COMPACTION: &str = "create a detailed summary of";

/// The line the summaries this server writes end with, before the step
/// the script resumes at: a request after a client's compaction says
/// where the script stands in its visible text.
const RESUME_MARKER: &str = "Resume at scripted step ";

/// The furthest step the resume markers in `text` name.
fn resume_marker(text: &str) -> Option<usize> {
    text.match_indices(RESUME_MARKER)
        .filter_map(|(at, _)| {
            let rest = &text[at + RESUME_MARKER.len()..];
            let end = rest
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(rest.len());
            rest[..end].parse().ok()
        })
        .max()
}

/// The step a `reread` call (a `Read` made after a compaction, before
/// the edit it stands for) stands for, from its result's id.
fn reread_step(ids: &[String], prefix: &str) -> Option<usize> {
    ids.iter()
        .find_map(|id| id.strip_prefix(prefix)?.parse().ok())
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

/// What the server sends back for one request.
struct Reply {
    status: StatusCode,
    content_type: &'static str,
    body: String,
}

/// A JSON reply with `status`.
fn json_reply(status: StatusCode, body: Value) -> Reply {
    Reply {
        status,
        content_type: "application/json",
        body: body.to_string(),
    }
}

/// What a body that is not JSON gets, inside either API's error envelope.
fn not_json() -> Value {
    json!({"type": "invalid_request_error", "message": "body is not JSON"})
}

/// A successful reply: `whole` as one JSON body, or the server-sent
/// `events` made of it when the request asks for a stream.
fn reply_to(request: &Value, whole: Value, events: impl FnOnce(Value) -> Vec<Value>) -> Reply {
    if request["stream"] != true {
        return json_reply(StatusCode::OK, whole);
    }
    Reply {
        status: StatusCode::OK,
        content_type: "text/event-stream",
        body: sse(&events(whole)),
    }
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

/// An Anthropic Messages reply holding `content`, streamed when the
/// request asks for it.
fn anthropic_reply(
    body: &Value,
    id: String,
    content: Vec<Value>,
    stop_reason: &str,
    tokens: usize,
) -> Reply {
    let model = body["model"]
        .as_str()
        .unwrap_or("claude-scripted")
        .to_string();
    let usage_out = 20 * content.len();
    let whole = json!({"id": id, "type": "message", "role": "assistant", "model": model,
                       "content": content, "stop_reason": stop_reason, "stop_sequence": null,
                       "usage": {"input_tokens": tokens, "output_tokens": usage_out}});
    reply_to(body, whole, |_| {
        let mut events = vec![
            json!({"type": "message_start", "message": {"id": id, "type": "message",
            "role": "assistant", "model": model, "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": tokens, "output_tokens": 1}}}),
        ];
        for (index, block) in content.iter().enumerate() {
            events.extend(block_events(index, block));
        }
        events.push(json!({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": null}, "usage": {"output_tokens": usage_out}}));
        events.push(json!({"type": "message_stop"}));
        events
    })
}

/// The stream events of one Anthropic content block (a tool call's input
/// in two parts).
fn block_events(index: usize, block: &Value) -> Vec<Value> {
    let mut events = Vec::new();
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
    events
}

/// An OpenAI Responses reply holding `output`, streamed when the request
/// asks for it; a reasoning item in it stands for `reasoning` tokens.
fn responses_reply(
    body: &Value,
    id: String,
    output: Vec<Value>,
    tokens: usize,
    reasoning: usize,
) -> Reply {
    let reasoning = if output.iter().any(|item| item["type"] == "reasoning") {
        reasoning
    } else {
        0
    };
    let generated = 20 * output.len() + reasoning;
    let usage = json!({"input_tokens": tokens, "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": generated, "output_tokens_details": {"reasoning_tokens": reasoning},
        "total_tokens": tokens + generated});
    let response = json!({"id": id, "object": "response", "status": "completed",
        "model": body["model"], "output": output, "usage": usage});
    reply_to(body, response, |response| {
        let mut events = vec![json!({"type": "response.created", "response": {"id": id,
            "object": "response", "status": "in_progress", "output": []}})];
        for (index, item) in output.iter().enumerate() {
            events.push(
                json!({"type": "response.output_item.added", "output_index": index, "item": item}),
            );
            if item["type"] == "message" {
                events.push(
                    json!({"type": "response.output_text.delta", "output_index": index,
                    "item_id": item["id"], "content_index": 0, "delta": item["content"][0]["text"]}),
                );
            }
            events.push(
                json!({"type": "response.output_item.done", "output_index": index, "item": item}),
            );
        }
        events.push(json!({"type": "response.completed", "response": response}));
        events
    })
}

/// An Anthropic text block.
fn text_block(text: String) -> Value {
    json!({"type": "text", "text": text})
}

/// An Anthropic tool call.
fn tool_use(id: String, name: &str, input: Value) -> Value {
    json!({"type": "tool_use", "id": id, "name": name, "input": input})
}

/// A Responses assistant message.
fn output_message(id: String, text: String) -> Value {
    json!({"type": "message", "id": id, "role": "assistant", "status": "completed",
           "content": [{"type": "output_text", "text": text, "annotations": []}]})
}

/// A Responses function call; the `fc_` and `call_` ids end in `suffix`.
fn function_call(prefix: &str, suffix: &str, name: &str, arguments: String) -> Value {
    json!({"type": "function_call", "id": format!("fc_{prefix}_{suffix}"),
           "call_id": format!("call_{prefix}_{suffix}"), "name": name,
           "arguments": arguments, "status": "completed"})
}

/// A request to the model APIs, as both handlers read it.
struct Inbound<'a> {
    /// The API's name in the log.
    api: &'static str,
    path: &'a str,
    raw: &'a [u8],
    body: Value,
    /// Its input tokens, as reported.
    tokens: usize,
    /// What its history holds, and how many (`messages` or `items`).
    count: (&'static str, usize),
}

/// What the log says of a request and the step it asks for (`None`: a
/// side request).
#[derive(Default)]
struct Turn {
    step: Option<usize>,
    /// Whether the latest assistant turn is the one this server sent.
    latest_ok: Option<bool>,
    tool_error: bool,
    /// The logged result of a `recall` call it answers.
    recall: Option<Value>,
    /// Whether it resumed after a compaction.
    resumed: bool,
    /// The step a re-read it answers stands for.
    reread: Option<usize>,
}

/// What a reply does.
enum Move {
    /// Ends the turn until round `round` is asked for.
    Pause { step: usize, round: usize },
    /// Reads the file step `step` edits again (Claude Code).
    Reread(usize),
    /// Calls `recall` on `id` before step `step`.
    Recall { step: usize, id: String },
    /// The step's call.
    Step(usize),
    /// A short text for a side request.
    Side,
}

impl Move {
    /// How the reply's ids end (`side`: for a side request).
    fn suffix(&self, side: &str) -> String {
        match self {
            Move::Pause { step, .. } => format!("pause_{step:03}"),
            Move::Reread(step) => format!("reread_{step:03}"),
            Move::Recall { step, .. } => format!("recall_{step:03}"),
            Move::Step(step) => format!("{step:03}"),
            Move::Side => side.to_string(),
        }
    }
}

/// Whether a Claude Code request asks for a summary of the session.
fn claude_compacting(messages: &[Value]) -> bool {
    messages
        .last()
        .is_some_and(|m| m["role"] == "user" && text_of(&m["content"]).contains(CLAUDE_COMPACTION))
}

/// Whether a Claude Code request is the main session's (Bash among its
/// tools) rather than a side one.
fn claude_main(body: &Value, messages: &[Value]) -> bool {
    // Claude Code 2.0 warms its sub-agents up with a lone "Warmup"
    // prompt, Bash among their tools: a side request.
    let warmup = messages.len() == 1 && text_of(&messages[0]["content"]).trim() == "Warmup";
    !warmup
        && body["tools"]
            .as_array()
            .is_some_and(|t| t.iter().any(|t| t["name"] == "Bash"))
}

/// Whether a Codex CLI request asks for a summary: its history of calls
/// ends in a user message that is no round prompt.
fn codex_compacting(input: &[Value], latest: Option<usize>) -> bool {
    let prompted = input
        .iter()
        .rev()
        .take_while(|item| item["type"] == "message")
        .any(|item| item["role"] == "user" && text_of(&item["content"]).contains(ROUND_PROMPT));
    latest.is_some()
        && !prompted
        && input
            .last()
            .is_some_and(|item| item["type"] == "message" && item["role"] == "user")
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

    /// Where a request that holds no result of this server's latest call
    /// resumes: the furthest of the progress so far, the resume markers in
    /// its text and one past the latest step whose result it holds
    /// (`latest`); 0 for the first request of a session.
    fn resume(&self, raw: &[u8], latest: Option<usize>) -> usize {
        let marker = resume_marker(&String::from_utf8_lossy(raw));
        let step = [
            Some(self.progress.load(Ordering::SeqCst)),
            marker,
            latest.map(|s| s + 1),
        ]
        .into_iter()
        .flatten()
        .max()
        .unwrap_or(0);
        self.advance(step)
    }

    /// Whether Claude Code has compacted since it last read, edited or
    /// wrote `path`.
    fn forgotten(&self, path: &str) -> bool {
        self.touched
            .lock()
            .expect("not poisoned")
            .as_ref()
            .is_some_and(|paths| !paths.contains(path))
    }

    /// Records that Claude Code is about to read, edit or write `path`.
    fn touch(&self, path: &str) {
        if let Some(paths) = self.touched.lock().expect("not poisoned").as_mut() {
            paths.insert(path.to_string());
        }
    }

    /// The round that `step` starts when the request (`raw`) has not yet
    /// been given that round's prompt: the session then ends its turn and
    /// waits for it (`SCRIPTED_PROMPTS=1`).
    fn awaits_prompt(&self, step: usize, raw: &[u8]) -> Option<usize> {
        let &(_, round) = self.prompted_rounds.iter().find(|(at, _)| *at == step)?;
        let text = String::from_utf8_lossy(raw);
        (!text.contains(&round_prompt(round))).then_some(round)
    }

    /// Records that a request asked for `step`; returns it.
    fn advance(&self, step: usize) -> usize {
        self.progress.fetch_max(step, Ordering::SeqCst);
        step
    }

    /// The summary a client's compaction request gets: what was done, what
    /// comes next and the resume marker for step `next`.
    fn compaction_summary(&self, next: usize) -> String {
        let next = next.min(self.script.len() - 1);
        let mut edited: Vec<String> = Vec::new();
        for step in &self.script[..next] {
            if let Step::Edit(path, _, _) | Step::Write(path, _) = step
                && !edited.contains(path)
            {
                edited.push(path.clone());
            }
        }
        let recent: Vec<String> = (next.saturating_sub(6)..next)
            .map(|i| format!("   - {}", narration(&self.script[i], i)))
            .collect();
        format!(
            "<analysis>\nThe user asked to tidy the inventory package; the work went step by step \
             through reads, greps, log slices, edits and test runs. {next} steps are done.\n</analysis>\n\
             <summary>\n\
             1. Primary Request and Intent: tidy the inventory package (double the orders and \
             stock limits, make every total skip non-positive amounts, add a limits summary \
             module, mention it in the README), then document the parsers.\n\
             2. Key Technical Concepts: Python modules in src/inventory with one parser per \
             record kind and a LIMIT_ constant each; data/events.log holds the records.\n\
             3. Files and Code Sections: edited so far: {}.\n\
             4. Errors and fixes: none.\n\
             5. Problem Solving: every change compiled and the tests pass.\n\
             6. All user messages: the request above.\n\
             7. Pending Tasks: the remaining scripted steps.\n\
             8. Current Work: the latest steps:\n{}\n\
             9. Optional Next Step: {}\n\
             {RESUME_MARKER}{next}.\n</summary>",
            if edited.is_empty() {
                "nothing yet".to_string()
            } else {
                edited.join(", ")
            },
            recent.join("\n"),
            narration(&self.script[next], next)
        )
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

    /// The request body as JSON; when it is not, the request is logged and
    /// gets a 400 with `error`.
    fn parse(&self, api: &str, path: &str, raw: &[u8], error: Value) -> Result<Value, Reply> {
        serde_json::from_slice::<Value>(raw).map_err(|_| {
            self.log(api, raw, json!({"path": path, "error": "not JSON"}));
            json_reply(StatusCode::BAD_REQUEST, error)
        })
    }

    /// Logs a compaction request; returns the step its summary resumes at
    /// and the compaction's number.
    fn compaction(&self, inbound: &Inbound, latest: Option<usize>) -> (usize, usize) {
        let next = self.resume(inbound.raw, latest);
        let (count, len) = inbound.count;
        self.log(
            inbound.api,
            inbound.raw,
            json!({"path": inbound.path, "kind": "compaction", "model": inbound.body["model"],
                   "step": next, (count): len, "input_tokens": inbound.tokens}),
        );
        (next, self.compactions.fetch_add(1, Ordering::SeqCst))
    }

    /// The step a main request asks for: the furthest its results name
    /// (`named`, or one past `from_ids`'s step), else where it resumes;
    /// with whether it resumed past the start.
    fn requested(
        &self,
        raw: &[u8],
        latest: Option<usize>,
        named: Option<usize>,
        from_ids: usize,
    ) -> (usize, bool) {
        if named.is_some() || from_ids > 0 {
            (self.advance(named.max(Some(from_ids)).unwrap_or(0)), false)
        } else {
            let step = self.resume(raw, latest);
            (step, step > 0)
        }
    }

    /// The turn of a main request for `step` (the final answer past the
    /// script's end).
    fn turn_at(&self, step: usize, resumed: bool) -> Turn {
        Turn {
            step: Some(step.min(self.script.len() - 1)),
            resumed,
            ..Turn::default()
        }
    }

    /// Logs a request with what its turn showed.
    fn log_turn(&self, inbound: &Inbound, turn: &Turn) {
        let (count, len) = inbound.count;
        let mut summary = json!({"path": inbound.path,
               "kind": if turn.step.is_some() {"main"} else {"side"},
               "model": inbound.body["model"], "step": turn.step, (count): len,
               "input_tokens": inbound.tokens, "latest_turn_ok": turn.latest_ok,
               "tool_error": turn.tool_error, "recall": turn.recall});
        mark_resume(&mut summary, turn.resumed, turn.reread);
        self.log(inbound.api, inbound.raw, summary);
    }

    /// What the reply to a request for `step` does: waits for a round's
    /// prompt, reads a file again (`rereads`), calls `recall` on a fold
    /// pointer the request shows (unless it `called` it already) or
    /// makes the step's call.
    fn next_move(&self, raw: &[u8], step: Option<usize>, rereads: bool, called: bool) -> Move {
        let Some(step) = step else {
            return Move::Side;
        };
        if let Some(round) = self.awaits_prompt(step, raw) {
            return Move::Pause { step, round };
        }
        if rereads {
            return Move::Reread(step);
        }
        if self.recall
            && !called
            && let Some(id) = folded_id(&String::from_utf8_lossy(raw))
        {
            return Move::Recall { step, id };
        }
        Move::Step(step)
    }

    /// A side request's text: a fold plan for Self-GC's planner, else a
    /// title.
    fn side_text(&self, raw: &[u8]) -> String {
        if self.recall && String::from_utf8_lossy(raw).contains(PLANNER) {
            fold_plan(&String::from_utf8_lossy(raw))
        } else {
            "Scripted inventory session".to_string()
        }
    }

    fn anthropic(&self, path: &str, raw: &[u8]) -> Reply {
        let error = json!({"type": "error", "error": not_json()});
        let body = match self.parse("anthropic", path, raw, error) {
            Ok(body) => body,
            Err(reply) => return reply,
        };
        let tokens = anthropic_tokens(&body);
        if path.contains("count_tokens") {
            self.log(
                "anthropic",
                raw,
                json!({"path": path, "kind": "count_tokens", "input_tokens": tokens}),
            );
            return json_reply(StatusCode::OK, json!({"input_tokens": tokens}));
        }
        let messages = body["messages"].as_array().cloned().unwrap_or_default();
        let latest = latest_result(
            messages
                .iter()
                .filter_map(|m| m["content"].as_array())
                .flatten()
                .filter(|b| b["type"] == "tool_result")
                .filter_map(|b| b["tool_use_id"].as_str()),
            "toolu_cwl_",
        );
        let main = claude_main(&body, &messages);
        let inbound = Inbound {
            api: "anthropic",
            path,
            raw,
            body,
            tokens,
            count: ("messages", messages.len()),
        };
        if claude_compacting(&messages) {
            return self.claude_compaction(&inbound, latest);
        }
        let turn = if main {
            self.claude_turn(&inbound, &messages, latest)
        } else {
            Turn::default()
        };
        self.log_turn(&inbound, &turn);
        let step = turn.step;
        // After a compaction Claude Code forgets which files were read, and
        // its Edit refuses a file not read: read it again first.
        let rereads = step.is_some_and(|s| match &self.script[s] {
            Step::Edit(path, _, _) => turn.resumed || self.forgotten(path),
            _ => false,
        });
        if let Some(path) = step.and_then(|s| step_path(&self.script[s])) {
            self.touch(path);
        }
        let called = messages.iter().any(|m| {
            m["content"].as_array().is_some_and(|c| {
                c.iter()
                    .any(|b| b["type"] == "tool_use" && b["name"] == "recall")
            })
        });
        let next = self.next_move(raw, step, rereads, called);
        let (content, stop_reason) = self.claude_content(&inbound, &next);
        // Claude Code joins the blocks of responses with the same id.
        let id = format!("msg_cwl_{}", next.suffix("999"));
        anthropic_reply(&inbound.body, id, content, stop_reason, tokens)
    }

    /// The summary a Claude Code compaction request gets; Claude Code then
    /// forgets which files it read.
    fn claude_compaction(&self, inbound: &Inbound, latest: Option<usize>) -> Reply {
        let (next, n) = self.compaction(inbound, latest);
        *self.touched.lock().expect("not poisoned") = Some(Default::default());
        let content = vec![text_block(self.compaction_summary(next))];
        anthropic_reply(
            &inbound.body,
            format!("msg_cwl_summary_{n:03}"),
            content,
            "end_turn",
            inbound.tokens,
        )
    }

    /// The turn of a Claude Code main request: the step it asks for, from
    /// the results its last message holds, and what they report.
    fn claude_turn(&self, inbound: &Inbound, messages: &[Value], latest: Option<usize>) -> Turn {
        let last: &[Value] = messages
            .last()
            .and_then(|m| m["content"].as_array())
            .map_or(&[], Vec::as_slice);
        let last_ids: Vec<String> = last
            .iter()
            .filter(|b| b["type"] == "tool_result")
            .filter_map(|b| b["tool_use_id"].as_str().map(String::from))
            .collect();
        let recalled = self
            .recall
            .then(|| recall_step(&last_ids, "toolu_cwl_recall_"))
            .flatten();
        let recall = recalled.map(|_| {
            let result = last
                .iter()
                .find(|b| {
                    b["tool_use_id"]
                        .as_str()
                        .is_some_and(|id| id.starts_with("toolu_cwl_recall_"))
                })
                .cloned()
                .unwrap_or(Value::Null);
            self.recalled(&text_of(&result["content"]), result["is_error"] == true)
        });
        let reread = reread_step(&last_ids, "toolu_cwl_reread_");
        let from_ids = next_step(&last_ids, "toolu_cwl_");
        let (step, resumed) = self.requested(inbound.raw, latest, recalled.max(reread), from_ids);
        let tool_error = last
            .iter()
            .any(|b| b["type"] == "tool_result" && b["is_error"] == true);
        let latest_ok = (step > 0 && recalled.is_none() && reread.is_none() && !resumed)
            .then(|| self.claude_latest_ok(messages, step - 1));
        Turn {
            latest_ok,
            tool_error,
            recall,
            reread,
            ..self.turn_at(step, resumed)
        }
    }

    /// Whether the latest assistant turn of `messages` holds the call this
    /// server sent for step `sent`.
    fn claude_latest_ok(&self, messages: &[Value], sent: usize) -> bool {
        let expected = claude_call(&self.script[sent], &self.repo);
        let assistant = messages.iter().rev().find(|m| m["role"] == "assistant");
        let call = assistant
            .and_then(|m| m["content"].as_array())
            .into_iter()
            .flatten()
            .find(|b| b["type"] == "tool_use");
        match (expected, call) {
            (Some((name, input)), Some(call)) => {
                call["name"] == name
                    && call["id"] == format!("toolu_cwl_{sent:03}")
                    && input
                        .as_object()
                        .is_some_and(|fields| fields.iter().all(|(k, v)| call["input"][k] == *v))
            }
            _ => false,
        }
    }

    /// A Claude Code reply's content blocks and stop reason.
    fn claude_content(&self, inbound: &Inbound, next: &Move) -> (Vec<Value>, &'static str) {
        match next {
            Move::Pause { round, .. } => (vec![text_block(round_done(*round))], "end_turn"),
            Move::Reread(step) => {
                let Step::Edit(path, _, _) = &self.script[*step] else {
                    unreachable!("checked")
                };
                let file_path = self.repo.join(path).display().to_string();
                let content = vec![
                    text_block(format!(
                        "Step {step}: reading {path} again before editing it."
                    )),
                    tool_use(
                        format!("toolu_cwl_reread_{step:03}"),
                        "Read",
                        json!({"file_path": file_path}),
                    ),
                ];
                (content, "tool_use")
            }
            Move::Recall { step, id } => {
                let content = vec![
                    text_block(format!("Step {step}: recalling {id}.")),
                    tool_use(
                        format!("toolu_cwl_recall_{step:03}"),
                        "recall",
                        json!({"episode": id}),
                    ),
                ];
                (content, "tool_use")
            }
            Move::Step(step) => self.claude_step(&inbound.body["tools"], *step),
            Move::Side => (vec![text_block(self.side_text(inbound.raw))], "end_turn"),
        }
    }

    /// Step `step` in Claude Code's shape: thinking, narration, its call
    /// and a plan call when one is due.
    fn claude_step(&self, tools: &Value, step: usize) -> (Vec<Value>, &'static str) {
        let current = &self.script[step];
        let mut content = vec![
            json!({"type": "thinking", "thinking": thinking(current, step, self.reasoning),
                   "signature": opaque(step, SIGNATURE_BYTES)}),
            text_block(narration(current, step)),
        ];
        let Some((name, input)) = claude_call(current, &self.repo) else {
            return (content, "end_turn");
        };
        content.push(tool_use(format!("toolu_cwl_{step:03}"), name, input));
        if let Some(todos) = self.plan_due(step, tools, "TodoWrite") {
            content.push(tool_use(
                format!("toolu_plan_{step:03}"),
                "TodoWrite",
                json!({"todos": todos}),
            ));
        }
        (content, "tool_use")
    }

    fn responses(&self, path: &str, raw: &[u8]) -> Reply {
        let body = match self.parse("responses", path, raw, json!({"error": not_json()})) {
            Ok(body) => body,
            Err(reply) => return reply,
        };
        let tokens = responses_tokens(&body, self.reasoning);
        let input = body["input"].as_array().cloned().unwrap_or_default();
        let latest = latest_result(
            input
                .iter()
                .filter(|item| is_output(item))
                .filter_map(|item| item["call_id"].as_str()),
            "call_cwl_",
        );
        let inbound = Inbound {
            api: "responses",
            path,
            raw,
            body,
            tokens,
            count: ("items", input.len()),
        };
        // A compaction: the remote endpoint, or the history of calls
        // followed by a user message (the summarising prompt).
        let remote = path.contains("/compact");
        if remote || codex_compacting(&input, latest) {
            return self.codex_compaction(&inbound, &input, latest, remote);
        }
        let shell = CodexShell::offered(&inbound.body["tools"]);
        let turn = match shell {
            Some(shell) => self.codex_turn(&inbound, &input, latest, shell),
            None => Turn::default(),
        };
        self.log_turn(&inbound, &turn);
        let called = input
            .iter()
            .any(|item| item["type"] == "function_call" && item["name"] == "recall");
        let next = self.next_move(raw, turn.step, false, called);
        self.codex_reply(&inbound, shell, &next)
    }

    /// The summary a Codex CLI compaction request gets: the history to go
    /// on with for the remote endpoint, else a message.
    fn codex_compaction(
        &self,
        inbound: &Inbound,
        input: &[Value],
        latest: Option<usize>,
        remote: bool,
    ) -> Reply {
        let (next, n) = self.compaction(inbound, latest);
        let summary = self.compaction_summary(next);
        if remote {
            let mut history: Vec<Value> = input
                .iter()
                .filter(|item| item["type"] == "message" && item["role"] == "user")
                .cloned()
                .collect();
            history.push(json!({"type": "message", "role": "user",
                "content": [{"type": "input_text", "text": summary}]}));
            return json_reply(StatusCode::OK, json!({"output": history}));
        }
        let output = vec![output_message(format!("msg_cwl_summary_{n:03}"), summary)];
        responses_reply(
            &inbound.body,
            format!("resp_cwl_summary_{n:03}"),
            output,
            inbound.tokens,
            self.reasoning,
        )
    }

    /// The turn of a Codex CLI main request: the step it asks for, from
    /// the outputs since its latest user message, and what they report.
    fn codex_turn(
        &self,
        inbound: &Inbound,
        input: &[Value],
        latest: Option<usize>,
        shell: CodexShell,
    ) -> Turn {
        let tail: Vec<String> = input
            .iter()
            .rev()
            .take_while(|item| item["type"] != "message" || item["role"] != "user")
            .filter(|item| is_output(item))
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
        let recall = recalled.map(|_| {
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
            self.recalled(&text_of(&result["output"]), false)
        });
        let from_ids = next_step(&tail, "call_cwl_");
        let (step, resumed) = self.requested(inbound.raw, latest, recalled, from_ids);
        let tool_error = input
            .last()
            .filter(|item| is_output(item))
            .is_some_and(|item| failed_exit(&text_of(&item["output"])));
        let latest_ok = (step > 0 && recalled.is_none() && !resumed)
            .then(|| self.codex_latest_ok(&inbound.body["tools"], input, shell, step - 1));
        Turn {
            latest_ok,
            tool_error,
            recall,
            ..self.turn_at(step, resumed)
        }
    }

    /// Whether the latest call in `input` is the one this server sent for
    /// step `sent`, in the shape the request's `tools` ask for.
    fn codex_latest_ok(
        &self,
        tools: &Value,
        input: &[Value],
        shell: CodexShell,
        sent: usize,
    ) -> bool {
        let call = input
            .iter()
            .rev()
            .find(|item| item["type"] == "function_call" || item["type"] == "custom_tool_call");
        let patch = codex_patch(&self.script[sent]).filter(|_| offers_patch_tool(tools));
        match (shell.arguments(&self.script[sent]), call) {
            (_, Some(call)) if patch.is_some() => {
                call["type"] == "custom_tool_call"
                    && call["name"] == "apply_patch"
                    && call["call_id"] == format!("call_cwl_{sent:03}")
                    && call["input"].as_str() == patch.as_deref()
            }
            (Some(arguments), Some(call)) => {
                call["name"] == shell.name()
                    && call["call_id"] == format!("call_cwl_{sent:03}")
                    && call["arguments"]
                        .as_str()
                        .and_then(|a| serde_json::from_str::<Value>(a).ok())
                        == Some(arguments)
            }
            _ => false,
        }
    }

    /// A Codex CLI reply doing `next`.
    fn codex_reply(&self, inbound: &Inbound, shell: Option<CodexShell>, next: &Move) -> Reply {
        let suffix = next.suffix("side");
        let message = |text| output_message(format!("msg_cwl_{suffix}"), text);
        let output = match next {
            Move::Pause { round, .. } => vec![message(round_done(*round))],
            Move::Recall { step, id } => vec![
                message(format!("Step {step}: recalling {id}.")),
                function_call("cwl", &suffix, "recall", json!({"episode": id}).to_string()),
            ],
            Move::Step(step) => {
                let current = &self.script[*step];
                let mut output = vec![
                    json!({"type": "reasoning", "id": format!("rs_cwl_{suffix}"),
                    "summary": [{"type": "summary_text", "text": thought(current, *step)}],
                    "encrypted_content": opaque(*step, SIGNATURE_BYTES)}),
                    message(narration(current, *step)),
                ];
                if let Some(shell) = shell {
                    output.extend(self.codex_calls(&inbound.body["tools"], shell, *step, &suffix));
                }
                output
            }
            Move::Side => vec![message(self.side_text(inbound.raw))],
            Move::Reread(_) => unreachable!("Codex CLI requests are never re-read"),
        };
        responses_reply(
            &inbound.body,
            format!("resp_cwl_{suffix}"),
            output,
            inbound.tokens,
            self.reasoning,
        )
    }

    /// Step `step`'s calls in Codex CLI's shape: a plan call when one is
    /// due, then the step's patch or shell call.
    fn codex_calls(
        &self,
        tools: &Value,
        shell: CodexShell,
        step: usize,
        suffix: &str,
    ) -> Vec<Value> {
        let Some(arguments) = shell.arguments(&self.script[step]) else {
            return Vec::new();
        };
        let mut calls = Vec::new();
        if let Some(plan) = self.plan_due(step, tools, "update_plan") {
            let arguments = json!({"plan": plan}).to_string();
            calls.push(function_call("plan", suffix, "update_plan", arguments));
        }
        calls.push(
            match codex_patch(&self.script[step]).filter(|_| offers_patch_tool(tools)) {
                Some(patch) => {
                    json!({"type": "custom_tool_call", "id": format!("ctc_cwl_{suffix}"),
                    "call_id": format!("call_cwl_{suffix}"), "name": "apply_patch",
                    "input": patch, "status": "completed"})
                }
                None => function_call("cwl", suffix, shell.name(), arguments.to_string()),
            },
        );
        calls
    }

    /// The items of a plan call due at `step` (`SCRIPTED_PLANS`), when the
    /// request offers `tool`: the steps around this one, done, in progress
    /// or pending, in the tool's own item shape (Claude Code's `TodoWrite`
    /// items as its schema lists them; Codex CLI's `update_plan` steps).
    fn plan_due(&self, step: usize, tools: &Value, tool: &str) -> Option<Vec<Value>> {
        if self.plans == 0 || !step.is_multiple_of(self.plans) {
            return None;
        }
        let offered = tools.as_array()?.iter().find(|t| t["name"] == tool)?;
        let first = step.saturating_sub(3);
        let last = (step + 5).min(self.script.len());
        let fields = offered["input_schema"]["properties"]["todos"]["items"]["properties"]
            .as_object()
            .cloned()
            .unwrap_or_default();
        Some(
            (first..last)
                .map(|at| {
                    let status = match at.cmp(&step) {
                        std::cmp::Ordering::Less => "completed",
                        std::cmp::Ordering::Equal => "in_progress",
                        std::cmp::Ordering::Greater => "pending",
                    };
                    let text = narration(&self.script[at], at);
                    if tool == "update_plan" {
                        return json!({"step": text, "status": status});
                    }
                    let mut item = serde_json::Map::new();
                    for (name, schema) in &fields {
                        let value = match name.as_str() {
                            "status" => json!(status),
                            "id" => json!(format!("{at}")),
                            "activeForm" => json!(format!("Working on step {at}")),
                            _ => match schema["enum"].as_array().and_then(|e| e.first()) {
                                Some(first) => first.clone(),
                                None => json!(text),
                            },
                        };
                        item.insert(name.clone(), value);
                    }
                    Value::Object(item)
                })
                .collect(),
        )
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
            json_reply(
                StatusCode::NOT_FOUND,
                json!({"error": {"type": "not_found", "message": format!("no scripted answer for {method} {path}")}}),
            )
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
     | tap --listen ADDR --to URL --log-dir DIR | check-turns TAP_DIR UPSTREAM_DIR \
     | check-edits DIR"
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
/// the last assistant message, or the user turn after it (Anthropic), or
/// the first of the output items (assistant messages, calls, reasoning)
/// before the trailing call outputs (Responses).
fn latest_turn(items: &[&serde_json::value::RawValue]) -> usize {
    let parsed: Vec<Value> = items
        .iter()
        .map(|raw| serde_json::from_str(raw.get()).unwrap_or(Value::Null))
        .collect();
    let anthropic = parsed.iter().all(|v| v.get("type").is_none());
    if anthropic {
        // A new user turn after it ends the assistant's turn: the provider
        // drops that turn's thinking, and so may the proxy.
        let assistant = parsed
            .iter()
            .rposition(|v| v["role"] == "assistant")
            .unwrap_or(0);
        return assistant.max(user_turn(&parsed).unwrap_or(0));
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
        Some("check-edits") => {
            let dir = args.get(1).ok_or_else(usage)?;
            check_edits(Path::new(dir), rounds_from_env()?)
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
            let rounds = rounds_from_env()?;
            let script = script(rounds);
            println!(
                "scripted upstream on http://{address} ({} steps)",
                script.len()
            );
            if rounds > 1 {
                println!("{rounds} rounds");
            }
            let server = Arc::new(Server {
                repo,
                log_dir,
                script,
                seq: AtomicUsize::new(0),
                recall: std::env::var("SCRIPTED_RECALL").is_ok_and(|v| v == "1"),
                prompted_rounds: if std::env::var("SCRIPTED_PROMPTS").is_ok_and(|v| v == "1") {
                    round_starts(rounds)
                } else {
                    Vec::new()
                },
                plans: std::env::var("SCRIPTED_PLANS")
                    .ok()
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(0),
                reasoning: std::env::var("SCRIPTED_REASONING")
                    .ok()
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(0),
                progress: AtomicUsize::new(0),
                compactions: AtomicUsize::new(0),
                touched: std::sync::Mutex::new(None),
            });
            serve(listener, server).await;
            Ok(())
        }
        _ => Err(usage()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("scripted-upstream-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("a temporary directory");
        dir
    }

    /// Applies the script's edits and writes as Claude Code's Edit does:
    /// the old text must occur exactly once.
    fn apply(dir: &Path, rounds: usize) -> Result<(), String> {
        for (index, step) in script(rounds).iter().enumerate() {
            match step {
                Step::Edit(path, old, new) => {
                    let text =
                        std::fs::read_to_string(dir.join(path)).map_err(|e| e.to_string())?;
                    if text.matches(old.as_str()).count() != 1 {
                        return Err(format!("step {index}: {old:?} is not once in {path}"));
                    }
                    std::fs::write(dir.join(path), text.replacen(old.as_str(), new, 1))
                        .map_err(|e| e.to_string())?;
                }
                Step::Write(path, content) => {
                    std::fs::write(dir.join(path), content).map_err(|e| e.to_string())?
                }
                _ => {}
            }
        }
        Ok(())
    }

    #[test]
    fn one_round_is_the_session_as_before() {
        let steps = script(1);
        assert_eq!(steps.len(), 36);
        assert!(matches!(&steps[35], Step::Done(text) if text.ends_with("the README says so.")));
    }

    #[test]
    fn every_edit_of_the_longest_session_applies_and_is_checked() {
        let dir = temp_dir("edits");
        init_repo(&dir).expect("the repository");
        assert!(check_edits(&dir, MAX_ROUNDS).is_err(), "nothing edited yet");
        apply(&dir, MAX_ROUNDS).expect("every edit applies once");
        check_edits(&dir, MAX_ROUNDS).expect("every edit is found");
        let steps = script(MAX_ROUNDS);
        assert!(steps.len() < 1000, "step ids keep three digits");
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }

    #[test]
    fn rounds_differ_and_lengthen_the_session() {
        let twelve = script(12);
        assert!(twelve.len() > 200, "{} steps", twelve.len());
        let calls = |round| {
            round_steps(round)
                .iter()
                .filter_map(codex_call)
                .map(|c| c.to_string())
                .collect::<Vec<_>>()
        };
        assert_ne!(calls(5), calls(6));
        // Rounds 5 and 13 edit the same module: they read, compile and diff
        // it alike, and do everything else differently.
        let shared = calls(5).iter().filter(|c| calls(13).contains(c)).count();
        assert_eq!(shared, 3, "rounds 5 and 13 share {shared} calls");
    }

    #[test]
    fn rounds_parse_with_a_clear_error() {
        assert_eq!(parse_rounds(None), Ok(1));
        assert_eq!(parse_rounds(Some("12")), Ok(12));
        for bad in ["0", "41", "twelve", ""] {
            let error = parse_rounds(Some(bad)).expect_err(bad);
            assert!(error.contains("SCRIPTED_ROUNDS"), "{error}");
        }
    }

    #[test]
    fn claude_thinking_is_as_long_as_asked() {
        let step = &script(1)[3];
        assert_eq!(thinking(step, 3, 0), thought(step, 3));
        let long = cwl::O200k.count(&thinking(step, 3, 400));
        assert!((400..440).contains(&long), "{long}");
    }

    #[test]
    fn a_new_user_turn_starts_the_latest_turn() {
        let raw = |items: &[Value]| -> Vec<Box<serde_json::value::RawValue>> {
            items
                .iter()
                .map(|item| serde_json::value::to_raw_value(item).unwrap())
                .collect()
        };
        let user = json!({"role": "user", "content": "go"});
        let call = json!({"role": "assistant", "content": [{"type": "thinking", "thinking": "t"},
            {"type": "tool_use", "id": "t1", "name": "Read", "input": {}}]});
        let result = json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "x"}]});
        let answer = json!({"role": "assistant", "content": [{"type": "text", "text": "done"}]});
        let within = raw(&[user.clone(), call.clone(), result.clone()]);
        let within: Vec<&serde_json::value::RawValue> = within.iter().map(|r| &**r).collect();
        assert_eq!(latest_turn(&within), 1, "tool results continue the turn");
        let next = raw(&[user.clone(), call, result, answer, user]);
        let next: Vec<&serde_json::value::RawValue> = next.iter().map(|r| &**r).collect();
        assert_eq!(latest_turn(&next), 4, "a prompt starts a new one");
    }

    #[test]
    fn messages_count_only_the_current_turns_thinking() {
        let thinking = |id: &str| {
            json!({"role": "assistant", "content": [
                {"type": "thinking", "thinking": "thinking it over", "signature": opaque(1, SIGNATURE_BYTES)},
                {"type": "tool_use", "id": id, "name": "Read", "input": {"file_path": "a.py"}}]})
        };
        let result = |id: &str| json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": id, "content": "x = 1"}]});
        let user =
            |text: &str| json!({"role": "user", "content": [{"type": "text", "text": text}]});
        let count = |messages: Vec<Value>| anthropic_tokens(&json!({"messages": messages}));
        let thought = cwl::O200k.count("thinking it over");
        let within = count(vec![user("first"), thinking("t1"), result("t1")]);
        let without = count(vec![
            user("first"),
            json!({"role": "assistant", "content": [
                {"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "a.py"}}]}),
            result("t1"),
        ]);
        assert_eq!(
            within,
            without + thought,
            "a tool result does not end the turn"
        );
        let next = count(vec![
            user("first"),
            thinking("t1"),
            result("t1"),
            json!({"role": "user", "content": "second"}),
        ]);
        let next_without = count(vec![
            user("first"),
            json!({"role": "assistant", "content": [
                {"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "a.py"}}]}),
            result("t1"),
            json!({"role": "user", "content": "second"}),
        ]);
        assert_eq!(
            next, next_without,
            "the earlier turn's thinking counts nothing"
        );
    }

    #[test]
    fn responses_count_only_the_current_turns_reasoning() {
        let reasoning = |text: &str| {
            json!({"type": "reasoning", "summary": [{"type": "summary_text", "text": text}],
                "encrypted_content": opaque(1, SIGNATURE_BYTES)})
        };
        let user = |text: &str| {
            json!({"type": "message", "role": "user",
            "content": [{"type": "input_text", "text": text}]})
        };
        let summary = cwl::O200k.count("thinking it over");
        let turn = |items: Vec<Value>| responses_tokens(&json!({"input": items}), 100);
        let one = turn(vec![user("first"), reasoning("thinking it over")]);
        let two = turn(vec![
            user("first"),
            reasoning("thinking it over"),
            user("second"),
        ]);
        let three = turn(vec![
            user("first"),
            reasoning("thinking it over"),
            user("second"),
            reasoning("thinking it over"),
        ]);
        let message = |text: &str| 4 + cwl::O200k.count(text);
        assert_eq!(one, message("first") + 100 + summary);
        assert_eq!(two, message("first") + message("second"));
        assert_eq!(
            three,
            two + 100 + summary,
            "the earlier turn's item counts nothing"
        );

        let server = Server {
            reasoning: 300,
            ..server(1)
        };
        let tools = json!([{"type": "function", "name": "exec_command"}]);
        let body = json!({"model": "gpt-5-codex", "tools": tools, "input": [user("go")]});
        let reply = codex_reply(&server, &body);
        let usage = &reply["usage"];
        assert_eq!(usage["output_tokens_details"]["reasoning_tokens"], 300);
        assert!(usage["output_tokens"].as_u64().unwrap() > 300);
    }

    #[test]
    fn resume_markers_give_the_furthest_step() {
        let text = format!("a {RESUME_MARKER}12.\nb {RESUME_MARKER}40.\n{RESUME_MARKER}x");
        assert_eq!(resume_marker(&text), Some(40));
        assert_eq!(resume_marker("no marker"), None);
    }

    fn server(rounds: usize) -> Server {
        // Tests run in parallel: each server logs to a folder of its own.
        static SERVERS: AtomicUsize = AtomicUsize::new(0);
        let n = SERVERS.fetch_add(1, Ordering::SeqCst);
        Server {
            repo: PathBuf::from("/repo"),
            log_dir: temp_dir(&format!("log-{rounds}-{n}")),
            script: script(rounds),
            seq: AtomicUsize::new(0),
            recall: false,
            prompted_rounds: Vec::new(),
            plans: 0,
            reasoning: 0,
            progress: AtomicUsize::new(0),
            compactions: AtomicUsize::new(0),
            touched: std::sync::Mutex::new(None),
        }
    }

    fn claude_request(messages: Value) -> Vec<u8> {
        json!({"model": "claude-sonnet-4-5", "tools": [{"name": "Bash"}], "messages": messages})
            .to_string()
            .into_bytes()
    }

    fn result(step: usize) -> Value {
        json!({"role": "user", "content": [{"type": "tool_result",
            "tool_use_id": format!("toolu_cwl_{step:03}"), "content": "ok"}]})
    }

    fn reply(server: &Server, body: Vec<u8>) -> Value {
        let reply = server.anthropic("/v1/messages", &body);
        assert_eq!(reply.status, StatusCode::OK);
        serde_json::from_str(&reply.body).expect("a JSON reply")
    }

    /// The first function call of a Codex reply.
    fn function_call(reply: &Value) -> Value {
        reply["output"]
            .as_array()
            .expect("output")
            .iter()
            .find(|item| item["type"] == "function_call")
            .expect("a function call")
            .clone()
    }

    fn codex_reply(server: &Server, body: &Value) -> Value {
        let reply = server.responses("/v1/responses", body.to_string().as_bytes());
        serde_json::from_str(&reply.body).expect("a JSON reply")
    }

    #[test]
    fn a_claude_compaction_neither_restarts_nor_repeats_the_script() {
        let server = server(3);
        let edit = server
            .script
            .iter()
            .position(|s| matches!(s, Step::Edit(..)))
            .expect("an edit");
        let before = edit - 1;
        let next = reply(&server, claude_request(json!([result(before - 1)])));
        assert_eq!(next["content"][2]["id"], format!("toolu_cwl_{before:03}"));
        let prompt = json!({"role": "user", "content": [{"type": "text",
            "text": "Your task is to create a detailed summary of the conversation so far."}]});
        let summary = reply(
            &server,
            claude_request(json!([result(before - 1), result(before), prompt])),
        );
        let text = summary["content"][0]["text"].as_str().expect("a summary");
        assert!(text.contains(&format!("{RESUME_MARKER}{edit}.")), "{text}");
        assert_eq!(summary["stop_reason"], "end_turn");
        // After the compaction only the summary is left: the edit's file is
        // read again, then the edit follows.
        let resumed = claude_request(json!([{"role": "user", "content": text}]));
        let first = reply(&server, resumed);
        assert_eq!(
            first["content"][1]["id"],
            format!("toolu_cwl_reread_{edit:03}")
        );
        assert_eq!(first["content"][1]["name"], "Read");
        let reread = json!([{"role": "user", "content": [{"type": "tool_result",
            "tool_use_id": format!("toolu_cwl_reread_{edit:03}"), "content": "file"}]}]);
        let then = reply(&server, claude_request(reread));
        assert_eq!(then["content"][2]["id"], format!("toolu_cwl_{edit:03}"));
        assert_eq!(then["content"][2]["name"], "Edit");
        // Without any marker or result, progress alone resumes the script.
        let bare = reply(
            &server,
            claude_request(json!([{"role": "user", "content": "go on"}])),
        );
        assert_eq!(
            bare["content"][1]["id"],
            format!("toolu_cwl_reread_{edit:03}")
        );
        let log = std::fs::read_to_string(server.log_dir.join("requests.jsonl")).expect("a log");
        assert_eq!(log.matches("\"kind\":\"compaction\"").count(), 1);
        assert_eq!(log.matches("\"resumed\":true").count(), 2);
        std::fs::remove_dir_all(&server.log_dir).expect("cleanup");
    }

    #[test]
    fn an_edit_after_a_claude_compaction_reads_its_file_again() {
        let server = server(2);
        let edit = server
            .script
            .iter()
            .position(|s| matches!(s, Step::Edit(..)))
            .expect("an edit");
        let prompt = json!({"role": "user", "content": [{"type": "text",
            "text": "Your task is to create a detailed summary of the conversation so far."}]});
        reply(&server, claude_request(json!([result(edit - 3), prompt])));
        // Claude Code kept the latest turn after its summary: the request
        // holds a result, yet the edit's file was read before the
        // compaction only.
        let kept = reply(&server, claude_request(json!([result(edit - 1)])));
        assert_eq!(
            kept["content"][1]["id"],
            format!("toolu_cwl_reread_{edit:03}")
        );
        let Step::Edit(path, _, _) = &server.script[edit] else {
            unreachable!("an edit")
        };
        assert_eq!(
            kept["content"][1]["input"]["file_path"],
            format!("/repo/{path}")
        );
        // An edit of a file already read since the compaction goes ahead.
        let next_edit = edit + 1;
        assert!(matches!(&server.script[next_edit], Step::Edit(p, _, _) if p != path));
        let Step::Edit(other, _, _) = &server.script[next_edit] else {
            unreachable!("an edit")
        };
        server.touch(other);
        let then = reply(&server, claude_request(json!([result(edit)])));
        assert_eq!(
            then["content"][2]["id"],
            format!("toolu_cwl_{next_edit:03}")
        );
        std::fs::remove_dir_all(&server.log_dir).expect("cleanup");
    }

    /// The blocks or items of `list` of type `kind`.
    fn of_type<'a>(list: &'a Value, kind: &str) -> Vec<&'a Value> {
        list.as_array()
            .expect("a list")
            .iter()
            .filter(|item| item["type"] == kind)
            .collect()
    }

    #[test]
    fn plan_calls_come_every_nth_step_when_the_client_offers_a_plan_tool() {
        let server = Server {
            plans: 2,
            ..server(1)
        };
        let todo_schema = json!({"properties": {"todos": {"items": {"properties": {
            "content": {"type": "string"}, "activeForm": {"type": "string"},
            "status": {"enum": ["pending", "in_progress", "completed"]}}}}}});
        let claude = |tools: Value, step: usize| {
            let body = json!({"model": "claude-sonnet-4-5", "tools": tools,
                "messages": [result(step - 1)]});
            reply(&server, body.to_string().into_bytes())
        };
        let with_todos =
            json!([{"name": "Bash"}, {"name": "TodoWrite", "input_schema": todo_schema}]);
        let due = claude(with_todos.clone(), 2);
        let calls = of_type(&due["content"], "tool_use");
        assert_eq!(calls.len(), 2, "{due}");
        assert_eq!(calls[0]["id"], "toolu_cwl_002", "the step's call first");
        assert_eq!(calls[1]["name"], "TodoWrite");
        let todos = calls[1]["input"]["todos"].as_array().unwrap();
        assert_eq!(todos[0]["status"], "completed");
        assert!(todos.iter().any(|t| t["status"] == "in_progress"));
        assert!(
            todos
                .iter()
                .all(|t| t["activeForm"].is_string() && t["content"].is_string())
        );
        let between = claude(with_todos, 3);
        assert_eq!(of_type(&between["content"], "tool_use").len(), 1);
        let without = claude(json!([{"name": "Bash"}]), 2);
        assert_eq!(of_type(&without["content"], "tool_use").len(), 1);

        let tools = json!([{"type": "function", "name": "exec_command"},
            {"type": "function", "name": "update_plan"}]);
        let output = json!({"type": "function_call_output", "call_id": "call_cwl_001", "output": "Process exited with code 0"});
        let codex = codex_reply(
            &server,
            &json!({"model": "gpt-5-codex", "tools": tools, "input": [output]}),
        );
        let calls = of_type(&codex["output"], "function_call");
        assert_eq!(calls.len(), 2, "{codex}");
        assert_eq!(calls[0]["name"], "update_plan", "the plan first");
        assert_eq!(calls[1]["call_id"], "call_cwl_002");
        let plan: Value = serde_json::from_str(calls[0]["arguments"].as_str().unwrap()).unwrap();
        assert!(
            plan["plan"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p["status"] == "in_progress")
        );
        std::fs::remove_dir_all(&server.log_dir).expect("cleanup");
    }

    #[test]
    fn a_sub_agent_warmup_is_a_side_request() {
        let server = server(1);
        let warmup = claude_request(json!([{"role": "user",
            "content": [{"type": "text", "text": "Warmup"}]}]));
        let answer = reply(&server, warmup);
        assert_eq!(answer["stop_reason"], "end_turn");
        assert!(
            answer["content"]
                .as_array()
                .unwrap()
                .iter()
                .all(|b| b["type"] == "text"),
            "{answer}"
        );
        let first = reply(
            &server,
            claude_request(json!([{"role": "user", "content": "go"}])),
        );
        assert_eq!(
            first["content"][2]["id"], "toolu_cwl_000",
            "the script starts unmoved"
        );
        std::fs::remove_dir_all(&server.log_dir).expect("cleanup");
    }

    #[test]
    fn each_round_waits_for_its_prompt_when_asked_to() {
        let server = Server {
            prompted_rounds: round_starts(3),
            ..server(3)
        };
        let (start, round) = server.prompted_rounds[0];
        assert_eq!(round, 2);
        assert!(matches!(server.script[start - 1], Step::Shell(..)));
        let paused = reply(&server, claude_request(json!([result(start - 1)])));
        assert_eq!(paused["stop_reason"], "end_turn");
        assert_eq!(paused["content"][0]["text"], round_done(2));
        assert_eq!(paused["id"], format!("msg_cwl_pause_{start:03}"));
        let prompt = json!({"role": "user", "content": round_prompt(2)});
        let history =
            json!([result(start - 1), {"role": "assistant", "content": paused["content"]}, prompt]);
        let next = reply(&server, claude_request(history));
        assert_eq!(next["content"][2]["id"], format!("toolu_cwl_{start:03}"));
        // Codex: the prompt after the pause is not a compaction request.
        let tools = json!([{"type": "function", "name": "exec_command"}]);
        let output = json!({"type": "function_call_output",
            "call_id": format!("call_cwl_{:03}", start - 1), "output": "Process exited with code 0"});
        let body = json!({"model": "gpt-5", "tools": tools, "input": [output]});
        let paused = codex_reply(&server, &body);
        assert_eq!(paused["output"][0]["content"][0]["text"], round_done(2));
        assert_eq!(paused["output"].as_array().map(Vec::len), Some(1));
        let prompt = json!({"type": "message", "role": "user",
            "content": [{"type": "input_text", "text": round_prompt(2)}]});
        let body = json!({"model": "gpt-5", "tools": tools,
            "input": [output, paused["output"][0], prompt]});
        let next = codex_reply(&server, &body);
        let call = function_call(&next);
        assert_eq!(call["call_id"], format!("call_cwl_{start:03}"));
        let log = std::fs::read_to_string(server.log_dir.join("requests.jsonl")).expect("a log");
        assert!(!log.contains("\"kind\":\"compaction\""), "{log}");
        std::fs::remove_dir_all(&server.log_dir).expect("cleanup");
    }

    #[test]
    fn an_older_codex_gets_shell_calls_with_an_argument_vector() {
        let server = server(1);
        let tools = json!([{"type": "function", "name": "shell"}, {"type": "function", "name": "view_image"}]);
        let user = json!({"type": "message", "role": "user",
            "content": [{"type": "input_text", "text": "Tidy the inventory package"}]});
        let body = json!({"model": "gpt-5", "tools": tools, "input": [user]});
        let first = codex_reply(&server, &body);
        let call = function_call(&first);
        assert_eq!(call["name"], "shell");
        assert_eq!(call["call_id"], "call_cwl_000");
        let cmd = codex_call(&server.script[0]).expect("a command")["cmd"].clone();
        let arguments: Value =
            serde_json::from_str(call["arguments"].as_str().expect("arguments")).expect("JSON");
        assert_eq!(arguments, json!({"command": ["bash", "-lc", cmd]}));
        let output =
            json!({"output": "ok\n", "metadata": {"exit_code": 0, "duration_seconds": 0.0}});
        let body = json!({"model": "gpt-5", "tools": tools, "input": [user, call,
            {"type": "function_call_output", "call_id": "call_cwl_000", "output": output.to_string()}]});
        let next = codex_reply(&server, &body);
        let called: Vec<&Value> = next["output"]
            .as_array()
            .expect("output")
            .iter()
            .filter(|item| item["type"] == "function_call")
            .collect();
        assert_eq!(called.len(), 1);
        assert_eq!(called[0]["call_id"], "call_cwl_001", "the script goes on");
        let logged = std::fs::read_to_string(server.log_dir.join("requests.jsonl")).expect("log");
        let last: Value =
            serde_json::from_str(logged.lines().last().expect("a line")).expect("JSON");
        assert_eq!(last["latest_turn_ok"], true);
        std::fs::remove_dir_all(&server.log_dir).expect("cleanup");
    }

    #[test]
    fn each_codex_shell_tool_gets_its_own_argument_shape() {
        let step = Step::Read("src/inventory/orders.py".into());
        let cmd = json!("cat -n src/inventory/orders.py");
        let offered = |names: &[&str]| {
            let tools: Vec<Value> = names
                .iter()
                .map(|n| json!({"type": "function", "name": n}))
                .collect();
            CodexShell::offered(&json!(tools))
        };
        let exec = offered(&["exec_command", "shell", "apply_patch"]).expect("a shell");
        assert_eq!(exec.arguments(&step), Some(json!({"cmd": cmd})));
        let command = offered(&["shell_command", "apply_patch"]).expect("a shell");
        assert_eq!(command.name(), "shell_command");
        assert_eq!(command.arguments(&step), Some(json!({"command": cmd})));
        let argv = offered(&["shell", "view_image"]).expect("a shell");
        assert_eq!(
            argv.arguments(&step),
            Some(json!({"command": ["bash", "-lc", cmd]}))
        );
        assert_eq!(offered(&["view_image"]), None, "a side request");
    }

    #[test]
    fn edits_go_through_a_custom_apply_patch_tool_when_codex_offers_one() {
        let edit = Step::Edit("src/a.py".into(), "x = 1".into(), "x = 2".into());
        let patch = codex_patch(&edit).expect("an edit has a patch");
        assert_eq!(
            patch,
            "*** Begin Patch\n*** Update File: src/a.py\n@@\n-x = 1\n+x = 2\n*** End Patch"
        );
        assert!(
            codex_call(&edit).expect("a heredoc")["cmd"]
                .as_str()
                .is_some_and(|cmd| cmd.contains(&patch)),
            "the heredoc carries the same patch"
        );
        assert_eq!(codex_patch(&Step::Read("src/a.py".into())), None);
        let custom = json!([{"type": "function", "name": "shell_command"},
                            {"type": "custom", "name": "apply_patch"}]);
        assert!(offers_patch_tool(&custom));
        let function = json!([{"type": "function", "name": "apply_patch"}]);
        assert!(
            !offers_patch_tool(&function),
            "a function tool takes JSON, not a patch"
        );
        assert!(is_output(&json!({"type": "custom_tool_call_output"})));
        assert!(is_output(&json!({"type": "function_call_output"})));
        assert!(!is_output(&json!({"type": "custom_tool_call"})));
    }

    #[test]
    fn exit_codes_are_read_from_headers_and_from_shell_metadata() {
        assert!(failed_exit("Process exited with code 2\nOutput:\n"));
        assert!(!failed_exit("Exit code: 0\nOutput:\nok"));
        assert!(failed_exit(
            r#"{"output":"boom","metadata":{"exit_code":1}}"#
        ));
        assert!(!failed_exit(
            r#"{"output":"ok","metadata":{"exit_code":0}}"#
        ));
        assert!(!failed_exit("plain text"));
    }

    #[test]
    fn a_codex_compaction_resumes_at_the_next_step() {
        let server = server(2);
        let tools = json!([{"type": "function", "name": "exec_command"}]);
        let call = |step: usize| {
            [
                json!({"type": "function_call", "name": "exec_command",
                       "call_id": format!("call_cwl_{step:03}"), "arguments": "{}"}),
                json!({"type": "function_call_output", "call_id": format!("call_cwl_{step:03}"),
                       "output": "ok"}),
            ]
        };
        let user = |text: &str| {
            json!({"type": "message", "role": "user",
            "content": [{"type": "input_text", "text": text}]})
        };
        let mut history = vec![user("Tidy the inventory package")];
        for step in 0..4 {
            history.extend(call(step));
        }
        history.push(user("Summarise the conversation for a handoff."));
        let body = json!({"model": "gpt-5-codex", "tools": tools, "input": history});
        let summary = codex_reply(&server, &body);
        let text = summary["output"][0]["content"][0]["text"]
            .as_str()
            .expect("a summary");
        assert!(text.contains(&format!("{RESUME_MARKER}4.")), "{text}");
        assert!(
            summary["output"].as_array().expect("output").len() == 1,
            "no call"
        );
        let resumed = json!({"model": "gpt-5-codex", "tools": tools,
            "input": [user("Tidy the inventory package"), user(text)]});
        let next = codex_reply(&server, &resumed);
        let calls: Vec<&Value> = next["output"]
            .as_array()
            .expect("output")
            .iter()
            .filter(|item| item["type"] == "function_call")
            .collect();
        assert_eq!(calls[0]["call_id"], "call_cwl_004");
        std::fs::remove_dir_all(&server.log_dir).expect("cleanup");
    }
}
