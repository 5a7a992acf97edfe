#!/usr/bin/env bash
# Builds (if needed) and runs the Java scenarios against a running name server.
#
#   java/run.sh --namesrv 127.0.0.1:9876 [--client 5|4] [--suite clients|admin|acl] [--only a,b]
#   java/run.sh --namesrv 127.0.0.1:9876 [--client 5|4] --suite ha -- --phase ... (HaSuite's)
#   java/run.sh --namesrv 127.0.0.1:9876 --tls-ca ca.pem [...]   (the clients speak TLS)
#
# --suite clients (default): the client scenarios (dev.comet.compat.Main);
# --suite admin: RocketMQ's admin CLI, mqadmin, with its output checked (AdminSuite);
# --suite acl: clients signing with AclClientRPCHook (AclSuite), against a broker started with
# aclEnable=true and the accounts of acl/plain_acl.yml;
# --suite ha: one phase of the master-and-slave suite (HaSuite), which ../ha/run.sh drives;
# the arguments after -- go to HaSuite.
# --tls-ca FILE: the clients speak TLS (-Dtls.enable=true) and check the server's certificate
# against the PEM CA FILE (-Dtls.test.mode.enable=false -Dtls.client.authServer=true
# -Dtls.client.trustCertPath=FILE), for a broker with tls.server.mode=enforcing.
# --client 5 (default) uses the current 5.x rocketmq-client, --client 4 the last 4.9.x
# (Maven profile rocketmq4). Prints PASS/FAIL per scenario and "N passed, N failed";
# exits non-zero when any scenario fails. Client logs go to a temporary folder that is
# removed afterwards unless KEEP_LOGS=1.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
NAMESRV=""
CLIENT=5
SUITE=clients
TLS_CA=""
ARGS=()
while (($#)); do
  case "$1" in
    --namesrv) NAMESRV="$2"; shift 2 ;;
    --client) CLIENT="$2"; shift 2 ;;
    --suite) SUITE="$2"; shift 2 ;;
    --tls-ca) TLS_CA="$2"; shift 2 ;;
    --only|--scenario-timeout-s) ARGS+=("$1" "$2"); shift 2 ;;
    --) shift; ARGS+=("$@"); break ;;
    *) echo "java/run.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
[[ -n "$NAMESRV" ]] || { echo "java/run.sh: --namesrv HOST:PORT is required" >&2; exit 2; }
case "$CLIENT" in
  5) OUT="$HERE/target/rmq5" ;;
  4) OUT="$HERE/target/rmq4" ;;
  *) echo "java/run.sh: --client must be 5 or 4" >&2; exit 2 ;;
esac
case "$SUITE" in
  clients) MAIN=dev.comet.compat.Main ;;
  admin) MAIN=dev.comet.compat.AdminSuite; ((${#ARGS[@]} == 0)) || { echo "java/run.sh: --only is for the clients suite" >&2; exit 2; } ;;
  acl) MAIN=dev.comet.compat.AclSuite; ((${#ARGS[@]} == 0)) || { echo "java/run.sh: --only is for the clients suite" >&2; exit 2; } ;;
  ha) MAIN=dev.comet.compat.HaSuite ;;
  *) echo "java/run.sh: --suite must be clients, admin, acl or ha" >&2; exit 2 ;;
esac
command -v mvn >/dev/null || { echo "java/run.sh: Maven (mvn) is required" >&2; exit 1; }
command -v java >/dev/null || { echo "java/run.sh: java (17) is required" >&2; exit 1; }

"$HERE/build.sh" "$CLIENT" >&2
TMP="$(mktemp -d "${TMPDIR:-/tmp}/compat-java.XXXXXX")"
cleanup() { if [[ "${KEEP_LOGS:-0}" == 1 ]]; then echo "client logs kept in $TMP" >&2; else rm -rf "$TMP"; fi; }
trap cleanup EXIT
# The 4.9.x admin tool reads its logging set-up from $ROCKETMQ_HOME/conf/logback_tools.xml.
mkdir -p "$TMP/conf"
cat >"$TMP/conf/logback_tools.xml" <<'XML'
<configuration>
  <appender name="FILE" class="ch.qos.logback.core.FileAppender">
    <file>${user.home}/logs/tools.log</file>
    <encoder><pattern>%d %p %t - %m%n</pattern></encoder>
  </appender>
  <root level="INFO"><appender-ref ref="FILE"/></root>
</configuration>
XML
# The 4.9.x remoting code logs through slf4j/logback, to the console unless configured.
EXTRA=()
[[ "$CLIENT" == 4 ]] && EXTRA+=(-Dlogback.configurationFile="$TMP/conf/logback_tools.xml")
# Java's TlsSystemConfig reads these system properties once, when the client first loads it.
if [[ -n "$TLS_CA" ]]; then
  EXTRA+=(-Dtls.enable=true -Dtls.test.mode.enable=false -Dtls.client.authServer=true
    -Dtls.client.trustCertPath="$TLS_CA")
fi
# The admin suite and the compression scenarios also run comet-admin, the release build of
# this workspace (COMET_ADMIN_BIN names a build elsewhere).
EXTRA+=(-Dcomet.admin="${COMET_ADMIN_BIN:-$HERE/../../../target/release/comet-admin}")
# Each scenario is bounded (150 s) inside; the whole run is bounded here at 15 min (it needs
# one to three), the last line of defence against a hang.
timeout -k 10 900 java -Xms128m -Xmx512m "${EXTRA[@]}" \
  -Drocketmq.log.root="$TMP/logs" -Drocketmq.client.logRoot="$TMP/logs" \
  -Drocketmq.client.localOffsetStoreDir="$TMP/offsets" -Duser.home="$TMP" \
  -Drocketmq.home.dir="$TMP" \
  -cp "$OUT/classes:$(cat "$OUT/classpath.txt")" "$MAIN" \
  --namesrv "$NAMESRV" "${ARGS[@]}"
