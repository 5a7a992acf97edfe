#!/usr/bin/env bash
# Transactional sends (issue 23, item 7): comet-bench produce --transactional, 1 KiB bodies,
# 64 and 8 sync sender threads on a topic of 8 queues, SYNC_FLUSH, against Comet and against
# Apache RocketMQ's broker in one sitting, with the brokers, warm-up and run rules of
# perf/run.sh (whose helpers it sources). One command:
#
#   perf/tx.sh
#
# Workload TX<N>, for each thread count N of THREADS: N threads each send a half message,
# commit it with END_TRANSACTION as soon as the half is stored (the local transaction always
# commits), and start the next one; a check-back listener answers COMMIT too. Figures: the
# committed transactions per second, and the latency of one transaction (the half's round
# trip plus writing the one-way END_TRANSACTION, as Java's TransactionMQProducer sends it).
# Every transaction costs a broker three stored messages (the half, the op record of the
# decision, and the committed message), so the figures are not comparable with W1's sends.
# Warm-up rounds (WARMUP_S each, until two rounds agree within WARMUP_TOLERANCE_PCT) run
# before every measured run. The table of medians and spreads, with the load averages of the
# sitting, goes to stdout and $RUN_DIR/tx.md; raw reports to $RUN_DIR/raw.
#
# Environment (defaults in brackets), besides perf/run.sh's (SYSTEMS, COMET_BIN_DIR,
# COMET_CORES, PIN, PERF_CACHE, ROCKETMQ_VERSION, WARMUP_*):
#   REPS [3]  DURATION_S [10]  THREADS ["64 8"]  QUEUES [8]  SIZE [1024]
#   FLUSH [SYNC_FLUSH]: the brokers' flush mode
#   COMET_EXTRA_OPTS [unset]: more `key=value` settings for the Comet broker, space-separated
#                    (e.g. diskSpaceWarningLevelRatio=99 on a nearly full disk)
# A short smoke against Comet alone:
#   SYSTEMS=comet REPS=1 DURATION_S=3 WARMUP_S=2 WARMUP_MAX_ROUNDS=2 perf/tx.sh
set -euo pipefail

TX_HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# The sourced harness must not fetch the Java benchmark producer: it has no transactional
# mode, so both systems are driven by comet-bench alone.
JAVA_BENCH=0
THREADS="${THREADS:-64 8}"
# Only named in the sitting's meta.txt (run.sh's workload list is not run here).
WORKLOADS="$(for n in $THREADS; do printf 'TX%s ' "$n"; done)"
# shellcheck source=perf/run.sh
source "$TX_HERE/run.sh"

QUEUES="${QUEUES:-8}"
SIZE="${SIZE:-1024}"
FLUSH="${FLUSH:-SYNC_FLUSH}"
for option in ${COMET_EXTRA_OPTS:-}; do COMET_OPTS+=(-o "$option"); done
RUN_DIR="$CACHE/tx-$(date -u +%Y%m%dT%H%M%S)"
RAW="$RUN_DIR/raw"
WARM="$RUN_DIR/warmup"

check_tx_settings() {
  local n
  for n in REPS DURATION_S WARMUP_S WARMUP_MAX_ROUNDS WARMUP_TOLERANCE_PCT QUEUES SIZE; do
    [[ "${!n}" =~ ^[0-9]+$ ]] || die "$n must be a whole number, not '${!n}'"
  done
  (( REPS >= 1 && DURATION_S > 0 && WARMUP_S > 0 && QUEUES > 0 && SIZE > 0 )) \
    || die "REPS, DURATION_S, WARMUP_S, QUEUES and SIZE must be positive"
  (( WARMUP_MAX_ROUNDS >= 2 )) || die "WARMUP_MAX_ROUNDS must be at least 2"
  (( REPS >= 3 )) || log "REPS=$REPS: fewer than 3 runs give no spread (a smoke, not a sitting)"
  [[ -n "${THREADS// /}" ]] || die "THREADS names no thread count"
  for n in $THREADS; do
    if ! [[ "$n" =~ ^[0-9]+$ ]] || (( n < 1 )); then die "THREADS holds '$n', not a count"; fi
  done
  for n in $SYSTEMS; do
    case "$n" in comet|apache) ;; *) die "unknown system $n (comet, apache)" ;; esac
  done
  case "$FLUSH" in
    SYNC_FLUSH|ASYNC_FLUSH) ;;
    *) die "FLUSH is SYNC_FLUSH or ASYNC_FLUSH, not '$FLUSH'" ;;
  esac
}

run_tx() {
  local sys rep n
  for n in $THREADS; do
    local args=(produce --transactional --topic PerfTx --queues "$QUEUES" --size "$SIZE"
      --threads "$n" --producer-group perf_tx_producer)
    WARM_ARGS=("${args[@]}")
    note_load "TX$n start"
    for rep in $(seq 1 "$REPS"); do
      for sys in $(order "$rep"); do
        log "$sys TX$n run $rep"
        measure "$sys" "TX$n" "$rep" 0 "${args[@]}"
      done
    done
    note_load "TX$n end"
  done
}

# Per workload and system: committed transactions per second (median, min-max and the
# spread (max - min) / median), p50/p99 latency medians, the broker's CPU, check-backs; the
# Comet/Apache ratio of the medians with the ratios of the run pairs; the measured runs
# whose warm-up hit the round cap; the load averages.
tx_table() {
  python3 - "$TX_HERE" "$RUN_DIR" "$SYSTEMS" <<'PY'
import os, sys
sys.path.insert(0, sys.argv[1])
import report as r  # perf/report.py: the sitting's figures, shared with run.sh
run_dir, systems = sys.argv[2], sys.argv[3].split()
failed = {}
for system, workload, rep, _ in r.read_tsv(os.path.join(run_dir, "failures.tsv"), 4):
    failed.setdefault((system, workload), set()).add(rep)
runs = r.load_runs(os.path.join(run_dir, "raw"))
summary = {key: r.summarise(reps, failed.get(key, set())) for key, reps in runs.items()}
checks = {key: sum(rep.get("tx_check_backs_total") or 0 for rep in reps.values())
          for key, reps in runs.items()}
def threads(workload):
    return int(workload[2:]) if workload[2:].isdigit() else 0
workloads = sorted({w for _, w in summary}, key=threads, reverse=True)
head = ["workload", "system", "status", "runs", "tx/s (median)", "min–max", "spread",
        "p50 ms", "p99 ms", "broker cores", "broker µs CPU/tx", "check-backs"]
print("| " + " | ".join(head) + " |")
print("|" + "---|" * len(head))
ms = lambda us: r.fmt(None if us is None else us / 1000, 2)
for workload in workloads:
    for system in systems:
        fig = summary.get((system, workload))
        if fig is None:
            continue
        status = f"**FAILED** ({fig['failed_runs']} runs)" if fig["failed_runs"] else "ok"
        print("| " + " | ".join([
            workload, system, status, str(fig["runs"]), *r.fmt_spread(fig["throughput"]),
            ms(fig["p50"]), ms(fig["p99"]), r.fmt(fig["broker_cores"], 2),
            r.fmt(fig["broker_us_per_msg"], 1), str(checks[(system, workload)])]) + " |")
ratios = []
for workload in workloads:
    comet, apache = summary.get(("comet", workload)), summary.get(("apache", workload))
    if not comet or not apache or not comet["throughput"] or not apache["throughput"]:
        continue
    pairs = r.pair_ratios(comet["tput_by_rep"], apache["tput_by_rep"])
    cell, span = r.ratio_cell(comet["throughput"][0], apache["throughput"][0], pairs)
    ratios.append(f"| {workload} | {cell} | {span} |")
if ratios:
    print()
    print("| workload | Comet/Apache tx/s (medians) | run pairs |")
    print("|---|---|---|")
    print("\n".join(ratios))
capped = [f"{system} {workload} run {rep} (last change {change or 'n/a'}%)"
          for system, workload, rep, _rounds, converged, change
          in r.read_tsv(os.path.join(run_dir, "warmup-verdicts.tsv"), 6) if converged != "1"]
print()
print("Warm-up: " + ("every measured run followed two rounds within the tolerance." if not capped
      else "the round cap was hit before " + ", ".join(capped) + "."))
print()
print("Load averages (1/5/15 min) through the sitting:")
print()
print(r.load_table(r.read_tsv(os.path.join(run_dir, "loadavg.tsv"), 5)))
PY
}

tx_main() {
  check_tx_settings
  prepare
  log "results of this run: $RUN_DIR"
  write_meta
  echo "tx: threads=$THREADS queues=$QUEUES size=$SIZE flush=$FLUSH" >>"$RUN_DIR/meta.txt"
  note_load "sitting start"
  start_brokers "$FLUSH"
  run_tx
  stop_brokers
  note_load "sitting end"
  tx_table | tee "$RUN_DIR/tx.md"
  if [[ -s "$RUN_DIR/failures.tsv" ]]; then
    log "the sitting FAILED: $(cut -f1,2 "$RUN_DIR/failures.tsv" | sort -u | tr '\t' ' ' \
      | paste -sd, -)"
    exit 1
  fi
}

tx_main "$@"
