# Shared by run.sh and recall.sh (sourced, not run): the clients, the
# binaries, OUT, the process cleanup and the helpers both use. The caller
# sets SCRIPT (its name, for messages), ROOT and OUT first.

CLIENTS=${CLIENTS:-/tmp/clients/node_modules/.bin}
CLAUDE=${CLAUDE:-$CLIENTS/claude}
CODEX=${CODEX:-$CLIENTS/codex}
CLAUDE_BUDGET=${CLAUDE_BUDGET:-50k}
CODEX_BUDGET=${CODEX_BUDGET:-24k}
PROMPT="Tidy the inventory package: double the orders and stock limits, make every total skip non-positive amounts, add a limits summary module and mention it in the README."

case "$OUT" in "$ROOT"|"$ROOT"/*) echo "$SCRIPT: OUT must be outside the repository" >&2; exit 2 ;; esac
for exe in "$CLAUDE" "$CODEX"; do
  [ -x "$exe" ] || { echo "$SCRIPT: $exe not found; install the clients (see the top of run.sh)" >&2; exit 2; }
done
if [ -z "${CWL:-}" ]; then
  (cd "$ROOT" && cargo build --release -p cwl-cli && cargo build --release -p cwl-proxy --example scripted_upstream)
  CWL=$ROOT/target/release/cwl
fi
UPSTREAM=${UPSTREAM:-$ROOT/target/release/examples/scripted_upstream}
rm -rf "$OUT"
mkdir -p "$OUT"
"$CLAUDE" --version > "$OUT/versions.txt"
"$CODEX" --version >> "$OUT/versions.txt"

PIDS=()
cleanup() { for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done; }
trap cleanup EXIT

# wait_for FILE PATTERN: prints the first http://… address in the line of FILE matching PATTERN.
wait_for() {
  for _ in $(seq 100); do
    if grep -q "$2" "$1" 2>/dev/null; then
      grep "$2" "$1" | head -1 | grep -o 'http://[0-9.:]*' | head -1
      return 0
    fi
    sleep 0.1
  done
  echo "$SCRIPT: no '$2' in $1" >&2
  cat "$1" >&2
  return 1
}

# init_repo DIR: the scripted session's repository, committed.
init_repo() {
  "$UPSTREAM" init-repo "$1"
  git -C "$1" init -q
  git -C "$1" -c user.name=cwl -c user.email=cwl@example.invalid add -A
  git -C "$1" -c user.name=cwl -c user.email=cwl@example.invalid commit -qm "inventory: initial"
}
