#!/usr/bin/env bash
# Browser test of Comet's web console (docs/operations.md#web-console): starts a standalone
# broker with the console on, on free loopback ports, and drives every page in Debian's
# headless Chromium through playwright-core (pinned in package-lock.json; it never downloads
# a browser), checking what the pages show and saving a screenshot of each under
# docs/console/. Always stops what it started.
#
# Usage: tests/console/run.sh [--release]   (the debug build by default)
# Needs: cargo, node with npm, and Chromium at $CHROMIUM (default /usr/bin/chromium, Debian's
# `chromium` package).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
ROOT=$(pwd)

PROFILE=debug
if [[ "${1:-}" == --release ]]; then
    PROFILE=release
fi
CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
if [[ ! -x "$CHROMIUM" ]]; then
    echo "console test: no Chromium at $CHROMIUM (apt-get install chromium)" >&2
    exit 1
fi

if [[ "$PROFILE" == debug ]]; then
    # The binaries as the workspace's tests build them: after the quick tier
    # (tests/run-all.sh) nothing, where building the three packages alone would resolve
    # their dependencies' features apart and recompile most of the tree.
    cargo test --workspace --no-run
else
    cargo build --release -p comet-broker -p comet-tools -p comet-bench
fi
BIN_DIR="${CARGO_TARGET_DIR:-$ROOT/target}/$PROFILE"
(cd tests/console && npm ci --no-audit --no-fund --loglevel=error)

WORK=$(mktemp -d "${TMPDIR:-/tmp}/comet-console.XXXXXX")
BROKER_PID=
cleanup() {
    if [[ -n "$BROKER_PID" ]] && kill -0 "$BROKER_PID" 2>/dev/null; then
        kill "$BROKER_PID"
        wait "$BROKER_PID" 2>/dev/null || true
    fi
    rm -rf "$WORK"
}
trap cleanup EXIT

# A port nothing listens on now (the kernel's pick for a socket bound to port 0).
free_port() {
    node -e 'const s = require("net").createServer().listen(0, "127.0.0.1", () => {
        console.log(s.address().port); s.close(); });'
}
NAMESRV_PORT=$(free_port)
BROKER_PORT=$(free_port)
HA_PORT=$(free_port)
CONSOLE_PORT=$(free_port)

"$BIN_DIR/comet-broker" --standalone --no-pin --cores 2 --bind-address 127.0.0.1 \
    --listen-port "$BROKER_PORT" --namesrv "127.0.0.1:$NAMESRV_PORT" --store "$WORK/store" \
    -o "haListenPort=$HA_PORT" -o "consoleListenPort=$CONSOLE_PORT" \
    -o "mappedFileSizeCommitLog=67108864" >"$WORK/broker.log" 2>&1 &
BROKER_PID=$!

# Up when the console answers (the name server and broker listen before it is spawned).
up=0
for _ in $(seq 1 120); do
    if node -e 'fetch(process.argv[1]).then((r) => process.exit(r.ok ? 0 : 1),
            () => process.exit(1))' "http://127.0.0.1:$CONSOLE_PORT/api/cluster" 2>/dev/null; then
        up=1
        break
    fi
    if ! kill -0 "$BROKER_PID" 2>/dev/null; then
        echo "console test: the broker exited" >&2
        cat "$WORK/broker.log" >&2
        exit 1
    fi
    sleep 0.5
done
if [[ $up != 1 ]]; then
    echo "console test: the console did not answer within 60 s" >&2
    cat "$WORK/broker.log" >&2
    exit 1
fi

status=0
CONSOLE_URL="http://127.0.0.1:$CONSOLE_PORT/" NAMESRV="127.0.0.1:$NAMESRV_PORT" \
    BROKER_ADDR="127.0.0.1:$BROKER_PORT" BIN_DIR="$BIN_DIR" SHOTS_DIR="$ROOT/docs/console" \
    CHROMIUM="$CHROMIUM" node tests/console/console.test.mjs || status=$?
if [[ $status -ne 0 ]]; then
    echo "console test failed; the broker's log:" >&2
    tail -n 50 "$WORK/broker.log" >&2
fi
exit $status
