#!/usr/bin/env bash
# Compiles the Java scenarios for one client generation: build.sh 5|4.
# Output goes to target/rmq5 or target/rmq4 (classes/ and classpath.txt for `java -cp`).
# Skips Maven when nothing under src/ nor the pom changed since the last good build.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
case "${1:-5}" in
  5) PROFILE=(); OUT="$HERE/target/rmq5" ;;
  4) PROFILE=(-Procketmq4); OUT="$HERE/target/rmq4" ;;
  *) echo "build.sh: 5 or 4" >&2; exit 2 ;;
esac
STAMP="$OUT/.built"
if [[ -f "$STAMP" && -f "$OUT/classpath.txt" ]] \
    && [[ -z "$(find "$HERE/src" "$HERE/pom.xml" -newer "$STAMP" -print -quit)" ]]; then
  exit 0
fi
LOG="$(mktemp)"
if ! timeout 900 mvn -B -q -f "$HERE/pom.xml" "${PROFILE[@]}" compile >"$LOG" 2>&1; then
  cat "$LOG" >&2; rm -f "$LOG"
  echo "build.sh: Maven build of the Java scenarios failed" >&2; exit 1
fi
rm -f "$LOG"
touch "$STAMP"
