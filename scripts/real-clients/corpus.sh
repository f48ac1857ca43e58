#!/usr/bin/env bash
# Makes the corpus of older real clients' session logs behind
# docs/results.md: Codex CLI 0.80.0 and Claude Code 2.0.77, run offline by
# run.sh against the scripted upstream, long enough to compact on their
# own (Claude Code 2.0.77 also clears old tool results from what it sends).
#
# Usage: scripts/real-clients/corpus.sh [OUT]     (default /tmp/real-logs)
#
# Installs the two clients from the npm registry into CLIENTS_PREFIX
# (default /tmp/clients-old) when they are not there yet; nothing else is
# downloaded. Each run goes to OUT/<name>/<client>-direct/ with the
# client's own log (codex-rollout.jsonl or claude-session.jsonl) and every
# request as sent (upstream/). Then, for example:
#   cwl replay --summary OUT/codex080-*/codex-direct/codex-rollout.jsonl
#   cwl replay --summary OUT/claude2077-*/claude-direct/claude-session.jsonl
# Takes about an hour on two cores.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${1:-/tmp/real-logs}
PREFIX=${CLIENTS_PREFIX:-/tmp/clients-old}
CODEX_VERSION=0.80.0
CLAUDE_VERSION=2.0.77

case "$OUT" in "$ROOT"|"$ROOT"/*) echo "corpus.sh: OUT must be outside the repository" >&2; exit 2 ;; esac
bin=$PREFIX/node_modules/.bin
if ! "$bin/codex" --version 2>/dev/null | grep -q "$CODEX_VERSION" \
  || ! "$bin/claude" --version 2>/dev/null | grep -q "$CLAUDE_VERSION"; then
  npm install --prefix "$PREFIX" "@openai/codex@$CODEX_VERSION" "@anthropic-ai/claude-code@$CLAUDE_VERSION"
fi
export CLAUDE=$bin/claude CODEX=$bin/codex PROMPTS=1
mkdir -p "$OUT"

# run NAME VAR=VALUE...: one run.sh run with the given settings.
run() {
  local name=$1
  shift
  env "$@" bash "$ROOT/scripts/real-clients/run.sh" "$OUT/$name"
}

run codex080-3r RUNS=codex-direct ROUNDS=3
run codex080-12r RUNS=codex-direct ROUNDS=12 REASONING=400 CODEX_AUTO_COMPACT=60000
# As the real 0.80 rollouts run: gpt-5.1-codex-max through `exec_command`.
run codex080ue-3r RUNS=codex-direct ROUNDS=3 CODEX_MODEL=gpt-5.1-codex-max CODEX_FEATURES=unified_exec
run codex080ue-12r RUNS=codex-direct ROUNDS=12 REASONING=400 CODEX_AUTO_COMPACT=60000 \
  CODEX_MODEL=gpt-5.1-codex-max CODEX_FEATURES=unified_exec
run claude2077-3r RUNS=claude-direct ROUNDS=3
run claude2077-16r-pct62 RUNS=claude-direct ROUNDS=16 REASONING=400 CLAUDE_AUTOCOMPACT_PCT_OVERRIDE=62
run claude2077-24r-pct65 RUNS=claude-direct ROUNDS=24 REASONING=400 CLAUDE_AUTOCOMPACT_PCT_OVERRIDE=65
