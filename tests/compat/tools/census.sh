#!/usr/bin/env bash
# Records what each real client sends: runs the suites against Apache RocketMQ's broker
# through wiretap.py and prints, per suite, the request codes seen on the wire.
#
#   tools/census.sh OUTDIR [--suites java5,java4,admin5,admin4,go]
#
# The Apache name server and broker listen on 127.0.0.2 but advertise 127.0.0.1, where the
# relay listens, so every client (and the broker's own registration) goes through it.
# OUTDIR receives <suite>.jsonl (one line per frame) and <suite>.txt (the tally).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
OUT="${1:?usage: census.sh OUTDIR [--suites LIST]}"; shift
SUITES="java5,java4,admin5,admin4,go"
while (($#)); do
  case "$1" in
    --suites) SUITES="$2"; shift 2 ;;
    *) echo "census.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
BROKER_DIR="$(mktemp -d "${TMPDIR:-/tmp}/compat-census.XXXXXX")"
RELAY_PID=""
stop_relay() {
  if [[ -n "$RELAY_PID" ]]; then kill "$RELAY_PID" 2>/dev/null || true; wait "$RELAY_PID" 2>/dev/null || true; fi
  RELAY_PID=""
}
cleanup() {
  stop_relay
  "$HERE/../apache/broker.sh" stop --dir "$BROKER_DIR/apache" || true
  rm -rf "$BROKER_DIR"
}
trap cleanup EXIT
start_relay() {
  python3 "$HERE/wiretap.py" relay --seconds 900 --out "$1" \
    --map 127.0.0.1:9876=127.0.0.2:9876 --map 127.0.0.1:10911=127.0.0.2:10911 \
    --map 127.0.0.1:10909=127.0.0.2:10909 &
  RELAY_PID=$!
  for _ in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/9876) 2>/dev/null && return 0; sleep 0.1; done
  echo "census.sh: relay did not start" >&2; exit 1
}

start_relay "$OUT/broker-start.jsonl"
"$HERE/../apache/broker.sh" start --dir "$BROKER_DIR/apache" --bind 127.0.0.2
stop_relay
IFS=',' read -r -a LIST <<<"$SUITES"
for s in "${LIST[@]}"; do
  start_relay "$OUT/$s.jsonl"
  "$HERE/../run.sh" --namesrv 127.0.0.1:9876 --broker 127.0.0.1:10911 --suites "$s" \
    >"$OUT/$s.run.log" 2>&1 || echo "census.sh: suite $s failed (see $OUT/$s.run.log)" >&2
  stop_relay
  python3 "$HERE/wiretap.py" summary "$OUT/$s.jsonl" >"$OUT/$s.txt"
  echo "== $s"; cat "$OUT/$s.txt"
done
