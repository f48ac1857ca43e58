"""The pass and `extend` run without the GIL: another Python thread runs
while the engine evicts or takes in a history, and a second thread
calling into the same `Context` during a pass gets an error, not a torn
view.

Not timed: the interpreter's switch interval is set far beyond the test's
length, so the waiting main thread can run while the worker is inside the
extension only if the extension lets go of the GIL. Holding it, the main
thread never gets in; letting go, it gets in unless the pass ends before
the OS wakes it, so each check has a few tries and needs one."""

from __future__ import annotations

import sys
import threading

import cwl
import pytest
from history import TOOLS, history

BUDGET = 8_000
TRIES = 3


@pytest.fixture(autouse=True)
def no_forced_switches():
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1000.0)
    yield
    sys.setswitchinterval(interval)


@pytest.fixture(scope="module")
def messages():
    return history(1000)


def ran_during(work, meanwhile=lambda: None) -> tuple[bool, object, object]:
    """Runs `work` on a thread and `meanwhile` here as soon as this thread
    runs again; whether that was while `work` was still going, what
    `meanwhile` returned and what `work` returned."""
    started, done = threading.Event(), threading.Event()
    out = {}

    def worker():
        started.set()
        out["value"] = work()
        done.set()

    thread = threading.Thread(target=worker)
    thread.start()
    started.wait()
    during = not done.is_set()
    beside = meanwhile() if during else None
    thread.join()
    return during, beside, out["value"]


def loaded(messages) -> cwl.Context:
    context = cwl.Context(budget=BUDGET, tools=TOOLS, episodes="delimiter")
    context.extend(messages)
    return context


def in_some_try(attempt, what: str) -> None:
    """Runs `attempt` (which says whether this thread ran during the
    pass) until it does, at most TRIES times."""
    if not any(attempt() for _ in range(TRIES)):
        pytest.fail(f"the main thread ran only after the pass: {what} held the GIL")


def test_evict_lets_other_threads_run(messages):
    def attempt():
        during, _, result = ran_during(lambda: cwl.evict(messages, budget=BUDGET, tools=TOOLS))
        assert result["report"].evicted and result["report"].budget_met
        return during

    in_some_try(attempt, "evict()")


def test_a_pass_in_view_lets_other_threads_run(messages):
    def attempt():
        context = loaded(messages)
        during, _, view = ran_during(context.view)
        assert context.last_report.evicted and context.last_report.tokens_after <= BUDGET
        assert view[0]["role"] == "system"
        return during

    in_some_try(attempt, "view()")


def test_extend_lets_other_threads_run(messages):
    def attempt():
        context = cwl.Context(budget=BUDGET, tools=TOOLS, episodes="delimiter")
        during, _, _ = ran_during(lambda: context.extend(messages))
        assert context.stats["pushed"] == len(messages)
        return during

    in_some_try(attempt, "extend()")


def test_a_context_busy_in_a_pass_refuses_a_second_thread(messages):
    def attempt():
        context = loaded(messages)

        def push_meanwhile():
            try:
                context.push({"role": "user", "content": "meanwhile"})
            except RuntimeError as error:
                return str(error)
            return "pushed"

        during, refused, report = ran_during(context.enforce, push_meanwhile)
        assert report.budget_met
        if during:
            assert "borrow" in refused, refused
            assert context.stats["pushed"] == len(messages), "the refused push changed nothing"
        return during

    in_some_try(attempt, "enforce()")
