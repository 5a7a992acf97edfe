#!/usr/bin/env bash
# Builds and runs the Go client scenarios against a running name server.
#
#   go/run.sh --namesrv 127.0.0.1:9876 [--broker 127.0.0.1:10911] [--only a,b]
#
# The broker address is where topics are created (the Go admin API needs it); it defaults
# to the name server's host with port 10911. Prints PASS/FAIL per scenario and
# "N passed, N failed"; exits non-zero when any scenario fails.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
command -v go >/dev/null || { echo "go/run.sh: the Go toolchain (go) is required" >&2; exit 1; }
(cd "$HERE" && timeout 600 go build -o bin/compat-go .) \
  || { echo "go/run.sh: building the Go scenarios failed" >&2; exit 1; }
exec timeout -k 10 600 "$HERE/bin/compat-go" "$@"
