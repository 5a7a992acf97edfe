#!/usr/bin/env bash
# Apache RocketMQ's own name server and broker, fetched from Maven Central and run on loopback.
#
# They are the reference peer for the compatibility suites: the scenarios are proven against
# them, and comet-client / comet-bench are run against them ("the reverse direction").
#
#   broker.sh fetch                     download the jars (cached, see CACHE below)
#   broker.sh start [options]           start name server + broker, wait until ready
#   broker.sh stop  [--dir DIR]         stop both (TERM, then KILL after a bound), remove DIR
#   broker.sh status [--dir DIR]        exit 0 when both are running
#   broker.sh broker-command [options]  for a DIR that start made: rewrites the broker's
#                                       config from the options, keeps the store, and prints
#                                       the command that starts the broker alone, one word
#                                       per line (perf/retention.sh restarts it with this)
#
# start options:
#   --dir DIR              state folder (store, logs, pid files); default: a fixed folder under
#                          ${TMPDIR:-/tmp} named after the name-server port; wiped at start
#   --flush SYNC_FLUSH|ASYNC_FLUSH   flushDiskType (default ASYNC_FLUSH)
#   --namesrv-port N       default 9876
#   --broker-port N        default 10911 (the broker also takes N-2 and N+1, as RocketMQ does)
#   --bind IP              loopback address both listen on (default 127.0.0.1); they still
#                          advertise 127.0.0.1, so a relay there (tools/wiretap.py) sees all
#   --role ROLE            brokerRole: ASYNC_MASTER (default), SYNC_MASTER or SLAVE
#   --broker-id N          brokerId (default 0; a SLAVE needs 1 or more)
#   --join                 start only a broker, registering with the name server already
#                          running on --namesrv-port (a slave beside its master)
#   --keep                 (stop) keep DIR after stopping, for reading the logs
#
# Environment: ROCKETMQ_VERSION (default below), JAVA (default: java on PATH),
# COMPAT_CACHE (default tests/compat/.cache), START_TIMEOUT_S (default 90).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROCKETMQ_VERSION="${ROCKETMQ_VERSION:-5.5.0}"
CACHE="${COMPAT_CACHE:-$HERE/../.cache}"
JAVA="${JAVA:-java}"
START_TIMEOUT_S="${START_TIMEOUT_S:-90}"
STOP_TIMEOUT_S=30

NAMESRV_PORT=9876
BROKER_PORT=10911
FLUSH=ASYNC_FLUSH
BIND=127.0.0.1
DIR=""
KEEP=0
ROLE=ASYNC_MASTER
BROKER_ID=0
JOIN=0

die() { echo "apache-broker: error: $*" >&2; exit 1; }
log() { echo "apache-broker: $*" >&2; }

lib_dir() { echo "$CACHE/apache-rocketmq-$ROCKETMQ_VERSION/lib"; }

# Downloads rocketmq-namesrv, rocketmq-broker and rocketmq-tools with every dependency into
# the cache, once per version. A marker file makes a half-finished copy count as missing.
fetch() {
  local lib; lib="$(lib_dir)"
  if [[ -f "$lib/.complete" ]]; then echo "$lib"; return 0; fi
  command -v mvn >/dev/null || die "Maven (mvn) is required to fetch Apache RocketMQ"
  rm -rf "$lib"; mkdir -p "$lib"
  log "fetching Apache RocketMQ $ROCKETMQ_VERSION into $lib"
  if ! timeout 900 mvn -B -q -f "$HERE/pom.xml" -Drocketmq.version="$ROCKETMQ_VERSION" \
      dependency:copy-dependencies -DoutputDirectory="$lib" >"$lib/../fetch.log" 2>&1; then
    tail -20 "$lib/../fetch.log" >&2
    die "could not fetch Apache RocketMQ $ROCKETMQ_VERSION (log: $lib/../fetch.log)"
  fi
  ls "$lib"/rocketmq-broker-*.jar "$lib"/rocketmq-namesrv-*.jar >/dev/null \
    || die "fetch finished but the broker or name server jar is missing"
  touch "$lib/.complete"
  echo "$lib"
}

port_open() { (exec 3<>"/dev/tcp/$BIND/$1") 2>/dev/null; }

alive() { [[ -f "$1" ]] && kill -0 "$(cat "$1")" 2>/dev/null; }

# JVM flags shared by both processes: small heaps (the CI machine has 2 cores), the module
# openings RocketMQ needs on Java 9+ to unmap files, and user.home pointed into DIR because
# RocketMQ's logback configuration writes its logs under ${user.home}/logs.
jvm_flags() {
  local heap_max="$1"
  echo "-server -Xms256m -Xmx$heap_max -XX:+UseG1GC -XX:MaxDirectMemorySize=512m" \
    "-XX:-OmitStackTraceInFastThrow" \
    "--add-exports=java.base/jdk.internal.ref=ALL-UNNAMED" \
    "--add-opens=java.base/java.nio=ALL-UNNAMED" \
    "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED" \
    "--add-opens=java.base/java.lang=ALL-UNNAMED" \
    "-Duser.home=$DIR -Drocketmq.home.dir=$DIR"
}

# The two busy thresholds are raised from 200 ms / 1 s: on a shared 2-core machine (a build
# running beside the suites) the defaults make the broker refuse bursts of sends with
# "[TIMEOUT_CLEAN_QUEUE]broker busy" / "[PC_SYNCHRONIZED]broker busy", which is flow control
# working as designed but says nothing about the scenarios.
write_confs() {
  cat >"$DIR/namesrv.conf" <<EOF
listenPort=$NAMESRV_PORT
bindAddress=$BIND
EOF
  cat >"$DIR/broker.conf" <<EOF
brokerClusterName=DefaultCluster
brokerName=broker-a
brokerId=$BROKER_ID
brokerIP1=127.0.0.1
bindAddress=$BIND
namesrvAddr=127.0.0.1:$NAMESRV_PORT
listenPort=$BROKER_PORT
brokerRole=$ROLE
flushDiskType=$FLUSH
storePathRootDir=$DIR/store
storePathCommitLog=$DIR/store/commitlog
mappedFileSizeCommitLog=134217728
deleteWhen=04
fileReservedTime=48
diskMaxUsedSpaceRatio=95
waitTimeMillsInSendQueue=3000
osPageCacheBusyTimeOutMills=5000
enablePropertyFilter=true
EOF
}

# Waits for PORT to accept connections while PIDFILE's process lives; NAME is for messages.
wait_port() {
  local name="$1" port="$2" pidfile="$3" out="$4" deadline=$((SECONDS + START_TIMEOUT_S))
  until port_open "$port"; do
    if ! alive "$pidfile"; then
      tail -30 "$out" >&2 || true
      die "$name exited during start-up (output: $out)"
    fi
    (( SECONDS < deadline )) || { tail -30 "$out" >&2 || true; die "$name not listening on $port after ${START_TIMEOUT_S}s"; }
    sleep 0.3
  done
}

start() {
  [[ "$FLUSH" == SYNC_FLUSH || "$FLUSH" == ASYNC_FLUSH ]] || die "--flush must be SYNC_FLUSH or ASYNC_FLUSH"
  case "$ROLE" in
    ASYNC_MASTER|SYNC_MASTER) [[ "$BROKER_ID" == 0 ]] || die "a master needs --broker-id 0" ;;
    SLAVE) [[ "$BROKER_ID" =~ ^[1-9][0-9]*$ ]] || die "a SLAVE needs --broker-id 1 or more" ;;
    *) die "--role must be ASYNC_MASTER, SYNC_MASTER or SLAVE" ;;
  esac
  command -v "$JAVA" >/dev/null || die "java is required (Java 17)"
  local p ports=("$BROKER_PORT" $((BROKER_PORT - 2)) $((BROKER_PORT + 1)))
  if (( JOIN )); then
    port_open "$NAMESRV_PORT" || die "--join: no name server listening on $BIND:$NAMESRV_PORT"
  else
    ports+=("$NAMESRV_PORT")
  fi
  for p in "${ports[@]}"; do
    port_open "$p" && die "port $p on $BIND is in use (another broker running?)"
  done
  local lib; lib="$(fetch)"
  if [[ -d "$DIR" ]]; then
    [[ -f "$DIR/.apache-rocketmq" ]] || die "$DIR exists and was not made by this script; refusing to wipe it"
    if alive "$DIR/namesrv.pid" || alive "$DIR/broker.pid"; then die "already running in $DIR"; fi
    rm -rf "$DIR"
  fi
  mkdir -p "$DIR/store"; touch "$DIR/.apache-rocketmq"
  if (( JOIN )); then touch "$DIR/.joined"; fi
  write_confs
  export ROCKETMQ_HOME="$DIR"
  local cp="$lib/*"

  if (( ! JOIN )); then
    # shellcheck disable=SC2046 # word splitting of the JVM flags is intended
    setsid "$JAVA" $(jvm_flags 512m) -cp "$cp" org.apache.rocketmq.namesrv.NamesrvStartup \
      -c "$DIR/namesrv.conf" >"$DIR/namesrv.out" 2>&1 </dev/null &
    echo $! >"$DIR/namesrv.pid"
    wait_port "name server" "$NAMESRV_PORT" "$DIR/namesrv.pid" "$DIR/namesrv.out"
    log "name server up on $BIND:$NAMESRV_PORT (pid $(cat "$DIR/namesrv.pid"))"
  fi

  # shellcheck disable=SC2046
  setsid "$JAVA" $(jvm_flags 1g) -cp "$cp" org.apache.rocketmq.broker.BrokerStartup \
    -c "$DIR/broker.conf" >"$DIR/broker.out" 2>&1 </dev/null &
  echo $! >"$DIR/broker.pid"
  wait_port "broker" "$BROKER_PORT" "$DIR/broker.pid" "$DIR/broker.out"
  # The broker prints "boot success" after its first registration with the name server, so
  # from then on clients find its routes.
  local deadline=$((SECONDS + START_TIMEOUT_S))
  until grep -q "boot success" "$DIR/broker.out"; do
    alive "$DIR/broker.pid" || { tail -30 "$DIR/broker.out" >&2; die "broker exited during start-up"; }
    (( SECONDS < deadline )) || die "broker did not report boot success in ${START_TIMEOUT_S}s"
    sleep 0.3
  done
  log "broker up on $BIND:$BROKER_PORT ($ROLE, $FLUSH, RocketMQ $ROCKETMQ_VERSION, pid $(cat "$DIR/broker.pid"), dir $DIR)"
}

# Sends TERM (RocketMQ's shutdown hooks flush and unregister), waits, then KILLs the group.
stop_one() {
  local name="$1" pidfile="$2" pid deadline
  [[ -f "$pidfile" ]] || return 0
  pid="$(cat "$pidfile")"
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    deadline=$((SECONDS + STOP_TIMEOUT_S))
    while kill -0 "$pid" 2>/dev/null && (( SECONDS < deadline )); do sleep 0.2; done
    if kill -0 "$pid" 2>/dev/null; then
      log "$name (pid $pid) ignored TERM for ${STOP_TIMEOUT_S}s, killing it"
      kill -KILL "$pid" 2>/dev/null || true
    fi
  fi
  rm -f "$pidfile"
}

stop() {
  [[ -d "$DIR" ]] || { log "nothing to stop in $DIR"; return 0; }
  stop_one broker "$DIR/broker.pid"
  stop_one "name server" "$DIR/namesrv.pid"
  if (( KEEP )); then log "stopped; logs kept in $DIR"
  elif [[ -f "$DIR/.apache-rocketmq" ]]; then rm -rf "$DIR"; log "stopped"
  fi
}

# The broker's command line, one word per line, for DIR's store (kept as it is).
broker_command() {
  [[ -f "$DIR/.apache-rocketmq" ]] || die "$DIR was not made by this script's start"
  local lib word; lib="$(fetch)"
  write_confs
  printf '%s\n' env "ROCKETMQ_HOME=$DIR" "$JAVA"
  # shellcheck disable=SC2046 # word splitting of the JVM flags is intended
  for word in $(jvm_flags 1g); do printf '%s\n' "$word"; done
  printf '%s\n' -cp "$lib/*" org.apache.rocketmq.broker.BrokerStartup -c "$DIR/broker.conf"
}

status() {
  # A joined broker (--join) has no name server of its own.
  { [[ -f "$DIR/.joined" ]] || alive "$DIR/namesrv.pid"; } && alive "$DIR/broker.pid" \
    && { echo "running (dir $DIR)"; return 0; }
  echo "not running"; return 1
}

cmd="${1:-}"; shift || true
while (($#)); do
  case "$1" in
    --dir) DIR="$2"; shift 2 ;;
    --flush) FLUSH="$2"; shift 2 ;;
    --namesrv-port) NAMESRV_PORT="$2"; shift 2 ;;
    --broker-port) BROKER_PORT="$2"; shift 2 ;;
    --bind) BIND="$2"; shift 2 ;;
    --keep) KEEP=1; shift ;;
    --role) ROLE="$2"; shift 2 ;;
    --broker-id) BROKER_ID="$2"; shift 2 ;;
    --join) JOIN=1; shift ;;
    *) die "unknown option $1" ;;
  esac
done
[[ "$BIND" == 127.* ]] || die "--bind must be a loopback address (127.x.y.z)"
DIR="${DIR:-${TMPDIR:-/tmp}/comet-compat-apache-$NAMESRV_PORT}"

case "$cmd" in
  fetch) fetch ;;
  start) start ;;
  stop) stop ;;
  status) status ;;
  broker-command) broker_command ;;
  *) die "usage: broker.sh fetch|start|stop|status|broker-command [--dir DIR] [--flush SYNC_FLUSH|ASYNC_FLUSH] [--namesrv-port N] [--broker-port N] [--bind IP] [--role ROLE] [--broker-id N] [--join] [--keep]" ;;
esac
