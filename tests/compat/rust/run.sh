#!/usr/bin/env bash
# Builds and runs the scenarios of the published Rust client (rocketmq-client-rust 1.0.0)
# against a running name server.
#
#   rust/run.sh --namesrv 127.0.0.1:9876 [--only rust_producer_sync,...]
#
# The crate stays outside the Comet workspace (its dependency tree is large) and builds, with
# its committed Cargo.lock, into a target folder under the git-ignored cache
# (COMPAT_CACHE, default tests/compat/.cache), so only the first run pays the cold build
# (see the README's timings). Prints PASS/FAIL per scenario and "N passed, N failed"; exits
# non-zero when any scenario fails or the build fails.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE="${COMPAT_CACHE:-$HERE/../.cache}"
BUILD_TIMEOUT_S="${COMPAT_RUST_BUILD_TIMEOUT_S:-2400}"
command -v cargo >/dev/null || { echo "rust/run.sh: the Rust toolchain (cargo) is required" >&2; exit 1; }
mkdir -p "$CACHE"
export CARGO_TARGET_DIR="$CACHE/rust-target"
start=$SECONDS
(cd "$HERE" && timeout "$BUILD_TIMEOUT_S" cargo build --locked --quiet) \
  || { echo "rust/run.sh: building the Rust client scenarios failed (or passed ${BUILD_TIMEOUT_S}s)" >&2; exit 1; }
echo "rust/run.sh: build took $((SECONDS - start)) s" >&2
exec timeout -k 10 600 "$CARGO_TARGET_DIR/debug/compat-rust" "$@"
