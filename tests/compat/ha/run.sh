#!/usr/bin/env bash
# The master-and-slave suite: Apache RocketMQ's Java clients and mqadmin against a Comet
# SYNC_MASTER and its slave, then against the slave alone.
#
#   ha/run.sh [--dir DIR] [--messages N] [--keep-logs]
#
# Starts its own processes, bound to 127.0.0.1 on free ports, from target/release:
# comet-nameserver, a master (brokerRole=SYNC_MASTER, brokerId=0) and a slave
# (brokerRole=SLAVE, brokerId=1) of the same brokerName and cluster, one shard each; the slave
# learns the master's HA address from the name server. Then, one PASS/FAIL line per step:
#   ha_pair_in_sync            comet-admin ha-status of the master shows the slave in sync
#   ha_create_topic            a 4-queue topic on the master, routed, and in the slave's copy
#   ha5_/ha4_send_sync_SEND_OK   Java 5.x / 4.9.x producers: N sync sends each, all SEND_OK
#   ha5_/ha4_clusterList_master_slave  mqadmin 5.x / 4.9.x clusterList: ids 0 and 1, addresses
#   ha_master_stopped          SIGTERM to the master; it exits with status 0
#   ha5_/ha4_push_from_slave   Java 5.x / 4.9.x push consumers (one new group each, first
#                              offset) receive all 2N messages intact from the slave
# Processes it started are always stopped (TERM, then KILL after 30 s). Logs and stores go to
# DIR (default: a temporary folder, removed afterwards unless --keep-logs). Exits 1 when any
# step failed, 2 on bad arguments. Needs java, mvn, python3 and the release binaries
# comet-broker, comet-nameserver and comet-admin
# (cargo build --release -p comet-broker -p comet-nameserver -p comet-tools).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../../.." && pwd)"
BIN="$REPO/target/release"

DIR=""
KEEP=0
MESSAGES=100
CLUSTER=HaCluster
BROKER_NAME=ha-broker
START_TIMEOUT_S=60
IN_SYNC_TIMEOUT_S=60
STOP_TIMEOUT_S=30

die() { echo "ha: error: $1" >&2; exit "${2:-1}"; }

while (($#)); do
  case "$1" in
    --dir) DIR="$2"; shift 2 ;;
    --messages) MESSAGES="$2"; shift 2 ;;
    --keep-logs) KEEP=1; shift ;;
    -h|--help) sed -n '2,23p' "$0"; exit 0 ;;
    *) die "unknown option $1 (see --help)" 2 ;;
  esac
done
[[ "$MESSAGES" =~ ^[1-9][0-9]*$ ]] || die "--messages must be a positive number" 2
for b in comet-broker comet-nameserver comet-admin; do
  [[ -x "$BIN/$b" ]] || die "$BIN/$b is missing; build the three binaries first with:
  cargo build --release -p comet-broker -p comet-nameserver -p comet-tools"
done
command -v python3 >/dev/null || die "python3 is required (free ports)"

OWN_DIR=0
if [[ -z "$DIR" ]]; then
  DIR="$(mktemp -d "${TMPDIR:-/tmp}/comet-ha.XXXXXX")"
  OWN_DIR=1
fi
mkdir -p "$DIR"

NAMESRV_PID=""
MASTER_PID=""
SLAVE_PID=""

PROCESS_LOG_TAG=ha
# shellcheck source-path=SCRIPTDIR source=../lib/processes.sh
source "$HERE/../lib/processes.sh"

cleanup() {
  local rc=$?
  stop_pid "$SLAVE_PID" "the slave" || true
  stop_pid "$MASTER_PID" "the master" || true
  stop_pid "$NAMESRV_PID" "the name server" || true
  if ((OWN_DIR)); then
    if ((KEEP)); then echo "ha: logs kept in $DIR" >&2; else rm -rf "$DIR"; fi
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

NAMESRV_PORT="$(free_port)"
MASTER_PORT="$(free_port)"
MASTER_HA_PORT="$(free_port)"
SLAVE_PORT="$(free_port)"
NAMESRV="127.0.0.1:$NAMESRV_PORT"
MASTER="127.0.0.1:$MASTER_PORT"
SLAVE="127.0.0.1:$SLAVE_PORT"

mkdir -p "$DIR/namesrv" "$DIR/master" "$DIR/slave"
(cd "$DIR/namesrv" && exec setsid "$BIN/comet-nameserver" --bind-address 127.0.0.1 \
  --listen-port "$NAMESRV_PORT" --kv-config-path "$DIR/namesrv/kvConfig.json" \
  >"$DIR/namesrv/namesrv.out" 2>&1 </dev/null) &
NAMESRV_PID=$!
wait_port "$NAMESRV_PID" "$NAMESRV_PORT" comet-nameserver "$DIR/namesrv/namesrv.out"

# start_broker NAME PORT ROLE_OPTIONS...: one shard, registering with the suite's name server.
# The suites test the protocol, not disk space: a build machine's disk may be past 90 %, and
# 64 MiB log segments (the same on both, as replication requires) keep the two stores near
# 300 MiB instead of 4 GiB of preallocated 1 GiB segments.
start_broker() {
  local name="$1" port="$2"
  shift 2
  local options=(-o "brokerName=$BROKER_NAME" -o "brokerClusterName=$CLUSTER"
    -o diskSpaceWarningLevelRatio=98 -o mappedFileSizeCommitLog=67108864)
  local role
  for role in "$@"; do options+=(-o "$role"); done
  (cd "$DIR/$name" && exec setsid "$BIN/comet-broker" --cores 1 --no-pin \
    --bind-address 127.0.0.1 --broker-ip 127.0.0.1 --listen-port "$port" \
    --namesrv "$NAMESRV" --store "$DIR/$name/store" "${options[@]}" \
    >"$DIR/$name/broker.out" 2>&1 </dev/null) &
}
start_broker master "$MASTER_PORT" brokerRole=SYNC_MASTER brokerId=0 \
  "haListenPort=$MASTER_HA_PORT"
MASTER_PID=$!
wait_port "$MASTER_PID" "$MASTER_PORT" "the master" "$DIR/master/broker.out"
# Started once the master serves, so the slave's first registration already brings it the
# master's HA address (the next would come a registration period later).
start_broker slave "$SLAVE_PORT" brokerRole=SLAVE brokerId=1
SLAVE_PID=$!
wait_port "$SLAVE_PID" "$SLAVE_PORT" "the slave" "$DIR/slave/broker.out"
echo "ha: name server $NAMESRV (pid $NAMESRV_PID), master $MASTER (pid $MASTER_PID," \
  "HA port $MASTER_HA_PORT), slave $SLAVE (pid $SLAVE_PID), dir $DIR" >&2

PASSED=0
FAILED=0
now_ms() { date +%s%3N; }
# report STEP START_MS STATUS DETAIL: a line in the Java suites' format.
report() {
  local step="$1" ms=$(($(now_ms) - $2)) status="$3" detail="$4"
  if ((status == 0)); then
    printf 'PASS %-28s (%5d ms) %s\n' "$step" "$ms" "$detail"
    PASSED=$((PASSED + 1))
  else
    printf 'FAIL %-28s (%5d ms): %s\n' "$step" "$ms" "$detail"
    FAILED=$((FAILED + 1))
  fi
}
finish() {
  echo "$PASSED passed, $FAILED failed"
  if ((FAILED == 0)); then exit 0; else exit 1; fi
}

# The master's ha-status rows (one per log and slave) end with the slave's InSync flag; the
# pair is in sync when the log has a slave row and every row says true.
in_sync() {
  local out
  out="$("$BIN/comet-admin" -n "$NAMESRV" ha-status -b "$MASTER" 2>&1)" || return 1
  LAST_HA_STATUS="$out"
  awk '!/^#/ && NF >= 12 { rows++; if ($NF != "true") bad++ }
       END { exit !(rows > 0 && bad == 0) }' <<<"$out"
}
start=$(now_ms)
LAST_HA_STATUS=""
deadline=$((SECONDS + IN_SYNC_TIMEOUT_S))
until in_sync; do
  if ((SECONDS >= deadline)) || ! kill -0 "$SLAVE_PID" 2>/dev/null \
      || ! kill -0 "$MASTER_PID" 2>/dev/null; then
    report ha_pair_in_sync "$start" 1 "no slave in sync (at most ${IN_SYNC_TIMEOUT_S} s):\
 $(tr '\n' '|' <<<"$LAST_HA_STATUS")"
    tail -20 "$DIR/slave/broker.out" >&2 || true
    finish
  fi
  sleep 0.5
done
report ha_pair_in_sync "$start" 0 "$(awk '!/^#/ && NF >= 12 {
  printf "log %s: slave %s (id %s) in sync; ", $1, $5, $6 }' <<<"$LAST_HA_STATUS")"

RUN_ID="$(python3 -c 'import uuid; print(uuid.uuid4().hex[:8])')"
TOPIC="HaTopic_$RUN_ID"
# java_phase CLIENT PHASE ARGS...: runs one HaSuite phase; its PASS/FAIL lines are this
# suite's, its summary line is not.
java_phase() {
  local client="$1" phase="$2"
  shift 2
  local out rc=0
  out="$DIR/java-$client-$phase.out"
  "$REPO/tests/compat/java/run.sh" --client "$client" --suite ha --namesrv "$NAMESRV" -- \
    --phase "$phase" --topic "$TOPIC" --run-id "$RUN_ID" --cluster "$CLUSTER" \
    --broker-name "$BROKER_NAME" --master "$MASTER" --slave "$SLAVE" "$@" >"$out" || rc=$?
  grep -E '^(PASS|FAIL) ' "$out" || true
  PASSED=$((PASSED + $(grep -c '^PASS ' "$out" || true)))
  local failed
  failed=$(grep -c '^FAIL ' "$out" || true)
  if ((rc != 0 && failed == 0)); then
    # A phase that crashed before its steps still fails the suite, with its output shown.
    echo "FAIL ha_java${client}_$phase: exited $rc without a step result (see stderr)"
    tail -20 "$out" >&2
    failed=1
  fi
  FAILED=$((FAILED + failed))
  return "$rc"
}

java_phase 5 setup || finish
java_phase 5 produce --from 0 --count "$MESSAGES" || true
java_phase 4 produce --from "$MESSAGES" --count "$MESSAGES" || true

start=$(now_ms)
master_rc=0
stop_pid "$MASTER_PID" "the master" || master_rc=$?
MASTER_PID=""
if ((master_rc != 0)) || port_open "$MASTER_PORT"; then
  report ha_master_stopped "$start" 1 "exit status $master_rc after TERM"
  tail -20 "$DIR/master/broker.out" >&2 || true
  finish
fi
report ha_master_stopped "$start" 0 "exit status 0 after TERM"

java_phase 5 consume --count $((2 * MESSAGES)) || true
java_phase 4 consume --count $((2 * MESSAGES)) || true
finish
