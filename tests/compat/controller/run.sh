#!/usr/bin/env bash
# Proves Comet's controller session (comet_replication::controller) against Apache RocketMQ's
# own controller, with the opt-in tests of broker/tests/apache_controller.rs:
#
#   single  one Apache name server with its embedded controller (enableControllerInNamesrv=true,
#           one DLedger member): ids, first election, sync-state set, failover, restart;
#   group   three such name servers forming one DLedger group: a follower's
#           CONTROLLER_NOT_LEADER, and the session following a new leader after the test
#           kills the leader's process;
#   brokers one such name server, and two real Comet brokers in controller mode
#           (broker/tests/failover_e2e.rs): it elects one, the master SIGKILLed or frozen
#           under load is replaced by its slave with every acknowledged message, and returns
#           as a slave.
#
#   tests/compat/controller/run.sh [--keep] [--only single|group|brokers] [--against apache|comet]
#
# --against comet starts Comet's own name servers (target/debug/comet-nameserver, built first)
# with the same keys instead of Apache's, and runs the SAME tests against them: Comet's
# controller must answer as Apache's does. It needs no Java.
#
# Everything runs on free loopback ports and is stopped at the end. --keep keeps the state
# folder (name-server output and controller logs) for reading.
# Environment: ROCKETMQ_VERSION, JAVA, COMPAT_CACHE as for ../apache/broker.sh (whose jars are
# reused), START_TIMEOUT_S (default 90); COMET_CONTROLLER_CAPTURE=FILE (absolute path) makes
# the test append the first frame of each kind Apache's controller sent (the source of
# client/proto/tests/data/apache-controller-frames.txt).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../../.." && pwd)"
JAVA="${JAVA:-java}"
START_TIMEOUT_S="${START_TIMEOUT_S:-90}"
KEEP=0
ONLY=""
AGAINST=apache
while (($#)); do
  case "$1" in
    --keep) KEEP=1; shift ;;
    --only) ONLY="${2:-}"; shift 2 ;;
    --against) AGAINST="${2:-}"; shift 2 ;;
    *) echo "usage: run.sh [--keep] [--only single|group|brokers] [--against apache|comet]" >&2
       exit 2 ;;
  esac
done
case "$ONLY" in
  ""|single|group|brokers) ;;
  *) echo "--only takes single, group or brokers" >&2; exit 2 ;;
esac
case "$AGAINST" in
  apache|comet) ;;
  *) echo "--against takes apache or comet" >&2; exit 2 ;;
esac

die() { echo "controller-compat: error: $*" >&2; exit 1; }
log() { echo "controller-compat: $*" >&2; }

if [[ "$AGAINST" == apache ]]; then
  command -v "$JAVA" >/dev/null || die "java is required (Java 17)"
  LIB="$("$HERE/../apache/broker.sh" fetch)"
  [[ -f "$LIB/.complete" ]] || die "Apache RocketMQ jars missing in $LIB"
  ls "$LIB"/rocketmq-controller-*.jar >/dev/null 2>&1 \
    || die "the fetched jars lack rocketmq-controller (needed for enableControllerInNamesrv)"
fi

# A free loopback port: the kernel picks one for a socket that is closed again at once.
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

DIR="$(mktemp -d "${TMPDIR:-/tmp}/comet-controller-compat.XXXXXX")"
PIDS=()

stop_pid() {
  local pid="$1" deadline
  kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM "$pid" 2>/dev/null || true
  deadline=$((SECONDS + 30))
  while kill -0 "$pid" 2>/dev/null && (( SECONDS < deadline )); do sleep 0.2; done
  if kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid" 2>/dev/null || true; fi
}

stop_all() {
  local pid
  for pid in "${PIDS[@]}"; do stop_pid "$pid"; done
  PIDS=()
}

cleanup() {
  local status=$?
  stop_all
  if (( KEEP )) || (( status != 0 )); then
    log "state kept in $DIR (name-server output: $DIR/*/namesrv.out)"
  else
    rm -rf "$DIR"
  fi
  exit "$status"
}
trap cleanup EXIT INT TERM

# Starts one name server (Apache's, or Comet's with --against comet) with an embedded
# controller: NAME SELF_ID PEERS (its own controller port is the one PEERS gives SELF_ID).
# Broker liveness is scanned every second so the tests' 3 s heartbeat timeout turns into an
# election within a few seconds. Sets STARTED_PID and NAMESRV_PORT (its name-server port).
start_member() {
  local self_id="$2" peers="$3" dir="$DIR/$1"
  mkdir -p "$dir"
  NAMESRV_PORT="$(free_port)"
  cat >"$dir/namesrv.conf" <<CONF
listenPort=$NAMESRV_PORT
enableControllerInNamesrv=true
controllerDLegerGroup=comet-compat
controllerDLegerPeers=$peers
controllerDLegerSelfId=$self_id
controllerStorePath=$dir/controller-store
configStorePath=$dir/controller.properties
scanNotActiveBrokerInterval=1000
notifyBrokerRoleChanged=true
CONF
  if [[ "$AGAINST" == comet ]]; then
    echo "kvConfigPath=$dir/kvConfig.json" >>"$dir/namesrv.conf"
    RUST_LOG="${RUST_LOG:-info}" setsid "$COMET_NAMESRV" -c "$dir/namesrv.conf" \
      >"$dir/namesrv.out" 2>&1 </dev/null &
  else
    ROCKETMQ_HOME="$dir" setsid "$JAVA" -server -Xms128m -Xmx384m -XX:+UseG1GC \
      -XX:-OmitStackTraceInFastThrow --add-exports=java.base/jdk.internal.ref=ALL-UNNAMED \
      --add-opens=java.base/java.nio=ALL-UNNAMED --add-opens=java.base/sun.nio.ch=ALL-UNNAMED \
      --add-opens=java.base/java.lang=ALL-UNNAMED \
      -Duser.home="$dir" -Drocketmq.home.dir="$dir" -cp "$LIB/*" \
      org.apache.rocketmq.namesrv.NamesrvStartup -c "$dir/namesrv.conf" \
      >"$dir/namesrv.out" 2>&1 </dev/null &
  fi
  STARTED_PID=$!
  # Out of the job table: a member the test kills is not reported as a failed job.
  disown "$STARTED_PID"
  PIDS+=("$STARTED_PID")
}

# Waits until CONTROLLER_PORT listens while PID lives; NAME is for messages.
wait_member() {
  local name="$1" pid="$2" port="$3" deadline=$((SECONDS + START_TIMEOUT_S))
  until port_open "$port"; do
    if ! kill -0 "$pid" 2>/dev/null; then
      tail -30 "$DIR/$name/namesrv.out" >&2
      die "$name exited during start-up"
    fi
    if (( SECONDS >= deadline )); then
      tail -30 "$DIR/$name/namesrv.out" >&2
      die "$name's controller not listening on $port after ${START_TIMEOUT_S}s"
    fi
    sleep 0.3
  done
}

cd "$ROOT"
# Built before any Java starts, so the tests do not wait for the compiler. Built as the
# workspace's tests build them (the broker and name server binaries with them): building one
# package alone resolves its dependencies' features apart and recompiles most of the tree,
# while after the quick tier (tests/run-all.sh) this builds nothing.
cargo test --workspace --no-run
if [[ "$AGAINST" == comet ]]; then
  COMET_NAMESRV="${CARGO_TARGET_DIR:-$ROOT/target}/debug/comet-nameserver"
  [[ -x "$COMET_NAMESRV" ]] || die "comet-nameserver not built at $COMET_NAMESRV"
  log "against Comet's controller ($COMET_NAMESRV)"
fi

if [[ -z "$ONLY" || "$ONLY" == single ]]; then
  port="$(free_port)"
  start_member single n0 "n0-127.0.0.1:$port"
  wait_member single "$STARTED_PID" "$port"
  log "single: controller on 127.0.0.1:$port (pid $STARTED_PID)"
  COMET_CONTROLLER_ADDR="127.0.0.1:$port" \
    cargo test -p comet-broker --test apache_controller -- --ignored --nocapture \
    --exact failover_with_apache_controller
  stop_all
fi

if [[ -z "$ONLY" || "$ONLY" == group ]]; then
  ports=("$(free_port)" "$(free_port)" "$(free_port)")
  peers="n0-127.0.0.1:${ports[0]};n1-127.0.0.1:${ports[1]};n2-127.0.0.1:${ports[2]}"
  group=""
  for i in 0 1 2; do
    start_member "group$i" "n$i" "$peers"
    group+="${group:+;}127.0.0.1:${ports[$i]}=$STARTED_PID"
  done
  for i in 0 1 2; do wait_member "group$i" "${PIDS[$i]}" "${ports[$i]}"; done
  log "group: controllers $group"
  COMET_CONTROLLER_GROUP="$group" \
    cargo test -p comet-broker --test apache_controller -- --ignored --nocapture \
    --exact controller_leader_change_with_apache
  stop_all
fi

if [[ -z "$ONLY" || "$ONLY" == brokers ]]; then
  # Real Comet brokers in controller mode (broker/tests/failover_e2e.rs): elected, killed,
  # frozen and returning, with this controller deciding, and its name server serving routes.
  port="$(free_port)"
  start_member brokers n0 "n0-127.0.0.1:$port"
  wait_member brokers "$STARTED_PID" "$port"
  wait_member brokers "$STARTED_PID" "$NAMESRV_PORT"
  log "brokers: controller on 127.0.0.1:$port, name server on 127.0.0.1:$NAMESRV_PORT"
  COMET_FAILOVER_CONTROLLER="127.0.0.1:$port" COMET_FAILOVER_NAMESRV="127.0.0.1:$NAMESRV_PORT" \
    cargo test -p comet-broker --test failover_e2e -- --test-threads 1
  stop_all
fi
