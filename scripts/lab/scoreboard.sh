#!/usr/bin/env bash
# The lab's scoreboard: `cwl replay --summary` of every policy but `cwm` (the
# slowest to replay, and on these traces never the best on any measure) on
# the real traces in ../shared/traces at several budgets (the default 80k
# and the pressures around it), plus any session logs you name, and one line per
# setting: the share of requests over τ and the versus line (CWL against
# the best budget-holding policy on anchors, content and cost). This is how
# the README's "What it says, honestly" figures are checked after a change
# to the engine.
#
# Usage: scripts/lab/scoreboard.sh [NAME=LOG ...] [-- REPLAY ARGS...]
#   NAME=LOG   an extra setting: a log file or directory replayed at 80k
#              (e.g. cc12=OUT/claude-direct/claude-session.jsonl from
#              scripts/real-clients/run.sh)
#   REPLAY ARGS  passed to every replay (e.g. --low-water 0.7)
# Environment: CWL (a `cwl` binary; default: built here in release),
# TRACES (default: ../shared/traces beside the project), OUT (where each
# setting's full table goes; default: a temporary directory), JOBS
# (replays run at once; default 2).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
TRACES=${TRACES:-$ROOT/../shared/traces}
JOBS=${JOBS:-2}
OUT=${OUT:-$(mktemp -d)}
POLICIES=cwl,none,truncate,mask,compact,clear-tool-uses,oldest-turn,tool-prune,tool-mask-prune,hybrid,fifo,lru,priority,type,weighted,self-gc

settings=()
while (($#)); do
  case $1 in
    --) shift; break ;;
    *=*) settings+=("${1%%=*}|${1#*=}|80k"); shift ;;
    *) echo "scoreboard.sh: expected NAME=LOG or --, got '$1'" >&2; exit 2 ;;
  esac
done
extra=("$@")

if [[ -d $TRACES/pi ]]; then
  for budget in 40k 60k 80k 120k; do settings+=("pi$budget|$TRACES/pi|$budget"); done
fi
if [[ -d $TRACES/mini-swe-agent ]]; then
  for budget in 20k 30k 40k 80k; do settings+=("mini$budget|$TRACES/mini-swe-agent|$budget"); done
fi
if ((${#settings[@]} == 0)); then
  echo "scoreboard.sh: no traces under $TRACES and no NAME=LOG given" >&2
  exit 2
fi

if [[ -z ${CWL:-} ]]; then
  cargo build --release --quiet --manifest-path "$ROOT/Cargo.toml" -p cwl-cli
  CWL=$ROOT/target/release/cwl
fi

mkdir -p "$OUT"
run() {
  local name=$1 log=$2 budget=$3
  "$CWL" replay "$log" --policy "$POLICIES" --budget "$budget" --summary "${extra[@]}" \
    >"$OUT/$name.txt" 2>&1 || true
}
running=0
for setting in "${settings[@]}"; do
  IFS='|' read -r name log budget <<<"$setting"
  run "$name" "$log" "$budget" &
  running=$((running + 1))
  if ((running >= JOBS)); then wait -n; running=$((running - 1)); fi
done
wait

for setting in "${settings[@]}"; do
  IFS='|' read -r name _ _ <<<"$setting"
  file=$OUT/$name.txt
  over=$(awk -F'┆' '/^│ cwl /{gsub(/ /, "", $5); print $5}' "$file")
  line=$(grep -h "cwl against" "$file" | sed 's/\[[^]]*\]//g; s/^cwl against the best policy that held the budget: //')
  printf '%-9s over τ %-6s %s\n' "$name" "${over:-?}" "${line:-no versus line; see $file}"
done
echo "full tables: $OUT"
