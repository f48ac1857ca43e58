#!/usr/bin/env python3
"""Tables for docs/results.md, one corpus at a time, from `cwl replay --json`.

Usage: scripts/lab/results.py [--cwl BIN] [--budget 80k] NAME=GLOB[,GLOB...] ...

For each corpus NAME (its logs the union of the GLOBs; a corpus whose globs
match nothing is reported as absent) prints, in Markdown: how the replay of
what the logs' harnesses sent compares with their logged prompt sizes, every
policy's cost, retention (anchors and content loss-free), share of requests
over the budget and view changes, and whether CWL meets the bar (not
dominated on cost and both retention measures by a budget-holding policy,
within 1 point of the best holder on each retention measure).
"""
import argparse
import glob
import json
import subprocess
import sys


def replay(cwl, budget, files):
    out = subprocess.run(
        [cwl, "replay", "--json", "--budget", budget, *files],
        check=False,
        capture_output=True,
        text=True,
    )
    if not out.stdout.strip():
        sys.exit(f"results.py: cwl replay printed nothing: {out.stderr.strip()[-500:]}")
    return json.loads(out.stdout)


def fidelity(report):
    files = [f for f in report["files"] if f.get("compared_calls")]
    if not files:
        return "no log records its prompt sizes"
    logged = sum(f["logged_calls"] for f in files)
    compared = sum(f["compared_calls"] for f in files)
    gaps = [
        (f["replayed_prompt_tokens_mean"] - f["logged_prompt_tokens_mean"])
        / f["logged_prompt_tokens_mean"]
        for f in files
    ]
    worst_gap = max(gaps, key=abs)
    worst_median = max(f["prompt_tokens_error_median"] for f in files)
    worst_share = min(f["compared_calls"] / f["logged_calls"] for f in files)
    edits = {k: sum(f.get(k, 0) for f in files) for k in ("compactions", "clearings", "cuts")}
    return (
        f"{compared} of {logged} calls compared ({compared / logged:.1%}; per file at least "
        f"{worst_share:.1%}), mean gap per file at worst {worst_gap:+.1%}, median call error "
        f"per file at worst {worst_median:.1%}; the harnesses' own edits followed: "
        f"{edits['compactions']} compactions, {edits['clearings']} clearings, "
        f"{edits['cuts']} cuts sized from the log"
    )


def table(report):
    rows = [
        "| policy | cost $ | mean request | >τ | anchors loss-free | content loss-free | view changes |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, m in report["aggregate"].items():
        cost = "–" if m["cost_usd"] is None else f"{m['cost_usd']:.2f}"
        rows.append(
            f"| {'**cwl**' if name == 'cwl' else name} | {cost} | {m['tokens_mean']:,.0f} | "
            f"{m['over_budget_share']:.1%} | {m['loss_free_share']:.1%} | "
            f"{m['content_loss_free_share']:.1%} | {m['view_changes']:.1%} |"
        )
    return "\n".join(rows)


def bar(report):
    v = report.get("cwl_against_best")
    if not v:
        return "no other policy held the budget"
    dominated = "dominated by " + "/".join(v["as_retentive"]["by"]) if v["dominated"] else "not dominated"
    gap = v["retention_gap_points"]
    met = v["cwl_held_budget"] and not v["dominated"] and gap <= 1.0 + 1e-9
    best = lambda s: f"{s['cwl']:.1%} vs {s['best']:.1%} ({'/'.join(s['by'])})"
    return (
        f"**{'met' if met else 'missed'}**: {dominated}; anchors {best(v['loss_free'])}, "
        f"content {best(v['content_loss_free'])}, {gap:.1f} points behind at worst"
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cwl", default="target/release/cwl")
    parser.add_argument("--budget", default="80k")
    parser.add_argument("corpora", nargs="+", metavar="NAME=GLOB[,GLOB...]")
    args = parser.parse_args()
    for corpus in args.corpora:
        name, _, globs = corpus.partition("=")
        files = sorted(f for g in globs.split(",") for f in glob.glob(g))
        print(f"### {name}\n")
        if not files:
            print(f"absent here ({globs})\n")
            continue
        report = replay(args.cwl, args.budget, files)
        requests = sum(f["requests"] for f in report["files"])
        print(f"{len(files)} logs, {requests} requests, τ = {args.budget}.\n")
        print(f"Fidelity: {fidelity(report)}.\n")
        print(table(report) + "\n")
        print(f"The bar: {bar(report)}.\n")


if __name__ == "__main__":
    main()
