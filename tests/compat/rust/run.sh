#!/usr/bin/env bash
# Builds and runs the scenarios of the published Rust client (rocketmq-client-rust 1.0.0)
# against a running name server.
#
#   rust/run.sh --namesrv 127.0.0.1:9876 [--only rust_producer_sync,...]
#   rust/run.sh --build-only          build (or check the cached build) and stop
#
# The crate stays outside the Comet workspace (its dependency tree is large). Its build is
# cached per user, outside the checkout, so a fresh clone (as in CI) pays the cold build
# only once per machine and toolchain:
#   COMPAT_RUST_TARGET_DIR   cargo target folder
#                            (default ${XDG_CACHE_HOME:-$HOME/.cache}/comet/compat-rust-target)
#   COMPAT_RUST_BUILD_TIMEOUT_S   bound on the build (default 2400 s)
# The build always uses the committed Cargo.lock (--locked), and works offline once the
# crates are downloaded. Cargo's own fingerprints decide what is stale: a changed lock file,
# source file or toolchain rebuilds what it touches, never reuses old output.
# Prints PASS/FAIL per scenario and "N passed, N failed"; exits non-zero when any scenario
# fails, the build fails, or a prerequisite (cargo, a cache folder) is missing.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
BUILD_TIMEOUT_S="${COMPAT_RUST_BUILD_TIMEOUT_S:-2400}"
RUN_TIMEOUT_S=600

die() { echo "rust/run.sh: $1" >&2; exit 1; }

command -v cargo >/dev/null || die "the Rust toolchain (cargo) is required"
if [[ -n "${COMPAT_RUST_TARGET_DIR:-}" ]]; then
  TARGET="$COMPAT_RUST_TARGET_DIR"
elif [[ -n "${XDG_CACHE_HOME:-}" ]]; then
  TARGET="$XDG_CACHE_HOME/comet/compat-rust-target"
elif [[ -n "${HOME:-}" ]]; then
  TARGET="$HOME/.cache/comet/compat-rust-target"
else
  die "no cache folder for the build: set COMPAT_RUST_TARGET_DIR, XDG_CACHE_HOME or HOME"
fi
mkdir -p "$TARGET" || die "cannot create the build cache folder $TARGET"
export CARGO_TARGET_DIR="$TARGET"

build() {
  local start=$SECONDS
  # Download only what the lock file names and is not yet in cargo's cache (a no-op when
  # everything is there), then build without touching the network.
  (cd "$HERE" && timeout "$BUILD_TIMEOUT_S" cargo fetch --locked --quiet) \
    || die "fetching the locked crates of the Rust client scenarios failed"
  (cd "$HERE" && timeout "$BUILD_TIMEOUT_S" cargo build --locked --offline --quiet) \
    || die "building the Rust client scenarios failed (or passed ${BUILD_TIMEOUT_S} s); cache: $TARGET"
  echo "rust/run.sh: build took $((SECONDS - start)) s (cache: $TARGET)" >&2
}

if [[ "${1:-}" == "--build-only" ]]; then
  (($# == 1)) || die "--build-only takes no other argument"
  build
  exit 0
fi
build
exec timeout -k 10 "$RUN_TIMEOUT_S" "$TARGET/debug/compat-rust" "$@"
