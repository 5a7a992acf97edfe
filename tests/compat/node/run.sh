#!/usr/bin/env bash
# Installs (once) and runs one of the npm clients' scenarios against a running name server.
#
#   node/run.sh --client cpp|ons --namesrv 127.0.0.1:9876 [--broker 127.0.0.1:10911] [--only a,b]
#
#   cpp  rocketmq-nodejs 1.1.2: the C++ client 3.0 as a prebuilt N-API addon (cpp.js)
#   ons  ali-ons 3.12.0: a pure JavaScript client (ons.js)
#
# The first run installs package-lock.json's exact versions with `npm ci` into node/.cache
# (git-ignored); later runs reuse it. Topics are created through ../python/remoting.py, so
# python3 is needed too. Client logs go to a temporary HOME (kept with KEEP_LOGS=1). Prints
# PASS/FAIL per scenario and "N passed, N failed"; exits non-zero when any scenario fails or a
# prerequisite is missing.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE="$HERE/.cache/install"
INSTALL_TIMEOUT_S=300

die() { echo "node/run.sh: $1" >&2; exit 1; }
[[ "${1:-}" == --client && -n "${2:-}" ]] || die "usage: node/run.sh --client cpp|ons --namesrv HOST:PORT ..."
case "$2" in
  cpp) SCRIPT=cpp.js ;;
  ons) SCRIPT=ons.js ;;
  *) die "--client must be cpp or ons" ;;
esac
shift 2
for tool in node npm python3; do
  command -v "$tool" >/dev/null || die "$tool is required"
done

# Reinstall whenever the lock file changed since the last install.
if ! cmp -s "$HERE/package-lock.json" "$CACHE/package-lock.json" || [[ ! -f "$CACHE/.complete" ]]; then
  echo "node/run.sh: installing the npm clients into $CACHE" >&2
  rm -rf "$CACHE"
  mkdir -p "$CACHE"
  cp "$HERE/package.json" "$HERE/package-lock.json" "$CACHE/"
  (cd "$CACHE" && timeout "$INSTALL_TIMEOUT_S" npm ci --no-audit --no-fund --loglevel=error) \
    || die "npm ci failed"
  touch "$CACHE/.complete"
fi

LOGHOME="$(mktemp -d "${TMPDIR:-/tmp}/compat-node.XXXXXX")"
if [[ "${KEEP_LOGS:-0}" == 1 ]]; then
  echo "node/run.sh: client logs kept in $LOGHOME" >&2
else
  trap 'rm -rf "$LOGHOME"' EXIT
fi
# The C++ client writes its logs under $HOME/logs/rocketmq-cpp, ali-ons under $HOME/logs.
cd "$HERE"
set +e
HOME="$LOGHOME" NODE_PATH="$CACHE/node_modules" timeout -k 10 900 node "$HERE/$SCRIPT" "$@" \
  | tee "$LOGHOME/out"
rc=${PIPESTATUS[0]}
set -e
# cpp.js ends itself with SIGKILL (exit 137) after its report (see hardExit there): then
# the closing line decides. Any other death leaves no such line and fails.
if [[ "$SCRIPT" == cpp.js && "$rc" == 137 ]]; then
  grep -Eq '^[1-9][0-9]* passed, 0 failed$' "$LOGHOME/out" && rc=0 || rc=1
fi
exit "$rc"
