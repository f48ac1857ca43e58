"""What `Context.view()` hands out: a new list each call, the caller's to
change; its messages are shared between views, so they are read-only
(dicts and lists that refuse change), and any copy of them is plain and
mutable. Nothing a caller does to a view changes the next one."""

from __future__ import annotations

import copy
import json
import pickle

import cwl
import pytest
from history import TOOLS, history, to_anthropic, to_responses

BUDGET = 8_000
SHAPES = {"openai": lambda messages: messages, "anthropic": to_anthropic, "responses": to_responses}


def pushed(shape: str, turns: int = 40) -> cwl.Context:
    context = cwl.Context(budget=BUDGET, tools=TOOLS, episodes="delimiter")
    context.extend(SHAPES[shape](history(turns)))
    return context


def nested(view: list) -> dict:
    """A message of `view` holding a list (tool calls or content blocks)."""
    return next(m for m in view if any(isinstance(v, list) and v for v in m.values()))


def dumped(view: list) -> str:
    return json.dumps(view)


@pytest.mark.parametrize("shape", SHAPES)
def test_the_list_is_the_callers_to_change(shape):
    context = pushed(shape)
    view = context.view()
    before = dumped(view)
    view.append({"role": "user", "content": "added by the caller"})
    del view[0]
    view.reverse()
    again = context.view()
    assert again is not view
    assert dumped(again) == before


@pytest.mark.parametrize("shape", SHAPES)
def test_messages_refuse_change_in_place(shape):
    context = pushed(shape)
    view = context.view()
    before = dumped(view)
    message = nested(view)
    inner = next(v for v in message.values() if isinstance(v, list) and v)
    assert isinstance(message, dict) and isinstance(inner, list)
    changes = [
        lambda: message.__setitem__("role", "user"),
        lambda: message.__delitem__("role"),
        lambda: message.pop("role"),
        lambda: message.popitem(),
        lambda: message.update(role="user"),
        lambda: message.setdefault("cache_control", {}),
        lambda: message.clear(),
        lambda: message.__ior__({"role": "user"}),
        lambda: inner.append({}),
        lambda: inner.extend([{}]),
        lambda: inner.insert(0, {}),
        lambda: inner.__setitem__(0, {}),
        lambda: inner.__delitem__(0),
        lambda: inner.__iadd__([{}]),
        lambda: inner.pop(),
        lambda: inner.reverse(),
        lambda: inner[0].__setitem__("cache_control", {"type": "ephemeral"}),
    ]
    for change in changes:
        with pytest.raises(TypeError, match="read-only"):
            change()
    assert dumped(view) == before
    assert dumped(context.view()) == before


@pytest.mark.parametrize("shape", SHAPES)
def test_copies_are_plain_and_mutable_and_change_no_view(shape):
    context = pushed(shape)
    view = context.view()
    before = dumped(view)
    message = nested(view)
    for plain in (dict(message), message.copy(), copy.copy(message), {**message}):
        assert type(plain) is dict and plain == message
        plain["role"] = "changed"
    deep = copy.deepcopy(view)
    pickled = pickle.loads(pickle.dumps(view))
    for whole in (deep, pickled):
        assert whole == view and dumped(whole) == before
        copied = nested(whole)
        assert type(copied) is dict
        inner = next(v for v in copied.values() if isinstance(v, list) and v)
        assert type(inner) is list and type(inner[0]) is dict
        inner.append({"added": True})
        inner[0]["cache_control"] = {"type": "ephemeral"}
    assert dumped(view) == before
    assert dumped(context.view()) == before


def test_a_message_the_view_holds_unchanged_keeps_its_objects_across_passes():
    context = cwl.Context(budget=BUDGET, tools=TOOLS, episodes="delimiter")
    previous: dict[int, dict] = {}
    carried_over_a_pass = 0
    for message in history(120):
        context.push(message)
        if message["role"] != "tool":
            continue
        view = context.view()
        sources = context.view_sources()
        passed = context.last_report.evicted
        current = {source: m for source, m in zip(sources, view) if source is not None}
        for source, m in current.items():
            if source in previous:
                assert m is previous[source], "an unchanged message is not written again"
                carried_over_a_pass += passed
        previous = current
    assert context.stats["passes"] > 3
    assert carried_over_a_pass > 100
