#!/usr/bin/env bash
# SIGKILL durability soak (issue 25): runs comet-store's `sigkill_rounds` and comet-broker's
# `sigkill_under_sync_flush_load_loses_nothing_acknowledged` again and again, each run with a
# fresh random seed, until each test has been through at least ROUNDS kill rounds. Every run
# prints its seed (COMET_CRASH_SEED replays a run's kill moments; the kill still lands at a
# timing-dependent point of the load). The soak stops at the first failure and keeps that
# run's whole output; at the end it prints one summary line per test: rounds, acknowledged
# messages (summed from the tests' `crash round N: acknowledged X` lines) and lost (0: a run
# fails on any acknowledged message missing after a restart).
#
# Not run by CI: a thousand rounds take hours on a small machine.
#
# Usage: tests/soak/sigkill.sh [ROUNDS]          (default 1000)
# Environment:
#   SOAK_PROFILE=release|debug   build profile of the tests (default release)
#   SOAK_STORE_ROUNDS_PER_RUN    kill rounds per store run (default 20, the test's default;
#                                a run also needs over 1,000 acknowledged in all, so not 1)
#   SOAK_BROKER_ROUNDS_PER_RUN   kill rounds per broker run (default 10)
#   SOAK_ONLY=store|broker       run one of the two tests only
#   SOAK_DEADLINE=<epoch s>      stop starting new runs after this time (summary still printed)
#   SOAK_LOG_DIR                 where run outputs go (default a new temporary directory)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

rounds="${1:-1000}"
profile="${SOAK_PROFILE:-release}"
store_per_run="${SOAK_STORE_ROUNDS_PER_RUN:-20}"
broker_per_run="${SOAK_BROKER_ROUNDS_PER_RUN:-10}"
only="${SOAK_ONLY:-}"
deadline="${SOAK_DEADLINE:-}"
log_dir="${SOAK_LOG_DIR:-$(mktemp -d -t comet-soak.XXXXXX)}"
mkdir -p "$log_dir"
profile_flag=()
if [[ "$profile" == release ]]; then
    profile_flag=(--release)
elif [[ "$profile" != debug ]]; then
    echo "SOAK_PROFILE must be release or debug, not '$profile'" >&2
    exit 2
fi
for count in "$rounds" "$store_per_run" "$broker_per_run"; do
    if ! [[ "$count" =~ ^[1-9][0-9]*$ ]]; then
        echo "round counts must be positive numbers, not '$count'" >&2
        exit 2
    fi
done

store_test=(cargo test "${profile_flag[@]}" -p comet-store --test crash)
broker_test=(cargo test "${profile_flag[@]}" -p comet-broker --test crash)

# Builds one crash test and prints its executable: every run then executes that one build, so
# a source edit during a long soak neither changes what is tested nor waits for a rebuild.
build() {
    "$@" --no-run --message-format=json-render-diagnostics |
        grep '"kind":\["test"\]' | grep -o '"executable":"[^"]*"' | cut -d'"' -f4
}

echo "== building the crash tests ($profile)"
store_cmd=()
broker_cmd=()
if [[ "$only" != broker ]]; then
    store_cmd=("$(build "${store_test[@]}")" sigkill_rounds --exact --nocapture)
fi
if [[ "$only" != store ]]; then
    broker_cmd=("$(build "${broker_test[@]}")"
        sigkill_under_sync_flush_load_loses_nothing_acknowledged --exact --nocapture)
fi
for command in ${store_cmd[0]+"${store_cmd[0]}"} ${broker_cmd[0]+"${broker_cmd[0]}"}; do
    if [[ ! -x "$command" ]]; then
        echo "no test executable found in cargo's build output" >&2
        exit 2
    fi
done

# Per test: rounds done, messages acknowledged, runs.
declare -A done_rounds=([store]=0 [broker]=0)
declare -A acknowledged=([store]=0 [broker]=0)
declare -A runs=([store]=0 [broker]=0)

summary() {
    local test
    for test in store broker; do
        [[ -n "$only" && "$only" != "$test" ]] && continue
        echo "soak $test: rounds ${done_rounds[$test]}, runs ${runs[$test]}," \
            "acknowledged ${acknowledged[$test]}, lost $1"
    done
    echo "run outputs: $log_dir"
}

# One run of one test: prints its seed, keeps its output, adds its rounds and acks.
run_once() {
    local test="$1" per_run="$2"
    shift 2
    local seed=$(( (RANDOM << 45) ^ (RANDOM << 30) ^ (RANDOM << 15) ^ RANDOM | 1 ))
    local run="${runs[$test]}"
    local out="$log_dir/$test-$run-$seed.log"
    echo "$test run $run: seed $seed, $per_run rounds"
    if ! COMET_CRASH_SEED="$seed" COMET_CRASH_ROUNDS="$per_run" "$@" >"$out" 2>&1; then
        echo "FAILED: $test run $run, seed $seed (replay: COMET_CRASH_SEED=$seed" \
            "COMET_CRASH_ROUNDS=$per_run ${*})"
        echo "---- output ($out)"
        tail -n 60 "$out"
        summary "unknown (a run failed)"
        exit 1
    fi
    local ran acked
    ran=$(grep -cE '^crash round [0-9]+: acknowledged [0-9]+' "$out" || true)
    acked=$(grep -oE '^crash round [0-9]+: acknowledged [0-9]+' "$out" |
        awk '{ sum += $NF } END { print sum + 0 }')
    if [[ "$ran" -ne "$per_run" ]]; then
        echo "FAILED: $test run $run (seed $seed) reported $ran of $per_run rounds; see $out"
        summary "unknown (a run failed)"
        exit 1
    fi
    done_rounds[$test]=$(( done_rounds[$test] + ran ))
    acknowledged[$test]=$(( acknowledged[$test] + acked ))
    runs[$test]=$(( run + 1 ))
    rm -f "$out"
}

while :; do
    progressed=0
    if [[ -n "$deadline" && "$(date +%s)" -ge "$deadline" ]]; then
        echo "== deadline reached"
        break
    fi
    if [[ -n "${store_cmd[*]}" && "${done_rounds[store]}" -lt "$rounds" ]]; then
        run_once store "$store_per_run" "${store_cmd[@]}"
        progressed=1
    fi
    if [[ -n "${broker_cmd[*]}" && "${done_rounds[broker]}" -lt "$rounds" ]]; then
        run_once broker "$broker_per_run" "${broker_cmd[@]}"
        progressed=1
    fi
    [[ "$progressed" -eq 1 ]] || break
done
summary 0
