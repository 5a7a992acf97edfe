#!/usr/bin/env bash
# Installs (once) and runs the C++ client 1.x scenarios, through its Python binding, against
# a running name server.
#
#   python/run.sh --namesrv 127.0.0.1:9876 [--broker 127.0.0.1:10911] [--only a,b]
#
# The first run makes a virtual environment in python/.cache/venv (git-ignored) and installs
# rocketmq-client-python 0.5.0rc2 from PyPI into it; its manylinux x86_64 wheel bundles the
# native librocketmq.so, so nothing is compiled. The client's own logs go to a temporary HOME
# (kept with KEEP_LOGS=1). Prints PASS/FAIL per scenario and "N passed, N failed"; exits
# non-zero when any scenario fails or a prerequisite is missing.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PKG="rocketmq-client-python==0.5.0rc2"
VENV="$HERE/.cache/venv"
INSTALL_TIMEOUT_S=300

die() { echo "python/run.sh: $1" >&2; exit 1; }
command -v python3 >/dev/null || die "python3 is required"
[[ "$(uname -sm)" == "Linux x86_64" ]] \
  || die "the $PKG wheel bundles librocketmq.so for Linux x86_64 only (this is $(uname -sm))"

if ! "$VENV/bin/python" -c 'import rocketmq.client' 2>/dev/null; then
  echo "python/run.sh: installing $PKG into $VENV" >&2
  rm -rf "$VENV"
  mkdir -p "$HERE/.cache"
  python3 -m venv "$VENV" || die "python3 -m venv failed (install the venv module)"
  timeout "$INSTALL_TIMEOUT_S" "$VENV/bin/pip" install --quiet --disable-pip-version-check "$PKG" \
    || die "pip install $PKG failed"
  "$VENV/bin/python" -c 'import rocketmq.client' \
    || die "$PKG installed but its native library does not load"
fi

LOGHOME="$(mktemp -d "${TMPDIR:-/tmp}/compat-py.XXXXXX")"
if [[ "${KEEP_LOGS:-0}" == 1 ]]; then
  echo "python/run.sh: client logs kept in $LOGHOME/logs" >&2
else
  trap 'rm -rf "$LOGHOME"' EXIT
fi
# The C++ client writes its logs under $HOME/logs/rocketmq-cpp.
cd "$HERE"
HOME="$LOGHOME" timeout -k 10 900 "$VENV/bin/python" "$HERE/compat_py.py" "$@"
