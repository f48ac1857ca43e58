"""A 300-turn tool-using history pushed through `cwl.Context`."""

from __future__ import annotations

import cwl
import pytest
from checks import assert_valid_chat, content_tokens
from history import TOOLS, history, to_anthropic, to_responses

BUDGET = 20_000


def run(messages, shape="openai", **options):
    """Pushes `messages` one by one, taking the view before every model
    turn (each assistant message) as an agent would; returns the context
    and every view taken, in the Chat Completions shape."""
    context = cwl.Context(budget=BUDGET, tools=TOOLS, **options)
    views = []
    for message in messages:
        model_turn = message.get("role") == "assistant" or message.get("type") in (
            "function_call",
            "reasoning",
        ) or (message.get("type") == "message" and message.get("role") == "assistant")
        if model_turn and not (views and views[-1][0] == len_pushed(context)):
            views.append((len_pushed(context), context.view(shape="openai"), context.last_report))
        context.push(message)
    return context, views


def len_pushed(context):
    return context.stats["pushed"]


@pytest.fixture(scope="module")
def chat():
    messages = history(300)
    context, views = run(messages, episodes="delimiter")
    return messages, context, views


def test_the_history_is_long_enough_to_need_eviction(chat):
    messages, context, views = chat
    assert sum(1 for m in messages if m["role"] == "assistant") >= 300
    full = cwl.Context(budget=10_000_000, tools=TOOLS, episodes="delimiter")
    full.extend(messages)
    assert full.tokens > 8 * BUDGET, "the history is eight budgets long"
    assert context.stats["passes"] > 5 and context.stats["evicted_episodes"] > 50


def test_every_view_is_under_budget_and_a_valid_request(chat):
    _, _, views = chat
    assert len(views) >= 300
    for pushed, view, report in views:
        assert report.budget_met and report.tokens_after <= BUDGET, (pushed, report)
        assert content_tokens(view, cwl.count_tokens) <= BUDGET
        assert_valid_chat(view)


def test_every_user_turn_is_kept(chat):
    messages, _, views = chat
    for pushed, view, _ in views:
        shown = [m["content"] for m in view if m["role"] == "user"]
        asked = [m["content"] for m in messages[:pushed] if m["role"] == "user"]
        assert shown == asked


def test_delimiter_calls_are_answered_as_the_history_says(chat):
    messages, _, _ = chat
    context = cwl.Context(budget=BUDGET, tools=TOOLS, episodes="delimiter")
    for index, message in enumerate(messages):
        outcomes = context.push(message)
        for outcome in outcomes:
            assert not outcome["is_error"], outcome
            assert messages[index + 1]["content"] == outcome["content"]
            assert messages[index + 1]["tool_call_id"] == outcome["call_id"]


def test_recall_brings_an_evicted_episode_back_byte_exact(chat):
    messages, context, views = chat
    _, last_view, _ = views[-1]
    in_view = {m["tool_call_id"] for m in last_view if m["role"] == "tool"}
    # explore-1 read three files and searched once, calls 2 to 5.
    outputs = [m["content"] for m in messages if m.get("tool_call_id") in
               {"call_2", "call_3", "call_4", "call_5"}]
    assert len(outputs) == 4 and not in_view & {"call_2", "call_3", "call_4", "call_5"}
    recalled = context.recall("explore-1")
    assert recalled.startswith("Recalled expl episode `explore-1`")
    assert "src/mod_1_0.rs holds the bug." in recalled
    for output in outputs:
        assert output in recalled
    with pytest.raises(ValueError, match="nothing named `explore-9999` was evicted"):
        context.recall("explore-9999")


def test_the_view_of_every_shape_is_the_same(chat):
    messages, context, _ = chat
    expected = context.view(shape="openai")
    for shape, convert in (("anthropic", to_anthropic), ("responses", to_responses)):
        other = cwl.Context(budget=BUDGET, tools=TOOLS, episodes="delimiter")
        answering = False
        for message in convert(messages):
            # The view is taken before each response: before its first item.
            response = message.get("role") == "assistant" or message.get("type") == "function_call"
            if response and not answering:
                other.view()
            answering = response
            other.push(message)
        assert other.shape == shape
        assert other.view(shape="openai") == expected, shape
        assert other.tokens == context.tokens


def test_views_in_their_own_shape_are_valid_requests(chat):
    messages, _, _ = chat
    context = cwl.Context(budget=BUDGET, tools=TOOLS, episodes="delimiter")
    context.extend(to_anthropic(messages))
    view = context.view()
    roles = [m["role"] for m in view]
    assert roles[0] == "system" and "tool" not in roles
    waiting = set()
    for message in view[1:]:
        blocks = message["content"] if isinstance(message["content"], list) else []
        if message["role"] == "user":
            results = {b["tool_use_id"] for b in blocks if b["type"] == "tool_result"}
            assert results == waiting, "a user message answers exactly the calls before it"
            waiting = set()
        else:
            assert not waiting
            waiting = {b["id"] for b in blocks if b["type"] == "tool_use"}


def test_a_view_built_where_it_changed_is_the_view_built_whole():
    messages = to_anthropic(history(120))
    for shape in ("openai", "anthropic", "responses"):
        step = cwl.Context(budget=BUDGET, tools=TOOLS, episodes="delimiter")
        whole = cwl.Context(budget=BUDGET, tools=TOOLS, episodes="delimiter")
        for message in messages:
            step.push(message)
            whole.push(message)
            built = step.view(shape=shape)
            whole.enforce()
            other = "responses" if shape == "openai" else "openai"
            whole.view(shape=other, enforce=False)  # a change of shape builds anew
            assert built == whole.view(shape=shape, enforce=False)
        assert step.stats["passes"] > 0


def test_a_view_after_a_separate_pass_or_a_dropped_reasoning_is_rebuilt_where_it_changed():
    messages = to_anthropic(history(120))
    # Thinking in every response: a model whose provider drops an earlier
    # turn's reasoning loses it from the view when the next user turn comes.
    for message in messages:
        if message["role"] == "assistant":
            message["content"].insert(0, {"type": "thinking", "thinking": "Let me see. " * 20,
                                          "signature": "sig"})
    apart = cwl.Context(budget=BUDGET, tools=TOOLS, episodes="delimiter", model="claude-sonnet-4-5")
    whole = cwl.Context(budget=BUDGET, tools=TOOLS, episodes="delimiter", model="claude-sonnet-4-5")
    dropped = False
    for message in messages:
        before = apart.tokens
        apart.push(message)
        whole.push(message)
        dropped |= message["role"] == "user" and isinstance(message["content"], str) and apart.tokens < before
        apart.enforce()
        whole.enforce()
        built = apart.view(enforce=False)
        whole.view(shape="openai", enforce=False)
        assert built == whole.view(shape="anthropic", enforce=False)
    assert dropped, "a user turn took the turn's reasoning out"
    assert apart.stats["passes"] > 0


def test_inferred_episodes_keep_a_history_without_delimiter_calls_under_budget():
    messages = history(300, delimiter=False)
    context = cwl.Context(budget=BUDGET, tools=TOOLS)
    for message in messages:
        if message["role"] == "assistant":
            view = context.view()
            assert context.last_report.budget_met and context.tokens <= BUDGET
            assert_valid_chat(view)
        context.push(message)
    assert context.stats["episodes"] > 50 and context.stats["evicted_episodes"] > 20
