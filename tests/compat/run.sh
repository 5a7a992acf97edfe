#!/usr/bin/env bash
# Runs the compatibility suites (real RocketMQ clients and tools) against one broker.
#
#   run.sh --namesrv 127.0.0.1:9876 [--broker 127.0.0.1:10911]   a broker already running
#   run.sh --against apache [--flush SYNC_FLUSH|ASYNC_FLUSH]      Apache RocketMQ's Java broker
#   run.sh --against comet [--flush ...]                          target/release/comet-broker
#   common: [--suites java5,java4,admin5,admin4,go,python,node-cpp,node-ons,rust,acl5,acl4,ha,
#            tls5,failover,proxy]
#           [--keep-logs] [--acl-namesrv HOST:PORT]
#           [--only step,...]   (java5/java4 only: just these scenarios; the results of the
#                                suites' other steps are kept as they are in RESULTS.md)
#   (python: C++ client 1.x via PyPI; node-cpp, node-ons: C++ client 3.0 and ali-ons via npm;
#   rust: rocketmq-client-rust 1.0, built once per machine into a per-user cache, see
#   rust/run.sh; the first build is long)
#   opt-in suite: reverse (comet-client and comet-bench; meant for --against apache)
#   proxy (the 5.x gRPC SDKs, Java, Python and Node.js, through Apache RocketMQ's proxy 5.x
#   in cluster mode, which proxy/run.sh starts in front of the broker on free loopback ports;
#   see proxy/run.sh): in the default list with --against comet, named otherwise
#   acl5, acl4 (Java clients 5.x / 4.9.x signing with AclClientRPCHook) need a broker with
#   aclEnable=true and the accounts of java/acl/plain_acl.yml: with --against comet a second
#   Comet broker is started so (own name server and broker ports, free ones picked at start),
#   leaving the first, open broker to the other suites; otherwise give --acl-namesrv. They are
#   in the default suite list with --against comet only.
#   ha (Java clients 5.x and 4.9.x and mqadmin against a Comet SYNC_MASTER and its slave, then
#   the slave alone, see ha/run.sh) starts its own name server, master and slave from
#   target/release (comet-nameserver, comet-broker, comet-admin) on free loopback ports. It
#   is in the default suite list with --against comet only, and refused with --against apache.
#   tls5 (Java client 5.x with -Dtls.enable=true, checking the certificate against a CA) starts
#   its own Comet broker with tls.server.mode=enforcing and a certificate openssl makes at run
#   time; in the default suite list with --against comet only, refused with --against apache.
#   failover (Java clients 5.x and 4.9.x, then the Go client, each across a SIGKILL of a
#   master in controller mode, see failover/run.sh) starts its own name server with its controller and two brokers from
#   target/release; it runs only with --against comet, and is in its default suite list.
#
# COMET_BROKER_BIN names another comet-broker binary for --against comet (a build elsewhere).
# --flush defaults to ASYNC_FLUSH for apache and to the broker's own default for comet.
# --against starts the broker bound to 127.0.0.1 only (name server :9876, broker :10911) in a
# temporary folder, runs the suites and stops it, whatever happens. A missing prerequisite
# (java, mvn, go, python3, node, npm, cargo, the comet-broker binary) fails the run: nothing
# is ever skipped silently.
# Prints a summary table and "N passed, N failed" over all scenarios; exits 1 when any
# scenario or suite failed, 2 on bad arguments. A run with --against also writes each step's
# result into tests/compat/RESULTS.md (COMPAT_RESULTS_FILE to write elsewhere; see
# tools/results.py); a failure to write it is a warning, never a failed run.
# COMPAT_FAILED_SUITES_FILE names a file that receives the ids of the suites that failed, comma
# separated (empty when none did), so a caller can run those again with --suites.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"

NAMESRV=""
BROKER=""
AGAINST=""
FLUSH=""
SUITES="java5,java4,admin5,admin4,go,python,node-cpp,node-ons,rust"
SUITES_GIVEN=0
ACL_NAMESRV=""
KEEP=0
ONLY=""
NAMESRV_PORT=9876
BROKER_PORT=10911
START_TIMEOUT_S=90
# The suites test the protocol, not disk space: on a build machine whose disk compiler output
# fills past the default 90%, the brokers must not refuse the suites' few MiB of messages.
COMET_DISK_ARGS=(-o diskSpaceWarningLevelRatio=98)

die() { echo "compat: error: $1" >&2; exit "${2:-1}"; }

while (($#)); do
  case "$1" in
    --namesrv) NAMESRV="$2"; shift 2 ;;
    --broker) BROKER="$2"; shift 2 ;;
    --against) AGAINST="$2"; shift 2 ;;
    --flush) FLUSH="$2"; shift 2 ;;
    --suites) SUITES="$2"; SUITES_GIVEN=1; shift 2 ;;
    --acl-namesrv) ACL_NAMESRV="$2"; shift 2 ;;
    --keep-logs) KEEP=1; shift ;;
    --only) ONLY="$2"; shift 2 ;;
    -h|--help) sed -n '2,44p' "$0"; exit 0 ;;
    *) die "unknown option $1 (see --help)" 2 ;;
  esac
done
if [[ -n "$AGAINST" && -n "$NAMESRV" ]]; then die "give --namesrv or --against, not both" 2; fi
if [[ -z "$AGAINST" && -z "$NAMESRV" ]]; then die "give --namesrv HOST:PORT or --against apache|comet" 2; fi

if [[ -n "$ONLY" ]]; then
  [[ "$SUITES_GIVEN" == 1 ]] || die "--only needs --suites (java5 and/or java4)" 2
  IFS=',' read -r -a only_suites <<<"$SUITES"
  for s in "${only_suites[@]}"; do
    [[ "$s" == java5 || "$s" == java4 ]] || die "--only is for the java5 and java4 suites, not $s" 2
  done
fi
if [[ "$AGAINST" == comet && "$SUITES_GIVEN" == 0 ]]; then
  SUITES="$SUITES,acl5,acl4,ha,tls5,failover,proxy"
fi
if [[ -z "$AGAINST" && ",$SUITES," == *,tls5,* ]]; then
  die "the tls5 suite starts its own TLS broker: give --against comet" 2
fi
if [[ "$AGAINST" == apache && ",$SUITES," == *,tls5,* ]]; then
  die "the tls5 suite starts a Comet broker with TLS; it does not run with --against apache" 2
fi
if [[ "$AGAINST" == apache && ",$SUITES," == *,ha,* ]]; then
  die "the ha suite tests Comet's own master and slave; it does not run with --against apache" 2
fi
if [[ "$AGAINST" != comet && ",$SUITES," == *,failover,* ]]; then
  die "the failover suite tests Comet's brokers in controller mode: give --against comet" 2
fi
WANT_ACL=0
[[ ",$SUITES," == *,acl5,* || ",$SUITES," == *,acl4,* ]] && WANT_ACL=1
if ((WANT_ACL)) && [[ -z "$ACL_NAMESRV" && "$AGAINST" != comet ]]; then
  die "the acl5/acl4 suites need --against comet (which starts an ACL broker) or --acl-namesrv" 2
fi

WORK="$(mktemp -d "${TMPDIR:-/tmp}/comet-compat.XXXXXX")"
BROKER_PID=""
ACL_BROKER_PID=""
TLS_BROKER_PID=""
cleanup() {
  local rc=$?
  case "$AGAINST" in
    apache) "$HERE/apache/broker.sh" stop --dir "$WORK/apache" $( ((KEEP)) && echo --keep) || true ;;
    comet) stop_comet; stop_pid "$ACL_BROKER_PID"; stop_pid "$TLS_BROKER_PID" ;;
  esac
  if ((KEEP)); then echo "compat: logs kept in $WORK" >&2; else rm -rf "$WORK"; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

start_comet() {
  local bin="${COMET_BROKER_BIN:-$REPO/target/release/comet-broker}"
  [[ -x "$bin" ]] || die "the Comet broker binary is missing: $bin
  build it first with: cargo build --release -p comet-broker"
  local p
  for p in "$NAMESRV_PORT" "$BROKER_PORT"; do
    port_open "$p" && die "port $p on 127.0.0.1 is already in use (another broker running?)"
  done
  mkdir -p "$WORK/comet"
  # shellcheck disable=SC2086 # COMET_BROKER_ARGS holds extra flags, split on purpose
  local flush=()
  [[ -n "$FLUSH" ]] && flush=(--flush "$FLUSH")
  # The store path is given absolute and explicit, inside this run's temporary folder (early
  # brokers failed to open a relative one under io_uring).
  (cd "$WORK/comet" && exec setsid "$bin" --standalone --bind-address 127.0.0.1 \
    --store "$WORK/comet/store" "${flush[@]}" "${COMET_DISK_ARGS[@]}" \
    -o enablePropertyFilter=true ${COMET_BROKER_ARGS:-} \
    >"$WORK/comet/broker.out" 2>&1 </dev/null) &
  BROKER_PID=$!
  wait_listening "$BROKER_PID" "$NAMESRV_PORT" "$BROKER_PORT" "$WORK/comet/broker.out" comet-broker
  echo "compat: comet-broker up (pid $BROKER_PID, dir $WORK/comet)" >&2
}

# wait_listening PID NAMESRV_PORT BROKER_PORT OUTPUT NAME: waits (at most START_TIMEOUT_S)
# until both ports accept connections; stops the run with the broker's last output if it exits.
wait_listening() {
  local pid="$1" namesrv_port="$2" broker_port="$3" output="$4" name="$5"
  local deadline=$((SECONDS + START_TIMEOUT_S))
  until port_open "$namesrv_port" && port_open "$broker_port"; do
    if ! kill -0 "$pid" 2>/dev/null; then
      tail -30 "$output" >&2 || true
      die "$name exited during start-up (output above)"
    fi
    ((SECONDS < deadline)) || die "$name not listening on $namesrv_port and $broker_port after ${START_TIMEOUT_S}s"
    sleep 0.2
  done
}

stop_pid() {
  local pid="$1"
  [[ -n "$pid" ]] || return 0
  kill -TERM "$pid" 2>/dev/null || true
  local deadline=$((SECONDS + 30))
  while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.2; done
  if kill -0 "$pid" 2>/dev/null; then
    echo "compat: comet-broker $pid ignored TERM for 30 s; killing it" >&2
    kill -KILL "$pid" 2>/dev/null || true
  fi
  wait "$pid" 2>/dev/null || true
}

stop_comet() {
  stop_pid "$BROKER_PID"
  BROKER_PID=""
}

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# Every broker started on a free listen port gets a free HA port too: a master listens for
# slaves on haListenPort from its start, and the default (listen port + 1) may be taken.

# A second Comet broker for the acl suites: aclEnable=true with java/acl/plain_acl.yml, its
# own embedded name server, one shard, on free loopback ports.
start_comet_acl() {
  local bin="${COMET_BROKER_BIN:-$REPO/target/release/comet-broker}"
  local namesrv_port broker_port
  namesrv_port="$(free_port)"
  broker_port="$(free_port)"
  mkdir -p "$WORK/comet-acl"
  (cd "$WORK/comet-acl" && exec setsid "$bin" --standalone --bind-address 127.0.0.1 \
    --namesrv "127.0.0.1:$namesrv_port" --listen-port "$broker_port" --cores 1 --no-pin \
    --store "$WORK/comet-acl/store" -o aclEnable=true "${COMET_DISK_ARGS[@]}" \
    -o "haListenPort=$(free_port)" \
    -o "plainAclFile=$HERE/java/acl/plain_acl.yml" \
    >"$WORK/comet-acl/broker.out" 2>&1 </dev/null) &
  ACL_BROKER_PID=$!
  wait_listening "$ACL_BROKER_PID" "$namesrv_port" "$broker_port" "$WORK/comet-acl/broker.out" \
    "the ACL comet-broker"
  ACL_NAMESRV="127.0.0.1:$namesrv_port"
  echo "compat: ACL comet-broker up (pid $ACL_BROKER_PID, name server $ACL_NAMESRV)" >&2
}

# A third Comet broker for the tls5 suite: tls.server.mode=enforcing (its embedded name server
# too) with a CA and a server certificate for 127.0.0.1 made here with openssl (no key is
# kept), one shard, on free loopback ports.
start_comet_tls() {
  local bin="${COMET_BROKER_BIN:-$REPO/target/release/comet-broker}" dir="$WORK/comet-tls"
  local namesrv_port broker_port
  namesrv_port="$(free_port)"
  broker_port="$(free_port)"
  mkdir -p "$dir"
  command -v openssl >/dev/null || die "the tls5 suite needs openssl to make its certificates"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
    -subj "/CN=Comet compat CA" -keyout "$dir/ca.key" -out "$dir/ca.pem" >/dev/null 2>&1
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=127.0.0.1" \
    -keyout "$dir/server.key" -out "$dir/server.csr" >/dev/null 2>&1
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' >"$dir/san.ext"
  openssl x509 -req -in "$dir/server.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" \
    -CAcreateserial -days 2 -extfile "$dir/san.ext" -out "$dir/server.pem" >/dev/null 2>&1
  (cd "$dir" && exec setsid "$bin" --standalone --bind-address 127.0.0.1 \
    --namesrv "127.0.0.1:$namesrv_port" --listen-port "$broker_port" --cores 1 --no-pin \
    --store "$dir/store" "${COMET_DISK_ARGS[@]}" -o tls.server.mode=enforcing \
    -o "haListenPort=$(free_port)" \
    -o "tls.server.certPath=$dir/server.pem" -o "tls.server.keyPath=$dir/server.key" \
    >"$dir/broker.out" 2>&1 </dev/null) &
  TLS_BROKER_PID=$!
  wait_listening "$TLS_BROKER_PID" "$namesrv_port" "$broker_port" "$dir/broker.out" \
    "the TLS comet-broker"
  TLS_NAMESRV="127.0.0.1:$namesrv_port"
  TLS_CA="$dir/ca.pem"
  echo "compat: TLS comet-broker up (pid $TLS_BROKER_PID, name server $TLS_NAMESRV)" >&2
}

case "$AGAINST" in
  "") ;;
  apache)
    FLUSH="${FLUSH:-ASYNC_FLUSH}"
    # Checked here too: a busy port otherwise surfaces as a Java bind stack trace.
    for p in "$NAMESRV_PORT" "$BROKER_PORT"; do
      port_open "$p" && die "port $p on 127.0.0.1 is already in use (another broker running?)"
    done
    "$HERE/apache/broker.sh" start --dir "$WORK/apache" --flush "$FLUSH" \
      --namesrv-port "$NAMESRV_PORT" --broker-port "$BROKER_PORT"
    NAMESRV="127.0.0.1:$NAMESRV_PORT"; BROKER="127.0.0.1:$BROKER_PORT" ;;
  comet)
    start_comet
    if ((WANT_ACL)) && [[ -z "$ACL_NAMESRV" ]]; then start_comet_acl; fi
    if [[ ",$SUITES," == *,tls5,* ]]; then start_comet_tls; fi
    NAMESRV="127.0.0.1:$NAMESRV_PORT"; BROKER="127.0.0.1:$BROKER_PORT" ;;
  *) die "--against must be apache or comet" 2 ;;
esac
BROKER="${BROKER:-${NAMESRV%:*}:$BROKER_PORT}"

# suite id -> command line
suite_cmd() {
  case "$1" in
    java5) echo "$HERE/java/run.sh --client 5 --suite clients --namesrv $NAMESRV${ONLY:+ --only $ONLY}" ;;
    java4) echo "$HERE/java/run.sh --client 4 --suite clients --namesrv $NAMESRV${ONLY:+ --only $ONLY}" ;;
    admin5) echo "$HERE/java/run.sh --client 5 --suite admin --namesrv $NAMESRV" ;;
    admin4) echo "$HERE/java/run.sh --client 4 --suite admin --namesrv $NAMESRV" ;;
    go) echo "$HERE/go/run.sh --namesrv $NAMESRV --broker $BROKER" ;;
    python) echo "$HERE/python/run.sh --namesrv $NAMESRV --broker $BROKER" ;;
    node-cpp) echo "$HERE/node/run.sh --client cpp --namesrv $NAMESRV --broker $BROKER" ;;
    node-ons) echo "$HERE/node/run.sh --client ons --namesrv $NAMESRV --broker $BROKER" ;;
    rust) echo "$HERE/rust/run.sh --namesrv $NAMESRV" ;;
    reverse) echo "$HERE/reverse/run.sh --namesrv $NAMESRV" ;;
    proxy) echo "$HERE/proxy/run.sh --namesrv $NAMESRV --dir $WORK/proxy" ;;
    acl5) echo "$HERE/java/run.sh --client 5 --suite acl --namesrv ${ACL_NAMESRV:-unset}" ;;
    acl4) echo "$HERE/java/run.sh --client 4 --suite acl --namesrv ${ACL_NAMESRV:-unset}" ;;
    ha) echo "$HERE/ha/run.sh --dir $WORK/ha" ;;
    failover) echo "$HERE/failover/run.sh --dir $WORK/failover" ;;
    tls5) echo "$HERE/java/run.sh --client 5 --suite clients --namesrv ${TLS_NAMESRV:-unset} --tls-ca ${TLS_CA:-unset} --only producer_sync,push_clustering_concurrently,lite_pull_subscribe" ;;
    *) return 1 ;;
  esac
}
suite_title() {
  case "$1" in
    java5) echo "Java rocketmq-client 5.x" ;;
    java4) echo "Java rocketmq-client 4.9.x" ;;
    admin5) echo "mqadmin (rocketmq-tools 5.x)" ;;
    admin4) echo "mqadmin (rocketmq-tools 4.9.x)" ;;
    go) echo "Go rocketmq-client-go v2" ;;
    python) echo "C++ client 1.x (Python binding)" ;;
    node-cpp) echo "C++ client 3.0 (rocketmq-nodejs)" ;;
    node-ons) echo "ali-ons (pure JavaScript)" ;;
    rust) echo "Rust rocketmq-client-rust 1.0" ;;
    reverse) echo "comet-client + comet-bench" ;;
    proxy) echo "5.x gRPC SDKs via Apache proxy" ;;
    acl5) echo "Java 5.x signed (plain ACL)" ;;
    acl4) echo "Java 4.9.x signed (plain ACL)" ;;
    ha) echo "Master and slave (Java, mqadmin)" ;;
    failover) echo "Controller-mode failover (Java, Go)" ;;
    tls5) echo "Java 5.x over TLS (enforcing)" ;;
  esac
}

RESULTS_FILE="${COMPAT_RESULTS_FILE:-$HERE/RESULTS.md}"

# Writes this run's results into RESULTS_FILE (runs that started their own broker only): the
# date, and the commit (with "+changes" when tracked files other than the results differ).
write_results() {
  if [[ -z "$AGAINST" ]]; then
    echo "compat: results not recorded: this run did not start its broker" >&2
    return 0
  fi
  local commit changes
  commit="$(git -C "$REPO" rev-parse --short=12 HEAD 2>/dev/null)" || commit=unknown
  changes="$(git -C "$REPO" status --porcelain --untracked-files=no -- . \
    ':!tests/compat/RESULTS.md' 2>/dev/null)" || changes=""
  if [[ -n "$changes" && "$commit" != unknown ]]; then commit="$commit+changes"; fi
  python3 "$HERE/tools/results.py" --results "$RESULTS_FILE" --target "$AGAINST" \
    --run-dir "$WORK" --suites "$SUITES" --date "$(date -u +%Y-%m-%d)" --commit "$commit" \
    ${ONLY:+--only "$ONLY"}
}

IFS=',' read -r -a SUITE_LIST <<<"$SUITES"
for s in "${SUITE_LIST[@]}"; do suite_cmd "$s" >/dev/null || die "unknown suite $s" 2; done

total_pass=0
total_fail=0
rows=()
failed_suites=()
for s in "${SUITE_LIST[@]}"; do
  log="$WORK/$s.log"
  echo "== $(suite_title "$s")"
  start=$SECONDS
  set +e
  # shellcheck disable=SC2046
  $(suite_cmd "$s") 2>"$WORK/$s.err" | tee "$log"
  rc=${PIPESTATUS[0]}
  set -e
  echo "$rc" >"$WORK/$s.rc"
  secs=$((SECONDS - start))
  pass=$(grep -c '^PASS ' "$log" || true)
  fail=$(grep -c '^FAIL ' "$log" || true)
  status=ok
  if ((rc != 0 || fail > 0 || pass == 0)); then
    status=FAILED
    failed_suites+=("$s")
    # A suite that crashed or ran nothing counts as one failure even without FAIL lines.
    ((fail > 0)) || fail=1
    echo "-- $(suite_title "$s") exited $rc; its stderr ends with:"
    tail -20 "$WORK/$s.err" | sed 's/^/   /'
  fi
  total_pass=$((total_pass + pass))
  total_fail=$((total_fail + fail))
  rows+=("$(printf '%-32s %6d %6d %6ds  %s' "$(suite_title "$s")" "$pass" "$fail" "$secs" "$status")")
done

echo
echo "== compatibility summary (name server $NAMESRV${AGAINST:+, against $AGAINST}${FLUSH:+, $FLUSH})"
printf '%-32s %6s %6s %7s  %s\n' suite passed failed time status
for r in "${rows[@]}"; do echo "$r"; done
echo "compat: $total_pass passed, $total_fail failed"
write_results || echo "compat: warning: $RESULTS_FILE was not updated (error above)" >&2
if [[ -n "${COMPAT_FAILED_SUITES_FILE:-}" ]]; then
  (IFS=','; echo "${failed_suites[*]}") >"$COMPAT_FAILED_SUITES_FILE"
fi
((total_fail == 0))
