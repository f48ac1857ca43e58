"""A synthetic tool-using history: tasks of annotated episodes (an
exploration reading and searching, then an action editing what it read),
with large, distinct tool outputs, in OpenAI Chat Completions shape, and
the same history in the Anthropic Messages and Responses shapes."""

from __future__ import annotations

import json
import random
from typing import Any

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": f"The {name} tool.",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    }
    for name in ("read_file", "grep", "edit_file")
]


def _output(rng: random.Random, path: str, lines: int) -> str:
    words = ["handler", "session", "token", "budget", "episode", "parse", "render", "cache"]
    return "\n".join(
        f"{path}:{n}: fn {rng.choice(words)}_{rng.randrange(10_000)}(x: u32) -> "
        f"Result<{rng.choice(words).title()}, Error> {{ {rng.random():.12f} }}"
        for n in range(lines)
    )


def _args(value: dict[str, Any]) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


class _Writer:
    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self.turns = 0
        self.calls = 0

    def call(self, name: str, arguments: dict[str, Any], output: str, text: str = "") -> None:
        self.calls += 1
        call_id = f"call_{self.calls}"
        self.messages.append(
            {
                "role": "assistant",
                "content": text or None,
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": name, "arguments": _args(arguments)},
                    }
                ],
            }
        )
        self.messages.append({"role": "tool", "tool_call_id": call_id, "content": output})
        self.turns += 1


def history(turns: int = 300, seed: int = 7, delimiter: bool = True) -> list[dict[str, Any]]:
    """About `turns` model turns (assistant messages), in tasks of a few
    episodes each; every tool output is distinct."""
    rng = random.Random(seed)
    out = _Writer()
    out.messages.append({"role": "system", "content": "You are a coding agent."})
    task = episode = 0
    while out.turns < turns:
        task += 1
        out.messages.append({"role": "user", "content": f"Task {task}: fix issue #{100 + task}."})
        for _ in range(3):
            episode += 1
            expl, act = f"explore-{episode}", f"change-{episode}"
            if delimiter:
                out.call("delimiter", {"action": "start", "name": expl, "type": "expl"},
                         f"Started expl episode `{expl}`.")
            paths = [f"src/mod_{episode}_{k}.rs" for k in range(3)]
            for path in paths:
                out.call("read_file", {"path": path}, _output(rng, path, rng.randrange(20, 60)),
                         text=f"Reading {path}.")
            out.call("grep", {"path": "src", "pattern": f"token_{episode}"},
                     _output(rng, "src/lib.rs", 30))
            if delimiter:
                out.call("delimiter", {"action": "end", "description": f"{paths[0]} holds the bug."},
                         f"Ended expl episode `{expl}`.")
                out.call("delimiter", {"action": "start", "name": act, "type": "act",
                                       "dependencies": [expl]},
                         f"Started act episode `{act}`.")
            out.call("edit_file", {"path": paths[0], "old": "a", "new": "b"}, "Edited.")
            if delimiter:
                out.call("delimiter", {"action": "end"}, f"Ended act episode `{act}`.")
        out.messages.append({"role": "assistant", "content": f"Task {task} is done."})
        out.turns += 1
    return out.messages


def to_anthropic(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The same history as Anthropic Messages (the system prompt as a
    `system` message, which the engine reads like Claude Code's)."""
    out: list[dict[str, Any]] = []
    for message in messages:
        role = message["role"]
        if role == "assistant":
            blocks: list[dict[str, Any]] = []
            if message.get("content"):
                blocks.append({"type": "text", "text": message["content"]})
            for call in message.get("tool_calls") or []:
                blocks.append({"type": "tool_use", "id": call["id"], "name": call["function"]["name"],
                               "input": json.loads(call["function"]["arguments"])})
            out.append({"role": "assistant", "content": blocks})
        elif role == "tool":
            out.append({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": message["tool_call_id"],
                 "content": message["content"]}]})
        else:
            out.append({"role": role, "content": message["content"]})
    return out


def to_responses(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The same history as Responses input items."""
    out: list[dict[str, Any]] = []
    for message in messages:
        role = message["role"]
        if role == "assistant":
            if message.get("content"):
                out.append({"type": "message", "role": "assistant",
                            "content": [{"type": "output_text", "text": message["content"]}]})
            for call in message.get("tool_calls") or []:
                out.append({"type": "function_call", "call_id": call["id"],
                            "name": call["function"]["name"],
                            "arguments": call["function"]["arguments"]})
        elif role == "tool":
            out.append({"type": "function_call_output", "call_id": message["tool_call_id"],
                        "output": message["content"]})
        else:
            out.append({"role": role, "content": message["content"]})
    return out
