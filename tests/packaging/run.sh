#!/usr/bin/env bash
# Packaging check (README "Packaging"): what an operator installs is what runs.
#
#  1. `cargo install --locked --path` of the four packages into a fresh root, as the README
#     says (the workspace's release build is reused, so this costs the link steps only).
#  2. The systemd units in docs/packaging/: `systemd-analyze verify` where the machine has
#     it, then each unit's own ExecStart line (read from the file, not copied here) run with
#     the installed binaries, as an unprivileged user, with the unit's locked-memory limit,
#     the unit's paths moved under a temporary root: /usr/local/bin to the install root,
#     /etc/comet and /var/lib/comet to folders of this run. The name server unit starts
#     first (as its After= orders them); the broker reads docs/packaging/broker.conf. The
#     installed comet-admin then sees the broker in clusterList, creates a topic, sends a
#     message and reads it back; SIGTERM (the unit's KillSignal) stops both with status 0
#     within the unit's TimeoutStopSec.
#  3. The Dockerfile: no container engine is needed here, so the image is not built. What
#     is checked is what the image holds and runs: every binary its build stage copies out
#     of target/release exists after the same cargo build, and its ENTRYPOINT and CMD (read
#     from the file) start a standalone broker as an unprivileged user, with the store
#     under the image's WORKDIR moved to a temporary folder, that stores and serves a
#     message.
#
# Ports: the units and the image use RocketMQ's fixed ports (9876, 10911, 10912). The
# compatibility suites use them too, so this runs before or after them, never beside them.
#
# Usage: tests/packaging/run.sh      (as root: it adds a system user `comet` if missing)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
repo=$(pwd)

work=$(mktemp -d -t comet-packaging.XXXXXX)
chmod 755 "$work"
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT

fail() {
    echo "packaging: FAIL: $*" >&2
    for log in "$work"/*.log; do
        [[ -f "$log" ]] || continue
        echo "---- $log (last 20 lines)" >&2
        tail -n 20 "$log" >&2
    done
    exit 1
}

# Polls a command until it succeeds, at most $1 seconds.
poll() {
    local limit_s=$1
    shift
    local deadline=$((SECONDS + limit_s))
    until "$@" >/dev/null 2>&1; do
        ((SECONDS < deadline)) || return 1
        sleep 0.2
    done
}

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
for port in 9876 10911 10912; do
    port_free "$port" || fail "port $port is in use (the compatibility suites' brokers?)"
done

echo "== packaging: cargo install --locked --path (broker, nameserver, tools, bench)"
root="$work/usr-local"
for package in broker nameserver tools bench; do
    CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$repo/target}" \
        cargo install --quiet --locked --path "$package" --root "$root" --force
done
for binary in comet-broker comet-nameserver comet-admin comet-bench; do
    [[ -x "$root/bin/$binary" ]] || fail "cargo install left no $root/bin/$binary"
done
admin="$root/bin/comet-admin"

id comet >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin comet

# A unit's value for a key (the last assignment wins, as in systemd).
unit_value() { sed -n "s/^$2=//p" "$1" | tail -n 1; }

# The unit's ExecStart with its paths moved under this run's folders.
exec_start() {
    unit_value "$1" ExecStart |
        sed -e "s#/usr/local/bin/#$root/bin/#g" \
            -e "s#/etc/comet/#$work/etc/#g" \
            -e "s#/var/lib/comet#$work/state#g"
}

# Starts a command line (one string, split on spaces) as user comet, in a folder, with the
# given locked-memory limit (prlimit's form; empty: the default); output to a log.
start_as_comet() {
    local log=$1 dir=$2 memlock=$3 words limit=()
    read -ra words <<<"$4"
    # A unit without LimitMEMLOCK= keeps the machine's default limit. Raising the hard limit
    # needs CAP_SYS_RESOURCE, which systemd has and a container may not: there the command
    # runs under the machine's limit, as it would in a container started without
    # --ulimit memlock.
    if [[ -n "$memlock" ]]; then
        if prlimit --memlock="$memlock" true 2>/dev/null; then
            limit=(prlimit --memlock="$memlock")
        else
            echo "packaging: this machine refuses memlock $memlock; running with $(ulimit -l) KiB"
        fi
    fi
    (cd "$dir" && exec "${limit[@]}" \
        setpriv --reuid=comet --regid=comet --init-groups "${words[@]}") >"$log" 2>&1 &
    pids+=($!)
}

# SIGTERM, then the exit status within the limit; fails on a timeout or a non-zero status.
stop_cleanly() {
    local pid=$1 limit_s=$2 what=$3 status=0
    kill -TERM "$pid"
    local deadline=$((SECONDS + limit_s))
    while kill -0 "$pid" 2>/dev/null; do
        ((SECONDS < deadline)) || fail "$what did not stop within ${limit_s} s of SIGTERM"
        sleep 0.2
    done
    wait "$pid" || status=$?
    ((status == 0)) || fail "$what exited with status $status after SIGTERM"
}

# The installed comet-admin stores a message in a new topic and reads it back.
send_and_read() {
    local namesrv=$1 topic=$2 body=$3
    poll 60 bash -c "'$admin' clusterList -n $namesrv | grep -q broker-a" ||
        fail "clusterList never showed broker-a"
    "$admin" updateTopic -n "$namesrv" -c DefaultCluster -t "$topic" -r 1 -w 1 >/dev/null ||
        fail "updateTopic $topic"
    poll 30 "$admin" sendMessage -n "$namesrv" -t "$topic" -p "$body" ||
        fail "sendMessage to $topic"
    local read
    read=$("$admin" consumeMessage -n "$namesrv" -t "$topic" -c 1) ||
        fail "consumeMessage from $topic"
    grep -q -- "$body" <<<"$read" || fail "consumeMessage did not return the body: $read"
}

echo "== packaging: systemd units"
units=(docs/packaging/comet-nameserver.service docs/packaging/comet-broker.service)
if command -v systemd-analyze >/dev/null; then
    # Verify against the installed binaries: the units name /usr/local/bin, so a copy with
    # the install root's paths is what can be checked on a machine without them there.
    mkdir -p "$work/units"
    for unit in "${units[@]}"; do
        sed "s#/usr/local/bin/#$root/bin/#g" "$unit" >"$work/units/$(basename "$unit")"
    done
    SYSTEMD_LOG_LEVEL=warning systemd-analyze verify --man=no "$work"/units/*.service \
        2>"$work/verify.log" || fail "systemd-analyze verify: $(cat "$work/verify.log")"
    # Warnings that point at the units themselves (not at the machine) fail too.
    if grep -E "comet-(broker|nameserver)\.service:[0-9]+" "$work/verify.log"; then
        fail "systemd-analyze verify warned about a unit"
    fi
else
    echo "packaging: systemd-analyze not installed; unit syntax not verified"
fi
for unit in "${units[@]}"; do
    for dir in $(unit_value "$unit" StateDirectory); do
        install -d -o comet -g comet "$work/state/${dir#comet}"
    done
done
install -d "$work/etc"
install -m 644 docs/packaging/broker.conf "$work/etc/broker.conf"

nameserver_unit=docs/packaging/comet-nameserver.service
broker_unit=docs/packaging/comet-broker.service
start_as_comet "$work/nameserver.log" "$work/state" "$(unit_value "$nameserver_unit" LimitMEMLOCK)" \
    "$(exec_start "$nameserver_unit")"
nameserver_pid=${pids[-1]}
poll 30 bash -c "(exec 3<>/dev/tcp/127.0.0.1/9876)" ||
    fail "the name server unit's command never listened"
memlock=$(unit_value "$broker_unit" LimitMEMLOCK)
[[ "$memlock" == infinity ]] && memlock=unlimited
start_as_comet "$work/broker.log" "$work/state" "$memlock" "$(exec_start "$broker_unit")"
broker_pid=${pids[-1]}
send_and_read 127.0.0.1:9876 PackagingUnitTopic "sent-through-the-units"
[[ -n "$(ls -A "$work/state/store")" ]] || fail "the broker unit's store folder is empty"
timeout_s=$(unit_value "$broker_unit" TimeoutStopSec)
stop_cleanly "$broker_pid" "$timeout_s" "the broker unit's command"
stop_cleanly "$nameserver_pid" 90 "the name server unit's command"
echo "packaging: units PASS"

echo "== packaging: Dockerfile"
build_line=$(sed -n '/^RUN cargo build/,/^    && mkdir/p' Dockerfile | tr -d '\\\n')
for package in $(grep -o -- '-p comet-[a-z]*' <<<"$build_line" | cut -d' ' -f2); do
    cargo metadata --no-deps --format-version 1 | grep -q "\"name\":\"$package\"" ||
        fail "the Dockerfile builds $package, which is not a package of the workspace"
done
for binary in $(sed -n '/cp target\/release/,/\/out\//p' Dockerfile | grep -o 'target/release/[a-z-]*'); do
    [[ -x "${CARGO_TARGET_DIR:-$repo/target}/release/${binary#target/release/}" ]] ||
        fail "the Dockerfile copies $binary, which the release build does not make"
done
# ENTRYPOINT and CMD are JSON arrays (exec form): their words, in order.
json_words() { sed -n "s/^$1 //p" Dockerfile | python3 -c 'import json,sys; print(" ".join(json.load(sys.stdin)))'; }
workdir=$(sed -n 's/^WORKDIR //p' Dockerfile | tail -n 1)
image_user=$(sed -n 's/^USER //p' Dockerfile | tail -n 1)
[[ "$image_user" == comet ]] || fail "the image runs as '$image_user', expected comet"
command_line="$(json_words ENTRYPOINT) $(json_words CMD)"
command_line=${command_line//$workdir/$work/image}
install -d -o comet -g comet "$work/image"
start_as_comet "$work/image.log" "$work/image" unlimited "$root/bin/$command_line"
image_pid=${pids[-1]}
send_and_read 127.0.0.1:9876 PackagingImageTopic "sent-to-the-image-command"
stop_cleanly "$image_pid" 120 "the image's command"
echo "packaging: Dockerfile PASS (image not built: no container engine is needed or used)"
