#!/usr/bin/env bash
# Side-by-side performance harness: Comet against Apache RocketMQ's Java broker, on this
# machine, same flush mode, same workloads, in one sitting. One command:
#
#   perf/run.sh
#
# It builds Comet and comet-bench (release), fetches Apache RocketMQ (tests/compat/apache)
# and its official benchmark producer (rocketmq-example), runs every workload REPS times per
# system and writes perf/results/<date>.md (+ <date>.png) with medians, spreads and
# Comet/peer ratios, then refreshes the summary in perf/README.md.
#
# Fairness rules (perf/README.md#rules-of-a-sitting):
# - Every system's brokers start once per broker configuration (SYNC_FLUSH, then
#   ASYNC_FLUSH) and stay up for all workloads of that configuration; both systems' brokers
#   are up at the same time (each on its own ports, the idle one's CPU is recorded), so the
#   runs of the two systems alternate and each run pair shares the same minutes.
# - Before every measured run, warm-up rounds of the same load run until two consecutive
#   rounds' throughputs differ by less than WARMUP_TOLERANCE_PCT (at most WARMUP_MAX_ROUNDS
#   rounds; hitting the cap is reported). Warm-up rounds are recorded, never counted.
# - A measured run with errors (failed sends, non-OK statuses, missing or undrained
#   messages, a bench that fails) fails its workload: the report marks it and this script
#   exits 1 once the sitting is over.
# - REPS >= 3 measured runs per workload and system; the report gives medians and spreads.
#
# Workloads:
#   W1    1 KiB sync sends, 64 threads, SYNC_FLUSH          (+ the Java benchmark producer)
#   W3    128-byte messages in batches of 32, 16 threads, SYNC_FLUSH
#   AW-S  1 KiB async window of 256 sends, SYNC_FLUSH
#   W4    end-to-end latency at a fixed rate = half the slower system's W1 median, SYNC_FLUSH
#   W2    1 KiB sync sends, 64 threads, ASYNC_FLUSH         (+ the Java benchmark producer)
#   AW-A  1 KiB async window of 256 sends, ASYNC_FLUSH
#   W5    drain a backlog of BACKLOG_MIB MiB of 1 KiB messages with one push consumer group
#   W1-HA W1 against a master + slave pair: brokerRole=SYNC_MASTER, SYNC_FLUSH on both nodes,
#         one slave each (its own process, store and ports); the master's replication lag is
#         sampled every HA_SAMPLE_MS during each measured run (perf/ha_lag.py). Its brokers
#         are a configuration of their own, run before the SYNC_FLUSH one.
#
# Environment (defaults in brackets):
#   REPS [3]  DURATION_S [10]  WARMUP_S [DURATION_S]  WARMUP_TOLERANCE_PCT [5]
#   WARMUP_MAX_ROUNDS [6]  WORKLOADS ["W1 W3 AW-S W4 W2 AW-A W5"]  SYSTEMS ["comet apache"]
#   BACKLOG_MIB [2048]  JAVA_BENCH [1]  JAVA_MAX_WINDOWS [6]  W4_RATE [from W1]
#   COMET_CORES [2]  PIN [0]  NS_PORT [39876]  BROKER_PORT [40911]  HA_SAMPLE_MS [100]
#   PERF_CACHE [perf/.cache]: builds' downloads, run directories (stores, raw reports)
#   OUT_DIR [perf/results]: where <date>.md and <date>.png go
#   README [perf/README.md]: whose summary block is refreshed; README=none leaves it alone
#   ROCKETMQ_VERSION [5.5.0]
#   COMET_BIN_DIR [unset]: take comet-broker and comet-bench from this directory instead of
#                  building the working tree (e.g. a release build of a clean export of a
#                  commit); COMET_BIN_COMMIT names that commit in the sitting facts
#   COMET_SEGMENT_BYTES [unset: the broker's default]: mappedFileSizeCommitLog of every
#                  Comet broker of the sitting (the Apache brokers use 134217728)
#   ROCKETMQ_RUST [0]: 1 tries `cargo install rocketmq-broker/rocketmq-namesrv 1.0.0` once
#                      (10-minute limit); the port is not wired into the workloads.
#
# Pinning: on a 2-core machine each broker gets both cores and the bench shares them (there
# is no core left to pin the bench away from the broker); COMET_CORES=1 PIN=1 instead puts
# the brokers on core 0 (Comet --cores 1, Java with taskset) and the bench on core 1.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
REPS="${REPS:-3}"
DURATION_S="${DURATION_S:-10}"
WARMUP_S="${WARMUP_S:-$DURATION_S}"
WARMUP_TOLERANCE_PCT="${WARMUP_TOLERANCE_PCT:-5}"
WARMUP_MAX_ROUNDS="${WARMUP_MAX_ROUNDS:-6}"
WORKLOADS="${WORKLOADS:-W1 W3 AW-S W4 W2 AW-A W5}"
SYSTEMS="${SYSTEMS:-comet apache}"
read -r -a SYSTEM_LIST <<<"$SYSTEMS"
BACKLOG_MIB="${BACKLOG_MIB:-2048}"
JAVA_BENCH="${JAVA_BENCH:-1}"
JAVA_MAX_WINDOWS="${JAVA_MAX_WINDOWS:-6}"
W4_RATE="${W4_RATE:-}"
COMET_CORES="${COMET_CORES:-2}"
PIN="${PIN:-0}"
NS_PORT="${NS_PORT:-39876}"
BROKER_PORT="${BROKER_PORT:-40911}"
HA_SAMPLE_MS="${HA_SAMPLE_MS:-100}"
CACHE="${PERF_CACHE:-$HERE/.cache}"
OUT_DIR="${OUT_DIR:-$HERE/results}"
README="${README:-$HERE/README.md}"
ROCKETMQ_VERSION="${ROCKETMQ_VERSION:-5.5.0}"
ROCKETMQ_RUST="${ROCKETMQ_RUST:-0}"
STAMP="$(date -u +%Y-%m-%d)"
RUN_DIR="$CACHE/run-$(date -u +%Y%m%dT%H%M%S)"
RAW="$RUN_DIR/raw"
WARM="$RUN_DIR/warmup"
COMET_BIN_DIR="${COMET_BIN_DIR:-}"
COMET_BIN_COMMIT="${COMET_BIN_COMMIT:-}"
COMET_SEGMENT_BYTES="${COMET_SEGMENT_BYTES:-}"
BENCH="${COMET_BIN_DIR:-$ROOT/target/release}/comet-bench"
COMET="${COMET_BIN_DIR:-$ROOT/target/release}/comet-broker"
# Options every Comet broker of the sitting gets (master, slave and single node alike).
COMET_OPTS=()
if [[ -n "$COMET_SEGMENT_BYTES" ]]; then
  COMET_OPTS=(-o "mappedFileSizeCommitLog=$COMET_SEGMENT_BYTES")
fi
APACHE_SH="$ROOT/tests/compat/apache/broker.sh"
REPORT=(python3 "$HERE/report.py")
# The Java benchmark producer prints one line per 10-second window.
JAVA_WINDOW_S=10

log() { echo "perf: $*" >&2; }
die() { echo "perf: error: $*" >&2; exit 2; }

BENCH_PIN=()
BROKER_PIN=()
if [[ "$PIN" == 1 ]]; then BENCH_PIN=(taskset -c 1); BROKER_PIN=(taskset -c 0); fi

# Per system, while its brokers are up: broker pid, name server address, state directory.
declare -A PID=() NS=() DIR=()

check_settings() {
  local n
  for n in REPS DURATION_S WARMUP_S WARMUP_TOLERANCE_PCT WARMUP_MAX_ROUNDS BACKLOG_MIB \
      JAVA_MAX_WINDOWS HA_SAMPLE_MS; do
    [[ "${!n}" =~ ^[0-9]+$ ]] || die "$n must be a whole number, not '${!n}'"
  done
  (( REPS >= 3 )) || die "REPS must be at least 3 (medians and spreads need three runs)"
  (( WARMUP_MAX_ROUNDS >= 2 )) || die "WARMUP_MAX_ROUNDS must be at least 2"
  (( DURATION_S > 0 && WARMUP_S > 0 )) || die "DURATION_S and WARMUP_S must be positive"
  local w s
  for w in $WORKLOADS; do
    case "$w" in W1|W2|W3|W4|W5|AW-S|AW-A|W1-HA) ;; *) die "unknown workload $w" ;; esac
  done
  for s in $SYSTEMS; do
    case "$s" in comet|apache) ;; *) die "unknown system $s (comet, apache)" ;; esac
  done
  if [[ " $WORKLOADS " == *" W4 "* && " $WORKLOADS " != *" W1 "* && -z "$W4_RATE" ]]; then
    die "W4 needs W1 in the same sitting (its rate is half the slower W1) or W4_RATE"
  fi
}

prepare() {
  mkdir -p "$RAW" "$WARM" "$OUT_DIR"
  : >"$RUN_DIR/failures.tsv"
  : >"$RUN_DIR/warmup.tsv"
  : >"$RUN_DIR/warmup-verdicts.tsv"
  : >"$RUN_DIR/loadavg.tsv"
  : >"$RUN_DIR/java.tsv"
  if [[ -z "$COMET_BIN_DIR" ]]; then
    log "building comet-broker and comet-bench (release)"
    (cd "$ROOT" && cargo build --release -q -p comet-broker -p comet-bench)
  else
    log "using the prebuilt comet-broker and comet-bench in $COMET_BIN_DIR"
  fi
  [[ -x "$COMET" && -x "$BENCH" ]] || die "release binaries missing after the build"
  if [[ " $SYSTEMS " == *" apache "* ]]; then
    APACHE_LIB="$(ROCKETMQ_VERSION="$ROCKETMQ_VERSION" bash "$APACHE_SH" fetch)"
  fi
  if [[ "$JAVA_BENCH" == 1 ]]; then fetch_java_bench; fi
  if ! command -v gnuplot >/dev/null; then
    if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null; then
      apt-get install -y -qq gnuplot-nox >/dev/null 2>&1 \
        || log "gnuplot could not be installed; no chart"
    fi
  fi
  if [[ "$ROCKETMQ_RUST" == 1 ]]; then try_rocketmq_rust; fi
}

# The official benchmark producer (org.apache.rocketmq.example.benchmark.Producer).
fetch_java_bench() {
  mkdir -p "$CACHE"
  EXAMPLE_JAR="$CACHE/rocketmq-example-$ROCKETMQ_VERSION.jar"
  [[ -f "$EXAMPLE_JAR" ]] && return 0
  if [[ -z "${APACHE_LIB:-}" ]]; then
    APACHE_LIB="$(ROCKETMQ_VERSION="$ROCKETMQ_VERSION" bash "$APACHE_SH" fetch)"
  fi
  if timeout 300 mvn -B -q dependency:get -Dtransitive=false \
      -Dartifact="org.apache.rocketmq:rocketmq-example:$ROCKETMQ_VERSION" \
      >"$RUN_DIR/example-fetch.log" 2>&1; then
    local m2="$HOME/.m2/repository/org/apache/rocketmq/rocketmq-example/$ROCKETMQ_VERSION"
    cp "$m2/rocketmq-example-$ROCKETMQ_VERSION.jar" "$EXAMPLE_JAR"
  else
    log "rocketmq-example $ROCKETMQ_VERSION did not resolve; W1/W2 run with comet-bench only"
    JAVA_BENCH=0
  fi
}

try_rocketmq_rust() {
  local root="$CACHE/rocketmq-rust"
  if [[ -x "$root/bin/rocketmq-broker-rust" || -x "$root/bin/rocketmq-namesrv-rust" ]]; then
    return 0
  fi
  log "trying cargo install rocketmq-broker / rocketmq-namesrv 1.0.0 (10-minute limit)"
  if timeout 600 cargo install --root "$root" --version 1.0.0 rocketmq-namesrv rocketmq-broker \
      >"$RUN_DIR/rocketmq-rust-install.log" 2>&1; then
    log "rocketmq-rust installed into $root (not wired into the workloads; see perf/README.md)"
  else
    log "rocketmq-rust did not install within the limit (log: $RUN_DIR/rocketmq-rust-install.log)"
  fi
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

wait_port() {
  local port="$1" pid="$2" deadline=$((SECONDS + 60))
  until port_open "$port"; do
    kill -0 "$pid" 2>/dev/null || die "the broker (pid $pid) exited before port $port opened"
    (( SECONDS < deadline )) || die "port $port did not open"
    sleep 0.2
  done
}

loadavg() { cut -d' ' -f1-3 /proc/loadavg; }

# note_load LABEL: one line of loadavg.tsv (label, UTC time, 1/5/15-minute load averages).
note_load() {
  printf '%s\t%s\t%s\n' "$1" "$(date -u +%H:%M:%S)" "$(loadavg | tr ' ' '\t')" \
    >>"$RUN_DIR/loadavg.tsv"
}

# fail SYSTEM WORKLOAD REP REASON: marks a workload as failed (the sitting then exits 1).
fail() {
  printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >>"$RUN_DIR/failures.tsv"
  log "FAILED: $1 $2 run $3: $4"
}

# Each configuration takes fresh ports: a name server that just stopped leaves its port in
# TIME_WAIT, and the JVM's listener refuses to bind over it.
SESSION=0
# start_brokers FLUSH [ROLE]: with ROLE (SYNC_MASTER), each system's broker is that master
# and gets a slave (start_slave, in the replicated pair's section below).
start_brokers() {
  local flush="$1" role="${2:-}" index=0 sys label="$1"
  [[ -z "$role" ]] || label="$flush-$role"
  SESSION=$((SESSION + 1))
  for sys in $SYSTEMS; do
    index=$((index + 1))
    local ns_port=$((NS_PORT + 10 * SESSION + index))
    local broker_port=$((BROKER_PORT + 100 * SESSION + 10 * index))
    local p
    for p in "$ns_port" "$broker_port"; do port_open "$p" && die "port $p is busy"; done
    NS[$sys]="127.0.0.1:$ns_port"
    case "$sys" in
      comet)
        DIR[$sys]="$RUN_DIR/comet-$label"
        rm -rf "${DIR[$sys]}"; mkdir -p "${DIR[$sys]}/store"
        local role_args=()
        [[ -z "$role" ]] || role_args=(-o "brokerRole=$role")
        RUST_LOG=warn "${BROKER_PIN[@]}" "$COMET" --standalone --cores "$COMET_CORES" \
          --bind-address 127.0.0.1 --listen-port "$broker_port" --namesrv "${NS[$sys]}" \
          --store "${DIR[$sys]}/store" --flush "$flush" "${role_args[@]}" "${COMET_OPTS[@]}" \
          >"${DIR[$sys]}/broker.log" 2>&1 &
        PID[$sys]=$!
        wait_port "$broker_port" "${PID[$sys]}"; wait_port "$ns_port" "${PID[$sys]}"
        ;;
      apache)
        DIR[$sys]="$RUN_DIR/apache-$label"
        ROCKETMQ_VERSION="$ROCKETMQ_VERSION" \
          bash "$APACHE_SH" start --dir "${DIR[$sys]}" --flush "$flush" \
          --namesrv-port "$ns_port" --broker-port "$broker_port" \
          ${role:+--role "$role"} >&2
        PID[$sys]="$(cat "${DIR[$sys]}/broker.pid")"
        if [[ "$PIN" == 1 ]]; then
          taskset -a -p -c 0 "${PID[$sys]}" >/dev/null
          taskset -a -p -c 0 "$(cat "${DIR[$sys]}/namesrv.pid")" >/dev/null
        fi
        ;;
    esac
    log "$sys up ($flush${role:+ $role}, pid ${PID[$sys]}, name server ${NS[$sys]})"
    [[ -z "$role" ]] || start_slave "$sys" "$flush" "$ns_port" "$broker_port"
  done
}

stop_brokers() {
  local sys
  stop_slaves
  for sys in "${!PID[@]}"; do
    case "$sys" in
      comet)
        kill -TERM "${PID[$sys]}" 2>/dev/null || true
        local deadline=$((SECONDS + 30))
        while kill -0 "${PID[$sys]}" 2>/dev/null && (( SECONDS < deadline )); do sleep 0.2; done
        kill -KILL "${PID[$sys]}" 2>/dev/null || true
        wait "${PID[$sys]}" 2>/dev/null || true
        rm -rf "${DIR[$sys]}/store"
        ;;
      apache)
        bash "$APACHE_SH" stop --dir "${DIR[$sys]}" >&2 || true
        ;;
    esac
    unset "PID[$sys]"
  done
}
trap stop_brokers EXIT

# The other systems' broker pids (idle while SYSTEM runs), for the report's idle-peer CPU.
peer_pids() {
  local sys="$1" other
  for other in "${!PID[@]}"; do
    [[ "$other" == "$sys" ]] && continue
    echo "${PID[$other]}"
    [[ -z "${SLAVE_PID[$other]:-}" ]] || echo "${SLAVE_PID[$other]}"
  done
}

# bench_once SYSTEM JSON ARGS...: one comet-bench run against SYSTEM's brokers. Returns 1
# (and leaves a reason in BENCH_FAILURE) when the broker is gone or the bench fails.
BENCH_FAILURE=""
bench_once() {
  local sys="$1" json="$2"; shift 2
  local watch=(--watch-pid "${PID[$sys]}") peer
  # A replicated pair's slave is watched second (report.py reads it as the slave's CPU).
  [[ -z "${SLAVE_PID[$sys]:-}" ]] || watch+=(--watch-pid "${SLAVE_PID[$sys]}")
  for peer in $(peer_pids "$sys"); do watch+=(--watch-pid "$peer"); done
  BENCH_FAILURE=""
  rm -f "$json"
  if ! kill -0 "${PID[$sys]}" 2>/dev/null; then
    BENCH_FAILURE="the $sys broker (pid ${PID[$sys]}) is not running"
    return 1
  fi
  if ! "${BENCH_PIN[@]}" "$BENCH" --namesrv "${NS[$sys]}" --quiet "${watch[@]}" --json "$json" \
      "$@" >"${json%.json}.txt" 2>&1; then
    BENCH_FAILURE="comet-bench failed: $(tail -1 "${json%.json}.txt")"
    return 1
  fi
  [[ -f "$json" ]] || { BENCH_FAILURE="comet-bench wrote no report"; return 1; }
}

# figures JSON [EXPECTED]: "<msgs/s>\t<errors>\t<reason>" of one report (report.py check).
figures() { "${REPORT[@]}" check "$@"; }

# warm_up SYSTEM WORKLOAD REP ARGS...: rounds of WARMUP_S seconds until two consecutive
# rounds differ by less than WARMUP_TOLERANCE_PCT, or WARMUP_MAX_ROUNDS. Records every round
# in warmup.tsv and the verdict in warmup-verdicts.tsv. ARGS are the measured run's
# arguments without its length, which warm-up rounds replace with --duration WARMUP_S.
warm_up() {
  local sys="$1" workload="$2" rep="$3"; shift 3
  local round=0 prev="" tput errors reason delta="" converged=0
  while (( round < WARMUP_MAX_ROUNDS )); do
    round=$((round + 1))
    local json="$WARM/$sys.$workload.$rep.$round.json" args=()
    # A draining warm-up round needs a consumer group of its own to start from the first
    # message again: @ROUND@ in an argument names the round.
    local a
    for a in "$@"; do args+=("${a//@ROUND@/${sys}_${rep}_$round}"); done
    if ! bench_once "$sys" "$json" "${args[@]}" --duration "$WARMUP_S"; then
      printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$sys" "$workload" "$rep" "$round" 0 "-1" \
        >>"$RUN_DIR/warmup.tsv"
      log "  $sys $workload warm-up $round: $BENCH_FAILURE"
      prev=""
      # A broker that is gone will not come back: the measured run records the failure.
      kill -0 "${PID[$sys]}" 2>/dev/null || break
      continue
    fi
    IFS=$'\t' read -r tput errors reason < <(figures "$json")
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$sys" "$workload" "$rep" "$round" "$tput" "$errors" \
      >>"$RUN_DIR/warmup.tsv"
    if [[ -n "$prev" ]]; then
      delta="$("${REPORT[@]}" delta "$prev" "$tput")"
      if "${REPORT[@]}" within "$delta" "$WARMUP_TOLERANCE_PCT"; then converged=1; fi
    fi
    log "  $sys $workload warm-up $round: $tput msgs/s, errors $errors${delta:+, change $delta%}"
    (( converged )) && break
    prev="$tput"
  done
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$sys" "$workload" "$rep" "$round" "$converged" \
    "${delta:-}" >>"$RUN_DIR/warmup-verdicts.tsv"
  (( converged )) || log "  $sys $workload: warm-up cap of $WARMUP_MAX_ROUNDS rounds hit" \
    "(last change ${delta:-n/a}%); measuring anyway, the report marks it"
}

# measure SYSTEM WORKLOAD REP EXPECTED ARGS...: warm up, then one measured run (ARGS plus
# --duration DURATION_S unless ARGS end it otherwise). EXPECTED is the message count a
# draining run must reach (0: none).
measure() {
  local sys="$1" workload="$2" rep="$3" expected="$4"; shift 4
  local measured=("$@")
  if [[ " $* " != *" --messages "* ]]; then measured+=(--duration "$DURATION_S"); fi
  warm_up "$sys" "$workload" "$rep" "${WARM_ARGS[@]}"
  local json="$RAW/$sys.$workload.$rep.json" tput errors reason
  note_load "$workload $sys run $rep"
  ha_lag_start "$sys" "$workload" "$rep"
  if ! bench_once "$sys" "$json" "${measured[@]}"; then
    ha_lag_stop
    fail "$sys" "$workload" "$rep" "$BENCH_FAILURE"
    return 0
  fi
  ha_lag_stop
  IFS=$'\t' read -r tput errors reason < <(figures "$json" "$expected")
  log "  $sys $workload run $rep: $tput msgs/s, $("${REPORT[@]}" line "$json")"
  if [[ "$errors" != 0 ]]; then fail "$sys" "$workload" "$rep" "$reason"; fi
}

# The order of the systems in run REP: alternating, so neither always runs first.
order() {
  local rep="$1" list=() s
  for s in $SYSTEMS; do list+=("$s"); done
  if (( rep % 2 == 0 )); then
    local reversed=() i
    for (( i = ${#list[@]} - 1; i >= 0; i-- )); do reversed+=("${list[$i]}"); done
    list=("${reversed[@]}")
  fi
  echo "${list[@]}"
}

# java_run SYSTEM WORKLOAD REP TOPIC: the official producer, 64 threads, 1 KiB. Its 10 s
# windows are warm-up rounds (client and broker) until two consecutive ones differ by less
# than the tolerance (at most JAVA_MAX_WINDOWS); the next window is the measured one.
java_run() {
  local sys="$1" workload="$2" rep="$3" topic="$4"
  local out="$RAW/$sys.$workload-java.$rep.log" home="$RUN_DIR/java-home"
  mkdir -p "$home"
  if ! kill -0 "${PID[$sys]}" 2>/dev/null; then
    fail "$sys" "$workload-java" "$rep" "the $sys broker is not running"
    return 0
  fi
  local limit_s=$(( (JAVA_MAX_WINDOWS + 1) * JAVA_WINDOW_S + 20 ))
  timeout -s KILL "$limit_s" "${BENCH_PIN[@]}" java -Xms256m -Xmx1g -Duser.home="$home" \
    -Drocketmq.client.logRoot="$home/logs" -cp "$EXAMPLE_JAR:$APACHE_LIB/*" \
    org.apache.rocketmq.example.benchmark.Producer -n "${NS[$sys]}" -t "$topic" -w 64 -s 1024 \
    >"$out" 2>&1 &
  local java_pid=$! seen=0 prev="" prev_failed=0 converged=0 measured_tps="" delta=""
  local tps failed
  while kill -0 "$java_pid" 2>/dev/null && [[ -z "$measured_tps" ]]; do
    sleep 1
    local windows=()
    mapfile -t windows < <("${REPORT[@]}" java-windows "$out")
    while (( seen < ${#windows[@]} )) && [[ -z "$measured_tps" ]]; do
      IFS=$'\t' read -r tps failed <<<"${windows[$seen]}"
      seen=$((seen + 1))
      local window_failed=$((failed - prev_failed))
      prev_failed="$failed"
      if (( converged )) || (( seen > JAVA_MAX_WINDOWS )); then
        measured_tps="$tps"
        printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$sys" "$workload" "$rep" "$seen" "$tps" \
          "$window_failed" >>"$RUN_DIR/java.tsv"
        log "  $sys $workload-java run $rep: $tps msgs/s (window $seen), failed $window_failed"
        (( window_failed == 0 )) \
          || fail "$sys" "$workload-java" "$rep" "$window_failed sends failed in the window"
        break
      fi
      printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$sys" "$workload-java" "$rep" "$seen" "$tps" \
        "$window_failed" >>"$RUN_DIR/warmup.tsv"
      if [[ -n "$prev" ]]; then
        delta="$("${REPORT[@]}" delta "$prev" "$tps")"
        if "${REPORT[@]}" within "$delta" "$WARMUP_TOLERANCE_PCT"; then converged=1; fi
      fi
      log "  $sys $workload-java warm-up window $seen: $tps msgs/s${delta:+, change $delta%}"
      prev="$tps"
      if (( seen == JAVA_MAX_WINDOWS )) || (( converged )); then
        printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$sys" "$workload-java" "$rep" "$seen" \
          "$converged" "$delta" >>"$RUN_DIR/warmup-verdicts.tsv"
        (( converged )) || log "  $sys $workload-java: warm-up cap of $JAVA_MAX_WINDOWS" \
          "windows hit (last change ${delta:-n/a}%); measuring the next window anyway"
        note_load "$workload-java $sys run $rep"
      fi
    done
  done
  kill -TERM "$java_pid" 2>/dev/null || true
  wait "$java_pid" 2>/dev/null || true
  [[ -n "$measured_tps" ]] || fail "$sys" "$workload-java" "$rep" \
    "no measured window (output: $out)"
}

# The measured arguments of each closed-loop workload (each run adds its length).
workload_args() {
  case "$1" in
    W1) echo "produce --topic PerfW1 --queues 8 --size 1024 --threads 64" ;;
    W1-HA) echo "produce --topic PerfW1HA --queues 8 --size 1024 --threads 64" ;;
    W2) echo "produce --topic PerfW2 --queues 8 --size 1024 --threads 64" ;;
    W3) echo "produce --topic PerfW3 --queues 8 --size 128 --batch 32 --threads 16" ;;
    AW-S|AW-A) echo "produce --topic PerfAW --queues 8 --size 1024 --inflight 256" ;;
    W4) echo "e2e --topic PerfW4 --queues 8 --size 1024 --threads 64 --rate $2" ;;
  esac
}

workload_flush() {
  case "$1" in W1|W1-HA|W3|AW-S|W4) echo SYNC_FLUSH ;; *) echo ASYNC_FLUSH ;; esac
}

run_workload() {
  local workload="$1" rate="" sys rep
  note_load "$workload start"
  if [[ "$workload" == W4 ]]; then
    rate="${W4_RATE:-$("${REPORT[@]}" w4-rate "$RAW" "${SYSTEM_LIST[@]}")}"
    echo "w4_rate_msgs_per_s=$rate" >>"$RUN_DIR/meta.txt"
    log "W4 rate: $rate msgs/s"
  fi
  if [[ "$workload" == W5 ]]; then
    run_drain
  else
    local args
    read -r -a args <<<"$(workload_args "$workload" "$rate")"
    WARM_ARGS=("${args[@]}")
    for rep in $(seq 1 "$REPS"); do
      for sys in $(order "$rep"); do
        log "$sys $workload run $rep"
        measure "$sys" "$workload" "$rep" 0 "${args[@]}"
      done
    done
    if [[ "$JAVA_BENCH" == 1 && ( "$workload" == W1 || "$workload" == W2 ) ]]; then
      for rep in $(seq 1 "$REPS"); do
        for sys in $(order "$rep"); do
          log "$sys $workload with the Java benchmark producer, run $rep"
          java_run "$sys" "$workload" "$rep" "Perf$workload"
        done
      done
    fi
  fi
  note_load "$workload end"
}

# W5: each system gets a backlog, then drains it with a fresh group per measured run; warm-up
# rounds drain from the start for WARMUP_S with groups of their own.
run_drain() {
  local backlog=$(( BACKLOG_MIB * 1024 )) sys rep tput errors reason
  for sys in $SYSTEMS; do
    log "$sys W5: filling a backlog of $BACKLOG_MIB MiB ($backlog messages)"
    local json="$RAW/$sys.W5-fill.1.json"
    if ! bench_once "$sys" "$json" produce --topic PerfW5 --queues 8 --size 1024 \
        --inflight 512 --messages "$backlog"; then
      fail "$sys" W5 fill "$BENCH_FAILURE"
      continue
    fi
    IFS=$'\t' read -r tput errors reason < <(figures "$json")
    log "  $sys W5 fill: $tput msgs/s, errors $errors"
    [[ "$errors" == 0 ]] || fail "$sys" W5 fill "$reason"
  done
  for rep in $(seq 1 "$REPS"); do
    for sys in $(order "$rep"); do
      log "$sys W5 drain run $rep"
      WARM_ARGS=(consume --topic PerfW5 --group "perf_warm_@ROUND@" --from first --threads 20)
      measure "$sys" W5 "$rep" "$backlog" consume --topic PerfW5 --group "perf_drain_$rep" \
        --from first --threads 20 --messages "$backlog" --idle-exit 5 --duration 600
    done
  done
}

# ---- Replicated pair (W1-HA) -------------------------------------------------------------
# Each system's master (started by start_brokers with a role) gets one slave: its own
# process, store and ports, registered with the master's name server, SYNC_FLUSH like the
# master. Measured runs wait for the slave to be in sync first, and sample the master's
# replication lag (GET_BROKER_HA_STATUS) beside the bench.

declare -A SLAVE_PID=() SLAVE_DIR=() MASTER_ADDR=()
LAG_PID=""

# start_slave SYSTEM FLUSH NS_PORT MASTER_PORT: the slave of SYSTEM's master, on
# MASTER_PORT + 5 (Apache also takes that port - 2 and + 1; the master takes its own - 2
# to + 1), then waits until the master counts it in sync on every log.
start_slave() {
  local sys="$1" flush="$2" ns_port="$3" master_port="$4"
  local port=$((master_port + 5)) p
  for p in $((port - 2)) "$port" $((port + 1)); do port_open "$p" && die "port $p is busy"; done
  MASTER_ADDR[$sys]="127.0.0.1:$master_port"
  SLAVE_DIR[$sys]="${DIR[$sys]}-slave"
  case "$sys" in
    comet)
      rm -rf "${SLAVE_DIR[$sys]}"; mkdir -p "${SLAVE_DIR[$sys]}/store"
      RUST_LOG=warn "${BROKER_PIN[@]}" "$COMET" --cores "$COMET_CORES" \
        --bind-address 127.0.0.1 --listen-port "$port" --namesrv "${NS[$sys]}" \
        --store "${SLAVE_DIR[$sys]}/store" --flush "$flush" \
        -o brokerRole=SLAVE -o brokerId=1 "${COMET_OPTS[@]}" \
        >"${SLAVE_DIR[$sys]}/broker.log" 2>&1 &
      SLAVE_PID[$sys]=$!
      wait_port "$port" "${SLAVE_PID[$sys]}"
      ;;
    apache)
      ROCKETMQ_VERSION="$ROCKETMQ_VERSION" \
        bash "$APACHE_SH" start --dir "${SLAVE_DIR[$sys]}" --flush "$flush" \
        --namesrv-port "$ns_port" --broker-port "$port" --role SLAVE --broker-id 1 \
        --join >&2
      SLAVE_PID[$sys]="$(cat "${SLAVE_DIR[$sys]}/broker.pid")"
      if [[ "$PIN" == 1 ]]; then taskset -a -p -c 0 "${SLAVE_PID[$sys]}" >/dev/null; fi
      ;;
  esac
  python3 "$HERE/ha_lag.py" wait "${MASTER_ADDR[$sys]}" --timeout-s 90 \
    || die "the $sys slave (pid ${SLAVE_PID[$sys]}) did not get in sync with its master"
  log "$sys slave up and in sync (pid ${SLAVE_PID[$sys]}, port $port)"
}

# Slaves stop before their masters, so no master sits waiting for a slave going away.
stop_slaves() {
  local sys
  for sys in "${!SLAVE_PID[@]}"; do
    case "$sys" in
      comet)
        kill -TERM "${SLAVE_PID[$sys]}" 2>/dev/null || true
        local deadline=$((SECONDS + 30))
        while kill -0 "${SLAVE_PID[$sys]}" 2>/dev/null && (( SECONDS < deadline )); do
          sleep 0.2
        done
        kill -KILL "${SLAVE_PID[$sys]}" 2>/dev/null || true
        wait "${SLAVE_PID[$sys]}" 2>/dev/null || true
        rm -rf "${SLAVE_DIR[$sys]}/store"
        ;;
      apache)
        bash "$APACHE_SH" stop --dir "${SLAVE_DIR[$sys]}" >&2 || true
        ;;
    esac
    unset "SLAVE_PID[$sys]" "MASTER_ADDR[$sys]"
  done
}

# ha_lag_start SYSTEM WORKLOAD REP: samples the lag of SYSTEM's slave into
# raw/<system>.<workload>.<rep>.lag.tsv while the measured run goes (nothing without one).
ha_lag_start() {
  local sys="$1" workload="$2" rep="$3"
  LAG_PID=""
  [[ -n "${MASTER_ADDR[$sys]:-}" ]] || return 0
  python3 "$HERE/ha_lag.py" sample "${MASTER_ADDR[$sys]}" "$RAW/$sys.$workload.$rep.lag.tsv" \
    --interval-ms "$HA_SAMPLE_MS" &
  LAG_PID=$!
}

ha_lag_stop() {
  [[ -n "$LAG_PID" ]] || return 0
  kill -TERM "$LAG_PID" 2>/dev/null || true
  wait "$LAG_PID" 2>/dev/null || true
  LAG_PID=""
}

# The replicated configuration: both systems' SYNC_MASTER + slave pairs up together, W1-HA
# over them, all stopped (stores removed) before the single-node configurations start.
run_replicated() {
  start_brokers SYNC_FLUSH SYNC_MASTER
  run_workload W1-HA
  stop_brokers
}

write_meta() {
  local fs
  fs="$(findmnt -n -o SOURCE,FSTYPE,OPTIONS --target "$RUN_DIR" 2>/dev/null || echo unknown)"
  {
    echo "date_utc=$(date -u +%FT%TZ)"
    echo "git_commit=$(cd "$ROOT" && git rev-parse HEAD 2>/dev/null || echo unknown)"
    echo "git_uncommitted_files=$(cd "$ROOT" && git status --porcelain 2>/dev/null | wc -l)"
    if [[ -n "$COMET_BIN_DIR" ]]; then
      echo "comet_binaries=prebuilt, commit ${COMET_BIN_COMMIT:-not given}"
    else
      echo "comet_binaries=built from the working tree"
    fi
    echo "comet_segment_bytes=${COMET_SEGMENT_BYTES:-default}"
    echo "cores=$(nproc)"
    echo "cpu_model=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
    echo "memory_mib=$(awk '/MemTotal/ {print int($2 / 1024)}' /proc/meminfo)"
    echo "kernel=$(uname -r)"
    echo "filesystem=$fs"
    echo "java=$(java -version 2>&1 | head -1)"
    echo "rocketmq_version=$ROCKETMQ_VERSION java_bench=$JAVA_BENCH"
    echo "systems=$SYSTEMS"
    echo "workloads=$WORKLOADS"
    echo "reps=$REPS duration_s=$DURATION_S warmup_s=$WARMUP_S" \
      "warmup_tolerance_pct=$WARMUP_TOLERANCE_PCT warmup_max_rounds=$WARMUP_MAX_ROUNDS" \
      "java_max_windows=$JAVA_MAX_WINDOWS"
    echo "backlog_mib=$BACKLOG_MIB comet_cores=$COMET_CORES pin=$PIN" \
      "ha_sample_ms=$HA_SAMPLE_MS"
  } >"$RUN_DIR/meta.txt"
}

main() {
  check_settings
  prepare
  log "results of this run: $RUN_DIR"
  write_meta
  note_load "sitting start"
  if [[ " $WORKLOADS " == *" W1-HA "* ]]; then run_replicated; fi
  local flush w
  for flush in SYNC_FLUSH ASYNC_FLUSH; do
    local selected=()
    for w in W1 W3 AW-S W4 W2 AW-A W5; do
      if [[ " $WORKLOADS " == *" $w "* && "$(workload_flush "$w")" == "$flush" ]]; then
        selected+=("$w")
      fi
    done
    (( ${#selected[@]} )) || continue
    start_brokers "$flush"
    for w in "${selected[@]}"; do run_workload "$w"; done
    stop_brokers
  done
  note_load "sitting end"
  local readme_args=()
  [[ "$README" == none ]] || readme_args=(--readme "$README")
  "${REPORT[@]}" report "$RUN_DIR" "$OUT_DIR/$STAMP" "${readme_args[@]}" -- "${SYSTEM_LIST[@]}"
  log "wrote $OUT_DIR/$STAMP.md"
  if [[ -s "$RUN_DIR/failures.tsv" ]]; then
    log "the sitting FAILED: $(cut -f1,2 "$RUN_DIR/failures.tsv" | sort -u | tr '\t' ' ' \
      | paste -sd, -)"
    exit 1
  fi
}

# Sourced (perf/pop.sh uses these helpers), it defines them and runs nothing.
if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then main "$@"; fi
