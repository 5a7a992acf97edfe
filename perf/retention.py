#!/usr/bin/env python3
"""Helpers of perf/retention.sh.

  retention.py ports                 two free loopback ports for a broker (listenPort, with
                                     listenPort + 1 free too) and one for its name server
  retention.py serve LOG -- CMD...   starts the broker CMD (stdout and stderr into LOG), then
                                     times, on a monotonic clock from just before the exec,
                                     the listener opening, the first successful send and the
                                     first successful pull (PROBE_SEND and PROBE_PULL, shell
                                     commands retried until they succeed); prints
                                     `pid port_s send_s pull_s attempts` (pull_s is the time
                                     to serve again: a send and then a pull have succeeded),
                                     or `pid - - - attempts` if SERVE_LIMIT_S passed first
  retention.py probe                 one send then one pull on a running broker, timed (the
                                     probes' own cost: the floor under every serve time)
  retention.py table TSV             the run's table (markdown) from its TSV of figures
"""

import os
import socket
import subprocess
import sys
import time

# Between failed probes: short against the seconds measured, long enough not to spin.
RETRY_PAUSE_S = 0.05


def free_port(pair):
    """A loopback port free now (and its successor too with `pair`)."""
    for _ in range(200):
        with socket.socket() as first:
            first.bind(("127.0.0.1", 0))
            port = first.getsockname()[1]
            if not pair:
                return port
            if port >= 65535:
                continue
            with socket.socket() as second:
                try:
                    second.bind(("127.0.0.1", port + 1))
                except OSError:
                    continue
                return port
    raise SystemExit("retention.py: no free loopback port pair found")


def ports():
    broker = free_port(pair=True)
    namesrv = free_port(pair=False)
    while namesrv in (broker, broker + 1):
        namesrv = free_port(pair=False)
    print(broker, namesrv)


def port_open(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


def succeeds(command, expect):
    """Runs a probe shell command; true when it exits 0 (and prints `expect`, if given)."""
    done = subprocess.run(command, shell=True, capture_output=True, text=True, check=False)
    return done.returncode == 0 and (expect is None or expect in done.stdout)


def serve(log_path, command):
    send = os.environ["PROBE_SEND"]
    pull = os.environ["PROBE_PULL"]
    expect = os.environ.get("PROBE_PULL_EXPECT")
    port = int(os.environ["PROBE_PORT"])
    limit_s = float(os.environ.get("SERVE_LIMIT_S", "600"))
    log = open(log_path, "ab")
    start = time.monotonic()
    broker = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                              stdin=subprocess.DEVNULL)
    deadline = start + limit_s
    port_s = send_s = pull_s = None
    attempts = 0

    def alive():
        return broker.poll() is None

    while alive() and time.monotonic() < deadline and port_s is None:
        if port_open(port):
            port_s = time.monotonic() - start
        else:
            time.sleep(RETRY_PAUSE_S)
    while alive() and time.monotonic() < deadline and port_s is not None and send_s is None:
        attempts += 1
        if succeeds(send, None):
            send_s = time.monotonic() - start
        else:
            time.sleep(RETRY_PAUSE_S)
    while alive() and time.monotonic() < deadline and send_s is not None and pull_s is None:
        attempts += 1
        if succeeds(pull, expect):
            pull_s = time.monotonic() - start
        else:
            time.sleep(RETRY_PAUSE_S)

    def shown(value):
        return "-" if value is None else f"{value:.3f}"

    if not alive():
        print(f"retention.py: the broker exited with {broker.returncode}", file=sys.stderr)
    print(broker.pid, shown(port_s), shown(send_s), shown(pull_s), attempts)


def probe():
    expect = os.environ.get("PROBE_PULL_EXPECT")
    start = time.monotonic()
    if not succeeds(os.environ["PROBE_SEND"], None):
        raise SystemExit("retention.py: the probe send failed on a running broker")
    sent = time.monotonic()
    if not succeeds(os.environ["PROBE_PULL"], expect):
        raise SystemExit("retention.py: the probe pull failed on a running broker")
    print(f"{sent - start:.3f} {time.monotonic() - sent:.3f}")


def table(path):
    import csv
    with open(path, newline="") as source:
        rows = list(csv.DictReader(source, delimiter="\t"))
    columns = ["store", "phase", "figure", "value", "unit", "loadavg", "utc"]
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    for row in rows:
        print("| " + " | ".join(row[c] for c in columns) + " |")
    print()
    for line in summary(rows):
        print(line)


def summary(rows):
    """The issue's goals against the figures (large store against the baseline)."""
    value = {}
    for row in rows:
        value[(row["store"], row["phase"], row["figure"])] = row["value"]

    def number(store, phase, figure):
        try:
            return float(value[(store, phase, figure)])
        except (KeyError, ValueError):
            return None

    lines = []
    held = {s: number(s, "after fill", "messages_held") for s in ("large", "baseline")}
    lines.append(f"- Messages held: large {held['large']:.0f}, baseline {held['baseline']:.0f}"
                 if None not in held.values() else "- Messages held: not measured")
    for phase in ("start", "after fill", "restart after SIGTERM", "restart after SIGKILL"):
        large = number("large", phase, "VmRSS")
        base = number("baseline", phase, "VmRSS")
        if large is None or base is None or base == 0:
            continue
        verdict = "within" if large <= 1.10 * base else "NOT within"
        lines.append(f"- VmRSS {phase}: {large:.1f} MiB against {base:.1f} MiB, "
                     f"{large / base:.2f}x ({verdict} the goal of 1.10x)")
    parts = ("LogChunks", "ReadWindows", "ConsumeQueueCache", "ConsumeQueueTails", "KeyIndex")
    for store in ("baseline", "large"):
        held = [number(store, "after fill", "store_" + part) for part in parts]
        if None in held:
            continue
        listed = ", ".join(f"{part} {mib:.1f}" for part, mib in zip(parts, held))
        lines.append(f"- Store structures after the fill, {store}: {sum(held):.1f} MiB "
                     f"({listed})")
    for phase in ("restart after SIGTERM", "restart after SIGKILL"):
        for store in ("large", "baseline"):
            serve_s = number(store, phase, "serve_again")
            if serve_s is None:
                continue
            goal = ""
            if phase.endswith("SIGKILL"):
                goal = " (goal < 5 s: " + ("met" if serve_s < 5 else "NOT met") + ")"
            lines.append(f"- Time to serve again, {store}, {phase}: {serve_s:.2f} s{goal}")
    ratio = number("large", "drain alone", "drain_vs_fio")
    if ratio is not None:
        verdict = "met" if ratio >= 0.8 else "NOT met"
        lines.append(f"- Drain from the oldest message: {ratio:.3f}x fio's sequential direct "
                     f"read (goal >= 0.8x: {verdict})")
    alone = number("large", "producer alone", "send_p999")
    during = number("large", "producer during drain", "send_p999")
    if alone and during is not None:
        lines.append(f"- Producer p99.9: {alone / 1000:.2f} ms alone, {during / 1000:.2f} ms "
                     f"during the drain ({during / alone:.2f}x)")
    return lines


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "ports":
        ports()
    elif len(sys.argv) >= 5 and sys.argv[1] == "serve" and sys.argv[3] == "--":
        serve(sys.argv[2], sys.argv[4:])
    elif len(sys.argv) == 2 and sys.argv[1] == "probe":
        probe()
    elif len(sys.argv) == 3 and sys.argv[1] == "table":
        table(sys.argv[2])
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
