"""What every view must be: a valid request (each tool call answered
right after it, no result without its call), and what it holds."""

from __future__ import annotations

from typing import Any


def assert_valid_chat(view: list[dict[str, Any]]) -> None:
    """Each assistant message's tool calls are answered by the tool
    messages right after it, one each, and no tool message stands alone."""
    waiting: list[str] = []
    for index, message in enumerate(view):
        role = message["role"]
        if role == "tool":
            assert message["tool_call_id"] in waiting, f"view[{index}]: an orphan tool result"
            waiting.remove(message["tool_call_id"])
            continue
        assert not waiting, f"view[{index}]: calls {waiting} have no result before a {role} message"
        if role == "assistant":
            assert message.get("content") or message.get("tool_calls"), f"view[{index}]: empty"
            waiting = [call["id"] for call in message.get("tool_calls") or []]
    assert not waiting, f"calls {waiting} have no result at the end"


def content_tokens(view: list[dict[str, Any]], count) -> int:
    """Tokens of the view's text and arguments alone: a lower bound of what
    the engine counts (it adds each message's overhead)."""
    total = 0
    for message in view:
        total += count(message.get("content") or "")
        for call in message.get("tool_calls") or []:
            total += count(call["function"]["arguments"])
    return total
