#!/usr/bin/env bash
# Checks `cwl proxy` with real clients, offline: Claude Code and Codex CLI run
# a long scripted, tool-using session (about 40 model turns reading, grepping,
# running commands and editing files in a throwaway git repository) against a
# scripted model server on 127.0.0.1
# (crates/cwl-proxy/examples/scripted_upstream.rs), once straight to it
# ("direct") and once through `cwl proxy --budget ... --json` ("proxy").
#
# Usage: scripts/real-clients/run.sh [OUT]          (OUT defaults to /tmp/real-clients-out)
#
# Needs the clients installed outside the project, e.g.
#   npm install --prefix /tmp/clients @anthropic-ai/claude-code @openai/codex
# (CLIENTS=/tmp/clients/node_modules/.bin by default; or set CLAUDE / CODEX to
# the executables: older Codex CLIs run the same session through their
# own shell tools, `shell_command` (0.72.0) or `shell` (0.29.0, which
# writes rollouts in the format from before September 2025)). Nothing is
# downloaded here. The clients run with HOME and
# CODEX_HOME in OUT, so your own configuration is neither read nor changed.
# Environment: CLAUDE_BUDGET (default 50k: Claude Code's system prompt and
# tools alone are about 25k tokens), CODEX_BUDGET (default 24k), CWL (a `cwl`
# binary; default: built here in release with the scripted upstream),
# ROUNDS (default 1: the session above; N, up to 40, makes it N rounds long,
# about 16 more model turns a round, each round re-reading, grepping and
# editing differently: SCRIPTED_ROUNDS of the scripted upstream; long
# sessions may make the clients compact their history, which the upstream
# follows), RUNS (default "claude-direct claude-proxy codex-direct
# codex-proxy": the runs to make), TIMEOUT (seconds per client run; default
# 900 a round), CODEX_AUTO_COMPACT (Codex's model_auto_compact_token_limit;
# unset: its default), CODEX_MODEL (the model Codex asks for; default
# gpt-5-codex; its family picks Codex's tools and reasoning rule, e.g.
# gpt-5.1-codex-max), CODEX_FEATURES (Codex feature flags to turn on,
# space-separated, written to its config's [features] table; e.g.
# "unified_exec", whose `exec_command` tool real 0.80 rollouts use), PROMPTS (1: every round after the first waits for
# its own prompt, "Go on with round N.", sent by resuming the session:
# `claude -p --continue`, `codex exec resume <its id>`; a log then holds one
# user turn a round, as a person's session does; SCRIPTED_PROMPTS of the
# scripted upstream), PLANS (N: every Nth step's call comes with a call of
# the client's plan tool, the whole plan each time, when it offers one:
# `TodoWrite` up to Claude Code 2.0, `update_plan` up to Codex CLI about
# 0.60; SCRIPTED_PLANS of the scripted upstream), REASONING (N: each of
# the upstream's Responses reasoning items stands for N reasoning tokens,
# reported in its usage, and each Claude thinking block is about N tokens
# of text; both count only in later requests of the same user turn, as
# OpenAI's models before GPT-5.6 and Claude Sonnet 4.5 bill them;
# SCRIPTED_REASONING of the scripted upstream). Claude Code 2.1.197 does not compact a 12-round
# session by itself (its window for claude-sonnet-4-5 is over 490k tokens);
# its own CLAUDE_CODE_AUTO_COMPACT_WINDOW (e.g. 160000) passes through and
# makes it.
#
# For each run OUT/<client>-<direct|proxy>/ gets: repo/ (the repository the
# session edited), upstream/ (every request the upstream received, as sent,
# and requests.jsonl: step, input tokens, whether the latest assistant turn
# is the one it sent), client.out/.err, the client's own session log
# (claude-session.jsonl or codex-rollout.jsonl) and, through the proxy,
# proxy-events.jsonl (--json), proxy.err, sessions/ (its stored sessions),
# tap/ (each request as the client sent it, recorded before the proxy) and
# turns.json (for every request the upstream received, whether the latest
# assistant turn and what follows it are byte for byte what the client sent).
# The script fails if a client exits non-zero, a scripted tool call fails
# (an error result or a non-zero exit code) or the scripted edits are not in
# its repository (edits.json: `scripted_upstream check-edits`, every edit of
# every round); then scripts/real-clients/summarize.py OUT prints the
# figures.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${1:-/tmp/real-clients-out}
SCRIPT=run.sh
ROUNDS=${ROUNDS:-1}
RUNS=${RUNS:-claude-direct claude-proxy codex-direct codex-proxy}
for name in $RUNS; do
  case $name in claude-direct|claude-proxy|codex-direct|codex-proxy) ;;
    *) echo "$SCRIPT: RUNS: unknown run '$name' (claude-direct, claude-proxy, codex-direct, codex-proxy)" >&2; exit 2 ;;
  esac
done
[ -n "${RUNS// /}" ] || { echo "$SCRIPT: RUNS names no run" >&2; exit 2; }
case $ROUNDS in ''|*[!0-9]*) ROUNDS_OK= ;; *) ROUNDS_OK=$(( 10#$ROUNDS >= 1 && 10#$ROUNDS <= 40 )) ;; esac
[ "$ROUNDS_OK" = 1 ] || { echo "$SCRIPT: ROUNDS must be a whole number from 1 to 40, not '$ROUNDS'" >&2; exit 2; }
case ${PROMPTS:-0} in 0|1) ;; *) echo "$SCRIPT: PROMPTS must be 0 or 1, not '$PROMPTS'" >&2; exit 2 ;; esac
case ${REASONING:-0} in *[!0-9]*) echo "$SCRIPT: REASONING must be a whole number of tokens, not '$REASONING'" >&2; exit 2 ;; esac
TIMEOUT=${TIMEOUT:-$((900 * ROUNDS))}
. "$ROOT/scripts/real-clients/common.sh"

# copy_newest DIR PATTERN DEST
# Copies the newest file under DIR named like PATTERN to DEST (none: no
# copy, so the run reports the missing log): a resumed session may be
# written to a file of its own.
copy_newest() {
  find "$1" -name "$2" -printf '%T@ %p\n' 2>/dev/null | sort -n | tail -1 \
    | cut -d' ' -f2- | xargs -r -I{} cp {} "$3"
}

# run CLIENT MODE
run() {
  local client=$1 mode=$2 dir=$OUT/$1-$2
  mkdir -p "$dir/home"
  local repo=$dir/repo
  init_repo "$repo"

  SCRIPTED_ROUNDS=$ROUNDS SCRIPTED_PROMPTS=${PROMPTS:-0} SCRIPTED_PLANS=${PLANS:-0} SCRIPTED_REASONING=${REASONING:-0} "$UPSTREAM" serve --listen 127.0.0.1:0 --repo "$repo" --log-dir "$dir/upstream" > "$dir/upstream.out" 2>&1 &
  local upstream_pid=$!
  PIDS+=("$upstream_pid")
  local upstream_url base proxy_pid= tap_pid=
  upstream_url=$(wait_for "$dir/upstream.out" "scripted upstream on")
  base=$upstream_url
  if [ "$mode" = proxy ]; then
    local budget=$CLAUDE_BUDGET
    [ "$client" = codex ] && budget=$CODEX_BUDGET
    "$CWL" proxy --listen 127.0.0.1:0 --anthropic-upstream "$upstream_url" --openai-upstream "$upstream_url" \
      --budget "$budget" --session-dir "$dir/sessions" --json > "$dir/proxy-events.jsonl" 2> "$dir/proxy.err" &
    proxy_pid=$!
    PIDS+=("$proxy_pid")
    local proxy_url
    proxy_url=$(wait_for "$dir/proxy.err" "listening on")
    "$UPSTREAM" tap --listen 127.0.0.1:0 --to "$proxy_url" --log-dir "$dir/tap" > "$dir/tap.out" 2>&1 &
    tap_pid=$!
    PIDS+=("$tap_pid")
    base=$(wait_for "$dir/tap.out" "tap on")
    echo "$budget" > "$dir/budget.txt"
  fi

  local rc=0 prompts=("$PROMPT") round
  if [ "${PROMPTS:-0}" = 1 ]; then
    for ((round = 2; round <= ROUNDS; round++)); do prompts+=("Go on with round $round."); done
  fi
  if [ "$client" = claude ]; then
    for round in "${!prompts[@]}"; do
      [ "$rc" = 0 ] || break
      local resume=()
      [ "$round" = 0 ] || resume=(--continue)
      (cd "$repo" && HOME=$dir/home IS_SANDBOX=1 ANTHROPIC_BASE_URL=$base ANTHROPIC_API_KEY=sk-ant-dummy \
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 DISABLE_AUTOUPDATER=1 DISABLE_TELEMETRY=1 \
        timeout "$TIMEOUT" "$CLAUDE" -p "${prompts[$round]}" "${resume[@]}" --dangerously-skip-permissions \
        --model claude-sonnet-4-5 < /dev/null >> "$dir/client.out" 2>> "$dir/client.err") || rc=$?
    done
    copy_newest "$dir/home/.claude/projects" '*.jsonl' "$dir/claude-session.jsonl"
  else
    mkdir -p "$dir/codex-home"
    cat > "$dir/codex-home/config.toml" <<TOML
model = "${CODEX_MODEL:-gpt-5-codex}"
model_provider = "scripted"

[model_providers.scripted]
name = "scripted upstream"
base_url = "$base/v1"
env_key = "OPENAI_API_KEY"
wire_api = "responses"
TOML
    if [ -n "${CODEX_FEATURES:-}" ]; then
      printf '\n[features]\n' >> "$dir/codex-home/config.toml"
      for feature in $CODEX_FEATURES; do echo "$feature = true" >> "$dir/codex-home/config.toml"; done
    fi
    if [ -n "${CODEX_AUTO_COMPACT:-}" ]; then
      sed -i "1i model_auto_compact_token_limit = $CODEX_AUTO_COMPACT" "$dir/codex-home/config.toml"
    fi
    for round in "${!prompts[@]}"; do
      [ "$rc" = 0 ] || break
      local resume=()
      if [ "$round" != 0 ]; then
        # By id: Codex 0.57 takes a prompt after `--last` for a session id.
        local session
        session=$(find "$dir/codex-home/sessions" -name 'rollout-*.jsonl' -printf '%T@ %f\n' 2>/dev/null \
          | sort -n | tail -1 | sed -n 's/.*-\([0-9a-f]\{8\}-[0-9a-f-]\{27\}\)\.jsonl$/\1/p')
        if [ -n "$session" ]; then resume=(resume "$session"); else resume=(resume --last); fi
      fi
      (cd "$repo" && HOME=$dir/home CODEX_HOME=$dir/codex-home OPENAI_API_KEY=sk-dummy \
        timeout "$TIMEOUT" "$CODEX" exec --skip-git-repo-check --dangerously-bypass-approvals-and-sandbox \
        "${resume[@]}" "${prompts[$round]}" < /dev/null >> "$dir/client.out" 2>> "$dir/client.err") || rc=$?
    done
    copy_newest "$dir/codex-home/sessions" 'rollout-*.jsonl' "$dir/codex-rollout.jsonl"
  fi
  echo "$rc" > "$dir/client.rc"
  kill "$upstream_pid" ${proxy_pid:+"$proxy_pid"} ${tap_pid:+"$tap_pid"} 2>/dev/null || true
  wait "$upstream_pid" ${proxy_pid:+"$proxy_pid"} ${tap_pid:+"$tap_pid"} 2>/dev/null || true

  local fail=
  [ "$rc" = 0 ] || fail="exit status $rc"
  grep -q "LIMIT_ORDERS = 8000" "$repo/src/inventory/orders.py" || fail="${fail:+$fail; }orders limit not doubled"
  grep -q "LIMIT_STOCK = 9000" "$repo/src/inventory/stock.py" || fail="${fail:+$fail; }stock limit not doubled"
  [ "$(grep -l 'if r\["amount"\] > 0' "$repo"/src/inventory/*.py | wc -l)" = 8 ] || fail="${fail:+$fail; }not every total edited"
  [ -f "$repo/src/inventory/summary.py" ] || fail="${fail:+$fail; }summary.py missing"
  grep -q "inventory.summary" "$repo/README.md" || fail="${fail:+$fail; }README not edited"
  SCRIPTED_ROUNDS=$ROUNDS "$UPSTREAM" check-edits "$repo" > "$dir/edits.json" \
    || fail="${fail:+$fail; }scripted edits missing ($(cat "$dir/edits.json"))"
  git -C "$repo" diff > "$dir/repo.diff"
  local errors
  errors=$(grep -c '"tool_error":true' "$dir/upstream/requests.jsonl" || true)
  [ "$errors" = 0 ] || fail="${fail:+$fail; }$errors tool calls failed"
  if [ "$mode" = proxy ]; then
    "$UPSTREAM" check-turns "$dir/tap" "$dir/upstream" > "$dir/turns.json" \
      || fail="${fail:+$fail; }latest turn altered ($(cat "$dir/turns.json"))"
  fi
  if [ -n "$fail" ]; then
    echo "FAIL $client-$mode: $fail (see $dir)"
    return 1
  fi
  echo "ok   $client-$mode: exit 0, scripted edits of $ROUNDS round(s) in the repository"
}

status=0
for client in claude codex; do
  for mode in direct proxy; do
    case " $RUNS " in *" $client-$mode "*) run "$client" "$mode" || status=1 ;; esac
  done
done
exit $status
