#!/usr/bin/env bash
# CPU budget per message, stage by stage: runs perf/cpu_per_msg.sh under each workload with
# `perf record --call-graph dwarf` on the broker, then attributes the samples to the stages
# of a send (perf/cpu_budget.py) and prints µs of broker CPU per message per stage.
#
# Usage:
#   perf/cpu_budget.sh [W1] [AW] [W3]        (default: W1 AW)
# Workloads (the shapes of perf/run.sh, SYNC_FLUSH):
#   W1  1 KiB sync sends, 64 threads, 8 queues
#   AW  1 KiB async sends, a window of 256 in flight, 8 queues (AW-S)
#   W3  128-byte messages in batches of 32, 16 threads, 8 queues
# Environment:
#   OUT=<dir>            where perf data, scripts and tables go (default target/cpu-budget)
#   DURATION_S=8         measured seconds per workload
#   PERF_FREQ=999        samples per second per thread
#   FLAME=1              also write a flame graph per workload to OUT (needs
#                        inferno-collapse-perf and inferno-flamegraph on PATH)
#   BROKER_CONF, BROKER, BENCH, CORES, STORE_DIR   passed on to perf/cpu_per_msg.sh
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
OUT="${OUT:-$ROOT/target/cpu-budget}"
DURATION_S="${DURATION_S:-8}"
PERF_FREQ="${PERF_FREQ:-999}"
mkdir -p "$OUT"

workload_args() {
  case "$1" in
    W1) echo "--topic PerfW1 --queues 8 --size 1024 --threads 64" ;;
    AW) echo "--topic PerfAW --queues 8 --size 1024 --inflight 256" ;;
    W3) echo "--topic PerfW3 --queues 8 --size 128 --batch 32 --threads 16" ;;
    *) echo "unknown workload $1 (W1, AW or W3)" >&2; return 2 ;;
  esac
}

[[ $# -gt 0 ]] || set -- W1 AW
for workload in "$@"; do
  args="$(workload_args "$workload")"
  data="$OUT/$workload.perf.data"
  echo "== $workload: $args, ${DURATION_S}s, load average $(cut -d' ' -f1-3 /proc/loadavg)"
  # shellcheck disable=SC2086
  PERF_RECORD="$data" PERF_RECORD_ARGS="--call-graph dwarf,16384 -F $PERF_FREQ" \
    "$ROOT/perf/cpu_per_msg.sh" $args --duration "$DURATION_S" | tee "$OUT/$workload.run.txt"
  cpu_us="$(sed -n 's/.*=> \([0-9.]*\) us CPU\/msg.*/\1/p' "$OUT/$workload.run.txt")"
  [[ -n "$cpu_us" ]] || { echo "no CPU per message in the run's output" >&2; exit 1; }
  # Inlined frames included: they name the task a sample ran in (the connection reader,
  # its writer, a request).
  perf script -i "$data" -F comm,tid,time,event,ip,sym,dso 2>/dev/null >"$OUT/$workload.script.txt"
  python3 "$ROOT/perf/cpu_budget.py" "$OUT/$workload.script.txt" --cpu-us-per-msg "$cpu_us" \
    --label "$workload" --json "$OUT/$workload.budget.json" | tee "$OUT/$workload.budget.md"
  if [[ "${FLAME:-0}" == 1 ]]; then
    inferno-collapse-perf <"$OUT/$workload.script.txt" \
      | inferno-flamegraph --title "comet-broker, $workload, $cpu_us us CPU/msg" \
      >"$OUT/$workload.flame.svg"
    echo "flame graph: $OUT/$workload.flame.svg"
  fi
done
