#!/usr/bin/env bash
# The reverse direction: Comet's own client (comet-client, through the compat-reverse
# scenarios) and load generator (comet-bench) against a running name server, normally Apache
# RocketMQ's (tests/compat/run.sh --against apache --suites reverse).
#
#   reverse/run.sh --namesrv 127.0.0.1:9876 [--only producer_sync,...] [--no-bench]
#
# Builds both release binaries in the workspace's target folder, runs the scenarios (the Java
# suite's, every message checked), then short comet-bench runs that must finish with zero
# errors and every message accounted for: sync and windowed async produce, push and lite
# consume of everything produced, and an end-to-end run. Prints PASS/FAIL per step and
# "reverse: N passed, N failed"; exits 1 when anything failed.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../../.." && pwd)"
BUILD_TIMEOUT_S="${COMPAT_REVERSE_BUILD_TIMEOUT_S:-1800}"
STEP_TIMEOUT_S=180

NAMESRV=""
BENCH=1
SCENARIO_ARGS=()
while (($#)); do
  case "$1" in
    --namesrv) NAMESRV="$2"; SCENARIO_ARGS+=("$1" "$2"); shift 2 ;;
    --only) SCENARIO_ARGS+=("$1" "$2"); shift 2 ;;
    --no-bench) BENCH=0; shift ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "reverse/run.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
[[ -n "$NAMESRV" ]] || { echo "reverse/run.sh: --namesrv HOST:PORT is required" >&2; exit 2; }
command -v cargo >/dev/null || { echo "reverse/run.sh: the Rust toolchain (cargo) is required" >&2; exit 1; }

(cd "$REPO" && timeout "$BUILD_TIMEOUT_S" cargo build --release --quiet -p compat-reverse -p comet-bench) \
  || { echo "reverse/run.sh: building compat-reverse and comet-bench failed" >&2; exit 1; }
BIN="$REPO/target/release"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/compat-reverse.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT

pass=0
fail=0
set +e
timeout -k 10 900 "$BIN/compat-reverse" "${SCENARIO_ARGS[@]}" | tee "$WORK/scenarios.log"
rc=${PIPESTATUS[0]}
set -e
pass=$(grep -c '^PASS ' "$WORK/scenarios.log" || true)
fail=$(grep -c '^FAIL ' "$WORK/scenarios.log" || true)
if ((rc != 0 && fail == 0)); then fail=1; echo "FAIL compat-reverse exited $rc without a verdict"; fi

# field NAME FILE: the number a comet-bench JSON report gives for NAME (empty when absent).
field() { { grep -o "\"$1\": *[0-9.]*" "$2" || true; } | head -1 | sed 's/.*: *//'; }

# bench_step NAME CHECK -- ARGS...: runs comet-bench ARGS with a JSON report, then evaluates
# CHECK (a bash arithmetic expression over the report's fields, given as shell variables).
bench_step() {
  local name="$1" check="$2"; shift 3
  local json="$WORK/$name.json" started=$SECONDS
  if ! timeout -k 10 "$STEP_TIMEOUT_S" "$BIN/comet-bench" --namesrv "$NAMESRV" --quiet \
      --json "$json" "$@" >"$WORK/$name.out" 2>&1; then
    echo "FAIL $name: comet-bench exited non-zero: $(tail -3 "$WORK/$name.out" | tr '\n' ' ')"
    fail=$((fail + 1)); return
  fi
  local messages_total errors_total send_errors_total e2e_missing_total
  messages_total=$(field messages_total "$json")
  errors_total=$(field errors_total "$json")
  send_errors_total=$(field send_errors_total "$json")
  e2e_missing_total=$(field e2e_missing_total "$json")
  local figures="messages_total=${messages_total:-?} errors_total=${errors_total:-?}"
  figures+=" throughput_msgs_per_s=$(field throughput_msgs_per_s "$json") latency_us_p99=$(field latency_us_p99 "$json")"
  [[ -n "$send_errors_total" ]] && figures+=" send_errors_total=$send_errors_total e2e_missing_total=$e2e_missing_total"
  if (( ${messages_total:-0} > 0 )) && ( eval "(( $check ))" ) 2>/dev/null; then
    echo "PASS $name ($((SECONDS - started)) s) $figures"
    pass=$((pass + 1))
  else
    echo "FAIL $name ($((SECONDS - started)) s): wanted $check; got $figures"
    fail=$((fail + 1))
  fi
}

if ((BENCH)); then
  run="$(date +%s)_$$"
  topic="compat_bench_$run"
  echo "== comet-bench against name server $NAMESRV (topic $topic)"
  bench_step bench_produce_sync 'messages_total == 3000 && errors_total == 0' -- \
    produce --topic "$topic" --queues 4 --threads 8 --messages 3000
  bench_step bench_produce_async 'messages_total == 2000 && errors_total == 0' -- \
    produce --topic "$topic" --inflight 32 --messages 2000 --keys --tags TagA
  bench_step bench_consume_push 'messages_total >= 5000 && errors_total == 0' -- \
    consume --topic "$topic" --group "compat_bench_push_$run" --from first --idle-exit 3 --duration 90
  bench_step bench_consume_lite 'messages_total >= 5000 && errors_total == 0' -- \
    consume --topic "$topic" --group "compat_bench_lite_$run" --mode lite --from first --idle-exit 3 --duration 90
  bench_step bench_e2e 'send_errors_total == 0 && e2e_missing_total == 0' -- \
    e2e --topic "${topic}_e2e" --queues 4 --rate 200 --threads 4 --duration 3
fi
echo "reverse: $pass passed, $fail failed"
((fail == 0))
