"""`CwlMiddleware` under LangChain v1's `create_agent`, with LangChain's
own fake chat model calling tools 150 times: every model call is under
budget and a valid request, and the state keeps the full history."""

from __future__ import annotations

import json
import random

import pytest

import os

if not os.environ.get("CI"):  # CI installs LangChain: there, a missing one is an error
    pytest.importorskip("langchain")

import cwl  # noqa: E402
from checks import assert_valid_chat  # noqa: E402
from langchain.agents import create_agent  # noqa: E402
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel  # noqa: E402
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage  # noqa: E402
from langchain_core.tools import tool  # noqa: E402
from langchain_core.utils.function_calling import convert_to_openai_tool  # noqa: E402

from cwl.langchain import CwlMiddleware, to_openai  # noqa: E402

BUDGET = 12_000
CALLS = 150


def file_text(path: str) -> str:
    rng = random.Random(path)
    return "\n".join(f"{path}:{n}: let value_{rng.randrange(10**6)} = {rng.random():.10f};"
                     for n in range(rng.randrange(30, 70)))


@tool
def read_file(path: str) -> str:
    """Reads a file."""
    return file_text(path)


@tool
def grep(pattern: str) -> str:
    """Searches the repository."""
    return file_text(f"grep:{pattern}")


@tool
def edit_file(path: str, text: str) -> str:
    """Edits a file."""
    return f"Edited {path}."


class ToolCallingFake(GenericFakeChatModel):
    """LangChain's GenericFakeChatModel, which answers from a script, with
    `bind_tools` (create_agent binds the tools) and a record of each
    request it was sent."""

    seen: list = []

    def bind_tools(self, tools, **kwargs):
        return self

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        self.seen.append(list(messages))
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)


def script(delimiter: bool) -> list[AIMessage]:
    """150 tool calls: reads and searches, each few steps an edit; with
    `delimiter`, episodes marked around them."""
    steps: list[AIMessage] = []
    def call(name, args):
        steps.append(AIMessage(content="", tool_calls=[
            {"id": f"call_{len(steps)}", "name": name, "args": args, "type": "tool_call"}]))
    episode = 0
    while sum(1 for s in steps if s.tool_calls[0]["name"] != "delimiter") < CALLS:
        episode += 1
        if delimiter:
            call("delimiter", {"action": "start", "name": f"look-{episode}", "type": "expl"})
        for k in range(4):
            call("read_file", {"path": f"src/f{episode}_{k}.rs"})
        call("grep", {"pattern": f"value_{episode}"})
        if delimiter:
            call("delimiter", {"action": "end", "description": f"f{episode}_0 needs a fix"})
            call("delimiter", {"action": "start", "name": f"fix-{episode}", "type": "act",
                               "dependencies": [f"look-{episode}"]})
        call("edit_file", {"path": f"src/f{episode}_0.rs", "text": "fixed"})
        if delimiter:
            call("delimiter", {"action": "end"})
    return steps + [AIMessage(content="All done.")]


def sent_tokens(messages, tools) -> int:
    """What the engine counts for exactly these messages and tools: a fresh
    context that evicts nothing."""
    context = cwl.Context(budget=10**9, tools=tools, episodes="inferred")
    context.extend([to_openai(m) for m in messages])
    return context.tokens


def run_agent(delimiter: bool):
    model = ToolCallingFake(messages=iter(script(delimiter)))
    model.seen = []
    middleware = CwlMiddleware(budget=BUDGET, episodes="delimiter" if delimiter else "inferred")
    agent = create_agent(model, [read_file, grep, edit_file], system_prompt="You fix bugs.",
                         middleware=[middleware])
    state = agent.invoke({"messages": [HumanMessage("Fix the bugs.")]},
                         {"recursion_limit": 10_000})
    return model.seen, state["messages"]


@pytest.mark.parametrize("delimiter", [False, True], ids=["inferred", "delimiter"])
def test_every_model_call_is_under_budget_and_valid_and_the_state_keeps_everything(delimiter):
    seen, history = run_agent(delimiter)
    tools = [convert_to_openai_tool(t) for t in (read_file, grep, edit_file)]
    if delimiter:
        tools.append(cwl.delimiter_tool())
    calls = [m for m in history if isinstance(m, AIMessage) and m.tool_calls]
    assert sum(1 for m in calls if m.tool_calls[0]["name"] != "delimiter") == CALLS
    assert len(seen) == len(calls) + 1, "one model call per step, and the last answer"

    # The state holds the whole history, every tool output as the tool gave it.
    results = [m for m in history if isinstance(m, ToolMessage)]
    assert len(results) == len(calls)
    for message in results:
        if message.name == "read_file":
            call = next(c for m in calls for c in m.tool_calls if c["id"] == message.tool_call_id)
            assert message.content == file_text(call["args"]["path"])
    full = sent_tokens(history, tools)
    assert full > 5 * BUDGET, "the history is far over the budget"

    # Each model call: under budget, a valid request, the task kept.
    shrunk = 0
    for messages in seen:
        assert messages[0].content == "You fix bugs."
        chat = [to_openai(m) for m in messages]
        assert_valid_chat(chat[1:])
        assert sent_tokens(messages, tools) <= BUDGET
        assert [m for m in messages if isinstance(m, HumanMessage)][0].content == "Fix the bugs."
        shrunk += len(messages) < 1 + len(history)
    assert shrunk > len(seen) // 2, "most calls saw an evicted view"

    if delimiter:
        answers = [m.content for m in results if m.name == "delimiter"]
        assert answers[:2] == ["Started expl episode `look-1`.", "Ended expl episode `look-1`."]
        assert all(m.status == "success" for m in results if m.name == "delimiter")


def test_a_bad_setting_fails_when_the_middleware_is_made():
    with pytest.raises(ValueError, match="budget"):
        CwlMiddleware(budget=0)
    with pytest.raises(ValueError, match="unknown episodes"):
        CwlMiddleware(episodes="guess")
