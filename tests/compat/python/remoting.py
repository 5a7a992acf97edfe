#!/usr/bin/env python3
"""Minimal RocketMQ remoting client for the compatibility suites' setup steps.

The C++ and JavaScript clients under test have no admin API, so topics are created here,
with the standard library only, exactly as the Java admin tool does it:
UPDATE_AND_CREATE_TOPIC (17) to the broker, then GET_ROUTEINFO_BY_TOPIC (105) at the name
server until the route lists the queues. Nothing here is under test.

Frame layout (big-endian): total length u32 (everything after it), then u32 whose high byte
is the serialize type (0 = JSON) and whose low 24 bits are the header length, then the
header JSON, then the body.

Command line (used by the Node.js suites):
    remoting.py create-topic --namesrv HOST:PORT --broker HOST:PORT --topic NAME [--queues 4]
"""
import argparse
import json
import socket
import struct
import sys
import time

# Bounds for one frame read from a server: the route of one topic is a few hundred bytes.
MAX_FRAME_BYTES = 16 * 1024 * 1024
IO_TIMEOUT_S = 10.0
ROUTE_WAIT_S = 30.0


class RemotingError(Exception):
    """A request failed: connection, framing, or a non-zero response code."""


def _split(addr):
    host, _, port = addr.rpartition(":")
    if not host or not port.isdigit():
        raise RemotingError("bad address %r (want HOST:PORT)" % addr)
    return host, int(port)


def _read_exact(sock, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise RemotingError("connection closed after %d of %d bytes" % (len(buf), n))
        buf.extend(chunk)
    return bytes(buf)


def invoke(addr, code, ext_fields, body=b""):
    """Sends one request and returns (response header dict, response body bytes)."""
    header = json.dumps({"code": code, "language": "PYTHON", "version": 513, "opaque": 1,
                         "flag": 0, "extFields": ext_fields}).encode("utf-8")
    frame = struct.pack(">II", 4 + len(header) + len(body), len(header)) + header + body
    try:
        with socket.create_connection(_split(addr), timeout=IO_TIMEOUT_S) as sock:
            sock.sendall(frame)
            (total,) = struct.unpack(">I", _read_exact(sock, 4))
            if total < 4 or total > MAX_FRAME_BYTES:
                raise RemotingError("bad frame length %d from %s" % (total, addr))
            rest = _read_exact(sock, total)
    except OSError as e:
        raise RemotingError("request %d to %s: %s" % (code, addr, e)) from e
    (mark,) = struct.unpack(">I", rest[:4])
    header_len = mark & 0xFFFFFF
    if mark >> 24 != 0 or header_len > total - 4:
        raise RemotingError("unexpected header mark %#x from %s" % (mark, addr))
    try:
        resp = json.loads(rest[4:4 + header_len].decode("utf-8"))
    except ValueError as e:
        raise RemotingError("response header from %s is not JSON: %s" % (addr, e)) from e
    return resp, rest[4 + header_len:]


def create_topic(namesrv, broker, topic, queues=4):
    """Creates `topic` with `queues` read/write queues on `broker` and waits for its route."""
    resp, _ = invoke(broker, 17, {
        "topic": topic, "defaultTopic": "TBW102", "readQueueNums": str(queues),
        "writeQueueNums": str(queues), "perm": "6", "topicFilterType": "SINGLE_TAG",
        "topicSysFlag": "0", "order": "false",
    })
    if resp.get("code") != 0:
        raise RemotingError("create topic %s: code %s %s" % (topic, resp.get("code"), resp.get("remark")))
    deadline = time.monotonic() + ROUTE_WAIT_S
    last = None
    while time.monotonic() < deadline:
        resp, body = invoke(namesrv, 105, {"topic": topic})
        if resp.get("code") == 0:
            # Version 513 (5.x) asks for standard JSON: older requesters get fastjson's
            # unquoted numeric map keys, which json cannot read.
            try:
                route = json.loads(body.decode("utf-8"))
            except ValueError as e:
                raise RemotingError("route of %s is not JSON: %s" % (topic, e)) from e
            writable = sum(q.get("writeQueueNums", 0) for q in route.get("queueDatas", []))
            if writable >= queues:
                return
            last = "route has %d write queues" % writable
        else:
            last = "code %s %s" % (resp.get("code"), resp.get("remark"))
        time.sleep(0.1)
    raise RemotingError("route of new topic %s never appeared within %ds: %s" % (topic, ROUTE_WAIT_S, last))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    ct = sub.add_parser("create-topic")
    ct.add_argument("--namesrv", required=True)
    ct.add_argument("--broker", required=True)
    ct.add_argument("--topic", required=True)
    ct.add_argument("--queues", type=int, default=4)
    args = ap.parse_args()
    try:
        create_topic(args.namesrv, args.broker, args.topic, args.queues)
    except RemotingError as e:
        print("remoting.py: %s" % e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
