#!/usr/bin/env bash
# What TLS costs the W1 load (1 KiB sync sends, 64 threads): a release comet-broker
# --standalone (fresh store, free loopback ports) plain, then with tls.server.mode=enforcing
# (a certificate made here with openssl, removed afterwards) and comet-bench --tls,
# alternating, RUNS times each; each run warms up for WARM_S seconds, then measures DURATION_S.
# Prints each run's msgs/s, p99 send latency and CPU per message (broker and bench), then
# the medians.
#
# Usage: perf/tls_cost.sh
# Environment: RUNS=3, WARM_S=3, DURATION_S=10, CORES=2, BROKER=<path>, BENCH=<path>
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BROKER="${BROKER:-$ROOT/target/release/comet-broker}"
BENCH="${BENCH:-$ROOT/target/release/comet-bench}"
RUNS="${RUNS:-3}"
WARM_S="${WARM_S:-3}"
DURATION_S="${DURATION_S:-10}"
CORES="${CORES:-2}"
[[ -x "$BROKER" && -x "$BENCH" ]] || {
  echo "build first: cargo build --release -p comet-broker -p comet-bench" >&2
  exit 1
}
WORK="$(mktemp -d)"
BROKER_PID=""
cleanup() {
  if [[ -n "$BROKER_PID" ]]; then kill "$BROKER_PID" 2>/dev/null || true; wait "$BROKER_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
  -subj "/CN=127.0.0.1" -addext "subjectAltName=IP:127.0.0.1" \
  -keyout "$WORK/key.pem" -out "$WORK/cert.pem" >/dev/null 2>&1
printf 'tls.server.mode=enforcing\ntls.server.certPath=%s\ntls.server.keyPath=%s\n' \
  "$WORK/cert.pem" "$WORK/key.pem" >"$WORK/tls.conf"
: >"$WORK/plain.conf"

run_one() { # mode run
  local mode=$1 ns_port broker_port tls_args=()
  ns_port="$(free_port)"
  broker_port="$(free_port)"
  rm -rf "$WORK/store" && mkdir -p "$WORK/store"
  # Any certificate is accepted: checking it costs once per connection, not per message.
  [[ "$mode" == tls ]] && tls_args=(--tls)
  RUST_LOG=warn "$BROKER" -c "$WORK/$mode.conf" --standalone --cores "$CORES" \
    --bind-address 127.0.0.1 --listen-port "$broker_port" --namesrv "127.0.0.1:$ns_port" \
    --store "$WORK/store" -o "haListenPort=$(free_port)" >"$WORK/broker.log" 2>&1 &
  BROKER_PID=$!
  for _ in $(seq 1 300); do
    port_open "$broker_port" && port_open "$ns_port" && break
    kill -0 "$BROKER_PID" 2>/dev/null || { cat "$WORK/broker.log" >&2; exit 1; }
    sleep 0.2
  done
  "$BENCH" --namesrv "127.0.0.1:$ns_port" --quiet "${tls_args[@]}" produce --size 1024 \
    --threads 64 --duration "$WARM_S" >"$WORK/warm.txt" 2>&1 || { cat "$WORK/warm.txt" >&2; exit 1; }
  "$BENCH" --namesrv "127.0.0.1:$ns_port" --quiet "${tls_args[@]}" --json "$WORK/run.json" \
    --watch-pid "$BROKER_PID" produce --size 1024 --threads 64 --duration "$DURATION_S" >"$WORK/run.txt" 2>&1 \
    || { cat "$WORK/run.txt" >&2; exit 1; }
  kill "$BROKER_PID" 2>/dev/null || {
    echo "the broker died during the run:" >&2
    grep -m 3 -A 4 "panicked" "$WORK/broker.log" >&2 || tail -30 "$WORK/broker.log" >&2
    exit 1
  }
  wait "$BROKER_PID" 2>/dev/null || true
  BROKER_PID=""
  python3 - "$WORK/run.json" "$mode" "$2" <<'PY' | tee -a "$WORK/results"
import json, sys
report = json.load(open(sys.argv[1]))
def find(node, key):
    if isinstance(node, dict):
        if key in node: return node[key]
        for value in node.values():
            found = find(value, key)
            if found is not None: return found
    return None
rate = find(report, "throughput_msgs_per_s")
p99 = find(report, "latency_us_p99")
cpu = report.get("cpu", {})
# CPU per message: the broker's (the watched process) and the bench's own, from the bench's
# start to its end (connecting included), over the messages the run sent.
messages = find(report, "messages_total")
broker_s = (cpu.get("watched") or [{}])[0].get("cpu_s")
bench_s = cpu.get("bench_cpu_s")
per_msg = lambda s: f"{s / messages * 1e6:.1f}" if s is not None and messages else "?"
print(f"{sys.argv[2]} {sys.argv[3]} msgs_per_s={rate} p99_us={p99} "
      f"broker_cpu_us_per_msg={per_msg(broker_s)} bench_cpu_us_per_msg={per_msg(bench_s)}")
PY
}

for run in $(seq 1 "$RUNS"); do
  run_one plain "$run"
  run_one tls "$run"
done
python3 - "$WORK/results" <<'PY'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1])]
for mode in ("plain", "tls"):
    rates = [float(r[2].split("=")[1]) for r in rows if r[0] == mode]
    print(f"{mode}: median {statistics.median(rates):,.0f} msgs/s, runs "
          + ", ".join(f"{rate:,.0f}" for rate in rates))
    for field in ("broker_cpu_us_per_msg", "bench_cpu_us_per_msg"):
        values = [float(v) for r in rows if r[0] == mode
                  for k, v in [c.split("=") for c in r[2:]] if k == field and v != "?"]
        if values:
            print(f"{mode}: {field} median {statistics.median(values):.1f}, runs "
                  + ", ".join(f"{v:.1f}" for v in values))
PY
