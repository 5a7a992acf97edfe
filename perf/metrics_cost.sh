#!/usr/bin/env bash
# What the metrics cost the send path (issue 22): runs perf/cpu_per_msg.sh (the W1 load by
# default: 1 KiB sync sends, 64 threads, 10 s) with metrics off and with
# metricsExporterType=PROM, alternating, RUNS times each. While metrics are on, /metrics is
# scraped every SCRAPE_INTERVAL_S seconds (1 s: far more often than a Prometheus would), so
# the scrapes' own cost is in the figures too. Prints each run's line and the CPU per message
# of both modes.
#
# Usage:
#   perf/metrics_cost.sh [bench produce args...]
# Environment: RUNS=3, SCRAPE_INTERVAL_S=1, and everything perf/cpu_per_msg.sh takes.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
RUNS="${RUNS:-3}"
SCRAPE_INTERVAL_S="${SCRAPE_INTERVAL_S:-1}"
WORK="$(mktemp -d)"
SCRAPER=""
cleanup() {
  [[ -n "$SCRAPER" ]] && kill "$SCRAPER" 2>/dev/null && wait "$SCRAPER" 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# Scrapes until killed, appending each answer's HTTP status to $2.
scrape_loop() {
  while true; do
    curl -s -o /dev/null --max-time 2 -w '%{http_code}\n' "http://127.0.0.1:$1/metrics" \
      >>"$2" || true
    sleep "$SCRAPE_INTERVAL_S"
  done
}

for run in $(seq 1 "$RUNS"); do
  for mode in off on; do
    if [[ "$mode" == on ]]; then
      port="$(free_port)"
      printf 'metricsExporterType=PROM\nmetricsPromExporterHost=127.0.0.1\n' >"$WORK/on.conf"
      printf 'metricsPromExporterPort=%s\n' "$port" >>"$WORK/on.conf"
      : >"$WORK/scrapes-$run"
      scrape_loop "$port" "$WORK/scrapes-$run" &
      SCRAPER=$!
      BROKER_CONF="$WORK/on.conf" "$ROOT/perf/cpu_per_msg.sh" "$@" | sed "s/^/[on  $run] /" \
        | tee -a "$WORK/results"
      kill "$SCRAPER" 2>/dev/null || true
      wait "$SCRAPER" 2>/dev/null || true
      SCRAPER=""
      echo "[on  $run] scrapes answered 200: $(grep -c '^200$' "$WORK/scrapes-$run" || true)"
    else
      "$ROOT/perf/cpu_per_msg.sh" "$@" | sed "s/^/[off $run] /" | tee -a "$WORK/results"
    fi
  done
done

echo "== broker CPU per message (us) and msgs/s, by mode"
for mode in off on; do
  cpu="$(grep "^\[$mode" "$WORK/results" | grep -o '=> [0-9.]* us' | awk '{print $2}' | xargs)"
  rate="$(grep "^\[$mode" "$WORK/results" | grep -o 'msgs/s=[0-9]*' | cut -d= -f2 | xargs)"
  printf '%-3s cpu/msg: %s | msgs/s: %s\n' "$mode" "$cpu" "$rate"
done
