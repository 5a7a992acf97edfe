"""RocketMQ's 5.x gRPC Python SDK (PyPI rocketmq-python-client) through Apache RocketMQ's proxy.

    compat_grpc.py --endpoint HOST:PORT --topic T --group G [--only a,b]

The topic (NORMAL) and the consumer group are created beforehand at the brokers (run.sh does
it with the Java harness's `setup`). Every message carries a user property `cid` unique to the
run; each arrival is matched by it and compared with what was sent: topic, body bytes, tag,
key, every user property and the message id of the send receipt. Prints "PASS name (ms)" or
"FAIL name: reason" per scenario and "N passed, N failed"; exits 1 on any failure.
"""

import argparse
import os
import sys
import time
import traceback

from rocketmq import (ClientConfiguration, Credentials, FilterExpression, Message, Producer,
                      SimpleConsumer)

ARRIVAL_WAIT_S = 60
INVISIBLE_S = 20
SHORT_INVISIBLE_S = 10  # the proxy's minimum invisible duration for a receive


class Failure(Exception):
    """A scenario failure with a readable reason."""


def that(condition, message):
    if not condition:
        raise Failure(message)


def make(run_id, topic, i, tag):
    """Message i: alternating tag, one key, a non-ASCII property with '=', an 8 KiB body on
    every 25th message."""
    cid = f"{run_id}-{topic}-{i}"
    size = 8192 if i % 25 == 0 else 64 + i
    body = (f"body {cid} " + "".join(chr(ord('a') + (n * 7 + i) % 26) for n in range(size)))
    body = body[:size].encode()
    props = {"cid": cid, "idx": str(i), "note": f"naïve=ü {i}"}
    return {"cid": cid, "topic": topic, "tag": tag, "key": f"k{i}-{run_id}", "body": body,
            "props": props, "id": None}


def to_message(s):
    m = Message()
    m.topic = s["topic"]
    m.body = s["body"]
    m.tag = s["tag"]
    m.keys = s["key"]
    for k, v in s["props"].items():
        m.add_property(k, v)
    return m


def mismatch(s, m):
    if m.topic != s["topic"]:
        return f"topic {m.topic} != {s['topic']}"
    if bytes(m.body) != s["body"]:
        return f"body differs ({len(m.body)} bytes, sent {len(s['body'])})"
    if m.tag != s["tag"]:
        return f"tag {m.tag} != {s['tag']}"
    if set(m.keys) != {s["key"]}:
        return f"keys {m.keys} != {s['key']}"
    for k, v in s["props"].items():
        if m.properties.get(k) != v:
            return f"property {k}={m.properties.get(k)!r} != {v!r}"
    if m.message_id != s["id"]:
        return f"message id {m.message_id} != the send receipt's {s['id']}"
    if m.delivery_attempt is None or m.delivery_attempt < 1:
        return f"delivery attempt {m.delivery_attempt}"
    return None


class Suite:
    def __init__(self, endpoint, topic, group):
        self.config = ClientConfiguration(endpoint, Credentials(), request_timeout=10)
        self.topic = topic
        self.group = group
        self.run_id = format(int(time.time() * 1000) % 100_000_000, "x")
        self.consumer = None
        self.producer = None

    def start(self):
        # The consumer exists before anything is sent, as an application's would.
        self.consumer = SimpleConsumer(self.config, self.group,
                                       {self.topic: FilterExpression("*")}, await_duration=5)
        self.consumer.startup()
        self.producer = Producer(self.config, (self.topic,))
        self.producer.startup()

    def stop(self):
        for client in (self.producer, self.consumer):
            if client is not None:
                try:
                    client.shutdown()
                except Exception:  # noqa: BLE001 - shutting down after a failure
                    traceback.print_exc()

    def send(self, sent):
        for s in sent:
            receipt = self.producer.send(to_message(s))
            s["id"] = receipt.message_id
        that(len({s["id"] for s in sent}) == len(sent),
             "the send receipts do not carry distinct message ids")

    def record(self, by_cid, m):
        cid = m.properties.get("cid")
        s = by_cid.get(cid)
        that(s is not None, f"a message never sent arrived: id {m.message_id} cid {cid}")
        bad = mismatch(s, m)
        that(bad is None, f"{cid}: {bad}")
        return cid

    def producer_normal(self):
        """30 messages sent, each received once with everything intact, and acked."""
        sent = [make(self.run_id, self.topic, i, "TagA" if i % 2 == 0 else "TagB")
                for i in range(30)]
        by_cid = {s["cid"]: s for s in sent}
        self.send(sent)
        got = set()
        deadline = time.time() + ARRIVAL_WAIT_S
        while len(got) < len(sent):
            that(time.time() < deadline, f"{len(got)} of {len(sent)} arrived")
            for m in self.consumer.receive(16, INVISIBLE_S):
                cid = self.record(by_cid, m)
                that(cid not in got, f"{cid} arrived twice")
                got.add(cid)
                self.consumer.ack(m)

    def simple_consumer_invisible(self):
        """6 messages received with a 10 s invisible duration: the 3 acked never come back,
        the 3 not acked come back (delivery attempt 2) after it."""
        sent = [make(self.run_id, self.topic, 100 + i, "TagI") for i in range(6)]
        by_cid = {s["cid"]: s for s in sent}
        self.send(sent)
        left = {}
        seen = set()
        deadline = time.time() + ARRIVAL_WAIT_S
        while len(seen) < len(sent):
            that(time.time() < deadline, f"first receipt: {len(seen)} of {len(sent)}")
            for m in self.consumer.receive(16, SHORT_INVISIBLE_S):
                cid = self.record(by_cid, m)
                that(cid not in seen, f"{cid} came back within its invisible duration")
                that(m.delivery_attempt == 1, f"{cid}: first delivery attempt {m.delivery_attempt}")
                seen.add(cid)
                if int(by_cid[cid]["props"]["idx"]) % 2 == 1:
                    self.consumer.ack(m)
                else:
                    left[cid] = time.time()
        back = set()
        deadline = time.time() + ARRIVAL_WAIT_S
        while len(back) < len(left):
            that(time.time() < deadline, f"only {sorted(back)} of {sorted(left)} came back")
            for m in self.consumer.receive(16, SHORT_INVISIBLE_S):
                cid = self.record(by_cid, m)
                that(cid in left, f"acked message {cid} came back")
                that(cid not in back, f"{cid} came back twice")
                after = time.time() - left[cid]
                that(after >= SHORT_INVISIBLE_S - 1,
                     f"{cid} came back {after:.1f} s after, within its invisible duration")
                that(m.delivery_attempt == 2,
                     f"{cid} came back with delivery attempt {m.delivery_attempt}")
                back.add(cid)
                self.consumer.ack(m)
        end = time.time() + SHORT_INVISIBLE_S + 3
        while time.time() < end:
            for m in self.consumer.receive(16, SHORT_INVISIBLE_S):
                raise Failure(f"{m.properties.get('cid')} came back after being acked "
                              f"(attempt {m.delivery_attempt})")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--endpoint", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--group", required=True)
    p.add_argument("--only", default="")
    args = p.parse_args()
    suite = Suite(args.endpoint, args.topic, args.group)
    scenarios = [("py_producer_normal", suite.producer_normal),
                 ("py_simple_consumer_invisible", suite.simple_consumer_invisible)]
    only = set(filter(None, args.only.split(",")))
    unknown = only - {name for name, _ in scenarios}
    if unknown:
        print(f"unknown scenario(s) {sorted(unknown)}", file=sys.stderr)
        return 2
    passed = failed = 0
    try:
        suite.start()
    except Exception as e:  # noqa: BLE001 - reported as the failure of every scenario
        traceback.print_exc()
        for name, _ in scenarios:
            if not only or name in only:
                print(f"FAIL {name}: clients did not start: {e!r}", flush=True)
        return 1
    try:
        for name, run in scenarios:
            if only and name not in only:
                continue
            start = time.time()
            try:
                run()
                passed += 1
                print(f"PASS {name} ({int((time.time() - start) * 1000)} ms)", flush=True)
            except Failure as e:
                failed += 1
                print(f"FAIL {name}: {e}", flush=True)
            except Exception as e:  # noqa: BLE001 - an SDK error fails the scenario
                traceback.print_exc()
                failed += 1
                print(f"FAIL {name}: {e!r}", flush=True)
    finally:
        suite.stop()
    print(f"{passed} passed, {failed} failed", flush=True)
    return 0 if failed == 0 and passed > 0 else 1


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    # The SDK's background threads (scheduler, telemetry) are not all daemons.
    os._exit(code)
