#!/usr/bin/env python3
"""A master's replication lag, read with GET_BROKER_HA_STATUS (request code 907).

  ha_lag.py wait ADDR [--timeout-s S]         exit 0 once every log of the master at ADDR
                                              has a slave in sync; 1 at the deadline
  ha_lag.py sample ADDR OUT [--interval-ms M] append one line per sample to OUT until
                                              SIGTERM/SIGINT: "<unix ms>\\t<lag bytes>\\t
                                              <lag ms>\\t<note>"
  ha_lag.py summary TSV...                    "<samples>\\t<bytes p50>\\t<bytes p99>\\t<ms p50>
                                              \\t<ms p99>\\t<missed>" over the files' samples

One TCP connection speaks RocketMQ's remoting protocol (JSON headers), the same request
`comet-admin ha-status` and `mqadmin haStatus` send. A Comet master answers each log's lag
(`logs[].slaves[]`: bytes written here beyond the slave's durable end, and how long it has
held bytes the slave lacks); a sample is the sum of the logs' lag bytes and the largest lag
in ms. A Java master answers Java's `HARuntimeInfo` only: `haConnectionInfo[].diff` (its
commit log's end minus the slave's acknowledged offset) is the lag in bytes, and it has no
lag in time ("-"). A sample without a slave on some log, or a failed request, is written
with the note "no-slave" / "error: ..." and no figures, and counted as missed.
"""

import json
import math
import signal
import socket
import struct
import sys
import time

GET_BROKER_HA_STATUS = 907
# Flag bit 0 marks a response (RemotingCommand's RPC_TYPE).
RESPONSE_FLAG = 1


class HaStatusError(Exception):
    """A request that did not get a usable answer."""


class Connection:
    """One remoting connection to a broker, reopened after any failure."""

    def __init__(self, addr, timeout_s=2.0):
        host, port = addr.rsplit(":", 1)
        self.target = (host, int(port))
        self.timeout_s = timeout_s
        self.sock = None
        self.opaque = 0

    def close(self):
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def _read_exact(self, count):
        chunks = []
        while count:
            chunk = self.sock.recv(count)
            if not chunk:
                raise HaStatusError("the broker closed the connection")
            chunks.append(chunk)
            count -= len(chunk)
        return b"".join(chunks)

    def ha_status(self):
        """The decoded HARuntimeInfo body of one GET_BROKER_HA_STATUS."""
        try:
            if self.sock is None:
                self.sock = socket.create_connection(self.target, timeout=self.timeout_s)
                self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.opaque += 1
            header = json.dumps({
                "code": GET_BROKER_HA_STATUS, "language": "JAVA", "version": 453,
                "opaque": self.opaque, "flag": 0, "extFields": {},
            }).encode()
            # Frame: total length, then the header length whose high byte is the header's
            # serialization (0 = JSON), then the header; this request has no body.
            self.sock.sendall(struct.pack(">II", 4 + len(header), len(header)) + header)
            while True:
                total, = struct.unpack(">I", self._read_exact(4))
                frame = self._read_exact(total)
                header_len = struct.unpack(">I", frame[:4])[0] & 0xFFFFFF
                answer = json.loads(frame[4:4 + header_len])
                body = frame[4 + header_len:]
                if answer.get("flag", 0) & RESPONSE_FLAG and answer.get("opaque") == self.opaque:
                    break
            if answer.get("code") != 0:
                raise HaStatusError(f"code {answer.get('code')}: {answer.get('remark')}")
            return json.loads(body)
        except (OSError, ValueError, struct.error) as error:
            self.close()
            raise HaStatusError(str(error)) from error
        except HaStatusError:
            self.close()
            raise


def lag(status):
    """(lag bytes, lag ms or None, note) of one answer; bytes None when no slave follows."""
    logs = status.get("logs") or []
    if logs:
        total_bytes, worst_ms = 0, 0
        for log in logs:
            slaves = log.get("slaves") or []
            if not slaves:
                return None, None, f"no-slave (log {log.get('logId')})"
            # With several slaves, the one furthest ahead is what a SYNC_MASTER waits for.
            best = min(slaves, key=lambda s: s.get("lagBytes", 0))
            total_bytes += int(best.get("lagBytes", 0))
            worst_ms = max(worst_ms, int(best.get("lagMillis", 0)))
        return total_bytes, worst_ms, "comet"
    connections = status.get("haConnectionInfo") or []
    if not connections:
        return None, None, "no-slave"
    return min(int(c.get("diff", 0)) for c in connections), None, "java"


def in_sync(status):
    logs = status.get("logs") or []
    if logs:
        return all(any(s.get("inSync") for s in log.get("slaves") or []) for log in logs)
    return any(c.get("inSync") for c in status.get("haConnectionInfo") or [])


def wait(addr, timeout_s):
    connection = Connection(addr)
    deadline = time.monotonic() + timeout_s
    last = "no answer"
    while time.monotonic() < deadline:
        try:
            status = connection.ha_status()
            if in_sync(status):
                return 0
            last = json.dumps(status)[:300]
        except HaStatusError as error:
            last = str(error)
        time.sleep(0.2)
    print(f"ha_lag: no slave in sync on {addr} after {timeout_s} s (last: {last})",
          file=sys.stderr)
    return 1


def sample(addr, out_path, interval_ms):
    stop = []
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.append(True))
    connection = Connection(addr)
    with open(out_path, "a", buffering=1) as out:
        next_at = time.monotonic()
        while not stop:
            now_ms = int(time.time() * 1000)
            try:
                lag_bytes, lag_ms, note = lag(connection.ha_status())
            except HaStatusError as error:
                lag_bytes, lag_ms, note = None, None, f"error: {error}"
            cells = ["-" if v is None else str(v) for v in (lag_bytes, lag_ms)]
            out.write(f"{now_ms}\t{cells[0]}\t{cells[1]}\t{note}\n")
            next_at += interval_ms / 1000
            pause = next_at - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            else:
                next_at = time.monotonic()
    connection.close()
    return 0


def percentile(values, pct):
    """Nearest-rank percentile; None without values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(pct / 100 * len(ordered)))
    return ordered[rank - 1]


def summarise(paths):
    """(samples, bytes p50, bytes p99, ms p50, ms p99, missed) over the files' samples."""
    lag_bytes, lag_ms, missed = [], [], 0
    for path in paths:
        with open(path) as handle:
            for text in handle:
                fields = text.rstrip("\n").split("\t")
                if len(fields) < 4 or fields[1] == "-":
                    missed += 1
                    continue
                lag_bytes.append(int(fields[1]))
                if fields[2] != "-":
                    lag_ms.append(int(fields[2]))
    return (len(lag_bytes), percentile(lag_bytes, 50), percentile(lag_bytes, 99),
            percentile(lag_ms, 50), percentile(lag_ms, 99), missed)


def main():
    args = sys.argv[1:]
    if len(args) >= 2 and args[0] == "wait":
        timeout_s = float(args[3]) if len(args) == 4 and args[2] == "--timeout-s" else 60.0
        return wait(args[1], timeout_s)
    if len(args) >= 3 and args[0] == "sample":
        interval_ms = 100
        if len(args) == 5 and args[3] == "--interval-ms":
            interval_ms = int(args[4])
        return sample(args[1], args[2], interval_ms)
    if len(args) >= 2 and args[0] == "summary":
        print("\t".join("-" if v is None else str(v) for v in summarise(args[1:])))
        return 0
    sys.exit(__doc__)


if __name__ == "__main__":
    sys.exit(main())
