#!/usr/bin/env bash
# Pop consumption (issue 21): comet-bench pop with 1, 8 and 64 pop consumers of one group on
# a topic of 8 queues, against Comet and against Apache RocketMQ's broker in one sitting,
# with the brokers, warm-up and run rules of perf/run.sh (whose helpers it sources). One
# command:
#
#   perf/pop.sh
#
# Workloads, for each consumer count N of CONSUMERS:
#   POP-D<N>  drain: each system's topic PerfPop gets BACKLOG messages of SIZE bytes once;
#             each measured run pops all of them with a fresh group from the first message
#             (receive, then ack each), and reports the receive rate (first to last
#             receipt). More consumers than queues share the queues (every pop asks for
#             queue id -1), so N=64 on 8 queues is expected to add throughput over N=8.
#   POP-E<N>  end-to-end: produce RATE msgs/s of SIZE bytes (open loop) to PerfPopE while
#             the N consumers pop and ack; latency is intended send time to receipt. Each
#             run (warm-up rounds too) pops with a new group whose offsets comet-bench commits
#             at the queues' end first, so earlier runs' messages on PerfPopE are not read.
# Warm-up rounds (WARMUP_S each, until two rounds agree within WARMUP_TOLERANCE_PCT) run
# before every measured run, draining rounds with groups of their own. The table of medians
# goes to stdout and $RUN_DIR/pop.md; raw reports to $RUN_DIR/raw.
#
# Environment (defaults in brackets), besides perf/run.sh's (SYSTEMS, COMET_BIN_DIR,
# COMET_CORES, PIN, PERF_CACHE, ROCKETMQ_VERSION, WARMUP_*):
#   REPS [3]  DURATION_S [10]  CONSUMERS ["1 8 64"]  QUEUES [8]  SIZE [1024]
#   BACKLOG [200000]  RATE [5000]  INVISIBLE_MS [60000]  MODES ["drain e2e"]
#   DRAIN_FLUSH [ASYNC_FLUSH], E2E_FLUSH [SYNC_FLUSH]: the brokers' flush mode for each mode,
#     as perf/run.sh's W5 (drain) and W4 (end-to-end): Comet makes a message visible once it
#     is durable (docs/architecture.md#visibility), so under ASYNC_FLUSH the end-to-end
#     latency is mostly the wait for the next flush
#   COMET_EXTRA_OPTS [unset]: more `key=value` settings for the Comet broker, space-separated
#                    (e.g. diskSpaceWarningLevelRatio=99 on a nearly full disk, where the
#                    broker refuses writes past 95% as Java does)
# A short smoke against Comet alone:
#   SYSTEMS=comet REPS=1 DURATION_S=3 WARMUP_S=2 WARMUP_MAX_ROUNDS=2 BACKLOG=20000 \
#     RATE=1000 perf/pop.sh
set -euo pipefail

POP_HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# The sourced harness must not fetch the Java benchmark producer: pop has no Java twin.
JAVA_BENCH=0
# Only named in the sitting's meta.txt (run.sh's workload list is not run here).
WORKLOADS="POP-D POP-E"
# shellcheck source=perf/run.sh
source "$POP_HERE/run.sh"

CONSUMERS="${CONSUMERS:-1 8 64}"
QUEUES="${QUEUES:-8}"
SIZE="${SIZE:-1024}"
BACKLOG="${BACKLOG:-200000}"
RATE="${RATE:-5000}"
INVISIBLE_MS="${INVISIBLE_MS:-60000}"
DRAIN_FLUSH="${DRAIN_FLUSH:-ASYNC_FLUSH}"
E2E_FLUSH="${E2E_FLUSH:-SYNC_FLUSH}"
MODES="${MODES:-drain e2e}"
for option in ${COMET_EXTRA_OPTS:-}; do COMET_OPTS+=(-o "$option"); done
RUN_DIR="$CACHE/pop-$(date -u +%Y%m%dT%H%M%S)"
RAW="$RUN_DIR/raw"
WARM="$RUN_DIR/warmup"

check_pop_settings() {
  local n
  for n in REPS DURATION_S WARMUP_S WARMUP_MAX_ROUNDS QUEUES SIZE BACKLOG RATE INVISIBLE_MS; do
    [[ "${!n}" =~ ^[0-9]+$ ]] || die "$n must be a whole number, not '${!n}'"
  done
  (( REPS >= 1 && DURATION_S > 0 && WARMUP_S > 0 && BACKLOG > 0 && RATE > 0 )) \
    || die "REPS, DURATION_S, WARMUP_S, BACKLOG and RATE must be positive"
  (( REPS >= 3 )) || log "REPS=$REPS: fewer than 3 runs give no spread (a smoke, not a sitting)"
  for n in $CONSUMERS; do
    if ! [[ "$n" =~ ^[0-9]+$ ]] || (( n < 1 )); then die "CONSUMERS holds '$n', not a count"; fi
  done
  for n in $MODES; do
    case "$n" in drain|e2e) ;; *) die "unknown mode $n (drain, e2e)" ;; esac
  done
  for n in $SYSTEMS; do
    case "$n" in comet|apache) ;; *) die "unknown system $n (comet, apache)" ;; esac
  done
  for n in "$DRAIN_FLUSH" "$E2E_FLUSH"; do
    case "$n" in
      SYNC_FLUSH|ASYNC_FLUSH) ;;
      *) die "a flush mode is SYNC_FLUSH or ASYNC_FLUSH, not '$n'" ;;
    esac
  done
}

common_pop_args() { # consumers
  echo "--consumers $1 --size $SIZE --invisible-time-ms $INVISIBLE_MS"
}

run_pop_drain() {
  local sys rep n tput errors reason common
  for sys in $SYSTEMS; do
    log "$sys: filling PerfPop with $BACKLOG messages"
    local json="$RAW/$sys.POP-fill.1.json"
    if ! bench_once "$sys" "$json" produce --topic PerfPop --queues "$QUEUES" --size "$SIZE" \
        --inflight 512 --messages "$BACKLOG"; then
      fail "$sys" POP-fill 1 "$BENCH_FAILURE"
      continue
    fi
    IFS=$'\t' read -r tput errors reason < <(figures "$json")
    log "  $sys fill: $tput msgs/s, errors $errors"
    [[ "$errors" == 0 ]] || fail "$sys" POP-fill 1 "$reason"
  done
  for n in $CONSUMERS; do
    read -r -a common <<<"$(common_pop_args "$n")"
    note_load "POP-D$n start"
    for rep in $(seq 1 "$REPS"); do
      for sys in $(order "$rep"); do
        log "$sys POP-D$n run $rep"
        WARM_ARGS=(pop --topic PerfPop --group "perf_popwarm_${n}_@ROUND@" "${common[@]}")
        measure "$sys" "POP-D$n" "$rep" "$BACKLOG" pop --topic PerfPop \
          --group "perf_pop_${n}_$rep" "${common[@]}" --messages "$BACKLOG" --idle-exit 5 \
          --duration 600
      done
    done
  done
}

run_pop_e2e() {
  local sys rep n common
  for n in $CONSUMERS; do
    read -r -a common <<<"$(common_pop_args "$n")"
    local args=(pop --topic PerfPopE --queues "$QUEUES" --rate "$RATE" "${common[@]}")
    WARM_ARGS=("${args[@]}")
    note_load "POP-E$n start"
    for rep in $(seq 1 "$REPS"); do
      for sys in $(order "$rep"); do
        log "$sys POP-E$n run $rep"
        measure "$sys" "POP-E$n" "$rep" 0 "${args[@]}"
      done
    done
  done
}

# The medians of every workload and system: receive rate, redeliveries, and for the
# end-to-end runs p50/p99 latency (a drain's latency is the backlog's age, not a figure).
pop_table() {
  python3 - "$RAW" "$RUN_DIR/failures.tsv" <<'PY'
import glob, json, os, statistics, sys
raw, failures_path = sys.argv[1], sys.argv[2]
failed = set()
if os.path.exists(failures_path):
    for line in open(failures_path):
        parts = line.rstrip("\n").split("\t")
        if len(parts) >= 3:
            failed.add((parts[0], parts[1], parts[2]))
runs = {}
for path in sorted(glob.glob(os.path.join(raw, "*.json"))):
    system, workload, rep = os.path.basename(path)[:-5].split(".")[:3]
    if not workload.startswith("POP-") or workload == "POP-fill":
        continue
    if (system, workload, rep) in failed:
        continue
    runs.setdefault((workload, system), []).append(json.load(open(path)))
def median(reports, key):
    values = [r[key] for r in reports if isinstance(r.get(key), (int, float))]
    return statistics.median(values) if values else float("nan")
def order(key):
    workload, system = key
    return (workload[:5], int(workload[5:]), system)
print("| workload | system | runs | pop msgs/s (median) | p50 ms | p99 ms | redelivered |")
print("| --- | --- | --- | --- | --- | --- | --- |")
def latency(reports, workload, key):
    if not workload.startswith("POP-E"):
        return "-"
    return f"{median(reports, key) / 1000:.2f}"
for key in sorted(runs, key=order):
    reports = runs[key]
    print(f"| {key[0]} | {key[1]} | {len(reports)} "
          f"| {median(reports, 'throughput_msgs_per_s'):.0f} "
          f"| {latency(reports, key[0], 'latency_us_p50')} "
          f"| {latency(reports, key[0], 'latency_us_p99')} "
          f"| {median(reports, 'pop_redelivered_total'):.0f} |")
PY
}

pop_main() {
  check_pop_settings
  prepare
  log "results of this run: $RUN_DIR"
  write_meta
  echo "pop: consumers=$CONSUMERS queues=$QUEUES size=$SIZE backlog=$BACKLOG rate=$RATE" \
    "invisible_ms=$INVISIBLE_MS drain_flush=$DRAIN_FLUSH e2e_flush=$E2E_FLUSH modes=$MODES" \
    >>"$RUN_DIR/meta.txt"
  note_load "sitting start"
  local mode
  for mode in $MODES; do
    case "$mode" in
      drain) start_brokers "$DRAIN_FLUSH"; run_pop_drain ;;
      e2e) start_brokers "$E2E_FLUSH"; run_pop_e2e ;;
    esac
    stop_brokers
  done
  note_load "sitting end"
  pop_table | tee "$RUN_DIR/pop.md"
  if [[ -s "$RUN_DIR/failures.tsv" ]]; then
    log "the sitting FAILED: $(cut -f1,2 "$RUN_DIR/failures.tsv" | sort -u | tr '\t' ' ' \
      | paste -sd, -)"
    exit 1
  fi
}

pop_main "$@"
