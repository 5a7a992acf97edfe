#!/usr/bin/env bash
# Broker CPU per message under one load: starts a release comet-broker (standalone, fresh
# temp store, free ports), drives it with comet-bench, and reports the broker's user+system
# CPU time during the run (from /proc/<pid>/stat, all threads including io_uring workers)
# divided by the messages acknowledged. Optionally counts context switches and migrations
# with `perf stat` and lists the broker's threads (io-wq / iou-wrk workers show up there).
#
# Usage:
#   perf/cpu_per_msg.sh [bench produce args...]
# Defaults to the W1-like load: 1 KiB sync sends, 64 threads, 8 queues, 10 s, SYNC_FLUSH.
# Environment:
#   FLUSH=SYNC_FLUSH|ASYNC_FLUSH   broker flush mode (default SYNC_FLUSH)
#   CORES=2                        broker shards (--cores)
#   DURATION_S=10                  bench duration when no args are given
#   PERF_STAT=1                    also run `perf stat -e context-switches,cpu-migrations`
#   PERF_RECORD=<file>             also `perf record` the broker during the run, with
#   PERF_RECORD_ARGS="-g"          these options (e.g. "--call-graph dwarf -F 499")
#   STORE_DIR=<dir>                where the temp store goes (default: target/cpu-per-msg)
#   BROKER=<path> BENCH=<path>     binaries (default: target/release/...)
#   BROKER_CONF=<file>             a broker.conf passed with -c (A/B of config keys)
#   KEEP_LOG=1                     keep the broker log
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BROKER="${BROKER:-$ROOT/target/release/comet-broker}"
BENCH="${BENCH:-$ROOT/target/release/comet-bench}"
FLUSH="${FLUSH:-SYNC_FLUSH}"
CORES="${CORES:-2}"
DURATION_S="${DURATION_S:-10}"
STORE_PARENT="${STORE_DIR:-$ROOT/target/cpu-per-msg}"

[[ -x "$BROKER" && -x "$BENCH" ]] || {
  echo "build first: cargo build --release -p comet-broker -p comet-bench" >&2
  exit 2
}

if [[ $# -eq 0 ]]; then
  set -- --topic PerfW1 --queues 8 --size 1024 --threads 64 --duration "$DURATION_S"
fi

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# utime + stime of the whole process (all threads), in clock ticks.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

mkdir -p "$STORE_PARENT"
WORK="$(mktemp -d "$STORE_PARENT/run.XXXXXX")"
BROKER_PID=""
PERF_PIDS=()
cleanup() {
  for p in "${PERF_PIDS[@]}"; do kill -INT "$p" 2>/dev/null || true; done
  for p in "${PERF_PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  if [[ -n "$BROKER_PID" ]]; then
    kill -TERM "$BROKER_PID" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$BROKER_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$BROKER_PID" 2>/dev/null || true
    wait "$BROKER_PID" 2>/dev/null || true
  fi
  [[ "${KEEP_LOG:-0}" == 1 ]] && cp "$WORK/broker.log" "$STORE_PARENT/last-broker.log" 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT

MEASURED=("$@")
NS_PORT="$(free_port)"
BROKER_PORT="$(free_port)"
mkdir -p "$WORK/store"
CONF_ARGS=()
[[ -n "${BROKER_CONF:-}" ]] && CONF_ARGS=(-c "$BROKER_CONF")
RUST_LOG=warn "$BROKER" "${CONF_ARGS[@]}" --standalone --cores "$CORES" --bind-address 127.0.0.1 \
  --listen-port "$BROKER_PORT" -o "haListenPort=$(free_port)" \
  --namesrv "127.0.0.1:$NS_PORT" --store "$WORK/store" --flush "$FLUSH" \
  >"$WORK/broker.log" 2>&1 &
BROKER_PID=$!
for _ in $(seq 1 300); do
  port_open "$BROKER_PORT" && port_open "$NS_PORT" && break
  kill -0 "$BROKER_PID" 2>/dev/null || { cat "$WORK/broker.log" >&2; exit 1; }
  sleep 0.2
done

# Warm-up (the same load for 2 s): creates the topic, fills routes, connections and the
# first pages.
WARM=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --duration|--messages) shift 2 ;;
    *) WARM+=("$1"); shift ;;
  esac
done
set -- "${MEASURED[@]}"
"$BENCH" --namesrv "127.0.0.1:$NS_PORT" --quiet produce "${WARM[@]}" --duration 2 \
  >"$WORK/warmup.txt" 2>&1 || { cat "$WORK/warmup.txt" >&2; exit 1; }
# Let the spare segment's creation (if any) finish before measuring.
sleep 1

if [[ "${PERF_STAT:-0}" == 1 ]]; then
  perf stat -e context-switches,cpu-migrations,task-clock -p "$BROKER_PID" \
    -o "$WORK/perf-stat.txt" &
  PERF_PIDS+=($!)
fi
if [[ -n "${PERF_RECORD:-}" ]]; then
  # shellcheck disable=SC2086
  perf record ${PERF_RECORD_ARGS:--g} -o "$PERF_RECORD" -p "$BROKER_PID" >/dev/null 2>&1 &
  PERF_PIDS+=($!)
fi

TICK_HZ="$(getconf CLK_TCK)"
before="$(cpu_ticks "$BROKER_PID")"
wall_before="$(date +%s.%N)"
"$BENCH" --namesrv "127.0.0.1:$NS_PORT" --quiet --json "$WORK/bench.json" produce "$@" \
  >"$WORK/bench.txt" 2>&1 || { cat "$WORK/bench.txt" >&2; exit 1; }
after="$(cpu_ticks "$BROKER_PID")"
wall_after="$(date +%s.%N)"
threads="$(ps -L -o comm= -p "$BROKER_PID" | sort | uniq -c | awk '{printf "%s%s:%s", sep, $2, $1; sep=" "}')"

for p in "${PERF_PIDS[@]}"; do kill -INT "$p" 2>/dev/null || true; done
for p in "${PERF_PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
PERF_PIDS=()

python3 - "$WORK/bench.json" "$before" "$after" "$TICK_HZ" "$wall_before" "$wall_after" \
  "$FLUSH" "$threads" <<'EOF'
import json, sys
report = json.load(open(sys.argv[1]))
ticks = int(sys.argv[3]) - int(sys.argv[2])
hz = int(sys.argv[4])
wall = float(sys.argv[6]) - float(sys.argv[5])
msgs = report.get("messages_total") or report.get("sent_total") or 0
if not msgs:
    msgs = round(report["throughput_msgs_per_s"] * report.get("duration_s", wall))
cpu_s = ticks / hz
print(f"flush={sys.argv[7]} msgs={msgs} msgs/s={report['throughput_msgs_per_s']:.0f} "
      f"p50={report['latency_us_p50']}us p99={report['latency_us_p99']}us "
      f"errors={report['errors_total']}")
print(f"broker cpu={cpu_s:.2f}s over {wall:.1f}s wall ({cpu_s / wall:.2f} cores) "
      f"=> {cpu_s * 1e6 / max(msgs, 1):.1f} us CPU/msg")
print(f"broker threads: {sys.argv[8]}")
bench_cpu = report.get("cpu", {}).get("bench_cpu_s")
if bench_cpu is not None:
    total = bench_cpu + cpu_s
    print(f"client (comet-bench) cpu={bench_cpu:.2f}s ({bench_cpu / wall:.2f} cores), "
          f"{100 * bench_cpu / max(total, 1e-9):.0f}% of client+broker CPU")
EOF
# The share of requests that crossed cores, from the broker's runtime info (code 28).
python3 - "$BROKER_PORT" <<'EOF'
import json, socket, struct, sys
header = json.dumps({"code": 28, "language": "JAVA", "version": 0, "opaque": 1, "flag": 0}).encode()
frame = struct.pack(">II", 4 + len(header), len(header)) + header
with socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5) as conn:
    conn.sendall(frame)
    data = b""
    while len(data) < 4 or len(data) < 4 + struct.unpack(">I", data[:4])[0]:
        chunk = conn.recv(65536)
        if not chunk:
            break
        data += chunk
length, header_word = struct.unpack(">II", data[:8])
body = data[8 + (header_word & 0xFFFFFF):4 + length]
table = json.loads(body).get("table", {})
forwarded = int(table.get("requestsForwardedToOwnerShard", 0))
total = forwarded + int(table.get("requestsHandledInPlace", 0))
print(f"requests crossing cores: {table.get('requestsForwardedPercent', '?')}% "
      f"({forwarded} of {total} since start, warm-up included)")
EOF
if [[ -f "$WORK/perf-stat.txt" ]]; then
  grep -E "context-switches|cpu-migrations|task-clock" "$WORK/perf-stat.txt"
fi
