"""Push + view per model call from Python, at 1M tokens of history.

Builds a tool-using history of about `--history` tokens (reads of about
`--output` tokens each, in inferred episodes), pushing it through a
`cwl.Context` with a view before every model call as an agent would, then
times `--calls` more model calls: each pushes the model's response (one
tool call) and the tool's result, then takes `view()` (which enforces the
budget). Prints the percentiles of that per-call time and of its parts.

    maturin develop --release -m crates/cwl-py/Cargo.toml
    python crates/cwl-py/bench/push_view.py

It prints figures; it asserts nothing.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

import cwl


def output(rng: random.Random, step: int, lines: int) -> str:
    return "\n".join(
        f"src/mod_{step}.rs:{n}: let v{rng.randrange(10**6)} = f(x_{rng.randrange(10**4)});"
        for n in range(lines)
    )


def step_messages(rng: random.Random, step: int, lines: int) -> list[dict]:
    call_id = f"call_{step}"
    tool = "grep" if step % 5 == 0 else "read_file"
    return [
        {"role": "assistant", "content": None, "tool_calls": [{
            "id": call_id, "type": "function",
            "function": {"name": tool, "arguments": f'{{"path":"src/mod_{step}.rs"}}'}}]},
        {"role": "tool", "tool_call_id": call_id, "content": output(rng, step, lines)},
    ]


def percentiles(samples: list[float]) -> str:
    ordered = sorted(samples)
    pick = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1e6  # noqa: E731
    return (f"p50 {pick(0.5):8.1f} µs   p90 {pick(0.9):8.1f} µs   p99 {pick(0.99):8.1f} µs   "
            f"mean {statistics.fmean(samples) * 1e6:8.1f} µs")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--history", type=int, default=1_000_000, help="tokens pushed before timing")
    parser.add_argument("--budget", type=int, default=80_000)
    parser.add_argument("--output", type=int, default=40, help="lines per tool output (~16 tokens a line)")
    parser.add_argument("--calls", type=int, default=2_000, help="model calls timed")
    args = parser.parse_args()

    rng = random.Random(1)
    context = cwl.Context(budget=args.budget)
    context.push({"role": "system", "content": "You are a coding agent."})
    context.push({"role": "user", "content": "Read the whole repository."})
    pushed_tokens = 0
    step = 0
    started = time.perf_counter()
    while pushed_tokens < args.history:
        step += 1
        context.view()
        for message in step_messages(rng, step, args.output):
            context.push(message)
            pushed_tokens += cwl.count_tokens(message.get("content") or "") + 4
    built = time.perf_counter() - started
    print(f"history: {pushed_tokens:,} tokens in {step:,} model calls, pushed in {built:.1f} s; "
          f"view: {context.tokens:,} tokens, {context.stats['view_messages']:,} messages; "
          f"{context.stats['passes']} passes so far")

    total, pushes, views = [], [], []
    for _ in range(args.calls):
        step += 1
        messages = step_messages(rng, step, args.output)
        t0 = time.perf_counter()
        for message in messages:
            context.push(message)
        t1 = time.perf_counter()
        context.view()
        t2 = time.perf_counter()
        total.append(t2 - t0)
        pushes.append(t1 - t0)
        views.append(t2 - t1)
    stats = context.stats
    print(f"after: {stats['pushed']:,} messages pushed, {stats['passes']} passes, "
          f"view {stats['view_messages']:,} messages, {context.tokens:,} tokens")
    print(f"push + view per call ({args.calls} calls): {percentiles(total)}")
    print(f"  push (response + result):       {percentiles(pushes)}")
    print(f"  view (enforce + the list):      {percentiles(views)}")


if __name__ == "__main__":
    main()
