#!/usr/bin/env bash
# Side-by-side performance harness: Comet against Apache RocketMQ's Java broker (and, when
# it installs, the rocketmq-rust port), on this machine, same flush mode, same workloads,
# in one sitting. One command:
#
#   perf/run.sh
#
# It builds Comet and comet-bench (release), fetches Apache RocketMQ (tests/compat/apache)
# and its official benchmark producer (rocketmq-example), runs the workloads below REPS
# times per system, and writes perf/results/<date>.md (+ <date>.png) with medians and
# Comet/peer ratios, then refreshes the summary in perf/README.md.
#
# Workloads (issue 7):
#   W1  1 KiB sync sends, 64 threads, SYNC_FLUSH          (+ the Java benchmark producer)
#   W2  1 KiB sync sends, 64 threads, ASYNC_FLUSH         (+ the Java benchmark producer)
#   AW  1 KiB async window of 256 sends, SYNC_FLUSH and ASYNC_FLUSH (AW-S, AW-A)
#   W3  128-byte messages in batches of 32, 16 threads, SYNC_FLUSH
#   W4  end-to-end latency at a fixed rate = half the slower system's W1 throughput, SYNC_FLUSH
#   W5  drain a backlog of BACKLOG_MIB MiB of 1 KiB messages with one push consumer group
#
# Environment (defaults in brackets):
#   REPS [3]  DURATION_S [10]  BACKLOG_MIB [256]  SYSTEMS ["comet apache"]  JAVA_BENCH [1]
#   COMET_CORES [2]  NS_PORT [39876]  BROKER_PORT [40911]  PERF_CACHE [perf/.cache]
#   ROCKETMQ_RUST [0]: 1 tries `cargo install rocketmq-broker/rocketmq-namesrv 1.0.0` once
#                      (10-minute limit) and adds the port as a third system if it installs.
#
# Pinning: on a 2-core machine each broker gets both cores and the bench shares them (there
# is no core left to pin the bench away from the broker); COMET_CORES=1 PIN=1 instead puts
# the broker on core 0 (Comet --cores 1, Java with taskset) and the bench on core 1.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
REPS="${REPS:-3}"
DURATION_S="${DURATION_S:-10}"
BACKLOG_MIB="${BACKLOG_MIB:-256}"
SYSTEMS="${SYSTEMS:-comet apache}"
JAVA_BENCH="${JAVA_BENCH:-1}"
COMET_CORES="${COMET_CORES:-2}"
PIN="${PIN:-0}"
NS_PORT="${NS_PORT:-39876}"
BROKER_PORT="${BROKER_PORT:-40911}"
CACHE="${PERF_CACHE:-$HERE/.cache}"
ROCKETMQ_VERSION="${ROCKETMQ_VERSION:-5.5.0}"
ROCKETMQ_RUST="${ROCKETMQ_RUST:-0}"
STAMP="$(date -u +%Y-%m-%d)"
RUN_DIR="$CACHE/run-$(date -u +%Y%m%dT%H%M%S)"
RAW="$RUN_DIR/raw"
NS="127.0.0.1:$NS_PORT"
BENCH="$ROOT/target/release/comet-bench"
COMET="$ROOT/target/release/comet-broker"
APACHE_SH="$ROOT/tests/compat/apache/broker.sh"

log() { echo "perf: $*" >&2; }
die() { echo "perf: error: $*" >&2; exit 1; }

BROKER_PID=""
SYSTEM=""
BENCH_PIN=()
BROKER_PIN=()
if [[ "$PIN" == 1 ]]; then BENCH_PIN=(taskset -c 1); BROKER_PIN=(taskset -c 0); fi

prepare() {
  mkdir -p "$RAW" "$HERE/results"
  log "building comet-broker and comet-bench (release)"
  (cd "$ROOT" && cargo build --release -q -p comet-broker -p comet-bench)
  [[ -x "$COMET" && -x "$BENCH" ]] || die "release binaries missing after the build"
  if [[ " $SYSTEMS " == *" apache "* ]]; then
    APACHE_LIB="$(ROCKETMQ_VERSION="$ROCKETMQ_VERSION" bash "$APACHE_SH" fetch)"
    fetch_java_bench
  fi
  if ! command -v gnuplot >/dev/null; then
    if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null; then
      apt-get install -y -qq gnuplot-nox >/dev/null 2>&1 || log "gnuplot could not be installed; no chart"
    fi
  fi
  if [[ "$ROCKETMQ_RUST" == 1 ]]; then try_rocketmq_rust; fi
}

# The official benchmark producer (org.apache.rocketmq.example.benchmark.Producer).
fetch_java_bench() {
  EXAMPLE_JAR="$CACHE/rocketmq-example-$ROCKETMQ_VERSION.jar"
  [[ -f "$EXAMPLE_JAR" || "$JAVA_BENCH" != 1 ]] && return 0
  if timeout 300 mvn -B -q dependency:get -Dtransitive=false \
      -Dartifact="org.apache.rocketmq:rocketmq-example:$ROCKETMQ_VERSION" >"$RUN_DIR/example-fetch.log" 2>&1; then
    cp "$HOME/.m2/repository/org/apache/rocketmq/rocketmq-example/$ROCKETMQ_VERSION/rocketmq-example-$ROCKETMQ_VERSION.jar" "$EXAMPLE_JAR"
  else
    log "rocketmq-example $ROCKETMQ_VERSION did not resolve; W1/W2 run with comet-bench only"
    JAVA_BENCH=0
  fi
}

try_rocketmq_rust() {
  local root="$CACHE/rocketmq-rust"
  if [[ -x "$root/bin/rocketmq-broker-rust" || -x "$root/bin/rocketmq-namesrv-rust" ]]; then return 0; fi
  log "trying cargo install rocketmq-broker / rocketmq-namesrv 1.0.0 (10-minute limit)"
  if timeout 600 cargo install --root "$root" --version 1.0.0 rocketmq-namesrv rocketmq-broker \
      >"$RUN_DIR/rocketmq-rust-install.log" 2>&1; then
    log "rocketmq-rust installed into $root (not wired into the workloads yet; see perf/README.md)"
  else
    log "rocketmq-rust did not install within the limit (log: $RUN_DIR/rocketmq-rust-install.log)"
  fi
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

wait_port() {
  local port="$1" deadline=$((SECONDS + 60))
  until port_open "$port"; do
    (( SECONDS < deadline )) || die "port $port did not open"
    sleep 0.2
  done
}

# Every broker start takes fresh ports: a name server that just stopped leaves its port in
# TIME_WAIT, and the JVM's listener refuses to bind over it.
SESSION=0
start_broker() {
  SYSTEM="$1"; local flush="$2"
  SESSION=$((SESSION + 1))
  local ns_port=$((NS_PORT + SESSION)) broker_port=$((BROKER_PORT + 10 * SESSION))
  NS="127.0.0.1:$ns_port"
  for p in "$ns_port" "$broker_port"; do port_open "$p" && die "port $p is busy"; done
  case "$SYSTEM" in
    comet)
      rm -rf "$RUN_DIR/comet-store"; mkdir -p "$RUN_DIR/comet-store"
      RUST_LOG=warn "${BROKER_PIN[@]}" "$COMET" --standalone --cores "$COMET_CORES" \
        --bind-address 127.0.0.1 --listen-port "$broker_port" --namesrv "$NS" \
        --store "$RUN_DIR/comet-store" --flush "$flush" >"$RUN_DIR/comet-$flush.log" 2>&1 &
      BROKER_PID=$!
      wait_port "$broker_port"; wait_port "$ns_port"
      ;;
    apache)
      ROCKETMQ_VERSION="$ROCKETMQ_VERSION" \
        bash "$APACHE_SH" start --dir "$RUN_DIR/apache" --flush "$flush" \
        --namesrv-port "$ns_port" --broker-port "$broker_port" >&2
      BROKER_PID="$(cat "$RUN_DIR/apache/broker.pid")"
      if [[ "$PIN" == 1 ]]; then
        taskset -a -p -c 0 "$BROKER_PID" >/dev/null
        taskset -a -p -c 0 "$(cat "$RUN_DIR/apache/namesrv.pid")" >/dev/null
      fi
      ;;
    *) die "unknown system $SYSTEM" ;;
  esac
  log "$SYSTEM up ($flush, pid $BROKER_PID)"
}

stop_broker() {
  case "$SYSTEM" in
    comet)
      kill -TERM "$BROKER_PID" 2>/dev/null || true
      local deadline=$((SECONDS + 30))
      while kill -0 "$BROKER_PID" 2>/dev/null && (( SECONDS < deadline )); do sleep 0.2; done
      kill -KILL "$BROKER_PID" 2>/dev/null || true
      wait "$BROKER_PID" 2>/dev/null || true
      rm -rf "$RUN_DIR/comet-store"
      ;;
    apache)
      bash "$APACHE_SH" stop --dir "$RUN_DIR/apache" >&2 || true
      ;;
  esac
  BROKER_PID=""
}

cleanup() {
  if [[ -n "$BROKER_PID" ]]; then stop_broker; fi
}
trap cleanup EXIT

# bench WORKLOAD REP ARGS...: one comet-bench run, JSON into $RAW/<system>.<workload>.<rep>.json
bench() {
  local workload="$1" rep="$2"; shift 2
  local json="$RAW/$SYSTEM.$workload.$rep.json"
  "${BENCH_PIN[@]}" "$BENCH" --namesrv "$NS" --quiet --watch-pid "$BROKER_PID" --json "$json" "$@" \
    >"$RAW/$SYSTEM.$workload.$rep.txt" 2>&1 || { tail -5 "$RAW/$SYSTEM.$workload.$rep.txt" >&2; log "$workload run $rep failed"; return 0; }
  python3 - "$json" <<'EOF' >&2
import json, sys
r = json.load(open(sys.argv[1]))
print(f"perf:   {r['throughput_msgs_per_s']:10.0f} msgs/s  p50 {r['latency_us_p50']} us  p99 {r['latency_us_p99']} us"
      f"  p99.9 {r['latency_us_p999']} us  errors {r['errors_total']}")
EOF
}

# java_bench WORKLOAD REP TOPIC: the official producer, 64 threads, 1 KiB, ~DURATION_S+3 s.
java_bench() {
  local workload="$1" rep="$2" topic="$3"
  [[ "$JAVA_BENCH" == 1 && -f "${EXAMPLE_JAR:-}" ]] || return 0
  local out="$RAW/$SYSTEM.$workload-java.$rep.log" home="$RUN_DIR/java-home"
  mkdir -p "$home"
  # It prints "Send TPS" over its last 10 one-second snapshots every 10 s; run 13 s and keep
  # the line printed at 10 s.
  timeout -s KILL 14 "${BENCH_PIN[@]}" java -Xms256m -Xmx1g -Duser.home="$home" \
    -Drocketmq.client.logRoot="$home/logs" -cp "$EXAMPLE_JAR:$APACHE_LIB/*" \
    org.apache.rocketmq.example.benchmark.Producer -n "$NS" -t "$topic" -w 64 -s 1024 \
    >"$out" 2>&1 || true
  grep -E "Send TPS" "$out" | tail -1 | sed 's/^/perf:   java: /' >&2 || log "java producer printed no figures ($out)"
}

run_sync_session() {
  local sys="$1" d="$DURATION_S"
  start_broker "$sys" SYNC_FLUSH
  for r in $(seq 1 "$REPS"); do
    log "$sys W1 run $r"; bench W1 "$r" produce --topic PerfW1 --queues 8 --size 1024 --threads 64 --duration "$d"
    java_bench W1 "$r" PerfW1
    log "$sys W3 run $r"; bench W3 "$r" produce --topic PerfW3 --queues 8 --size 128 --batch 32 --threads 16 --duration "$d"
    log "$sys AW-S run $r"; bench AW-S "$r" produce --topic PerfAW --queues 8 --size 1024 --inflight 256 --duration "$d"
  done
  stop_broker
}

run_e2e_session() {
  local sys="$1" rate="$2"
  start_broker "$sys" SYNC_FLUSH
  for r in $(seq 1 "$REPS"); do
    log "$sys W4 run $r at $rate msgs/s"
    bench W4 "$r" e2e --topic PerfW4 --queues 8 --size 1024 --threads 64 --rate "$rate" --duration "$DURATION_S"
  done
  stop_broker
}

run_async_session() {
  local sys="$1" d="$DURATION_S"
  local backlog=$(( BACKLOG_MIB * 1024 ))
  start_broker "$sys" ASYNC_FLUSH
  for r in $(seq 1 "$REPS"); do
    log "$sys W2 run $r"; bench W2 "$r" produce --topic PerfW2 --queues 8 --size 1024 --threads 64 --duration "$d"
    java_bench W2 "$r" PerfW2
    log "$sys AW-A run $r"; bench AW-A "$r" produce --topic PerfAW --queues 8 --size 1024 --inflight 256 --duration "$d"
  done
  log "$sys W5: filling a backlog of $BACKLOG_MIB MiB ($backlog messages)"
  bench W5-fill 1 produce --topic PerfW5 --queues 8 --size 1024 --inflight 512 --messages "$backlog"
  for r in $(seq 1 "$REPS"); do
    log "$sys W5 drain run $r"
    bench W5 "$r" consume --topic PerfW5 --group "perf_drain_$r" --from first --threads 20 \
      --messages "$backlog" --idle-exit 5 --duration 600
  done
  stop_broker
}

main() {
  prepare
  log "results of this run: $RUN_DIR"
  {
    echo "date_utc=$(date -u +%FT%TZ)"; echo "kernel=$(uname -r)"; echo "cpus=$(nproc)"
    echo "git_commit=$(cd "$ROOT" && git rev-parse HEAD 2>/dev/null || echo unknown)"
    echo "reps=$REPS duration_s=$DURATION_S backlog_mib=$BACKLOG_MIB comet_cores=$COMET_CORES pin=$PIN"
    echo "rocketmq_version=$ROCKETMQ_VERSION java_bench=$JAVA_BENCH"
    echo "loadavg_before=$(cut -d' ' -f1-3 /proc/loadavg)"
  } >"$RUN_DIR/meta.txt"
  for sys in $SYSTEMS; do run_sync_session "$sys"; done
  local rate
  rate="$(python3 "$HERE/report.py" w4-rate "$RAW" $SYSTEMS)"
  for sys in $SYSTEMS; do run_e2e_session "$sys" "$rate"; done
  for sys in $SYSTEMS; do run_async_session "$sys"; done
  echo "loadavg_after=$(cut -d' ' -f1-3 /proc/loadavg)" >>"$RUN_DIR/meta.txt"
  echo "w4_rate_msgs_per_s=$rate" >>"$RUN_DIR/meta.txt"
  python3 "$HERE/report.py" report "$RUN_DIR" "$HERE/results/$STAMP" "$HERE/README.md" $SYSTEMS
  log "wrote $HERE/results/$STAMP.md"
}

main "$@"
