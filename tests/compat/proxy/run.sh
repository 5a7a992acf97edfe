#!/usr/bin/env bash
# RocketMQ's 5.x gRPC SDKs through Apache RocketMQ's proxy (cluster mode) in front of the
# brokers a running name server knows.
#
#   proxy/run.sh --namesrv 127.0.0.1:9876 [--only a,b] [--dir DIR] [--cluster NAME]
#
# Starts the proxy (proxy.sh: rocketmq-proxy from Maven Central, free loopback gRPC and
# remoting ports), runs the scenarios of the Java SDK (rocketmq-client-java, java/), the
# Python SDK (PyPI rocketmq-python-client, python/) and the Node.js SDK (npm
# rocketmq-client-nodejs, node/) against its gRPC endpoint, and stops it whatever happens.
# Scenario names start with grpc_ (Java), py_ and node_; --only picks some (an SDK none of
# whose scenarios is named is not started). Topics and groups are created at the brokers
# through the name server (the Java harness's `setup`, the remoting admin API), with the
# 5.x message type each topic needs.
#
# --dir DIR keeps the proxy's state and the clients' logs there (the caller removes it);
# without it a temporary folder is used and removed unless KEEP_LOGS=1. --cluster is the
# brokers' cluster name (default DefaultCluster).
# First run: Maven resolves the proxy, the Java SDK and rocketmq-tools; a virtual environment
# in .cache/venv gets the Python SDK; npm ci installs node/package-lock.json into
# node/.cache/install (all git-ignored, reused afterwards).
# Prints PASS/FAIL per scenario and "N passed, N failed" per SDK; exits non-zero when any
# scenario fails or a prerequisite (java, mvn, python3, node, npm) is missing, 2 on bad
# arguments.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PY_PKG="rocketmq-python-client==5.1.2"
VENV="$HERE/.cache/venv"
NODE_CACHE="$HERE/node/.cache/install"
INSTALL_TIMEOUT_S=300
SDK_TIMEOUT_S=600

NAMESRV=""
ONLY=""
DIR=""
CLUSTER=DefaultCluster
die() { echo "proxy/run.sh: $1" >&2; exit 1; }
while (($#)); do
  case "$1" in
    --namesrv) NAMESRV="$2"; shift 2 ;;
    --only) ONLY="$2"; shift 2 ;;
    --dir) DIR="$2"; shift 2 ;;
    --cluster) CLUSTER="$2"; shift 2 ;;
    *) echo "proxy/run.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
[[ -n "$NAMESRV" ]] || { echo "proxy/run.sh: --namesrv HOST:PORT is required" >&2; exit 2; }
for tool in java mvn python3 node npm; do
  command -v "$tool" >/dev/null || die "$tool is required"
done

# only_for PREFIX: the --only names of one SDK, comma-joined ("" = all of them; "-" = none).
only_for() {
  [[ -z "$ONLY" ]] && { echo ""; return; }
  local picked
  picked="$(tr ',' '\n' <<<"$ONLY" | grep "^$1" | paste -sd, -)" || true
  echo "${picked:--}"
}
JAVA_ONLY="$(only_for grpc_)"
PY_ONLY="$(only_for py_)"
NODE_ONLY="$(only_for node_)"
if [[ -n "$ONLY" ]]; then
  unknown="$(tr ',' '\n' <<<"$ONLY" | grep -Ev '^(grpc|py|node)_' | paste -sd, -)" || true
  if [[ -n "$unknown" ]]; then
    echo "proxy/run.sh: unknown scenario(s) $unknown (names start with grpc_, py_ or node_)" >&2
    exit 2
  fi
fi

# The Java harness: compiled once, again when its sources or pom change.
build_java() {
  local stamp="$HERE/java/target/.built"
  if [[ -f "$stamp" && -f "$HERE/java/target/classpath.txt" ]] \
      && [[ -z "$(find "$HERE/java/src" "$HERE/java/pom.xml" -newer "$stamp" -print -quit)" ]]; then
    return 0
  fi
  local log; log="$(mktemp)"
  if ! timeout 900 mvn -B -q -f "$HERE/java/pom.xml" compile >"$log" 2>&1; then
    cat "$log" >&2; rm -f "$log"; die "Maven build of the Java scenarios failed"
  fi
  rm -f "$log"
  touch "$stamp"
}

install_python() {
  if "$VENV/bin/python" -c 'import sys, importlib.metadata as m, rocketmq
sys.exit(m.version("rocketmq-python-client") != sys.argv[1])' "${PY_PKG#*==}" 2>/dev/null; then
    return 0
  fi
  echo "proxy/run.sh: installing $PY_PKG into $VENV" >&2
  rm -rf "$VENV"; mkdir -p "$HERE/.cache"
  python3 -m venv "$VENV" || die "python3 -m venv failed (install the venv module)"
  timeout "$INSTALL_TIMEOUT_S" "$VENV/bin/pip" install --quiet --disable-pip-version-check \
    "$PY_PKG" || die "pip install $PY_PKG failed"
}

install_node() {
  if cmp -s "$HERE/node/package-lock.json" "$NODE_CACHE/package-lock.json" \
      && [[ -f "$NODE_CACHE/.complete" ]]; then
    return 0
  fi
  echo "proxy/run.sh: installing rocketmq-client-nodejs into $NODE_CACHE" >&2
  rm -rf "$NODE_CACHE"; mkdir -p "$NODE_CACHE"
  cp "$HERE/node/package.json" "$HERE/node/package-lock.json" "$NODE_CACHE/"
  (cd "$NODE_CACHE" && timeout "$INSTALL_TIMEOUT_S" npm ci --no-audit --no-fund --loglevel=error \
    >&2) || die "npm ci failed"
  touch "$NODE_CACHE/.complete"
}

OWN_DIR=0
if [[ -z "$DIR" ]]; then
  DIR="$(mktemp -d "${TMPDIR:-/tmp}/compat-proxy.XXXXXX")"
  OWN_DIR=1
fi
mkdir -p "$DIR/clients"
cleanup() {
  local rc=$?
  "$HERE/proxy.sh" stop --dir "$DIR/proxy" || true
  if ((OWN_DIR)); then
    if [[ "${KEEP_LOGS:-0}" == 1 ]]; then
      echo "proxy/run.sh: logs kept in $DIR" >&2
    else
      rm -rf "$DIR"
    fi
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

build_java
[[ "$PY_ONLY" == - ]] || install_python
[[ "$NODE_ONLY" == - ]] || install_node
CP="$HERE/java/target/classes:$(cat "$HERE/java/target/classpath.txt")"
# Client logs (the Java SDK under user.home/logs, the Python SDK under ~/logs) stay in DIR.
JAVA_CMD=(java -Xmx512m -Duser.home="$DIR/clients" -cp "$CP" dev.comet.compat.proxy.Main)

read -r GRPC_PORT _ < <("$HERE/proxy.sh" start --namesrv "$NAMESRV" --dir "$DIR/proxy" \
  --cluster "$CLUSTER")
[[ -n "${GRPC_PORT:-}" ]] || die "the proxy did not start (see above)"
ENDPOINT="127.0.0.1:$GRPC_PORT"

failed=0
# run_sdk NAME COMMAND...: one SDK's scenarios, bounded; returns their status (non-zero when
# any failed or the process died, which the caller counts as a failure).
run_sdk() {
  local name="$1"; shift
  local rc=0
  timeout -k 10 "$SDK_TIMEOUT_S" "$@" || rc=$?
  ((rc == 0)) || echo "proxy/run.sh: the $name scenarios exited $rc" >&2
  return "$rc"
}

RUN_ID="$(date +%s)"
# setup_for SDK: a NORMAL topic and a group for one SDK's scenarios; prints "TOPIC GROUP".
setup_for() {
  local topic="compat_proxy_$1_$RUN_ID" group="compat_proxy_$1_g_$RUN_ID"
  timeout 120 "${JAVA_CMD[@]}" setup --namesrv "$NAMESRV" --topic "$topic:NORMAL" \
    --group "$group" >&2 || return 1
  echo "$topic $group"
}

# sdk_script NAME PREFIX ONLY COMMAND...: one script SDK's scenarios on a topic and group of
# its own, output into DIR/PREFIX.out (printed after the Java scenarios, so lines never mix).
sdk_script() {
  local name="$1" prefix="$2" only="$3"; shift 3
  local topic group
  if ! read -r topic group < <(setup_for "$prefix"); then
    echo "FAIL ${prefix}_setup: could not create the $name scenarios' topic and group"
    return 1
  fi
  local args=(--endpoint "$ENDPOINT" --topic "$topic" --group "$group")
  [[ -z "$only" ]] || args+=(--only "$only")
  (cd "$DIR/clients" && HOME="$DIR/clients" run_sdk "$name" "$@" "${args[@]}")
}

# The Python and Node.js scenarios run beside the Java ones: all of them mostly wait for the
# broker (invisible durations, transaction checks), on topics and groups of their own.
pids=()
if [[ "$PY_ONLY" != - ]]; then
  sdk_script Python py "$PY_ONLY" "$VENV/bin/python" "$HERE/python/compat_grpc.py" \
    >"$DIR/py.out" 2>"$DIR/py.err" &
  pids+=("$!:py")
fi
if [[ "$NODE_ONLY" != - ]]; then
  NODE_PATH="$NODE_CACHE/node_modules" sdk_script Node.js node "$NODE_ONLY" node \
    "$HERE/node/compat_grpc.js" >"$DIR/node.out" 2>"$DIR/node.err" &
  pids+=("$!:node")
fi

if [[ "$JAVA_ONLY" != - ]]; then
  args=(--namesrv "$NAMESRV" --endpoint "$ENDPOINT")
  [[ -z "$JAVA_ONLY" ]] || args+=(--only "$JAVA_ONLY")
  run_sdk Java "${JAVA_CMD[@]}" "${args[@]}" || failed=1
fi
for entry in "${pids[@]}"; do
  wait "${entry%%:*}" || failed=1
  cat "$DIR/${entry#*:}.out"
  cat "$DIR/${entry#*:}.err" >&2
done
exit "$failed"
