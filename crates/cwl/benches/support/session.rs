//! The synthetic session the steady-state benches grow: sequential tasks
//! of one expl (greps and reads with reasoning) and one act (edits and
//! shell runs), each closed by a plain answer.

use cwl::{Block, Message, ToolCall, ToolSpec, delimiter_spec};
use serde_json::json;

/// The tools the session's calls name, with `delimiter`.
pub fn tools() -> Vec<ToolSpec> {
    let mut tools: Vec<ToolSpec> = ["read", "write", "edit", "bash", "grep", "glob", "ls"]
        .iter()
        .map(|name| ToolSpec {
            name: name.to_string(),
            description: format!("The {name} tool."),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        })
        .collect();
    tools.push(delimiter_spec());
    tools
}

/// A tiny deterministic PRNG (xorshift64*), enough for shaping content.
pub struct Rng(pub u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn range(&mut self, low: usize, high: usize) -> usize {
        low + (self.next() % (high - low) as u64) as usize
    }
}

/// Text of about `tokens` tokens under the estimator (4 bytes a token).
fn text(rng: &mut Rng, tokens: usize) -> String {
    let mut out = String::with_capacity(tokens * 4);
    while out.len() < tokens * 4 {
        out.push_str(&format!(
            "src/m{}.rs:{} ",
            rng.range(0, 99),
            rng.range(0, 999)
        ));
    }
    out.truncate(tokens * 4);
    out
}

/// One model call: the results of the previous call's tools, then the
/// assistant message the model returned.
pub struct Turn {
    /// Results of the previous call's tools.
    pub results: Vec<Message>,
    /// What the model returned.
    pub reply: Message,
}

/// The session's generator.
pub struct Session {
    rng: Rng,
    next_id: u64,
    pending: Vec<Message>,
    /// When set, every call's arguments and every answer also name a path
    /// drawn from this generator (so the model's output uses episodes);
    /// `None` leaves the arguments free of names.
    names: Option<Rng>,
}

impl Session {
    /// A session seeded with `seed`; `names`: see [`Session::names`].
    pub fn new(seed: u64, names: Option<u64>) -> Self {
        Session {
            rng: Rng(seed),
            next_id: 0,
            pending: Vec::new(),
            names: names.map(Rng),
        }
    }

    fn name(&mut self) -> Option<String> {
        let rng = self.names.as_mut()?;
        Some(format!(
            "src/m{}.rs:{}",
            rng.range(0, 99),
            rng.range(0, 999)
        ))
    }

    fn call(
        &mut self,
        name: &str,
        arguments: String,
        output: String,
        reasoning: Option<String>,
    ) -> Turn {
        self.next_id += 1;
        let id = format!("call_{}", self.next_id);
        let mut content = Vec::new();
        if let Some(reasoning) = reasoning {
            content.push(Block::Reasoning {
                text: reasoning,
                signature: None,
            });
        }
        content.push(Block::ToolCall(ToolCall::new(&id, name, arguments)));
        let results = std::mem::take(&mut self.pending);
        self.pending
            .push(Message::tool_result(&id, name, output, false));
        Turn {
            results,
            reply: Message::Assistant { content },
        }
    }

    fn delimiter(&mut self, arguments: serde_json::Value) -> Turn {
        self.call("delimiter", arguments.to_string(), "ok".into(), None)
    }

    fn arguments(&mut self, key: &str, step: usize) -> String {
        match self.name() {
            Some(path) => json!({key: step, "file": path}).to_string(),
            None => json!({key: step}).to_string(),
        }
    }

    /// Task `task`: its user turn, then its model calls.
    pub fn task(&mut self, task: usize) -> (Message, Vec<Turn>) {
        let tokens = self.rng.range(40, 300);
        let user = Message::user(text(&mut self.rng, tokens));
        let expl = format!("explore-{task}");
        let mut turns =
            vec![self.delimiter(json!({"action": "start", "name": expl, "type": "expl"}))];
        for step in 0..4 {
            let (tool, size) = if step % 2 == 0 {
                ("grep", (1_800, 7_000))
            } else {
                ("read", (1_000, 4_000))
            };
            let tokens = self.rng.range(size.0, size.1);
            let output = text(&mut self.rng, tokens);
            let tokens = self.rng.range(50, 400);
            let reasoning = Some(text(&mut self.rng, tokens));
            let arguments = self.arguments("pattern", step);
            turns.push(self.call(tool, arguments, output, reasoning));
        }
        turns.push(self.delimiter(json!({"action": "end", "description": format!("task {task}: found the code in src/m{task}.rs")})));
        turns.push(self.delimiter(json!({"action": "start", "name": format!("change-{task}"), "type": "act", "dependencies": [expl]})));
        for step in 0..4 {
            let (tool, size) = if step % 2 == 0 {
                ("edit", (200, 800))
            } else {
                ("bash", (300, 2_000))
            };
            let tokens = self.rng.range(size.0, size.1);
            let output = text(&mut self.rng, tokens);
            let arguments = self.arguments("path", step);
            turns.push(self.call(tool, arguments, output, None));
        }
        turns.push(self.delimiter(json!({"action": "end"})));
        let results = std::mem::take(&mut self.pending);
        let answer = match self.name() {
            Some(path) => format!("Task {task} is done: see {path}."),
            None => format!("Task {task} is done."),
        };
        turns.push(Turn {
            results,
            reply: Message::assistant_text(answer),
        });
        (user, turns)
    }
}
