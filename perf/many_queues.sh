#!/usr/bin/env bash
# Many queues (issue 25): comet-bench produce spread over TOPICS topics x QUEUES queues
# (10,000 queues by default) against 1 topic x QUEUES queues, same sender threads, same
# duration, same message size, release broker, SYNC_FLUSH. One command:
#
#   perf/many_queues.sh
#
# Two brokers (--standalone, each with its own name server, store and ports) are up at the
# same time, one per shape; each gets one unmeasured warm-up run that creates its topics,
# then REPS measured runs per shape alternate (many, one, many, one, ...) so each pair
# shares the same minutes. With CONSUMER_GROUPS=1 (the default) every measured run also has
# as many consumer groups as topics consuming beside the producer: one comet-bench consume process
# per run, `--topics` groups (each `<group>_<i>` on `<topic>_<i>`, one async push consumer
# per group on 4 threads), started before the producer and waited for until every group
# consumes, stopping once nothing arrived for 5 s. After every measured run it records the
# broker's resident memory (VmRSS of /proc/<pid>/status), its open file descriptors
# (entries of /proc/<pid>/fd), its thread count and the load average, and the messages the
# groups received with their end-to-end p99; the table goes to stdout and
# $RUN_DIR/many-queues.tsv, with the many/one throughput ratio of each pair.
#
# Environment (defaults in brackets):
#   REPS [3]  DURATION_S [20]  WARMUP_S [10]  THREADS [64]  SIZE [256]  TOPICS [1250]
#   QUEUES [8]  CONSUMER_GROUPS [1]  COMET_CORES [2]  NS_PORT [49876]  BROKER_PORT [50911]
#   SYSTEM [comet]: comet, or apache for Apache RocketMQ's name server and broker
#                   (tests/compat/apache/broker.sh, SYNC_FLUSH) measured the same way
#   COMET_BIN_DIR [target/release]: where comet-broker and comet-bench are (built with
#                 `cargo build --release -p comet-broker -p comet-bench` when missing)
#   PERF_CACHE [perf/.cache]: run directories (stores, logs, raw reports)
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
REPS="${REPS:-3}"
DURATION_S="${DURATION_S:-20}"
WARMUP_S="${WARMUP_S:-10}"
THREADS="${THREADS:-64}"
SIZE="${SIZE:-256}"
TOPICS="${TOPICS:-1250}"
QUEUES="${QUEUES:-8}"
CONSUMER_GROUPS="${CONSUMER_GROUPS:-1}"
SYSTEM="${SYSTEM:-comet}"
APACHE_SH="$ROOT/tests/compat/apache/broker.sh"
COMET_CORES="${COMET_CORES:-2}"
NS_PORT="${NS_PORT:-49876}"
BROKER_PORT="${BROKER_PORT:-50911}"
BIN="${COMET_BIN_DIR:-$ROOT/target/release}"
CACHE="${PERF_CACHE:-$HERE/.cache}"
RUN_DIR="$CACHE/many-queues-${SYSTEM:-comet}-$(date -u +%Y%m%dT%H%M%S)"

log() { echo "many-queues: $*" >&2; }
die() { echo "many-queues: error: $*" >&2; exit 2; }

for n in REPS DURATION_S WARMUP_S THREADS SIZE TOPICS QUEUES; do
  [[ "${!n}" =~ ^[0-9]+$ ]] && (( ${!n} > 0 )) || die "$n must be a positive whole number"
done
if [[ ! -x "$BIN/comet-broker" || ! -x "$BIN/comet-bench" ]]; then
  [[ -z "${COMET_BIN_DIR:-}" ]] || die "comet-broker or comet-bench missing in $BIN"
  log "building comet-broker and comet-bench (release)"
  (cd "$ROOT" && cargo build --release -q -p comet-broker -p comet-bench)
fi
[[ "$CONSUMER_GROUPS" == 0 || "$CONSUMER_GROUPS" == 1 ]] || die "CONSUMER_GROUPS must be 0 or 1"
[[ "$SYSTEM" == comet || "$SYSTEM" == apache ]] || die "SYSTEM must be comet or apache"
"$BIN/comet-bench" produce --help | grep -q -- '--topics' \
  || die "$BIN/comet-bench has no --topics: rebuild it"
"$BIN/comet-bench" consume --help | grep -q -- '--topics' \
  || die "$BIN/comet-bench consume has no --topics: rebuild it"
mkdir -p "$RUN_DIR"

declare -A PID=() NS=()

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

wait_port() {
  local port="$1" pid="$2" deadline=$((SECONDS + 60))
  until port_open "$port"; do
    kill -0 "$pid" 2>/dev/null || die "broker $pid exited (see $RUN_DIR)"
    (( SECONDS < deadline )) || die "port $port not open after 60 s"
    sleep 0.2
  done
}

start_broker() {
  local shape="$1" index="$2"
  local ns_port=$((NS_PORT + 10 * index)) broker_port=$((BROKER_PORT + 100 * index))
  port_open "$ns_port" && die "port $ns_port is busy"
  port_open "$broker_port" && die "port $broker_port is busy"
  NS[$shape]="127.0.0.1:$ns_port"
  if [[ "$SYSTEM" == apache ]]; then
    bash "$APACHE_SH" start --dir "$RUN_DIR/$shape/apache" --flush SYNC_FLUSH \
      --namesrv-port "$ns_port" --broker-port "$broker_port" >&2
    PID[$shape]="$(cat "$RUN_DIR/$shape/apache/broker.pid")"
  else
    mkdir -p "$RUN_DIR/$shape/store"
    RUST_LOG=warn "$BIN/comet-broker" --standalone --cores "$COMET_CORES" \
      --bind-address 127.0.0.1 --listen-port "$broker_port" --namesrv "${NS[$shape]}" \
      --store "$RUN_DIR/$shape/store" --flush SYNC_FLUSH >"$RUN_DIR/$shape/broker.log" 2>&1 &
    PID[$shape]=$!
    wait_port "$broker_port" "${PID[$shape]}"
    wait_port "$ns_port" "${PID[$shape]}"
  fi
  log "$shape $SYSTEM broker up (pid ${PID[$shape]}, name server ${NS[$shape]})"
}

stop_brokers() {
  local shape
  for shape in "${!PID[@]}"; do
    if [[ "$SYSTEM" == apache ]]; then
      bash "$APACHE_SH" stop --dir "$RUN_DIR/$shape/apache" >&2 || true
      unset "PID[$shape]"
      continue
    fi
    kill -TERM "${PID[$shape]}" 2>/dev/null || true
    local deadline=$((SECONDS + 30))
    while kill -0 "${PID[$shape]}" 2>/dev/null && (( SECONDS < deadline )); do sleep 0.2; done
    kill -KILL "${PID[$shape]}" 2>/dev/null || true
    wait "${PID[$shape]}" 2>/dev/null || true
    rm -rf "$RUN_DIR/$shape/store"
    unset "PID[$shape]"
  done
}
trap stop_brokers EXIT

topics_of() { if [[ "$1" == many ]]; then echo "$TOPICS"; else echo 1; fi; }

# bench SHAPE SECONDS JSON [extra flags]: one produce run against SHAPE's broker.
bench() {
  local shape="$1" seconds="$2" json="$3"
  shift 3
  "$BIN/comet-bench" --namesrv "${NS[$shape]}" --quiet --json "$json" produce \
    --topic "MQ_$shape" --topics "$(topics_of "$shape")" --threads "$THREADS" \
    --size "$SIZE" --duration "$seconds" "$@" >"${json%.json}.txt"
}

# start_groups SHAPE JSON: starts SHAPE's consumer groups in the background (CONSUMER_PID)
# and returns once every group consumes (the bench prints its first line then).
start_groups() {
  local shape="$1" json="$2" deadline=$((SECONDS + 300))
  "$BIN/comet-bench" --namesrv "${NS[$shape]}" --json "$json" consume --topic "MQ_$shape" \
    --topics "$(topics_of "$shape")" --group "MQG_$shape" --threads 4 --from last \
    --idle-exit 5 --duration $((DURATION_S + 300)) >"${json%.json}.txt" 2>&1 &
  CONSUMER_PID=$!
  until grep -qs 'receive' "${json%.json}.txt"; do
    kill -0 "$CONSUMER_PID" 2>/dev/null \
      || die "consumers of $shape exited: $(tail -n 2 "${json%.json}.txt")"
    (( SECONDS < deadline )) || die "consumers of $shape not started after 300 s"
    sleep 0.2
  done
}

json_field() {
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"
}

status_kib() { awk -v key="$2:" '$1 == key { print $2 }' "/proc/$1/status"; }

start_broker many 1
start_broker one 2
# The single topic first: it takes a second, the 1,250 topics take minutes.
for shape in one many; do
  log "warm-up of $shape: creating $(topics_of "$shape") topic(s) of $QUEUES queues"
  bench "$shape" "$WARMUP_S" "$RUN_DIR/$shape-warmup.json" --queues "$QUEUES"
  if [[ "$CONSUMER_GROUPS" == 1 ]]; then
    # The groups' first run consumes the warm-up's messages too (a new group starts at a
    # young queue's beginning, as in Java): done here, unmeasured, so runs compare alike.
    log "warm-up of $shape: its consumer groups"
    start_groups "$shape" "$RUN_DIR/$shape-warmup-groups.json"
    bench "$shape" "$WARMUP_S" "$RUN_DIR/$shape-warmup-2.json"
    wait "$CONSUMER_PID" || die "consumers of $shape failed in the warm-up"
  fi
done

TSV="$RUN_DIR/many-queues.tsv"
printf 'run\tshape\tqueues\tgroups\tmsgs_per_s\terrors\tp99_us\treceived\te2e_p99_us' >"$TSV"
printf '\tvmrss_mib\tfds\tthreads\tloadavg\n' >>"$TSV"
for run in $(seq 1 "$REPS"); do
  for shape in many one; do
    json="$RUN_DIR/$shape-$run.json"
    groups=0 received=- e2e_p99=-
    if [[ "$CONSUMER_GROUPS" == 1 ]]; then
      groups="$(topics_of "$shape")"
      start_groups "$shape" "$RUN_DIR/$shape-$run-groups.json"
    fi
    bench "$shape" "$DURATION_S" "$json"
    pid="${PID[$shape]}"
    rss_kib="$(status_kib "$pid" VmRSS)"
    fds="$(ls "/proc/$pid/fd" | wc -l)"
    if [[ "$CONSUMER_GROUPS" == 1 ]]; then
      wait "$CONSUMER_PID" || die "consumers of $shape failed: see $RUN_DIR/$shape-$run-groups.txt"
      received="$(json_field "$RUN_DIR/$shape-$run-groups.json" messages_total)"
      e2e_p99="$(json_field "$RUN_DIR/$shape-$run-groups.json" latency_us_p99)"
    fi
    printf '%s\t%s\t%s\t%s\t%.0f\t%s\t%s\t%s\t%s\t%.1f\t%s\t%s\t%s\n' "$run" "$shape" \
      "$(( $(topics_of "$shape") * QUEUES ))" "$groups" \
      "$(json_field "$json" throughput_msgs_per_s)" "$(json_field "$json" errors_total)" \
      "$(json_field "$json" latency_us_p99)" "$received" "$e2e_p99" \
      "$(echo "$rss_kib / 1024" | bc -l)" "$fds" \
      "$(status_kib "$pid" Threads)" "$(cut -d' ' -f1-3 /proc/loadavg)" >>"$TSV"
    log "run $run $shape: $(tail -n 1 "$TSV")"
  done
done

python3 - "$TSV" <<'EOF'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
print("| run | shape | queues | groups | msgs/s | errors | p99 µs | received | e2e p99 µs "
      "| VmRSS MiB | fds | threads | load avg |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for r in rows:
    print(f"| {r['run']} | {r['shape']} | {r['queues']} | {r['groups']} | {r['msgs_per_s']} "
          f"| {r['errors']} | {r['p99_us']} | {r['received']} | {r['e2e_p99_us']} "
          f"| {r['vmrss_mib']} | {r['fds']} | {r['threads']} | {r['loadavg']} |")
rate = {(r["run"], r["shape"]): float(r["msgs_per_s"]) for r in rows}
ratios = [rate[(run, "many")] / rate[(run, "one")]
          for run in sorted({r["run"] for r in rows}) if rate[(run, "one")] > 0]
print()
print("many/one throughput per pair: " + ", ".join(f"{x:.2f}" for x in ratios)
      + f"; median {statistics.median(ratios):.2f}")
EOF
log "raw reports in $RUN_DIR"
