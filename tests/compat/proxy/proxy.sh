#!/usr/bin/env bash
# Apache RocketMQ's proxy (rocketmq-proxy, from Maven Central) in cluster mode, in front of the
# brokers a name server knows: the gateway the 5.x gRPC SDKs speak to.
#
#   proxy.sh fetch                        resolve the proxy's jars (cached, see CACHE below)
#   proxy.sh start --namesrv HOST:PORT --dir DIR [--cluster NAME]
#                                          start it on free loopback ports, wait until its
#                                          gRPC port answers and it logs its start; prints
#                                          "GRPC_PORT REMOTING_PORT" on stdout
#   proxy.sh stop --dir DIR               TERM, then KILL after a bound
#
# --cluster is the brokers' cluster name (rocketMQClusterName; default DefaultCluster, what
# both Apache RocketMQ's broker and Comet register). State (rmq-proxy.json, logs, pid file)
# lives in DIR: user.home and RMQ_PROXY_HOME point there.
#
# Environment: ROCKETMQ_PROXY_VERSION (default below, the Apache broker's version in
# ../apache/broker.sh), JAVA (default: java on PATH), COMPAT_CACHE (default tests/compat/.cache),
# START_TIMEOUT_S (default 90).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VERSION="${ROCKETMQ_PROXY_VERSION:-5.5.0}"
CACHE="${COMPAT_CACHE:-$HERE/../.cache}"
JAVA="${JAVA:-java}"
START_TIMEOUT_S="${START_TIMEOUT_S:-90}"
STOP_TIMEOUT_S=30
PROCESS_LOG_TAG=proxy
# shellcheck source=../lib/processes.sh
source "$HERE/../lib/processes.sh"

die() { echo "proxy: error: $*" >&2; exit 1; }
log() { echo "proxy: $*" >&2; }

# Resolves rocketmq-proxy with its dependencies into the local Maven repository and writes
# their class path, once per version; a marker file makes a half-finished resolution count as
# missing. The class path names the jars in the Maven repository, so nothing is copied.
fetch() {
  local dir="$CACHE/apache-rocketmq-proxy-$VERSION"
  if [[ -f "$dir/.complete" && -s "$dir/classpath.txt" ]]; then
    echo "$dir/classpath.txt"
    return 0
  fi
  command -v mvn >/dev/null || die "Maven (mvn) is required to fetch Apache RocketMQ's proxy"
  rm -rf "$dir"; mkdir -p "$dir"
  log "resolving rocketmq-proxy $VERSION"
  if ! timeout 900 mvn -B -q -f "$HERE/pom.xml" -Drocketmq.version="$VERSION" \
      dependency:build-classpath -Dmdep.outputFile="$dir/classpath.txt" >"$dir/fetch.log" 2>&1; then
    tail -20 "$dir/fetch.log" >&2
    die "could not fetch rocketmq-proxy $VERSION (log: $dir/fetch.log)"
  fi
  grep -q "rocketmq-proxy-$VERSION.jar" "$dir/classpath.txt" \
    || die "the resolved class path lacks rocketmq-proxy-$VERSION.jar"
  touch "$dir/.complete"
  echo "$dir/classpath.txt"
}

# wait_cluster NAMESRV CLUSTER: until the name server lists a broker of CLUSTER (bounded):
# the proxy creates its heartbeat-syncer topic on the cluster at start-up and exits when the
# cluster has no broker yet ("create system broadcast topic ... failed on cluster").
wait_cluster() {
  PYTHONPATH="$HERE/../python" timeout "$START_TIMEOUT_S" python3 - "$1" "$2" <<'PY' \
    || die "the name server $1 lists no broker of cluster $2 within ${START_TIMEOUT_S}s"
import sys, time
import remoting
namesrv, cluster = sys.argv[1], sys.argv[2]
while True:
    try:
        header, body = remoting.invoke(namesrv, 106, {})  # GET_BROKER_CLUSTER_INFO
        if header.get("code") == 0 and ('"%s"' % cluster).encode() in body:
            sys.exit(0)
    except remoting.RemotingError:
        pass
    time.sleep(0.5)
PY
}

start() {
  local namesrv="" dir="" cluster=DefaultCluster
  while (($#)); do
    case "$1" in
      --namesrv) namesrv="$2"; shift 2 ;;
      --dir) dir="$2"; shift 2 ;;
      --cluster) cluster="$2"; shift 2 ;;
      *) die "unknown start option $1" ;;
    esac
  done
  [[ -n "$namesrv" && -n "$dir" ]] || die "start needs --namesrv and --dir"
  command -v "$JAVA" >/dev/null || die "java (17) is required"
  local cp_file; cp_file="$(fetch)"
  wait_cluster "$namesrv" "$cluster"
  mkdir -p "$dir/conf"
  local grpc_port remoting_port
  grpc_port="$(free_port)"
  remoting_port="$(free_port)"
  [[ "$grpc_port" != "$remoting_port" ]] || remoting_port="$(free_port)"
  # Cluster mode: the proxy speaks remoting to the brokers it finds through the name server.
  # The caches of topic routes and configurations are refreshed every 20 s by default; a new
  # topic is loaded at its first use, which the scenarios make after creating it.
  cat >"$dir/conf/rmq-proxy.json" <<EOF
{
  "rocketMQClusterName": "$cluster",
  "namesrvAddr": "$namesrv",
  "proxyMode": "cluster",
  "grpcServerPort": $grpc_port,
  "remotingListenPort": $remoting_port,
  "grpcThreadPoolNums": 16,
  "grpcWorkerLoopNum": 2,
  "rocketmqMQClientNum": 2,
  "grpcShutdownTimeSeconds": 3
}
EOF
  # Small heap (the CI machine has 2 cores); user.home and RMQ_PROXY_HOME point into DIR
  # because the proxy's logback configuration writes under ${user.home}/logs.
  (cd "$dir" && RMQ_PROXY_HOME="$dir" exec setsid "$JAVA" -server -Xms256m -Xmx512m \
    -XX:+UseG1GC -XX:MaxDirectMemorySize=256m -XX:-OmitStackTraceInFastThrow \
    --add-opens=java.base/java.nio=ALL-UNNAMED --add-opens=java.base/sun.nio.ch=ALL-UNNAMED \
    --add-opens=java.base/java.lang=ALL-UNNAMED \
    -Duser.home="$dir" -Drocketmq.home.dir="$dir" \
    -cp "$(cat "$cp_file")" org.apache.rocketmq.proxy.ProxyStartup \
    -pc "$dir/conf/rmq-proxy.json" -pm cluster -n "$namesrv" \
    >"$dir/proxy.out" 2>&1 </dev/null) &
  local pid=$!
  echo "$pid" >"$dir/proxy.pid"
  wait_port "$pid" "$grpc_port" "the proxy" "$dir/proxy.out"
  local deadline=$((SECONDS + START_TIMEOUT_S))
  until grep -q 'rocketmq-proxy startup successfully' "$dir/proxy.out" 2>/dev/null; do
    if ! kill -0 "$pid" 2>/dev/null; then
      tail -30 "$dir/proxy.out" >&2
      die "the proxy exited during start-up"
    fi
    ((SECONDS < deadline)) || die "the proxy did not log its start within ${START_TIMEOUT_S}s"
    sleep 0.2
  done
  log "up (pid $pid, gRPC 127.0.0.1:$grpc_port, remoting $remoting_port, name server $namesrv)"
  echo "$grpc_port $remoting_port"
}

stop() {
  local dir=""
  while (($#)); do
    case "$1" in
      --dir) dir="$2"; shift 2 ;;
      *) die "unknown stop option $1" ;;
    esac
  done
  [[ -n "$dir" ]] || die "stop needs --dir"
  [[ -f "$dir/proxy.pid" ]] || return 0
  local pid; pid="$(cat "$dir/proxy.pid")"
  # Not our child here when called from another shell: stop_pid's wait then returns at once,
  # after the bounded TERM / KILL.
  stop_pid "$pid" "the proxy" || true
  rm -f "$dir/proxy.pid"
}

cmd="${1:-}"
shift || true
case "$cmd" in
  fetch) fetch ;;
  start) start "$@" ;;
  stop) stop "$@" ;;
  *) die "usage: proxy.sh fetch | start --namesrv HOST:PORT --dir DIR [--cluster NAME]" \
       "| stop --dir DIR" ;;
esac
