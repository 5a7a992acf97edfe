#!/usr/bin/env bash
# Proves Comet's controller session (comet_replication::controller) against Apache RocketMQ's
# own controller: starts Apache's name server with its embedded controller
# (enableControllerInNamesrv=true, one DLedger member) on free loopback ports, runs the
# opt-in test broker/replication/tests/apache_controller.rs against it, and stops it.
#
#   tests/compat/controller/run.sh [--keep]
#
# --keep keeps the state folder (name-server output and controller logs) for reading.
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
[[ "${1:-}" == "--keep" ]] && KEEP=1

die() { echo "controller-compat: error: $*" >&2; exit 1; }
log() { echo "controller-compat: $*" >&2; }

command -v "$JAVA" >/dev/null || die "java is required (Java 17)"
LIB="$("$HERE/../apache/broker.sh" fetch)"
[[ -f "$LIB/.complete" ]] || die "Apache RocketMQ jars missing in $LIB"
ls "$LIB"/rocketmq-controller-*.jar >/dev/null 2>&1 \
  || die "the fetched jars lack rocketmq-controller (needed for enableControllerInNamesrv)"

# A free loopback port: the kernel picks one for a socket that is closed again at once.
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

NAMESRV_PORT="$(free_port)"
CONTROLLER_PORT="$(free_port)"
[[ "$NAMESRV_PORT" != "$CONTROLLER_PORT" ]] || CONTROLLER_PORT="$(free_port)"
DIR="$(mktemp -d "${TMPDIR:-/tmp}/comet-controller-compat.XXXXXX")"
PID=""

cleanup() {
  local status=$?
  if [[ -n "$PID" ]] && kill -0 "$PID" 2>/dev/null; then
    kill -TERM "$PID" 2>/dev/null || true
    local deadline=$((SECONDS + 30))
    while kill -0 "$PID" 2>/dev/null && (( SECONDS < deadline )); do sleep 0.2; done
    if kill -0 "$PID" 2>/dev/null; then kill -KILL "$PID" 2>/dev/null || true; fi
  fi
  if (( KEEP )) || (( status != 0 )); then
    log "state kept in $DIR (name-server output: $DIR/namesrv.out)"
  else
    rm -rf "$DIR"
  fi
  exit "$status"
}
trap cleanup EXIT INT TERM

# One DLedger member: it elects itself leader. Broker liveness is scanned every second so the
# test's 3 s heartbeat timeout turns into an election within a few seconds.
cat >"$DIR/namesrv.conf" <<CONF
listenPort=$NAMESRV_PORT
enableControllerInNamesrv=true
controllerDLegerGroup=comet-compat
controllerDLegerPeers=n0-127.0.0.1:$CONTROLLER_PORT
controllerDLegerSelfId=n0
controllerStorePath=$DIR/controller-store
configStorePath=$DIR/controller.properties
scanNotActiveBrokerInterval=1000
notifyBrokerRoleChanged=true
CONF

export ROCKETMQ_HOME="$DIR"
setsid "$JAVA" -server -Xms128m -Xmx384m -XX:+UseG1GC -XX:-OmitStackTraceInFastThrow \
  --add-exports=java.base/jdk.internal.ref=ALL-UNNAMED \
  --add-opens=java.base/java.nio=ALL-UNNAMED --add-opens=java.base/sun.nio.ch=ALL-UNNAMED \
  --add-opens=java.base/java.lang=ALL-UNNAMED \
  -Duser.home="$DIR" -Drocketmq.home.dir="$DIR" -cp "$LIB/*" \
  org.apache.rocketmq.namesrv.NamesrvStartup -c "$DIR/namesrv.conf" \
  >"$DIR/namesrv.out" 2>&1 </dev/null &
PID=$!

deadline=$((SECONDS + START_TIMEOUT_S))
until port_open "$CONTROLLER_PORT"; do
  kill -0 "$PID" 2>/dev/null || { tail -30 "$DIR/namesrv.out" >&2; die "name server exited"; }
  if (( SECONDS >= deadline )); then
    tail -30 "$DIR/namesrv.out" >&2
    die "controller not listening on $CONTROLLER_PORT after ${START_TIMEOUT_S}s"
  fi
  sleep 0.3
done
log "name server on 127.0.0.1:$NAMESRV_PORT, controller on 127.0.0.1:$CONTROLLER_PORT (pid $PID)"

cd "$ROOT"
COMET_CONTROLLER_ADDR="127.0.0.1:$CONTROLLER_PORT" \
  cargo test -p comet-replication --test apache_controller -- --ignored --nocapture
