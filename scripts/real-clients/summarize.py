#!/usr/bin/env python3
"""Figures of a scripts/real-clients/run.sh output directory, as JSON lines.

Usage: scripts/real-clients/summarize.py [OUT]     (default /tmp/real-clients-out)

Per run (<client>-<direct|proxy>): the client's exit status; requests the
upstream received (main loop, side requests, count_tokens); the largest
input-token count the upstream received (its own o200k count, see
crates/cwl-proxy/examples/scripted_upstream.rs) against the proxy's budget;
how many latest assistant turns the upstream found to be the ones it sent;
the client's own compactions (compaction requests the upstream answered,
requests that resumed after one, compaction records in the client's log);
and from the proxy's --json events: requests, routes, the largest
tokens_before/tokens_after, requests over budget, episodes evicted, warnings.
"""
import glob
import json
import os
import sys


def tokens(text):
    text = text.strip().lower()
    scale = {"k": 1000, "m": 1000000}.get(text[-1:], 1)
    return int(float(text.rstrip("km")) * scale)


def lines(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def client_compactions(directory):
    """Compaction records in the client's own session log: Claude Code's
    compact_boundary system lines, Codex's compacted items."""
    count = 0
    for name in ("claude-session.jsonl", "codex-rollout.jsonl"):
        for line in lines(os.path.join(directory, name)):
            if line.get("subtype") == "compact_boundary" or line.get("type") == "compacted":
                count += 1
    return count


def run(directory):
    name = os.path.basename(directory)
    out = {"run": name}
    rc_path = os.path.join(directory, "client.rc")
    out["client_exit"] = int(open(rc_path).read()) if os.path.exists(rc_path) else None
    requests = lines(os.path.join(directory, "upstream", "requests.jsonl"))
    main = [r for r in requests if r.get("kind") == "main"]
    out["upstream_requests"] = len(requests)
    out["main"] = len(main)
    out["side"] = sum(r.get("kind") == "side" for r in requests)
    out["count_tokens"] = sum(r.get("kind") == "count_tokens" for r in requests)
    out["probes"] = sum(r.get("kind") == "probe" for r in requests)
    out["other"] = sum("kind" not in r for r in requests)
    out["compaction_requests"] = sum(r.get("kind") == "compaction" for r in requests)
    out["resumed"] = sum(bool(r.get("resumed")) for r in main)
    out["client_log_compactions"] = client_compactions(directory)
    out["steps_reached"] = max((r["step"] for r in main), default=None)
    out["max_input_tokens"] = max((r["input_tokens"] for r in main), default=0)
    out["mean_input_tokens"] = round(sum(r["input_tokens"] for r in main) / len(main)) if main else 0
    checked = [r["latest_turn_ok"] for r in main if r.get("latest_turn_ok") is not None]
    out["latest_turn_as_sent"] = f"{sum(checked)}/{len(checked)}"
    out["tool_errors"] = sum(bool(r.get("tool_error")) for r in main)
    budget_path = os.path.join(directory, "budget.txt")
    if os.path.exists(budget_path):
        budget = tokens(open(budget_path).read())
        out["budget"] = budget
        out["upstream_max_within_budget"] = out["max_input_tokens"] <= budget
        events = lines(os.path.join(directory, "proxy-events.jsonl"))
        out["proxy_requests"] = len(events)
        routes = {}
        for e in events:
            routes[e.get("route")] = routes.get(e.get("route"), 0) + 1
        out["routes"] = routes
        out["max_tokens_before"] = max((e.get("tokens_before", 0) for e in events), default=0)
        out["max_tokens_after"] = max((e.get("tokens_after", 0) for e in events), default=0)
        out["over_budget"] = sum(e.get("budget_met") is False for e in events)
        out["evicted_episodes"] = sum(len(e.get("evicted") or []) for e in events)
        out["evicting_requests"] = sum(bool(e.get("evicted")) for e in events)
        out["event_warnings"] = sum(len(e.get("warnings") or []) for e in events)
        err = os.path.join(directory, "proxy.err")
        out["proxy_stderr_warnings"] = sum(
            "warn" in line.lower() for line in open(err)) if os.path.exists(err) else None
        out["stored_sessions"] = len(glob.glob(os.path.join(directory, "sessions", "*.jsonl")))
    return out


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "/tmp/real-clients-out"
    for directory in sorted(glob.glob(os.path.join(root, "*-direct")) + glob.glob(os.path.join(root, "*-proxy"))):
        print(json.dumps(run(directory)))


if __name__ == "__main__":
    main()
