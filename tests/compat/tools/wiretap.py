#!/usr/bin/env python3
"""A recording TCP relay for the RocketMQ remoting protocol (standard library only).

It listens where clients expect the name server and broker, forwards every byte unchanged to
where they really listen, and writes one JSON line per remoting frame seen in either
direction: which port, which way, code, flag (response / oneway bits), opaque, language,
version, ext-field names and body length. `summary` then tallies the request codes per
port: what a real client actually asks a broker and name server, in what numbers.

  wiretap.py relay --map 127.0.0.1:9876=127.0.0.2:9876 --map 127.0.0.1:10911=127.0.0.2:10911 \
                   --out frames.jsonl [--seconds N]
  wiretap.py summary frames.jsonl

Frame layout (big-endian): total length u32 (excluding itself), then a u32 whose top byte is
the header serialization (0 JSON, 1 ROCKETMQ binary) and low 24 bits the header length, the
header, then the body. Only loopback addresses are accepted.
"""
import argparse
import asyncio
import json
import struct
import sys
import time
from collections import Counter

MAX_FRAME_BYTES = 64 * 1024 * 1024  # anything larger is not a frame we can trust

# Request code names (RocketMQ RequestCode, from the project's protocol reference).
CODE_NAMES = {
    10: "SEND_MESSAGE", 11: "PULL_MESSAGE", 12: "QUERY_MESSAGE", 13: "QUERY_BROKER_OFFSET", 14:
    "QUERY_CONSUMER_OFFSET", 15: "UPDATE_CONSUMER_OFFSET", 17: "UPDATE_AND_CREATE_TOPIC", 18:
    "UPDATE_AND_CREATE_TOPIC_LIST", 21: "GET_ALL_TOPIC_CONFIG", 22: "GET_TOPIC_CONFIG_LIST",
    23: "GET_TOPIC_NAME_LIST", 25: "UPDATE_BROKER_CONFIG", 26: "GET_BROKER_CONFIG", 27:
    "TRIGGER_DELETE_FILES", 28: "GET_BROKER_RUNTIME_INFO", 29: "SEARCH_OFFSET_BY_TIMESTAMP",
    30: "GET_MAX_OFFSET", 31: "GET_MIN_OFFSET", 32: "GET_EARLIEST_MSG_STORETIME", 33:
    "VIEW_MESSAGE_BY_ID", 34: "HEART_BEAT", 35: "UNREGISTER_CLIENT", 36:
    "CONSUMER_SEND_MSG_BACK", 37: "END_TRANSACTION", 38: "GET_CONSUMER_LIST_BY_GROUP", 39:
    "CHECK_TRANSACTION_STATE", 40: "NOTIFY_CONSUMER_IDS_CHANGED", 41: "LOCK_BATCH_MQ", 42:
    "UNLOCK_BATCH_MQ", 43: "GET_ALL_CONSUMER_OFFSET", 45: "GET_ALL_DELAY_OFFSET", 46:
    "CHECK_CLIENT_CONFIG", 47: "GET_CLIENT_CONFIG", 60: "GET_TIMER_CHECK_POINT", 61:
    "GET_TIMER_METRICS", 100: "PUT_KV_CONFIG", 101: "GET_KV_CONFIG", 102: "DELETE_KV_CONFIG",
    103: "REGISTER_BROKER", 104: "UNREGISTER_BROKER", 105: "GET_ROUTEINFO_BY_TOPIC", 106:
    "GET_BROKER_CLUSTER_INFO", 200: "UPDATE_AND_CREATE_SUBSCRIPTIONGROUP", 201:
    "GET_ALL_SUBSCRIPTIONGROUP_CONFIG", 202: "GET_TOPIC_STATS_INFO", 203:
    "GET_CONSUMER_CONNECTION_LIST", 204: "GET_PRODUCER_CONNECTION_LIST", 205:
    "WIPE_WRITE_PERM_OF_BROKER", 206: "GET_ALL_TOPIC_LIST_FROM_NAMESERVER", 207:
    "DELETE_SUBSCRIPTIONGROUP", 208: "GET_CONSUME_STATS", 209: "SUSPEND_CONSUMER", 210:
    "RESUME_CONSUMER", 211: "RESET_CONSUMER_OFFSET_IN_CONSUMER", 212:
    "RESET_CONSUMER_OFFSET_IN_BROKER", 213: "ADJUST_CONSUMER_THREAD_POOL", 214:
    "WHO_CONSUME_THE_MESSAGE", 215: "DELETE_TOPIC_IN_BROKER", 216: "DELETE_TOPIC_IN_NAMESRV",
    217: "REGISTER_TOPIC_IN_NAMESRV", 219: "GET_KVLIST_BY_NAMESPACE", 220:
    "RESET_CONSUMER_CLIENT_OFFSET", 221: "GET_CONSUMER_STATUS_FROM_CLIENT", 222:
    "INVOKE_BROKER_TO_RESET_OFFSET", 223: "INVOKE_BROKER_TO_GET_CONSUMER_STATUS", 224:
    "GET_TOPICS_BY_CLUSTER", 225: "UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST", 300:
    "QUERY_TOPIC_CONSUME_BY_WHO", 301: "REGISTER_FILTER_SERVER", 302:
    "REGISTER_MESSAGE_FILTER_CLASS", 303: "QUERY_CONSUME_TIME_SPAN", 304:
    "GET_SYSTEM_TOPIC_LIST_FROM_NS", 305: "GET_SYSTEM_TOPIC_LIST_FROM_BROKER", 306:
    "CLEAN_EXPIRED_CONSUMEQUEUE", 307: "GET_CONSUMER_RUNNING_INFO", 308:
    "QUERY_CORRECTION_OFFSET", 309: "CONSUME_MESSAGE_DIRECTLY", 310: "SEND_MESSAGE_V2", 311:
    "GET_UNIT_TOPIC_LIST", 312: "GET_HAS_UNIT_SUB_TOPIC_LIST", 313:
    "GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST", 314: "CLONE_GROUP_OFFSET", 315:
    "VIEW_BROKER_STATS_DATA", 316: "CLEAN_UNUSED_TOPIC", 317: "GET_BROKER_CONSUME_STATS", 318:
    "UPDATE_NAMESRV_CONFIG", 319: "GET_NAMESRV_CONFIG", 320: "SEND_BATCH_MESSAGE", 321:
    "QUERY_CONSUME_QUEUE", 322: "QUERY_DATA_VERSION", 323: "RESUME_CHECK_HALF_MESSAGE", 324:
    "SEND_REPLY_MESSAGE", 325: "SEND_REPLY_MESSAGE_V2", 326: "PUSH_REPLY_MESSAGE_TO_CLIENT",
    327: "ADD_WRITE_PERM_OF_BROKER", 328: "GET_ALL_PRODUCER_INFO", 329:
    "DELETE_EXPIRED_COMMITLOG", 343: "QUERY_TOPICS_BY_CONSUMER", 345:
    "QUERY_SUBSCRIPTION_BY_CONSUMER", 351: "GET_TOPIC_CONFIG", 352:
    "GET_SUBSCRIPTIONGROUP_CONFIG", 353: "UPDATE_AND_GET_GROUP_FORBIDDEN", 354:
    "CHECK_ROCKSDB_CQ_WRITE_PROGRESS", 355: "EXPORT_ROCKSDB_CONFIG_TO_JSON", 361:
    "LITE_PULL_MESSAGE", 370: "RECALL_MESSAGE", 400: "QUERY_ASSIGNMENT", 401:
    "SET_MESSAGE_REQUEST_MODE", 402: "GET_ALL_MESSAGE_REQUEST_MODE", 513:
    "UPDATE_AND_CREATE_STATIC_TOPIC", 901: "GET_BROKER_MEMBER_GROUP", 902: "ADD_BROKER", 903:
    "REMOVE_BROKER", 904: "BROKER_HEARTBEAT", 905: "NOTIFY_MIN_BROKER_ID_CHANGE", 906:
    "EXCHANGE_BROKER_HA_INFO", 907: "GET_BROKER_HA_STATUS", 908: "RESET_MASTER_FLUSH_OFFSET",
    200050: "POP_MESSAGE", 200051: "ACK_MESSAGE", 200151: "BATCH_ACK_MESSAGE", 200052:
    "PEEK_MESSAGE", 200053: "CHANGE_MESSAGE_INVISIBLETIME", 200054: "NOTIFICATION", 200055:
    "POLLING_INFO", 200056: "POP_ROLLBACK"
}


def parse_header(kind, raw):
    """Decodes a header: JSON (kind 0) or the ROCKETMQ binary form (kind 1)."""
    if kind == 0:
        h = json.loads(raw.decode("utf-8", "replace"))
        return {"code": h.get("code"), "flag": h.get("flag", 0), "opaque": h.get("opaque"),
                "language": h.get("language"), "version": h.get("version"),
                "ext": sorted((h.get("extFields") or {}).keys()),
                "remark": (h.get("remark") or "")[:120]}
    code, lang, version, opaque, flag = struct.unpack_from(">hbhii", raw, 0)
    pos = 13
    (remark_len,) = struct.unpack_from(">i", raw, pos)
    pos += 4
    remark = raw[pos:pos + remark_len].decode("utf-8", "replace") if remark_len > 0 else ""
    pos += max(remark_len, 0)
    (ext_len,) = struct.unpack_from(">i", raw, pos)
    pos += 4
    end = pos + max(ext_len, 0)
    keys = []
    while pos + 2 <= end:
        (klen,) = struct.unpack_from(">h", raw, pos)
        pos += 2
        keys.append(raw[pos:pos + klen].decode("utf-8", "replace"))
        pos += klen
        (vlen,) = struct.unpack_from(">i", raw, pos)
        pos += 4 + vlen
    return {"code": code, "flag": flag, "opaque": opaque, "language": lang,
            "version": version, "ext": sorted(keys), "remark": remark[:120]}


class FrameLog:
    """Splits one direction of one connection into frames and logs each."""

    def __init__(self, out, conn, port, direction):
        self.buf = bytearray()
        self.out, self.conn, self.port, self.direction = out, conn, port, direction
        self.broken = False

    def feed(self, data):
        if self.broken:
            return
        self.buf += data
        while len(self.buf) >= 8:
            (total,) = struct.unpack_from(">I", self.buf, 0)
            if total < 4 or total > MAX_FRAME_BYTES:
                self.record({"error": f"bad frame length {total}"})
                self.broken = True
                return
            if len(self.buf) < 4 + total:
                return
            (mark,) = struct.unpack_from(">I", self.buf, 4)
            kind, header_len = mark >> 24, mark & 0xFFFFFF
            raw = bytes(self.buf[8:8 + header_len])
            body_len = total - 4 - header_len
            try:
                entry = parse_header(kind, raw)
            except (ValueError, struct.error) as e:
                entry = {"error": f"undecodable header: {e}"}
            entry.update({"serialize": kind, "body_len": body_len})
            if kind == 0 and raw.endswith(b"\n"):
                entry["header_trailing_newline"] = True
            self.record(entry)
            del self.buf[:4 + total]

    def record(self, entry):
        entry.update({"t": round(time.time(), 6), "conn": self.conn, "port": self.port,
                      "dir": self.direction})
        self.out.write(json.dumps(entry) + "\n")


async def pump(reader, writer, log):
    try:
        while True:
            data = await reader.read(65536)
            if not data:
                break
            log.feed(data)
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        writer.close()


def loopback(host):
    if not host.startswith("127."):
        sys.exit(f"wiretap: {host} is not a loopback address")
    return host


async def relay(maps, out, seconds):
    counter = [0]

    def handler_for(up_host, up_port, port):
        async def handle(c_reader, c_writer):
            counter[0] += 1
            conn = counter[0]
            try:
                u_reader, u_writer = await asyncio.open_connection(up_host, up_port)
            except OSError as e:
                out.write(json.dumps({"conn": conn, "port": port, "error": str(e)}) + "\n")
                c_writer.close()
                return
            await asyncio.gather(
                pump(c_reader, u_writer, FrameLog(out, conn, port, "c2s")),
                pump(u_reader, c_writer, FrameLog(out, conn, port, "s2c")))
        return handle

    servers = []
    for listen, upstream in maps:
        lh, lp = listen
        uh, up = upstream
        servers.append(await asyncio.start_server(handler_for(uh, up, lp), lh, lp))
    print("wiretap: relaying " + ", ".join(f"{a[0]}:{a[1]}->{b[0]}:{b[1]}" for a, b in maps),
          file=sys.stderr, flush=True)
    try:
        await asyncio.sleep(seconds)
    finally:
        for s in servers:
            s.close()
        out.flush()


def parse_addr(text):
    host, port = text.rsplit(":", 1)
    return loopback(host), int(port)


def summary(path):
    """Tallies requests per port, direction and code (responses are not counted).

    Connections that carry REGISTER_BROKER are the broker's own link to the name server; their
    requests are listed with direction "b2n" so they are not mistaken for a client's.
    """
    entries = []
    broker_conns = set()
    with open(path) as f:
        for line in f:
            e = json.loads(line)
            if "code" not in e or e.get("flag", 0) & 1:
                continue
            entries.append(e)
            if e["code"] == 103:
                broker_conns.add(e["conn"])
    by = Counter()
    oneway = Counter()
    for e in entries:
        direction = "b2n" if e["conn"] in broker_conns else e["dir"]
        key = (e["port"], direction, e["code"], e.get("language"))
        by[key] += 1
        if e.get("flag", 0) & 2:
            oneway[key] += 1
    print(f"{'port':>6} {'dir':>4} {'code':>5} {'name':<38} {'lang':<6} {'count':>6} oneway")
    for (port, d, code, lang), n in sorted(by.items()):
        name = CODE_NAMES.get(code, "?")
        print(f"{port:>6} {d:>4} {code:>5} {name:<38} {str(lang):<6} {n:>6} {oneway[(port, d, code, lang)]:>6}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("relay")
    r.add_argument("--map", action="append", required=True, help="LISTEN_HOST:PORT=UPSTREAM_HOST:PORT")
    r.add_argument("--out", required=True)
    r.add_argument("--seconds", type=float, default=1800, help="stop after this long (bound)")
    s = sub.add_parser("summary")
    s.add_argument("path")
    a = ap.parse_args()
    if a.cmd == "summary":
        summary(a.path)
        return
    maps = []
    for m in a.map:
        listen, upstream = m.split("=", 1)
        maps.append((parse_addr(listen), parse_addr(upstream)))
    with open(a.out, "w", buffering=1) as out:
        asyncio.run(relay(maps, out, a.seconds))


if __name__ == "__main__":
    main()
