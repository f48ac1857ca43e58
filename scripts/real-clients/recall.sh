#!/usr/bin/env bash
# Checks `recall` through `cwl proxy --strategy self-gc` with real clients,
# offline: Claude Code and Codex CLI run the scripted session of run.sh
# through the proxy, against the scripted upstream with SCRIPTED_RECALL=1:
# it answers Self-GC's planner with folds and, once a request shows a fold
# pointer, calls `recall` on the folded id (a tool neither client defines;
# the proxy adds it). The check: the client answers the call (with its
# unknown-tool error) and finishes the session; the upstream gets the
# proxy's answer in place of that error, byte for byte the sidecar file of
# the fold, the same on every later request (until a later plan folds it
# again), and never the client's error
# text.
#
# Usage: scripts/real-clients/recall.sh [OUT]       (OUT defaults to /tmp/real-clients-recall)
# Environment as for run.sh (CLIENTS, CLAUDE, CODEX, CLAUDE_BUDGET,
# CODEX_BUDGET, CWL, UPSTREAM).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${1:-/tmp/real-clients-recall}
SCRIPT=recall.sh
. "$ROOT/scripts/real-clients/common.sh"

# run CLIENT
run() {
  local client=$1 dir=$OUT/$1-recall
  mkdir -p "$dir/home"
  local repo=$dir/repo
  init_repo "$repo"

  SCRIPTED_RECALL=1 "$UPSTREAM" serve --listen 127.0.0.1:0 --repo "$repo" --log-dir "$dir/upstream" > "$dir/upstream.out" 2>&1 &
  local upstream_pid=$!
  PIDS+=("$upstream_pid")
  local upstream_url
  upstream_url=$(wait_for "$dir/upstream.out" "scripted upstream on")
  local budget=$CLAUDE_BUDGET
  [ "$client" = codex ] && budget=$CODEX_BUDGET
  "$CWL" proxy --listen 127.0.0.1:0 --anthropic-upstream "$upstream_url" --openai-upstream "$upstream_url" \
    --strategy self-gc --budget "$budget" --session-dir "$dir/sessions" --json \
    > "$dir/proxy-events.jsonl" 2> "$dir/proxy.err" &
  local proxy_pid=$!
  PIDS+=("$proxy_pid")
  local base
  base=$(wait_for "$dir/proxy.err" "listening on")

  local rc=0
  if [ "$client" = claude ]; then
    (cd "$repo" && HOME=$dir/home IS_SANDBOX=1 ANTHROPIC_BASE_URL=$base ANTHROPIC_API_KEY=sk-ant-dummy \
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 DISABLE_AUTOUPDATER=1 DISABLE_TELEMETRY=1 \
      timeout 900 "$CLAUDE" -p "$PROMPT" --dangerously-skip-permissions --model claude-sonnet-4-5 \
      < /dev/null > "$dir/client.out" 2> "$dir/client.err") || rc=$?
    find "$dir/home/.claude/projects" -name '*.jsonl' -exec cp {} "$dir/claude-session.jsonl" \;
  else
    mkdir -p "$dir/codex-home"
    cat > "$dir/codex-home/config.toml" <<TOML
model = "gpt-5-codex"
model_provider = "scripted"

[model_providers.scripted]
name = "scripted upstream"
base_url = "$base/v1"
env_key = "OPENAI_API_KEY"
wire_api = "responses"
TOML
    (cd "$repo" && HOME=$dir/home CODEX_HOME=$dir/codex-home OPENAI_API_KEY=sk-dummy \
      timeout 900 "$CODEX" exec --skip-git-repo-check --dangerously-bypass-approvals-and-sandbox "$PROMPT" \
      < /dev/null > "$dir/client.out" 2> "$dir/client.err") || rc=$?
    find "$dir/codex-home/sessions" -name 'rollout-*.jsonl' -exec cp {} "$dir/codex-rollout.jsonl" \;
  fi
  echo "$rc" > "$dir/client.rc"
  kill "$upstream_pid" "$proxy_pid" 2>/dev/null || true
  wait "$upstream_pid" "$proxy_pid" 2>/dev/null || true

  local fail=
  [ "$rc" = 0 ] || fail="exit status $rc"
  grep -q "LIMIT_ORDERS = 8000" "$repo/src/inventory/orders.py" || fail="${fail:+$fail; }orders limit not doubled"
  [ -f "$repo/src/inventory/summary.py" ] || fail="${fail:+$fail; }summary.py missing"
  local verdict
  verdict=$(python3 - "$dir" <<'PY'
import glob, json, os, sys

dir = sys.argv[1]
lines = [json.loads(l) for l in open(os.path.join(dir, "upstream", "requests.jsonl"))]
recalls = [l for l in lines if l.get("recall")]
problems = []
if not recalls:
    problems.append("no recall result reached the upstream")
else:
    first = recalls[0]["recall"]
    if first["is_error"] or first["client_error"]:
        problems.append("the upstream got the client's error: %s" % first["first_line"])
    got = open(os.path.join(dir, "upstream", "recall-result.txt"), "rb").read()
    sidecars = glob.glob(os.path.join(dir, "sessions", "**", "*.sidecars", "*"), recursive=True)
    if not any(open(p, "rb").read() == got for p in sidecars):
        problems.append("the recalled payload matches none of %d sidecar files" % len(sidecars))
bodies = sorted(glob.glob(os.path.join(dir, "upstream", "*-anthropic.json"))
                + glob.glob(os.path.join(dir, "upstream", "*-responses.json")))
# The client's main requests (not titles, not Self-GC's planner, whose
# fork tags every result) that carry the recall result: its content must be
# the same in each, byte for byte in the body (the client moves its own
# cache_control markers, which are left out).
seen, leaked, carrying, folded_again = set(), 0, 0, 0
for path in bodies:
    text = open(path).read()
    if "No such tool available: recall" in text or "unsupported call: recall" in text:
        leaked += 1
    body = json.loads(text)
    if not any(t.get("name") in ("Bash", "exec_command") for t in body.get("tools") or []):
        continue
    for item in body.get("messages") or body.get("input") or []:
        blocks = item.get("content") if isinstance(item.get("content"), list) else [item]
        for block in blocks:
            if not isinstance(block, dict):
                continue
            ident = block.get("tool_use_id") or block.get("call_id") or ""
            if "cwl_recall_" in ident and block.get("type") in ("tool_result", "function_call_output"):
                content = block.get("content", block.get("output"))
                if json.dumps(content, ensure_ascii=False) not in text:
                    problems.append("%s: the recall result is not in the body as serialized" % path)
                block = {k: v for k, v in block.items() if k != "cache_control"}
                carrying += 1
                # A later plan may fold the recalled result again: a
                # committed change, not instability.
                if isinstance(content, str) and content.startswith("[folded as "):
                    folded_again += 1
                    continue
                seen.add(json.dumps(block, sort_keys=True))
if leaked:
    problems.append("%d upstream requests carry the client's unknown-tool error" % leaked)
if len(seen) > 1:
    problems.append("the recall result changed between requests (%d versions)" % len(seen))
print(json.dumps({"recall_results": len(recalls), "main_requests_carrying_it": carrying,
                  "folded_again": folded_again,
                  "versions": len(seen), "recalled_bytes": recalls[0]["recall"]["bytes"] if recalls else 0,
                  "problems": problems}))
PY
)
  echo "$verdict" > "$dir/recall.json"
  case "$verdict" in *'"problems": []'*) ;; *) fail="${fail:+$fail; }$verdict" ;; esac
  if [ -n "$fail" ]; then
    echo "FAIL $client-recall: $fail (see $dir)"
    return 1
  fi
  echo "ok   $client-recall: exit 0, $verdict"
}

status=0
for client in claude codex; do
  run "$client" || status=1
done
exit $status
