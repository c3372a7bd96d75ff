#!/usr/bin/env bash
# bench/adversarial.sh — the adversarial suite, long: a real `linerate server`
# under ≥ 10⁶ fuzzed control messages and 10 minutes of pending-connection
# floods (plus descriptor bombs and slowloris at the same scale), printing the
# server's RSS and descriptor counts before, at peak and after each case.
#
# NOT a CI test (CI runs the same cases at scale 1 in
# crates/linerate/tests/adversarial.rs, ~10⁴ messages): a soak run whose
# figures go in the closing note of a hardening change. Loopback only; no root
# needed (the bed cases are skipped unless run as root).
#
#   SCALE    multiplies the counts (default 100: 10⁶ fuzzed messages, 2,000
#            legitimate handshakes during the flood, 30,000 extra data
#            connections)
#   FLOOD_S  how long the pending flood lasts at least, seconds (default 600)
#
# Shortened, to check that it works:  SCALE=2 FLOOD_S=10 bench/adversarial.sh
set -euo pipefail
cd "$(dirname "$0")/.."
SCALE=${SCALE:-100}
FLOOD_S=${FLOOD_S:-600}
log=$(mktemp /tmp/lr-adversarial.XXXXXX)
trap 'rm -f "$log"' EXIT

echo "building (release)…"
cargo test --release -p linerate --test adversarial --no-run >/dev/null 2>&1

cases=(pending_flood fuzzed_control_messages slowloris extra_data_connections
       oversized_and_malformed frozen_and_vanished)
echo "adversarial: SCALE=$SCALE FLOOD_S=$FLOOD_S, cases: ${cases[*]}"
start=$(date +%s)
status=0
for c in "${cases[@]}"; do
  LINERATE_ADVERSARIAL_SCALE=$SCALE LINERATE_ADVERSARIAL_FLOOD_S=$FLOOD_S \
    cargo test --release -p linerate --test adversarial -- --nocapture --test-threads 1 "$c" \
    >>"$log" 2>&1 || status=$?
done
echo
grep -oE 'adversarial: .*' "$log" || true
grep -oE '^test [a-z_0-9]+ ' "$log" | sed 's/^test /  case /' || true
grep -E '^test result: ' "$log" | sed 's/^/  /' || true
echo "elapsed $(( $(date +%s) - start )) s; measured under whatever load this host had"
if [ "$status" -ne 0 ]; then
  echo "FAILED (exit $status); the full log:"; cat "$log"
  exit "$status"
fi
