#!/usr/bin/env bash
# The failover suite: unchanged Apache RocketMQ clients (Java 5.x and 4.9.x, Go v2) carry on
# across an automatic failover of Comet brokers in controller mode, and the time the producer
# waits for it is measured.
#
#   failover/run.sh [--bin-dir DIR] [--dir DIR] [--messages N] [--keep-logs]
#
# Starts its own processes, bound to 127.0.0.1 on free ports, from --bin-dir (default: the
# repository's target/release): comet-nameserver with its controller
# (enableControllerInNamesrv=true, one member) and two comet-broker processes of one
# brokerName in controller mode (enableControllerMode=true, brokerRole=SYNC_MASTER, one shard
# each, their own stores); the controller picks the master. Then, one PASS/FAIL line per step:
#   failover_master_elected       the controller names one broker master, it reports
#                                 SYNC_MASTER and the other SLAVE (GET_BROKER_CONFIG), and
#                                 the sync-state set holds both
#   failover_create_topic, failover_go_create_topic  a 4-queue topic each for the Java and
#                                 the Go producer on the master, routed, in the slave's copy
#   failover_survivor_elected     the master is SIGKILLed once a third of the messages are
#                                 answered; the other broker reports SYNC_MASTER and the
#                                 controller names it (time since the kill)
#   failover_producer_recovered   the producer's next SEND_OK after the kill, from the
#                                 survivor: the client-observed recovery time
#   failover5_send_through_failover  Java 5.x producer: N sync sends with unique bodies, one
#                                 at a time, each failed attempt sent again until SEND_OK
#   failover_old_master_rejoins   the killed broker, restarted on its store with the same
#                                 command, reports SLAVE and rejoins the sync-state set
#   failover5_/failover4_push_every_SEND_OK  Java 5.x / 4.9.x push consumers (a new group
#                                 each, first offset) receive every body answered SEND_OK
#   failover_go_survivor_elected, failover_go_producer_recovered,
#   failover_go_send_through_failover, failover_go_old_master_rejoins  the same cycle again
#                                 with the broker set whole, under the Go producer: the
#                                 master now (the first survivor) is killed and the broker
#                                 killed first takes over
#   failover_go_push_every_SEND_OK  a Go push consumer (new group, first offset) receives
#                                 every body the Go producer had answered SEND_OK
# Processes it started are always stopped (TERM, then KILL after 30 s). Logs and stores go to
# DIR (default: a temporary folder, removed afterwards unless --keep-logs). Exits 1 when any
# step failed, 2 on bad arguments. Needs java, mvn, go, python3 and the release binaries
# comet-broker, comet-nameserver and comet-admin
# (cargo build --release -p comet-broker -p comet-nameserver -p comet-tools).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../../.." && pwd)"
BIN="$REPO/target/release"

DIR=""
KEEP=0
MESSAGES=300
CLUSTER=FailoverCluster
BROKER_NAME=failover-broker
START_TIMEOUT_S=60
# Election, sync-state set and role changes take seconds with the periods below.
CONVERGE_TIMEOUT_S=60
STOP_TIMEOUT_S=30
# The producer phase bounds itself at 180 s; this adds its JVM start and build check.
PRODUCE_TIMEOUT_S=240
# The Go client asks the name server for routes every 30 s, a period no option changes: it
# sends to the killed master until its next poll after the survivor's promotion, which a poll
# during the election (no master routed) puts off by another 30 s.
GO_RECOVERY_TIMEOUT_S=90
# Controller-mode periods of the run, shorter than Java's defaults so a failover takes
# seconds: the controller counts a broker gone after 3 s without heartbeats, which go every
# 300 ms (at most 30% of the timeout: the master's write lease relies on it).
CONTROLLER_OPTIONS=(
  controllerHeartBeatTimeoutMills=3000
  brokerHeartbeatInterval=300
  syncBrokerMetadataPeriod=500
  haHousekeepingInterval=3000
  syncFlushTimeout=2000
  # The master's heartbeat on an idle replication link (default 5 s) must come well within
  # haHousekeepingInterval, or each idle link is closed every 3 s and the slave leaves the
  # sync-state set until it reconnects: a master killed then has no one to hand over to.
  haSendHeartbeatInterval=1000
)
# The controller's and name server's scan for silent brokers (default 10 s): the election
# starts at the first scan after the heartbeat timeout.
SCAN_INTERVAL_MS=1000

die() { echo "failover: error: $1" >&2; exit "${2:-1}"; }

while (($#)); do
  case "$1" in
    --bin-dir|--dir|--messages) (($# >= 2)) || die "$1 needs a value" 2 ;;
  esac
  case "$1" in
    --bin-dir) BIN="$2"; shift 2 ;;
    --dir) DIR="$2"; shift 2 ;;
    --messages) MESSAGES="$2"; shift 2 ;;
    --keep-logs) KEEP=1; shift ;;
    -h|--help) sed -n '2,40p' "$0"; exit 0 ;;
    *) die "unknown option $1 (see --help)" 2 ;;
  esac
done
if ! [[ "$MESSAGES" =~ ^[1-9][0-9]{0,6}$ ]] || ((MESSAGES < 6)); then
  die "--messages must be a number from 6 to 9999999" 2
fi
[[ -n "$BIN" ]] || die "--bin-dir needs a folder" 2
for b in comet-broker comet-nameserver comet-admin; do
  [[ -x "$BIN/$b" ]] || die "$BIN/$b is missing; build the three binaries first with:
  cargo build --release -p comet-broker -p comet-nameserver -p comet-tools"
done
command -v python3 >/dev/null || die "python3 is required (free ports, broker requests)"
command -v go >/dev/null || die "go is required (the Go client's steps)"

OWN_DIR=0
if [[ -z "$DIR" ]]; then
  DIR="$(mktemp -d "${TMPDIR:-/tmp}/comet-failover.XXXXXX")"
  OWN_DIR=1
fi
mkdir -p "$DIR"
DIR="$(cd "$DIR" && pwd)"

NAMESRV_PID=""
BROKER_PIDS=("" "")
PRODUCER_PID=""
WATCH_PID=""

# stop_session SID: TERM to every process of the session SID started (the producer's
# java/run.sh, and the timeout and JVM under it, which run in a process group of their own).
stop_session() {
  pkill -TERM -s "$1" 2>/dev/null || true
}

PROCESS_LOG_TAG=failover
# shellcheck source-path=SCRIPTDIR source=../lib/processes.sh
source "$HERE/../lib/processes.sh"

cleanup() {
  local rc=$?
  if [[ -n "$PRODUCER_PID" ]]; then
    stop_session "$PRODUCER_PID"
    stop_pid "$PRODUCER_PID" "the producer" || true
  fi
  stop_pid "$WATCH_PID" "the election poller" || true
  stop_pid "${BROKER_PIDS[0]}" "broker a" || true
  stop_pid "${BROKER_PIDS[1]}" "broker b" || true
  stop_pid "$NAMESRV_PID" "the name server" || true
  if ((OWN_DIR)); then
    if ((KEEP)); then echo "failover: logs kept in $DIR" >&2; else rm -rf "$DIR"; fi
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# RocketMQ remoting requests on fresh connections (JSON header), for what comet-admin does
# not show. `role ADDR` prints the broker's brokerRole (GET_BROKER_CONFIG, 26);
# `replica CONTROLLER BROKER_NAME` prints the master's address, the master epoch and the
# size of the sync-state set (CONTROLLER_GET_REPLICA_INFO, 1004); both exit 1 without an
# answer. `await-master CONTROLLER BROKER_NAME ADDR TIMEOUT_S` polls both every 50 ms in one
# process (started before the kill: a python start can take a second here) and prints
# "controller LO HI EPOCH SET_SIZE" once the controller names ADDR master and "role LO HI"
# once ADDR says it is SYNC_MASTER, where the change happened between LO (when the last
# request still answered otherwise was sent) and HI (when the answer that shows it came), in
# milliseconds since the epoch; exits 1 when TIMEOUT_S passes first.
REMOTING_PY='
import json, socket, struct, sys, time

def call(addr, code, fields=None):
    host, port = addr.rsplit(":", 1)
    header = {"code": code, "flag": 0, "language": "JAVA", "opaque": 1,
              "serializeTypeCurrentRPC": "JSON", "version": 513}
    if fields:
        header["extFields"] = fields
    encoded = json.dumps(header).encode()
    with socket.create_connection((host, int(port)), timeout=1) as sock:
        sock.settimeout(1)
        sock.sendall(struct.pack(">II", 4 + len(encoded), len(encoded)) + encoded)
        def read(n):
            data = b""
            while len(data) < n:
                chunk = sock.recv(n - len(data))
                if not chunk:
                    raise EOFError("connection closed")
                data += chunk
            return data
        frame = read(struct.unpack(">I", read(4))[0])
    length = struct.unpack(">I", frame[:4])[0] & 0xFFFFFF
    answer = json.loads(frame[4:4 + length])
    if answer.get("code") != 0:
        raise RuntimeError("code %s: %s" % (answer.get("code"), answer.get("remark")))
    return answer.get("extFields") or {}, frame[4 + length:]

def role(addr):
    _, body = call(addr, 26)
    for line in body.decode().splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "brokerRole":
            return value.strip()
    raise RuntimeError("no brokerRole")

def replica(controller, name):
    fields, body = call(controller, 1004, {"brokerName": name})
    members = json.loads(body).get("syncStateSet") or []
    return fields.get("masterAddress", ""), fields.get("masterEpoch", ""), len(members)

FAILED = (OSError, EOFError, ValueError, RuntimeError)
if sys.argv[1] == "await-master":
    controller, name, addr = sys.argv[2:5]
    deadline = time.time() + float(sys.argv[5])
    now_ms = lambda: int(time.time() * 1000)
    elected = role_seen = False
    # Until a request answers otherwise, all that is known is that the change came after
    # the poller started.
    elected_lo = role_lo = now_ms()
    while not (elected and role_seen):
        if time.time() > deadline:
            sys.exit(1)
        if not elected:
            sent = now_ms()
            try:
                master, epoch, size = replica(controller, name)
                if master == addr:
                    elected = True
                    print("controller", elected_lo, now_ms(), epoch, size, flush=True)
                else:
                    elected_lo = sent
            except FAILED:
                pass
        if not role_seen:
            sent = now_ms()
            try:
                if role(addr) == "SYNC_MASTER":
                    role_seen = True
                    print("role", role_lo, now_ms(), flush=True)
                else:
                    role_lo = sent
            except FAILED:
                # Not answering (restarting its shards into the new role): not yet master.
                role_lo = sent
        time.sleep(0.05)
    sys.exit(0)
try:
    if sys.argv[1] == "role":
        print(role(sys.argv[2]))
    else:
        print(*replica(sys.argv[2], sys.argv[3]))
except FAILED:
    sys.exit(1)
'
broker_role() { python3 -c "$REMOTING_PY" role "$1" 2>/dev/null || true; }
replica_info() {
  python3 -c "$REMOTING_PY" replica "$CONTROLLER" "$BROKER_NAME" 2>/dev/null || true
}

NAMESRV_PORT="$(free_port)"
CONTROLLER_PORT="$(free_port)"
BROKER_PORTS=("$(free_port)" "$(free_port)")
HA_PORTS=("$(free_port)" "$(free_port)")
NAMESRV="127.0.0.1:$NAMESRV_PORT"
CONTROLLER="127.0.0.1:$CONTROLLER_PORT"
NAMES=(a b)
ADDRS=("127.0.0.1:${BROKER_PORTS[0]}" "127.0.0.1:${BROKER_PORTS[1]}")

mkdir -p "$DIR/namesrv" "$DIR/a" "$DIR/b"
cat >"$DIR/namesrv/namesrv.conf" <<EOF
listenPort=$NAMESRV_PORT
bindAddress=127.0.0.1
kvConfigPath=$DIR/namesrv/kvConfig.json
scanNotActiveBrokerInterval=$SCAN_INTERVAL_MS
enableControllerInNamesrv=true
controllerDLegerPeers=n0-127.0.0.1:$CONTROLLER_PORT
controllerDLegerSelfId=n0
controllerStorePath=$DIR/namesrv/controller
EOF
(cd "$DIR/namesrv" && exec setsid "$BIN/comet-nameserver" -c "$DIR/namesrv/namesrv.conf" \
  >"$DIR/namesrv/namesrv.out" 2>&1 </dev/null) &
NAMESRV_PID=$!
wait_port "$NAMESRV_PID" "$NAMESRV_PORT" comet-nameserver "$DIR/namesrv/namesrv.out"
wait_port "$NAMESRV_PID" "$CONTROLLER_PORT" "the controller" "$DIR/namesrv/namesrv.out"

# start_broker I: broker I (0 = a, 1 = b) in controller mode on its own store; the same
# command starts it again after the kill. One shard each; 64 MiB log segments (the same on
# both, as replication requires) keep the stores small, and the disk mark is raised because
# the suite tests failover, not the build machine's free space.
start_broker() {
  local i="$1" name="${NAMES[$1]}" options=() option
  for option in "brokerName=$BROKER_NAME" "brokerClusterName=$CLUSTER" \
      diskSpaceWarningLevelRatio=98 mappedFileSizeCommitLog=67108864 \
      "haListenPort=${HA_PORTS[$i]}" enableControllerMode=true \
      "controllerAddr=$CONTROLLER" brokerRole=SYNC_MASTER "${CONTROLLER_OPTIONS[@]}"; do
    options+=(-o "$option")
  done
  (cd "$DIR/$name" && exec setsid "$BIN/comet-broker" --cores 1 --no-pin \
    --bind-address 127.0.0.1 --broker-ip 127.0.0.1 --listen-port "${BROKER_PORTS[$i]}" \
    --namesrv "$NAMESRV" --store "$DIR/$name/store" "${options[@]}" \
    >>"$DIR/$name/broker.out" 2>&1 </dev/null) &
  BROKER_PIDS[i]=$!
}
start_broker 0
start_broker 1
# A broker in controller mode serves only once the controller gave it a role.
wait_port "${BROKER_PIDS[0]}" "${BROKER_PORTS[0]}" "broker a" "$DIR/a/broker.out"
wait_port "${BROKER_PIDS[1]}" "${BROKER_PORTS[1]}" "broker b" "$DIR/b/broker.out"
echo "failover: name server $NAMESRV, controller $CONTROLLER (pid $NAMESRV_PID)," \
  "broker a ${ADDRS[0]} (pid ${BROKER_PIDS[0]}), broker b ${ADDRS[1]}" \
  "(pid ${BROKER_PIDS[1]}), dir $DIR" >&2

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
logs_tail() {
  local name
  for name in a b; do
    echo "-- broker $name (${DIR}/$name/broker.out):" >&2
    tail -15 "$DIR/$name/broker.out" >&2 || true
  done
}

# roles_state: "MASTER_INDEX master_role slave_role epoch set_size" of what the controller
# and both brokers say now; MASTER_INDEX is -1 while the controller names neither broker.
roles_state() {
  local replica master="" epoch="" members=0 index=-1
  replica="$(replica_info)"
  [[ -n "$replica" ]] && read -r master epoch members <<<"$replica"
  [[ "$master" == "${ADDRS[0]}" ]] && index=0
  [[ "$master" == "${ADDRS[1]}" ]] && index=1
  if ((index < 0)); then
    echo "-1 - - ${epoch:--} ${members:-0}"
  else
    echo "$index $(broker_role "${ADDRS[index]}" | grep . || echo -)" \
      "$(broker_role "${ADDRS[1 - index]}" | grep . || echo -) ${epoch:--} ${members:-0}"
  fi
}

# await_pair: until the controller names one broker master, it reports SYNC_MASTER, the other
# SLAVE, and the sync-state set holds both (at most CONVERGE_TIMEOUT_S). Sets MASTER and
# SLAVE, and PAIR_EPOCH to the master epoch; returns 1 when the time passes first, with what
# was seen last in PAIR_STATE.
PAIR_EPOCH=""
PAIR_STATE=""
await_pair() {
  local deadline=$((SECONDS + CONVERGE_TIMEOUT_S)) index master_role slave_role epoch members
  while true; do
    PAIR_STATE="$(roles_state)"
    read -r index master_role slave_role epoch members <<<"$PAIR_STATE"
    if ((index >= 0)) && [[ "$master_role" == SYNC_MASTER && "$slave_role" == SLAVE ]] \
        && ((members == 2)); then
      MASTER=$index
      SLAVE=$((1 - index))
      PAIR_EPOCH=$epoch
      return 0
    fi
    ((SECONDS < deadline)) || return 1
    sleep 0.2
  done
}

MASTER=-1
SLAVE=-1
start=$(now_ms)
if ! await_pair; then
  report failover_master_elected "$start" 1 "no master with its slave in the sync-state set\
 within ${CONVERGE_TIMEOUT_S} s (controller master index, roles, epoch, set size:\
 $PAIR_STATE)"
  logs_tail
  finish
fi
report failover_master_elected "$start" 0 "broker ${NAMES[MASTER]} ${ADDRS[MASTER]}\
 SYNC_MASTER (master epoch $PAIR_EPOCH), broker ${NAMES[SLAVE]} ${ADDRS[SLAVE]} SLAVE,\
 sync-state set of 2"

RUN_ID="$(python3 -c 'import uuid; print(uuid.uuid4().hex[:8])')"
TOPIC="FailoverTopic_$RUN_ID"
GO_TOPIC="FailoverGoTopic_$RUN_ID"
# java_command CLIENT PHASE ARGS...: sets JAVA_COMMAND to one FailoverSuite phase's command.
JAVA_COMMAND=()
java_command() {
  local client="$1" phase="$2"
  shift 2
  JAVA_COMMAND=("$REPO/tests/compat/java/run.sh" --client "$client" --namesrv "$NAMESRV" --
    --suite failover --phase "$phase" --topic "$TOPIC" --run-id "$RUN_ID" "$@")
}
# go_command PHASE ARGS...: sets GO_COMMAND to one phase of the Go client's failover mode.
GO_COMMAND=()
go_command() {
  local phase="$1"
  shift
  GO_COMMAND=("$REPO/tests/compat/go/run.sh" failover --namesrv "$NAMESRV" --phase "$phase"
    --topic "$GO_TOPIC" --run-id "$RUN_ID" "$@")
}
# phase_result LABEL RC: prints the PASS/FAIL lines of the phase whose output is in
# DIR/LABEL.out (its summary line is not this suite's) and counts them; a phase that exited
# without a step result fails too, as failover_LABEL.
phase_result() {
  local label="$1" rc="$2" out="$DIR/$1.out" failed
  grep -E '^(PASS|FAIL) ' "$out" || true
  PASSED=$((PASSED + $(grep -c '^PASS ' "$out" || true)))
  failed=$(grep -c '^FAIL ' "$out" || true)
  if ((rc != 0 && failed == 0)); then
    echo "FAIL failover_${label//-/_}: exited $rc without a step result (see stderr)"
    tail -20 "$DIR/$label.err" >&2 || true
    failed=1
  fi
  FAILED=$((FAILED + failed))
  return "$rc"
}
# run_phase LABEL COMMAND...: runs one phase in the foreground, its output in DIR/LABEL.*.
run_phase() {
  local label="$1" rc=0
  shift
  "$@" >"$DIR/$label.out" 2>"$DIR/$label.err" </dev/null || rc=$?
  phase_result "$label" "$rc"
}
# java_phase CLIENT PHASE ARGS...: runs one FailoverSuite phase in the foreground.
java_phase() {
  java_command "$@"
  run_phase "java$1-$2" "${JAVA_COMMAND[@]}"
}
# go_phase PHASE ARGS...: runs one Go phase in the foreground.
go_phase() {
  go_command "$@"
  run_phase "go-$1" "${GO_COMMAND[@]}"
}

java_phase 5 setup --master "${ADDRS[MASTER]}" --slave "${ADDRS[SLAVE]}" || finish
go_phase setup --master "${ADDRS[MASTER]}" --slave "${ADDRS[SLAVE]}" || finish

acked() { grep -c '^OK ' "$ACKS" || true; }
# routes: the name server's "brokerId address" pairs of the broker set (comet-admin
# cluster-list rows: cluster, broker name, id, address), sorted by id.
routes() {
  "$BIN/comet-admin" -n "$NAMESRV" cluster-list 2>/dev/null \
    | awk -v cluster="$CLUSTER" -v name="$BROKER_NAME" \
      '$1 == cluster && $2 == name { print $3, $4 }' | sort -n | tr '\n' ' ' | sed 's/ $//'
}
# A change is reported as "LO-HI": it happened in that window, in ms after the kill (LO
# is at least 0: nothing changed before the kill).
window() {
  local lo=$(($1 - KILL_MS)) hi=$(($2 - KILL_MS))
  ((lo >= 0)) || lo=0
  echo "$lo-$hi"
}

# kill_cycle PREFIX LABEL RECOVERY_TIMEOUT_S: one failover under a producer. Starts
# PRODUCER_COMMAND (the phase LABEL; it appends to ACKS and holds before its middle message
# until RELEASE_FILE exists) in the background, SIGKILLs the master once a third of the
# messages are answered, and reports PREFIXsurvivor_elected, PREFIXproducer_recovered (the
# recovery awaited at most RECOVERY_TIMEOUT_S), the producer's own step and, once the killed
# broker is started again on its store, PREFIXold_master_rejoins. Then MASTER and SLAVE name
# the new roles. A producer that stops before the kill ends the suite.
PRODUCER_COMMAND=()
ACKS=""
RELEASE_FILE=""
ELECTION=""
kill_cycle() {
  local prefix="$1" label="$2" recovery_timeout_s="$3" start deadline rc
  rm -f "$RELEASE_FILE"
  : >"$ACKS"
  setsid "${PRODUCER_COMMAND[@]}" >"$DIR/$label.out" 2>"$DIR/$label.err" </dev/null &
  PRODUCER_PID=$!
  # Watching for the slave's promotion from now on, so the first polls after the kill do
  # not wait for a python start.
  python3 -c "$REMOTING_PY" await-master "$CONTROLLER" "$BROKER_NAME" "${ADDRS[SLAVE]}" \
    $((PRODUCE_TIMEOUT_S + CONVERGE_TIMEOUT_S)) >"$ELECTION" 2>"$ELECTION.err" &
  WATCH_PID=$!

  local kill_at=$((MESSAGES / 3))
  start=$(now_ms)
  deadline=$((SECONDS + PRODUCE_TIMEOUT_S))
  until (($(acked) >= kill_at)); do
    if ! kill -0 "$PRODUCER_PID" 2>/dev/null || ((SECONDS >= deadline)); then
      report "${prefix}master_killed" "$start" 1 "the producer had $(acked) of the\
 $kill_at SEND_OK that come before the kill when it $(kill -0 "$PRODUCER_PID" 2>/dev/null \
        && echo "ran out of time" || echo exited)"
      stop_session "$PRODUCER_PID"
      rc=0
      wait "$PRODUCER_PID" || rc=$?
      PRODUCER_PID=""
      phase_result "$label" "$rc" || true
      finish
    fi
    sleep 0.05
  done

  # The kill: the time is taken first, so no answer sent after it can count as earlier.
  KILLED=$MASTER
  SURVIVOR=$SLAVE
  KILL_MS=$(now_ms)
  # (The shell's own "Killed" notice of the job goes to /dev/null with the group's stderr.)
  {
    kill -KILL "${BROKER_PIDS[KILLED]}"
    wait "${BROKER_PIDS[KILLED]}" || true
  } 2>/dev/null
  BROKER_PIDS[KILLED]=""
  local acked_before
  acked_before=$(acked)
  touch "$RELEASE_FILE"
  echo "failover: SIGKILL to broker ${NAMES[KILLED]} ${ADDRS[KILLED]} after $acked_before" \
    "SEND_OK of $label" >&2

  # Until the controller named the survivor master, the survivor says so itself (both
  # watched by one poller in the background) and the producer had a SEND_OK stored by it.
  local recovered=""
  deadline=$((SECONDS + recovery_timeout_s))
  while [[ -z "$recovered" ]] && ((SECONDS < deadline)); do
    # OK index ack_ms queue offset store_host
    recovered="$(awk -v kill="$KILL_MS" -v host="${ADDRS[SURVIVOR]}" \
      '$1 == "OK" && $3 > kill && $6 == host { print $2, $3 - kill, $3; exit }' "$ACKS")"
    [[ -n "$recovered" ]] || sleep 0.05
  done
  while kill -0 "$WATCH_PID" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.05; done
  stop_pid "$WATCH_PID" "the election poller" || true
  WATCH_PID=""
  local elected_ms="" role_ms="" elected_epoch="" elected_members="" early=0
  local what lo_ms hi_ms epoch members
  while read -r what lo_ms hi_ms epoch members; do
    # A change seen before the kill is a failover nobody asked for.
    ((hi_ms >= KILL_MS)) || early=1
    case "$what" in
      controller) elected_ms="$(window "$lo_ms" "$hi_ms")"; elected_epoch=$epoch
        elected_members=$members ;;
      role) role_ms="$(window "$lo_ms" "$hi_ms")" ;;
    esac
  done <"$ELECTION"
  if ((early)); then
    report "${prefix}survivor_elected" "$KILL_MS" 1 "broker ${NAMES[SURVIVOR]} became\
 master before the SIGKILL (controller's master at ${elected_ms:-never} ms, SYNC_MASTER at\
 ${role_ms:-never} ms after it)"
    logs_tail
  elif [[ -n "$elected_ms" && -n "$role_ms" ]]; then
    report "${prefix}survivor_elected" "$KILL_MS" 0 "broker ${NAMES[SURVIVOR]}\
 ${ADDRS[SURVIVOR]}: the controller's master ${elected_ms} ms after the SIGKILL of\
 ${ADDRS[KILLED]} (master epoch $elected_epoch, sync-state set of $elected_members),\
 SYNC_MASTER by its own word after ${role_ms} ms"
  else
    report "${prefix}survivor_elected" "$KILL_MS" 1 "broker ${NAMES[SURVIVOR]} not master\
 ${recovery_timeout_s} s after the SIGKILL (controller's master after ${elected_ms:-never}\
 ms, SYNC_MASTER by its own word after ${role_ms:-never} ms; controller master index,\
 roles, epoch, set size now: $(roles_state))"
    logs_tail
  fi
  local failed_after_kill
  if [[ -n "$recovered" ]]; then
    local first_index recovery_ms recovered_at_ms
    read -r first_index recovery_ms recovered_at_ms <<<"$recovered"
    failed_after_kill=$(awk -v kill="$KILL_MS" -v until="$recovered_at_ms" \
      '$1 == "ERR" && $3 > kill && $3 <= until' "$ACKS" | wc -l)
    report "${prefix}producer_recovered" "$KILL_MS" 0 "recovery ${recovery_ms} ms: the\
 producer's next SEND_OK after the SIGKILL (message $first_index, stored by\
 ${ADDRS[SURVIVOR]}); $acked_before SEND_OK before, $failed_after_kill failed attempts\
 in between"
  else
    failed_after_kill=$(awk -v kill="$KILL_MS" '$1 == "ERR" && $3 > kill' "$ACKS" | wc -l)
    report "${prefix}producer_recovered" "$KILL_MS" 1 "no SEND_OK from ${ADDRS[SURVIVOR]}\
 ${recovery_timeout_s} s after the SIGKILL ($(acked) SEND_OK in all, $failed_after_kill\
 failed attempts since the kill; last: $(grep '^ERR ' "$ACKS" | tail -1))"
  fi

  # The producer's own verdict: every message answered SEND_OK.
  deadline=$((SECONDS + PRODUCE_TIMEOUT_S))
  while kill -0 "$PRODUCER_PID" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.2; done
  if kill -0 "$PRODUCER_PID" 2>/dev/null; then
    echo "failover: the producer still runs after ${PRODUCE_TIMEOUT_S} s; stopping it" >&2
    stop_session "$PRODUCER_PID"
  fi
  rc=0
  wait "$PRODUCER_PID" || rc=$?
  PRODUCER_PID=""
  phase_result "$label" "$rc" || true

  # The killed broker comes back on its store with the same command, and must follow.
  start=$(now_ms)
  start_broker "$KILLED"
  local slave_ms="" rejoined_ms="" routes_now="" index master_role slave_role
  deadline=$((SECONDS + CONVERGE_TIMEOUT_S))
  while [[ -z "$rejoined_ms" ]] && ((SECONDS < deadline)); do
    if ! kill -0 "${BROKER_PIDS[KILLED]}" 2>/dev/null; then break; fi
    if [[ -z "$slave_ms" && "$(broker_role "${ADDRS[KILLED]}")" == SLAVE ]]; then
      slave_ms=$(($(now_ms) - start))
    fi
    if [[ -n "$slave_ms" ]]; then
      read -r index master_role slave_role epoch members <<<"$(roles_state)"
      routes_now="$(routes)"
      # The clients' view: the survivor is brokerId 0, the returned one routed under its id.
      if ((index == SURVIVOR && members == 2)) && [[ "$slave_role" == SLAVE ]] \
          && [[ "$routes_now" =~ ^0\ ${ADDRS[SURVIVOR]}\ [1-9][0-9]*\ ${ADDRS[KILLED]}$ ]]
      then
        rejoined_ms=$(($(now_ms) - start))
      fi
    fi
    [[ -n "$rejoined_ms" ]] || sleep 0.2
  done
  if [[ -n "$rejoined_ms" ]]; then
    report "${prefix}old_master_rejoins" "$start" 0 "broker ${NAMES[KILLED]}\
 ${ADDRS[KILLED]} restarted on its store: SLAVE after ${slave_ms} ms, in the sync-state set\
 (of 2) after ${rejoined_ms} ms; master still ${ADDRS[SURVIVOR]}; name server routes (id\
 address): $routes_now"
  else
    local alive=exited
    kill -0 "${BROKER_PIDS[KILLED]}" 2>/dev/null && alive=running
    report "${prefix}old_master_rejoins" "$start" 1 "broker ${NAMES[KILLED]} ($alive) role\
 '$(broker_role "${ADDRS[KILLED]}")' after restart (SLAVE after ${slave_ms:-never} ms);\
 controller master index, roles, epoch, set size: $(roles_state); name server routes (id\
 address): $(routes)"
    logs_tail
  fi
  MASTER=$SURVIVOR
  SLAVE=$KILLED
}

# The producer holds before the middle message until the kill is done, so the kill falls
# inside the run whatever the pace.
ACKS="$DIR/acks.txt"
RELEASE_FILE="$DIR/master-killed"
ELECTION="$DIR/election.txt"
java_command 5 produce --count "$MESSAGES" --acks "$ACKS" --hold-at $((MESSAGES / 2)) \
  --go-file "$RELEASE_FILE"
PRODUCER_COMMAND=("${JAVA_COMMAND[@]}")
kill_cycle failover_ java5-produce "$CONVERGE_TIMEOUT_S"

java_phase 5 consume --acks "$ACKS" || true
java_phase 4 consume --acks "$ACKS" || true

# The Go client's cycle: the broker set whole again, its master (the survivor above) is
# killed under the Go producer, and the broker killed first must take over.
if ! await_pair; then
  report failover_go_send_through_failover "$(now_ms)" 1 "not started: no master with its\
 slave in the sync-state set within ${CONVERGE_TIMEOUT_S} s (controller master index, roles,\
 epoch, set size: $PAIR_STATE)"
  logs_tail
  finish
fi
ACKS="$DIR/acks-go.txt"
RELEASE_FILE="$DIR/master-killed-go"
ELECTION="$DIR/election-go.txt"
go_command produce --count "$MESSAGES" --acks "$ACKS" --hold-at $((MESSAGES / 2)) \
  --go-file "$RELEASE_FILE"
PRODUCER_COMMAND=("${GO_COMMAND[@]}")
kill_cycle failover_go_ go-produce "$GO_RECOVERY_TIMEOUT_S"
go_phase consume --count "$MESSAGES" --acks "$ACKS" --broker "${ADDRS[MASTER]}" || true
finish
