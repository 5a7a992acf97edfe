#!/usr/bin/env bash
# Retention at scale (issue 25): one standalone broker retains MESSAGES small messages
# (200 million by default); a second one, on a store of its own, holds BASELINE_MESSAGES
# (1 million) for comparison. One command:
#
#   STORE_ROOT=<directory on the disk to measure> perf/retention.sh
#
# For each broker (the baseline first): start on an empty store, fill it with comet-bench
# produce (batches of BATCH bodies of SIZE bytes, FILL_THREADS sender threads, runs of at most
# FILL_CHUNK messages, `--messages` stopping each at exactly its count) until the store holds
# its count, then a clean stop (SIGTERM) and a restart, then SIGKILL and a restart. Recorded:
# resident memory (VmRSS, RssAnon, RssFile of /proc/<pid>/status) and what the stores'
# structures hold of it by part (brokerStatus' storeMemory*Bytes), threads and descriptors
# at the start, after the fill and after each restart; the store's size on disk; the log
# bytes kept (brokerStatus); how long a clean stop takes; and for each restart the time to
# serve again, on a monotonic clock from the broker's exec: until its listener opens, until a
# send succeeds (comet-admin sendMessage) and until a pull of the topic's oldest message then
# succeeds (comet-admin consumeMessage -c 1). The probes' own cost on a running broker is
# recorded beside them: it is the floor under every time to serve.
#
# Then, on the large store only: fio's sequential direct-read rate of a fresh FIO_SIZE file on
# the same disk; a drain from the topic's first (oldest) message by a new consumer group for
# DRAIN_S seconds (comet-bench consume --from first), whose MB/s counts the log bytes
# consumed (messages x the log's average bytes per record; bodies alone are also given) and
# the broker's disk reads (/proc/<pid>/io read_bytes); then a producer at LIVE_RATE msgs/s of
# LIVE_SIZE bytes for LIVE_S seconds on another topic, alone and then while a second new
# group drains from the first message, and the two p99.9 send latencies.
#
# The figures, with the load average and UTC time beside each, go to stdout as a table and to
# $RUN_DIR/retention.tsv (+ retention.md); the stores are deleted at the end (KEEP_STORES=1
# keeps them).
#
# Environment (defaults in brackets):
#   STORE_ROOT [required]: where both stores and fio's file go; a real disk (not tmpfs)
#   MESSAGES [200000000]  BASELINE_MESSAGES [1000000]  SIZE [16]  BATCH [32]
#   FILL_THREADS [16]  FILL_CHUNK [10000000]  QUEUES [8]
#   FILL_MAX_S [0: no limit]: stop filling the large store once this many seconds have gone
#              (the table then says how many messages it holds)
#   DRAIN_S [60]  LIVE_RATE [5000]  LIVE_SIZE [1024]  LIVE_S [30]  DRAIN_THREADS [20]
#   FIO_SIZE [4G]  FIO_RUNTIME_S [10]  SERVE_LIMIT_S [600]  STOP_LIMIT_S [300]
#   BYTES_PER_MESSAGE [240]: disk estimate per retained message (log, queue and key index),
#              checked against the free space with FREE_MARGIN_GIB [10] to spare
#   COMET_CORES [2]  FLUSH [SYNC_FLUSH]  KEEP_STORES [0]
#   SYSTEM [comet]: comet, or apache for Apache RocketMQ's name server and broker
#              (tests/compat/apache/broker.sh: one name server for the store's life, the
#              broker restarted alone on the same store), measured the same way; its
#              store's parts on disk are commitlog, consumequeue and index, and it has no
#              storeMemory* figures
#   COMET_BIN_DIR [target/release]: comet-broker, comet-bench and comet-admin (built with
#                 `cargo build --release -p comet-broker -p comet-bench -p comet-tools` when
#                 missing)
#   PERF_CACHE [perf/.cache]: run directories (logs, raw reports, the table)
#
# Each broker runs with diskMaxUsedSpaceRatio=95, diskSpaceCleanForciblyRatio=95 and
# diskSpaceWarningLevelRatio=99: retention is what is measured, so a disk shared with other
# work must not make the broker delete its oldest segments or refuse sends (the defaults
# 75/85/90 would on a disk filled past 85%). Before each drain the kernel's page cache is
# dropped (as root): Comet reads the log with direct I/O, Apache RocketMQ through the page
# cache, which would otherwise still hold what the fill wrote.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
STORE_ROOT="${STORE_ROOT:-}"
MESSAGES="${MESSAGES:-200000000}"
BASELINE_MESSAGES="${BASELINE_MESSAGES:-1000000}"
SIZE="${SIZE:-16}"
BATCH="${BATCH:-32}"
FILL_THREADS="${FILL_THREADS:-16}"
FILL_CHUNK="${FILL_CHUNK:-10000000}"
FILL_MAX_S="${FILL_MAX_S:-0}"
QUEUES="${QUEUES:-8}"
DRAIN_S="${DRAIN_S:-60}"
DRAIN_THREADS="${DRAIN_THREADS:-20}"
LIVE_RATE="${LIVE_RATE:-5000}"
LIVE_SIZE="${LIVE_SIZE:-1024}"
LIVE_S="${LIVE_S:-30}"
FIO_SIZE="${FIO_SIZE:-4G}"
FIO_RUNTIME_S="${FIO_RUNTIME_S:-10}"
SERVE_LIMIT_S="${SERVE_LIMIT_S:-600}"
STOP_LIMIT_S="${STOP_LIMIT_S:-300}"
BYTES_PER_MESSAGE="${BYTES_PER_MESSAGE:-240}"
FREE_MARGIN_GIB="${FREE_MARGIN_GIB:-10}"
COMET_CORES="${COMET_CORES:-2}"
FLUSH="${FLUSH:-SYNC_FLUSH}"
KEEP_STORES="${KEEP_STORES:-0}"
SYSTEM="${SYSTEM:-comet}"
APACHE_SH="$ROOT/tests/compat/apache/broker.sh"
BIN="${COMET_BIN_DIR:-$ROOT/target/release}"
CACHE="${PERF_CACHE:-$HERE/.cache}"
RUN_DIR="$CACHE/retention-$SYSTEM-$(date -u +%Y%m%dT%H%M%S)"
TSV="$RUN_DIR/retention.tsv"
HELPER=(python3 "$HERE/retention.py")
TOPIC=Retain
LIVE_TOPIC=RetainLive
# The ratios a retention run must not cross (see the header).
DISK_OPTS=(-o diskMaxUsedSpaceRatio=95 -o diskSpaceCleanForciblyRatio=95
  -o diskSpaceWarningLevelRatio=99)

log() { echo "retention: $*" >&2; }
die() { echo "retention: error: $*" >&2; exit 2; }

for n in MESSAGES BASELINE_MESSAGES SIZE BATCH FILL_THREADS FILL_CHUNK QUEUES DRAIN_S \
    DRAIN_THREADS LIVE_RATE LIVE_SIZE LIVE_S FIO_RUNTIME_S SERVE_LIMIT_S STOP_LIMIT_S \
    BYTES_PER_MESSAGE COMET_CORES; do
  [[ "${!n}" =~ ^[0-9]+$ ]] && (( ${!n} > 0 )) || die "$n must be a positive whole number"
done
[[ "$FILL_MAX_S" =~ ^[0-9]+$ ]] || die "FILL_MAX_S must be a whole number"
[[ "$SYSTEM" == comet || "$SYSTEM" == apache ]] || die "SYSTEM must be comet or apache"
[[ -n "$STORE_ROOT" ]] || die "STORE_ROOT must name a directory on the disk to measure"
mkdir -p "$STORE_ROOT"
STORE_ROOT="$(cd "$STORE_ROOT" && pwd)"
case "$(stat -f -c %T "$STORE_ROOT")" in
  tmpfs|ramfs) die "STORE_ROOT is on $(stat -f -c %T "$STORE_ROOT"): the disk is measured" ;;
esac
case "$STORE_ROOT/" in
  "$ROOT"/*) die "STORE_ROOT must be outside the repository (tens of GiB)" ;;
esac

if [[ ! -x "$BIN/comet-broker" || ! -x "$BIN/comet-bench" || ! -x "$BIN/comet-admin" ]]; then
  [[ -z "${COMET_BIN_DIR:-}" ]] || die "comet-broker, comet-bench or comet-admin missing in $BIN"
  log "building comet-broker, comet-bench and comet-admin (release)"
  (cd "$ROOT" && cargo build --release -q -p comet-broker -p comet-bench -p comet-tools)
fi
if ! command -v fio >/dev/null; then
  if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null; then
    apt-get install -y -qq fio >/dev/null 2>&1 || true
  fi
  command -v fio >/dev/null || die "fio is missing (apt-get install fio)"
fi

# Free space: both stores, fio's file, and a margin for whatever else shares the disk.
fio_bytes="$(numfmt --from=iec "$FIO_SIZE")"
need_bytes=$(( (MESSAGES + BASELINE_MESSAGES) * BYTES_PER_MESSAGE + fio_bytes
  + FREE_MARGIN_GIB * 1024 * 1024 * 1024 ))
free_bytes="$(df -B1 --output=avail "$STORE_ROOT" | tail -n 1 | tr -d ' ')"
(( free_bytes >= need_bytes )) || die "$(numfmt --to=iec "$free_bytes") free under" \
  "$STORE_ROOT, $(numfmt --to=iec "$need_bytes") needed (MESSAGES x BYTES_PER_MESSAGE," \
  "FIO_SIZE, FREE_MARGIN_GIB)"

mkdir -p "$RUN_DIR"
printf 'store\tphase\tfigure\tvalue\tunit\tloadavg\tutc\n' >"$TSV"
log "run directory $RUN_DIR; stores under $STORE_ROOT"
{
  echo "date_utc=$(date -u +%FT%TZ)"
  echo "git_commit=$(cd "$ROOT" && git rev-parse HEAD 2>/dev/null || echo unknown)"
  echo "system=$SYSTEM binaries=$BIN"
  echo "messages=$MESSAGES baseline_messages=$BASELINE_MESSAGES size=$SIZE batch=$BATCH" \
    "fill_threads=$FILL_THREADS queues=$QUEUES flush=$FLUSH cores=$COMET_CORES"
  echo "drain_s=$DRAIN_S live_rate=$LIVE_RATE live_size=$LIVE_SIZE live_s=$LIVE_S"
  echo "store_fs=$(findmnt -n -o SOURCE,FSTYPE,OPTIONS --target "$STORE_ROOT" || true)"
  echo "free_bytes_at_start=$free_bytes"
  echo "cpus=$(nproc) memory_mib=$(awk '/MemTotal/ {print int($2 / 1024)}' /proc/meminfo)"
  echo "kernel=$(uname -r)"
} >"$RUN_DIR/meta.txt"

# note STORE PHASE FIGURE VALUE UNIT: one row of the table, with the load average and time.
note() {
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$5" \
    "$(cut -d' ' -f1-3 /proc/loadavg)" "$(date -u +%H:%M:%S)" >>"$TSV"
  log "$1 $2: $3 = $4 $5"
}

declare -A PID=() BROKER_PORT=() NS=() DIR=() LOG_BYTES_PER_MESSAGE=()

# A broker that exited but was not reaped yet (its starter has gone) is not running.
running() {
  local pid="$1" state
  state="$(awk '/^State:/ {print $2}' "/proc/$pid/status" 2>/dev/null)" || return 1
  [[ -n "$state" && "$state" != Z ]]
}

status_kib() { awk -v key="$2:" '$1 == key { print $2 }' "/proc/$1/status"; }

mib() { echo "scale=1; $1 / 1024" | bc; }

# proc_figures STORE PHASE: the broker's memory, threads and descriptors now.
proc_figures() {
  local pid="${PID[$1]}"
  note "$1" "$2" VmRSS "$(mib "$(status_kib "$pid" VmRSS)")" MiB
  note "$1" "$2" RssAnon "$(mib "$(status_kib "$pid" RssAnon)")" MiB
  note "$1" "$2" RssFile "$(mib "$(status_kib "$pid" RssFile)")" MiB
  note "$1" "$2" threads "$(status_kib "$pid" Threads)" ""
  note "$1" "$2" fds "$(find "/proc/$pid/fd" -mindepth 1 -maxdepth 1 | wc -l)" ""
  # What the stores' structures hold, by part (GET_BROKER_RUNTIME_INFO's storeMemory*):
  # the bounded caches, told apart from anything that would grow with the messages held.
  local part bytes
  for part in LogChunks ReadWindows ConsumeQueueCache ConsumeQueueTails KeyIndex; do
    bytes="$(runtime_figure "$1" "storeMemory${part}Bytes" || true)"
    [[ -n "$bytes" ]] && note "$1" "$2" "store_$part" "$(mib "$((bytes / 1024))")" MiB
  done
  return 0
}

admin() { "$BIN/comet-admin" -n "${NS[$1]}" "${@:2}"; }

# The probe commands of STORE (shell words, run by retention.py).
probe_env() {
  local ns="${NS[$1]}" admin_bin
  admin_bin="$(printf '%q' "$BIN/comet-admin")"
  export PROBE_PORT="${BROKER_PORT[$1]}"
  export PROBE_SEND="$admin_bin -n $ns sendMessage -t $TOPIC -p probe"
  export PROBE_PULL="$admin_bin -n $ns consumeMessage -t $TOPIC -c 1"
  export PROBE_PULL_EXPECT="1 message(s)"
  export SERVE_LIMIT_S
}

# start STORE PHASE [untimed]: starts STORE's broker on its ports and store; unless untimed
# (an empty store has no topic to probe yet), times it until it serves a send and a pull.
start() {
  local store="$1" phase="$2" untimed="${3:-}" out pid port_s send_s pull_s attempts
  probe_env "$store"
  if [[ -n "$untimed" ]]; then export PROBE_SEND=true PROBE_PULL=true PROBE_PULL_EXPECT=""; fi
  local command
  if [[ "$SYSTEM" == apache ]]; then
    mapfile -t command < <(bash "$APACHE_SH" broker-command --dir "${DIR[$store]}" \
      --flush "$FLUSH" --namesrv-port "${NS[$store]##*:}" --broker-port "${BROKER_PORT[$store]}")
  else
    command=("$BIN/comet-broker" --standalone --cores "$COMET_CORES" --bind-address 127.0.0.1
      --listen-port "${BROKER_PORT[$store]}" --namesrv "${NS[$store]}"
      --store "${DIR[$store]}/store" --flush "$FLUSH" "${DISK_OPTS[@]}")
  fi
  out="$(RUST_LOG=warn "${HELPER[@]}" serve "$RUN_DIR/$store-broker.log" -- "${command[@]}")"
  read -r pid port_s send_s pull_s attempts <<<"$out"
  PID[$store]="$pid"
  # broker.sh stop finds the restarted broker through its pid file.
  [[ "$SYSTEM" != apache ]] || echo "$pid" >"${DIR[$store]}/broker.pid"
  if [[ "$pull_s" == - ]]; then
    if ! running "$pid"; then
      note "$store" "$phase" serve_again "never (the broker exited)" ""
      die "$store broker exited while starting ($RUN_DIR/$store-broker.log)"
    fi
    note "$store" "$phase" serve_again "not within $SERVE_LIMIT_S s" ""
    die "$store broker did not serve within SERVE_LIMIT_S=$SERVE_LIMIT_S s"
  fi
  [[ -n "$untimed" ]] && return 0
  note "$store" "$phase" listener_open "$port_s" s
  note "$store" "$phase" first_send_ok "$send_s" s
  note "$store" "$phase" serve_again "$pull_s" s
  note "$store" "$phase" probe_attempts "$attempts" ""
}

# stop STORE SIGNAL PHASE: sends SIGNAL and waits for the exit (timed for SIGTERM).
stop() {
  local store="$1" signal="$2" phase="$3" pid="${PID[$1]}" t0 t1
  t0="$(cut -d' ' -f1 /proc/uptime)"
  kill "-$signal" "$pid" 2>/dev/null || true
  local deadline=$((SECONDS + STOP_LIMIT_S))
  while running "$pid" && (( SECONDS < deadline )); do sleep 0.05; done
  if running "$pid"; then
    note "$store" "$phase" clean_stop "not within $STOP_LIMIT_S s (killed)" s
    kill -KILL "$pid" 2>/dev/null || true
    while running "$pid"; do sleep 0.05; done
  elif [[ "$signal" == TERM ]]; then
    t1="$(cut -d' ' -f1 /proc/uptime)"
    note "$store" "$phase" clean_stop "$(echo "$t1 - $t0" | bc)" s
  fi
  unset "PID[$store]"
}

cleanup() {
  local store
  for store in "${!PID[@]}"; do
    kill -TERM "${PID[$store]}" 2>/dev/null || true
    local deadline=$((SECONDS + 60))
    while running "${PID[$store]}" && (( SECONDS < deadline )); do sleep 0.2; done
    kill -KILL "${PID[$store]}" 2>/dev/null || true
  done
  rm -f "$STORE_ROOT/fio.dat"
  if [[ "$SYSTEM" == apache ]]; then
    for store in "${!DIR[@]}"; do
      bash "$APACHE_SH" stop --keep --dir "${DIR[$store]}" >/dev/null 2>&1 || true
    done
  fi
  if [[ "$KEEP_STORES" != 1 ]]; then
    for store in "${!DIR[@]}"; do rm -rf "${DIR[$store]}"; done
  fi
}
trap cleanup EXIT

json_field() {
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"
}

# bench STORE JSON ARGS...: one comet-bench run; fails the script if it fails or errs.
bench() {
  local store="$1" json="$2"; shift 2
  if ! "$BIN/comet-bench" --namesrv "${NS[$store]}" --quiet --json "$json" \
      --watch-pid "${PID[$store]}" "$@" >"${json%.json}.txt" 2>&1; then
    die "comet-bench failed: $(tail -n 1 "${json%.json}.txt")"
  fi
  local errors
  errors="$(json_field "$json" errors_total)"
  [[ "$errors" == 0 ]] || die "comet-bench saw $errors errors ($json)"
}

# Messages the topic holds: the sum over its queues of max - min offset (topicStatus).
stored() {
  admin "$1" topicStatus -t "$2" | awk '$2 ~ /^[0-9]+$/ { n += $4 - $3 } END { print n + 0 }'
}

# runtime_figure STORE KEY: one figure of brokerStatus ("key : value", or "key: value" when the
# key fills the name column).
runtime_figure() {
  admin "$1" brokerStatus -b "127.0.0.1:${BROKER_PORT[$1]}" \
    | awk -F: -v key="$2" '{ k = $1; gsub(/ /, "", k) } k == key { v = $2; gsub(/ /, "", v); print v }'
}

# fill STORE COUNT [MAX_S]: produce until the topic holds COUNT messages (or MAX_S passed).
fill() {
  local store="$1" count="$2" max_s="${3:-0}" run=0 have=0 t0=$SECONDS fill_errors=0
  while (( have < count )); do
    if (( max_s > 0 && SECONDS - t0 >= max_s )); then
      log "$store: FILL_MAX_S=$max_s reached at $have of $count messages"
      break
    fi
    run=$((run + 1))
    local chunk=$((count - have))
    (( chunk <= FILL_CHUNK )) || chunk="$FILL_CHUNK"
    local json="$RUN_DIR/$store-fill-$run.json"
    # A send that fails (a timeout on a loaded machine) is counted, not fatal: the topic's
    # offsets say what the store holds.
    "$BIN/comet-bench" --namesrv "${NS[$store]}" --quiet --json "$json" produce \
      --topic "$TOPIC" --queues "$QUEUES" --size "$SIZE" --batch "$BATCH" \
      --threads "$FILL_THREADS" --messages "$chunk" >"${json%.json}.txt" 2>&1 \
      || die "comet-bench failed: $(tail -n 1 "${json%.json}.txt")"
    fill_errors=$((fill_errors + $(json_field "$json" errors_total)))
    have="$(stored "$store" "$TOPIC")"
    # Memory as the store grows: a cost per retained message would show here.
    note "$store" "fill, $have held" VmRSS "$(mib "$(status_kib "${PID[$store]}" VmRSS)")" MiB
    local rate elapsed=$((SECONDS - t0))
    rate="$(printf '%.0f' "$(json_field "$json" throughput_msgs_per_s)")"
    log "$store fill run $run: $chunk messages at $rate msgs/s; $have of $count after" \
      "${elapsed} s, load $(cut -d' ' -f1-3 /proc/loadavg)"
    if (( have < count && elapsed > 0 )); then
      log "$store: about $(( (count - have) * elapsed / have )) s of filling left"
    fi
  done
  local fill_s=$((SECONDS - t0))
  note "$store" fill fill_time "$fill_s" s
  note "$store" fill fill_send_errors "$fill_errors" ""
  if (( fill_s > 0 )); then note "$store" fill fill_rate "$((have / fill_s))" msgs/s; fi
}

# store_figures STORE PHASE: messages held, log bytes kept, sizes on disk.
store_figures() {
  local store="$1" phase="$2" held max min kept dir
  held="$(stored "$store" "$TOPIC")"
  note "$store" "$phase" messages_held "$held" ""
  # Apache RocketMQ's broker answers GET_BROKER_RUNTIME_INFO with an error for a while
  # after a restart from SIGKILL: asked again, for up to 60 s.
  local deadline=$((SECONDS + 60))
  until max="$(runtime_figure "$store" commitLogMaxOffset 2>/dev/null)" \
      && min="$(runtime_figure "$store" commitLogMinOffset 2>/dev/null)" \
      && [[ -n "$max" && -n "$min" ]]; do
    (( SECONDS < deadline )) || die "$store: brokerStatus gave no commit-log offsets in 60 s"
    sleep 1
  done
  kept=$((max - min))
  note "$store" "$phase" log_bytes_kept "$kept" B
  (( held > 0 )) || die "$store holds no message of $TOPIC"
  note "$store" "$phase" log_bytes_per_message "$((kept / held))" B
  note "$store" "$phase" store_on_disk "$(du -sb "${DIR[$store]}/store" | cut -f1)" B
  # Comet: each shard has its own store (shard-<n>/commitlog, consumequeue, index); Apache
  # RocketMQ: one of each under the store.
  local paths
  for dir in commitlog consumequeue index; do
    if [[ "$SYSTEM" == apache ]]; then
      paths=("${DIR[$store]}/store/$dir")
    else
      paths=("${DIR[$store]}"/store/shard-*/"$dir")
    fi
    note "$store" "$phase" "${dir}_on_disk" "$(du -scb "${paths[@]}" | tail -n 1 | cut -f1)" B
  done
  LOG_BYTES_PER_MESSAGE[$store]="$(echo "scale=3; $kept / $held" | bc)"
}

probe_cost() {
  local store="$1" send_s pull_s
  probe_env "$store"
  read -r send_s pull_s < <("${HELPER[@]}" probe)
  note "$store" running probe_send "$send_s" s
  note "$store" running probe_pull "$pull_s" s
}

# One store's life: start empty, fill, clean stop and restart, SIGKILL and restart.
lifecycle() {
  local store="$1" count="$2" max_s="${3:-0}" ports
  DIR[$store]="$STORE_ROOT/$store"
  rm -rf "${DIR[$store]}"
  read -r -a ports < <("${HELPER[@]}" ports)
  BROKER_PORT[$store]="${ports[0]}"
  NS[$store]="127.0.0.1:${ports[1]}"
  log "$store: broker port ${BROKER_PORT[$store]}, name server ${NS[$store]}"
  if [[ "$SYSTEM" == apache ]]; then
    # The name server and a first broker on an empty store; the broker alone restarts.
    bash "$APACHE_SH" start --dir "${DIR[$store]}" --flush "$FLUSH" \
      --namesrv-port "${ports[1]}" --broker-port "${ports[0]}" >&2
    PID[$store]="$(cat "${DIR[$store]}/broker.pid")"
  else
    mkdir -p "${DIR[$store]}/store"
    start "$store" start untimed
  fi
  proc_figures "$store" start
  fill "$store" "$count" "$max_s"
  store_figures "$store" "after fill"
  proc_figures "$store" "after fill"
  probe_cost "$store"
  stop "$store" TERM "SIGTERM"
  start "$store" "restart after SIGTERM"
  proc_figures "$store" "restart after SIGTERM"
  stop "$store" KILL "SIGKILL"
  start "$store" "restart after SIGKILL"
  proc_figures "$store" "restart after SIGKILL"
  store_figures "$store" "restart after SIGKILL"
}

# fio's sequential direct read of a fresh file on the store's disk.
fio_rate() {
  local file="$STORE_ROOT/fio.dat" json="$RUN_DIR/fio-read.json"
  fio --name=w --filename="$file" --size="$FIO_SIZE" --rw=write --bs=1M --direct=1 \
    --ioengine=io_uring --iodepth=4 --end_fsync=1 >"$RUN_DIR/fio-write.txt" 2>&1
  fio --name=r --filename="$file" --size="$FIO_SIZE" --rw=read --bs=256k --direct=1 \
    --ioengine=io_uring --iodepth=4 --runtime="$FIO_RUNTIME_S" --time_based \
    --output-format=json >"$json"
  rm -f "$file"
  FIO_MB_S="$(python3 -c 'import json,sys
print("%.1f" % (json.load(open(sys.argv[1]))["jobs"][0]["read"]["bw_bytes"] / 1e6))' "$json")"
  note disk fio fio_read "$FIO_MB_S" MB/s
}

read_bytes() { awk '$1 == "read_bytes:" { print $2 }' "/proc/$1/io"; }

# drain_figures STORE PHASE JSON READ_BYTES: the drain's rates from its report.
drain_figures() {
  local store="$1" phase="$2" json="$3" disk_bytes="$4" msgs elapsed body
  msgs="$(json_field "$json" messages_total)"
  elapsed="$(json_field "$json" elapsed_s)"
  body="$(json_field "$json" bytes_total)"
  note "$store" "$phase" drained_messages "$msgs" ""
  note "$store" "$phase" drain_time "$(printf '%.1f' "$elapsed")" s
  note "$store" "$phase" drain_rate "$(printf '%.0f' "$(json_field "$json" \
    throughput_msgs_per_s)")" msgs/s
  local log_mb_s body_mb_s disk_mb_s
  local per_message="${LOG_BYTES_PER_MESSAGE[$store]}"
  log_mb_s="$(echo "scale=1; $msgs * $per_message / $elapsed / 1000000" | bc)"
  body_mb_s="$(echo "scale=2; $body / $elapsed / 1000000" | bc)"
  disk_mb_s="$(echo "scale=1; $disk_bytes / $elapsed / 1000000" | bc)"
  note "$store" "$phase" drain_log_bytes "$log_mb_s" MB/s
  note "$store" "$phase" drain_body_bytes "$body_mb_s" MB/s
  note "$store" "$phase" broker_disk_reads "$disk_mb_s" MB/s
  note "$store" "$phase" drain_vs_fio "$(echo "scale=3; $log_mb_s / $FIO_MB_S" | bc)" x
}

# Drops the kernel's page cache (as root; see the header), and says so in the table.
drop_page_cache() {
  if [[ "$(id -u)" == 0 ]]; then
    sync && echo 3 >/proc/sys/vm/drop_caches && note disk "$1" page_cache dropped ""
  else
    note disk "$1" page_cache "kept (not root)" ""
  fi
}

drain_and_latency() {
  local store="$1" pid="${PID[$1]}" before after json
  fio_rate
  drop_page_cache "before drain alone"
  # A drain alone, from the oldest message.
  json="$RUN_DIR/$store-drain-1.json"
  before="$(read_bytes "$pid")"
  bench "$store" "$json" consume --topic "$TOPIC" --group retention_drain_1 --from first \
    --threads "$DRAIN_THREADS" --duration "$DRAIN_S" --idle-exit 5
  after="$(read_bytes "$pid")"
  drain_figures "$store" "drain alone" "$json" "$((after - before))"
  proc_figures "$store" "after drain"
  # The producer at a fixed rate without a drain, then with one (a second new group, from
  # the oldest message again), which starts first and outlasts it.
  json="$RUN_DIR/$store-live-alone.json"
  bench "$store" "$json" produce --topic "$LIVE_TOPIC" --queues "$QUEUES" --size "$LIVE_SIZE" \
    --rate "$LIVE_RATE" --duration "$LIVE_S"
  note "$store" "producer alone" send_p999 "$(json_field "$json" latency_us_p999)" us
  note "$store" "producer alone" send_p99 "$(json_field "$json" latency_us_p99)" us
  local drain_json="$RUN_DIR/$store-drain-2.json" drain_pid
  drop_page_cache "before drain beside producer"
  before="$(read_bytes "$pid")"
  bench "$store" "$drain_json" consume --topic "$TOPIC" --group retention_drain_2 \
    --from first --threads "$DRAIN_THREADS" --duration "$((LIVE_S + 15))" --idle-exit 5 &
  drain_pid=$!
  sleep 5
  json="$RUN_DIR/$store-live-drain.json"
  bench "$store" "$json" produce --topic "$LIVE_TOPIC" --size "$LIVE_SIZE" \
    --rate "$LIVE_RATE" --duration "$LIVE_S"
  note "$store" "producer during drain" send_p999 "$(json_field "$json" latency_us_p999)" us
  note "$store" "producer during drain" send_p99 "$(json_field "$json" latency_us_p99)" us
  wait "$drain_pid" || die "the drain beside the producer failed ($drain_json)"
  after="$(read_bytes "$pid")"
  drain_figures "$store" "drain beside producer" "$drain_json" "$((after - before))"
}

lifecycle baseline "$BASELINE_MESSAGES"
stop baseline TERM "end"
lifecycle large "$MESSAGES" "$FILL_MAX_S"
drain_and_latency large
stop large TERM "end"

"${HELPER[@]}" table "$TSV" | tee "$RUN_DIR/retention.md"
log "figures in $TSV"
