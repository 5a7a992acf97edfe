#!/usr/bin/env bash
# The quick tier: what a change must pass before anything slower runs. Formatting, lints with
# warnings as errors, and the workspace's tests (unit, end-to-end on loopback, and the tidy
# rules in tools/tests/tidy.rs). It needs only Rust; the compatibility tier (tests/run-all.sh)
# runs after it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

echo "== [$(date -u +%T)] quick tier: cargo fmt --check"
cargo fmt --all -- --check

echo "== [$(date -u +%T)] quick tier: clippy (warnings are errors)"
cargo clippy --workspace --all-targets -- -D warnings

echo "== [$(date -u +%T)] quick tier: workspace tests (with the tidy rules)"
cargo test --workspace
echo "== [$(date -u +%T)] quick tier passed"
