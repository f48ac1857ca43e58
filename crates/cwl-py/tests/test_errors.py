"""Bad input raises a ValueError that says what is wrong, and changes
nothing; it never crashes the interpreter."""

from __future__ import annotations

import cwl
import pytest

CALL = {
    "role": "assistant",
    "content": None,
    "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{}"}}],
}


@pytest.mark.parametrize(
    "message, says",
    [
        (42, "a message must be a JSON object"),
        ("hello", "a message must be a JSON object"),
        ({"content": "x"}, "message has no `role`"),
        ({"role": "robot", "content": "x"}, "unknown role `robot`"),
        ({"role": "user", "content": 3}, "`content` must be a string"),
        ({"role": "assistant", "content": None}, "neither content nor tool_calls"),
        ({"role": "user", "content": [{"type": "image_url", "image_url": {}}]}, "unsupported content part type `image_url`"),
        ({"role": "user", "content": [{"type": "image", "source": {}}, {"type": "tool_result"}]}, "unsupported block type `image`"),
        ({"type": "web_search_call", "id": "w"}, "unsupported item type `web_search_call`"),
        ({"role": "user", "content": {1: "x"}}, "dict keys must be strings"),
        ({"role": "user", "content": float("nan")}, "NaN and infinity are not JSON"),
        ({"role": "user", "content": object()}, "cannot read an object of type object"),
    ],
)
def test_a_message_of_no_shape_is_refused(message, says):
    context = cwl.Context(budget=1_000)
    with pytest.raises(ValueError, match=says.replace("(", r"\(").replace("[", r"\[")):
        context.push(message)
    assert context.stats["pushed"] == 0


@pytest.mark.parametrize(
    "result",
    [
        {"role": "tool", "tool_call_id": "nope", "content": "x"},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "nope", "content": "x"}]},
        {"type": "function_call_output", "call_id": "nope", "output": "x"},
    ],
)
def test_an_orphan_tool_result_is_refused(result):
    context = cwl.Context(budget=1_000)
    context.push({"role": "user", "content": "go"})
    context.push(CALL)
    before = context.stats
    with pytest.raises(ValueError, match="tool result for unknown call `nope`"):
        context.push(result)
    assert context.stats == before
    with pytest.raises(ValueError, match="messages\\[1\\]: .*tool result for unknown call `nope`"):
        cwl.evict([{"role": "user", "content": "go"}, result])


def test_a_result_answered_twice_is_refused():
    context = cwl.Context(budget=1_000)
    context.push(CALL)
    context.push({"role": "tool", "tool_call_id": "c1", "content": "x"})
    with pytest.raises(ValueError, match="unknown call `c1`"):
        context.push({"role": "tool", "tool_call_id": "c1", "content": "again"})
    context.push(CALL)
    with pytest.raises(ValueError, match="tool call id `c1` is used twice"):
        context.push(CALL)


def test_a_call_left_without_its_result_is_refused_by_evict():
    with pytest.raises(ValueError, match="messages\\[0\\]: tool call `c1` has no tool result"):
        cwl.evict([CALL])


@pytest.mark.parametrize("budget", [0, -5, "0", "none", True, 1.5j])
def test_a_budget_of_no_tokens_is_refused(budget):
    with pytest.raises(ValueError, match="budget"):
        cwl.Context(budget=budget)
    with pytest.raises(ValueError, match="budget"):
        cwl.evict([], budget=budget)


def test_settings_and_names_are_checked():
    cases = [
        (dict(preset="fast"), "unknown preset `fast`"),
        (dict(episodes="magic"), "unknown episodes `magic`"),
        (dict(shape="gemini"), "unknown shape `gemini`"),
        (dict(tokenizer="words"), "unknown tokenizer `words`"),
        (dict(low_water=7), "low_water=7"),
        (dict(residue_share="lots"), "residue_share=lots"),
        (dict(colour="blue"), "unknown setting `colour`"),
        (dict(classes={"read": "huge"}), "unknown class `huge`"),
        (dict(tools=[{"description": "no name"}]), "tools\\[0\\]"),
    ]
    for options, says in cases:
        with pytest.raises(ValueError, match=says):
            cwl.Context(**options)
    with pytest.raises(ValueError, match="unknown shape `xml`"):
        cwl.Context().view(shape="xml")


def test_a_message_that_contains_itself_is_refused_not_followed():
    message = {"role": "user"}
    message["content"] = [message]
    with pytest.raises(ValueError, match="nested deeper than"):
        cwl.Context().push(message)


def test_extend_names_the_message_at_fault():
    context = cwl.Context()
    with pytest.raises(ValueError, match="messages\\[1\\]: unknown role `robot`"):
        context.extend([{"role": "user", "content": "a"}, {"role": "robot", "content": "b"}])
    assert context.stats["pushed"] == 1


def test_extend_keeps_what_came_before_an_unreadable_message():
    context = cwl.Context()
    with pytest.raises(ValueError, match="messages\\[1\\]"):
        context.extend([{"role": "user", "content": "a"}, {"role": "user", "content": object()}])
    assert context.stats["pushed"] == 1


def test_extend_from_a_failing_iterator_keeps_what_came_before():
    def messages():
        yield {"role": "user", "content": "a"}
        raise KeyError("the source went away")

    context = cwl.Context()
    with pytest.raises(KeyError, match="the source went away"):
        context.extend(messages())
    assert context.stats["pushed"] == 1


def test_recall_of_nothing_evicted_says_so():
    context = cwl.Context(episodes="delimiter")
    context.push({"role": "user", "content": "go"})
    with pytest.raises(ValueError, match="nothing named `x` was evicted"):
        context.recall("x")
