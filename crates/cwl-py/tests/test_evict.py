"""`cwl.evict` is `cwl evict`: the same view and report, byte for byte."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import cwl
import pytest
from checks import assert_valid_chat
from history import TOOLS, history, to_anthropic, to_responses

BUDGET = 20_000
REPO = Path(__file__).resolve().parents[3]


def cwl_binary() -> str | None:
    """The `cwl` built in this repository's target directory (CWL_BIN, or
    $CARGO_TARGET_DIR/debug/cwl, or target/debug/cwl), else one on PATH."""
    given = os.environ.get("CWL_BIN")
    if given:
        return given
    target = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
    for profile in ("debug", "release"):
        path = target / profile / "cwl"
        if path.is_file():
            return str(path)
    return shutil.which("cwl")


def canonical(result: dict) -> bytes:
    """What `cwl evict` prints for this result: compact JSON, keys sorted
    (serde_json's maps are sorted), UTF-8, one line."""
    out = {"messages": result["messages"], "report": result["report"].to_dict()}
    text = json.dumps(out, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return (text + "\n").encode()


@pytest.fixture(scope="module")
def request_body():
    return {"messages": history(300), "tools": TOOLS}


def test_evict_matches_the_cwl_binary_byte_for_byte(request_body, tmp_path):
    binary = cwl_binary()
    if binary is None:
        reason = "no `cwl` binary: build it with `cargo build -p cwl-cli` (or set CWL_BIN)"
        if os.environ.get("CI"):
            pytest.fail(reason)  # CI builds it: a skip there would hide a missing build
        pytest.skip(reason)
    path = tmp_path / "session.json"
    path.write_text(json.dumps(request_body))
    for budget, flags in ((BUDGET, []), (50_000, ["--preset", "paper"]), (8_000, ["--low-water", "0.6"])):
        expected = subprocess.run(
            [binary, "evict", "--budget", str(budget), *flags, str(path)],
            check=True,
            capture_output=True,
        ).stdout
        settings = {"preset": "paper"} if "paper" in flags else {}
        if "--low-water" in flags:
            settings["low_water"] = 0.6
        result = cwl.evict(request_body, budget=budget, **settings)
        assert canonical(result) == expected, (budget, flags)
        assert result["report"].evicted


def test_evict_gives_a_valid_view_under_budget(request_body):
    result = cwl.evict(request_body, budget=BUDGET)
    report = result["report"]
    assert report.budget_met and report.tokens_after <= BUDGET < report.tokens_before
    assert_valid_chat(result["messages"])
    users = [m["content"] for m in request_body["messages"] if m["role"] == "user"]
    assert [m["content"] for m in result["messages"] if m["role"] == "user"] == users


def test_evict_answers_in_the_shape_it_was_given(request_body):
    chat = cwl.evict(request_body, budget=BUDGET)
    for convert in (to_anthropic, to_responses):
        result = cwl.evict(convert(request_body["messages"]), budget=BUDGET, tools=TOOLS)
        assert result["messages"] == convert(chat["messages"])
        assert result["report"].to_dict() == chat["report"].to_dict()


def test_evict_infers_episodes_when_asked(request_body):
    plain = history(300, delimiter=False)
    without = cwl.evict(plain, budget=BUDGET, tools=TOOLS)
    assert not without["report"].budget_met, "no episodes: nothing may go"
    inferred = cwl.evict(plain, budget=BUDGET, tools=TOOLS, episodes="inferred")
    assert inferred["report"].budget_met and inferred["report"].evicted
    assert_valid_chat(inferred["messages"])
