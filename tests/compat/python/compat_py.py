#!/usr/bin/env python3
"""Compatibility scenarios of the RocketMQ C++ client 1.x, through its Python binding
(PyPI rocketmq-client-python 0.5.0rc2, which bundles librocketmq.so).

    compat_py.py --namesrv 127.0.0.1:9876 [--broker 127.0.0.1:10911] [--only a,b]

Scenarios: sync and one-way sends, orderly sends by sharding key with an orderly push
consumer, and two clustering push-consumer members that split the queues and filter by tag.
Every message carries a unique "cid" property; each arrival is matched by it and compared with
what was sent: topic, body, tags, keys, every user property, and sane system fields.

Each scenario runs in its own child process with a deadline, because the native library
owns threads that a hang would leave behind: the child is killed and the scenario fails.
Prints PASS/FAIL per scenario and "N passed, N failed"; exits 1 on any failure.
"""
import argparse
import os
import subprocess
import sys
import threading
import time
import uuid

import remoting

QUEUES = 4
LARGE_BODY_BYTES = 8 * 1024  # above the client's 4 KiB compression threshold
ARRIVAL_TIMEOUT_S = 45.0
SCENARIO_TIMEOUT_S = 150.0
SETTLE_S = 3.0  # lets a new consumer register and rebalance before the first send
NOTE = u"h\u00e9llo w\u00f6rld \u2713 a=b"
# The user properties scenarios set; the binding reads properties by name only.
PROPERTY_NAMES = ("cid", "idx", "note", "order")


class Failure(Exception):
    """A scenario's check failed; the message says what differed."""


class Sent(object):
    """One message as sent, for comparison with what arrives."""

    def __init__(self, topic, cid, idx, tags, keys, body, props):
        self.topic, self.cid, self.idx = topic, cid, idx
        self.tags, self.keys, self.body, self.props = tags, keys, body, props

    def message(self):
        from rocketmq.client import Message
        m = Message(self.topic)
        m.set_tags(self.tags)
        m.set_keys(" ".join(self.keys))
        m.set_body(self.body)
        for k, v in self.props.items():
            m.set_property(k, v)
        return m


def make_messages(run_id, topic, n, tags):
    """n messages cycling through tags; every 25th body is 8 KiB (compressed by the client),
    odd ones carry two keys, all carry a non-ASCII property value containing '='."""
    out = []
    for i in range(n):
        cid = "%s-%s-%d" % (run_id, topic, i)
        size = LARGE_BODY_BYTES if i % 25 == 0 else 100 + i % 300
        body = bytearray(("body " + cid + " ").encode("ascii"))
        while len(body) < size:
            body.append(ord("a") + (len(body) * 7 + i) % 26)
        keys = ["k%d-%s" % (i, run_id)] + (["alt%d-%s" % (i, run_id)] if i % 2 else [])
        props = {"cid": cid, "idx": str(i), "note": NOTE}
        out.append(Sent(topic, cid, i, tags[i % len(tags)], keys, bytes(body), props))
    return out


def _text(v):
    return v.decode("utf-8") if isinstance(v, bytes) else (v or "")


class Collector(object):
    """Records arrivals of one consumer member; fields are copied inside the callback
    because the native message lives only that long."""

    def __init__(self, retry_first=None):
        self.lock = threading.Lock()
        self.got = []
        # retry_first(rec) -> True: answer RECONSUME_LATER to that message's first delivery.
        self.retry_first = retry_first

    def callback(self, msg):
        from rocketmq.client import ConsumeStatus
        rec = {
            "topic": msg.topic, "tags": _text(msg.tags), "keys": _text(msg.keys),
            "body": msg.body, "id": msg.id, "queue_id": msg.queue_id,
            "queue_offset": msg.queue_offset, "born": msg.born_timestamp,
            "stored": msg.store_timestamp, "reconsume": msg.reconsume_times,
            "props": {k: _text(msg.get_property(k)) for k in PROPERTY_NAMES},
        }
        with self.lock:
            first = all(r["props"]["cid"] != rec["props"]["cid"] for r in self.got)
            self.got.append(rec)
        if first and self.retry_first is not None and self.retry_first(rec):
            return ConsumeStatus.RECONSUME_LATER
        return ConsumeStatus.CONSUME_SUCCESS

    def arrivals(self):
        with self.lock:
            return list(self.got)

    def distinct(self):
        with self.lock:
            return len({r["props"]["cid"] for r in self.got})


def wait_for(what, timeout_s, done):
    deadline = time.monotonic() + timeout_s
    while not done():
        if time.monotonic() > deadline:
            raise Failure("timed out after %ds waiting for %s" % (timeout_s, what))
        time.sleep(0.05)


def compare(s, r):
    p = []
    tag = "cid=%s: " % s.cid
    if r["topic"] != s.topic:
        p.append(tag + "topic %r" % r["topic"])
    if r["body"] != s.body:
        p.append(tag + "body differs (%d bytes, sent %d)" % (len(r["body"] or b""), len(s.body)))
    if r["tags"] != s.tags:
        p.append(tag + "tags %r != %r" % (r["tags"], s.tags))
    if r["keys"] != " ".join(s.keys):
        p.append(tag + "keys %r != %r" % (r["keys"], " ".join(s.keys)))
    for k, v in s.props.items():
        if r["props"].get(k) != v:
            p.append(tag + "property %s=%r != %r" % (k, r["props"].get(k), v))
    if not r["id"] or r["queue_offset"] < 0 or r["stored"] <= 0 or r["born"] <= 0:
        p.append(tag + "bad system fields id=%r queueOffset=%d" % (r["id"], r["queue_offset"]))
    return p


def verify(expected, got, allow_dup):
    """Every expected message arrived intact, nothing else arrived; duplicates fail unless
    allowed (clustering is at-least-once around a rebalance)."""
    by_cid = {s.cid: s for s in expected}
    seen = {}
    problems = []
    dups = 0
    for r in got:
        cid = r["props"]["cid"]
        s = by_cid.get(cid)
        if s is None:
            problems.append("unexpected message cid=%r tags=%r" % (cid, r["tags"]))
            continue
        seen[cid] = seen.get(cid, 0) + 1
        if seen[cid] > 1:
            dups += 1
            continue
        problems.extend(compare(s, r))
    missing = [s.cid for s in expected if s.cid not in seen]
    problems.extend("missing cid=" + c for c in missing[:3])
    if len(missing) > 3:
        problems.append("... %d missing in all" % len(missing))
    if dups and not allow_dup:
        problems.append("%d duplicate deliveries" % dups)
    if problems:
        raise Failure("; ".join(problems[:8]))
    return "%d msgs intact%s" % (len(expected), ", %d dup" % dups if dups else "")


def check_offsets_dense(got):
    """A fresh topic's queues hold offsets 0..n-1 with no gap."""
    per_queue = {}
    for r in got:
        per_queue.setdefault(r["queue_id"], set()).add(r["queue_offset"])
    for q, offs in sorted(per_queue.items()):
        if sorted(offs) != list(range(len(offs))):
            raise Failure("queue %d offsets not 0..%d: %s" % (q, len(offs) - 1, sorted(offs)[:10]))
    return len(per_queue)


class Env(object):
    """What every scenario needs: addresses, the run id, and the clients to shut down."""

    def __init__(self, namesrv, broker, run_id):
        self.namesrv, self.broker, self.run_id = namesrv, broker, run_id
        self.started = []

    def name(self, prefix, scenario):
        return "%s_%s_%s" % (prefix, scenario, self.run_id)

    def topic(self, scenario):
        t = self.name("t", scenario)
        remoting.create_topic(self.namesrv, self.broker, t, QUEUES)
        return t

    def producer(self, scenario, orderly=False):
        from rocketmq.client import Producer
        p = Producer(self.name("pg", scenario), orderly=orderly, timeout=10000)
        p.set_namesrv_addr(self.namesrv)
        p.start()
        self.started.append(p)
        return p

    def consumer(self, group, member, topic, expr, collector, orderly=False):
        from rocketmq.client import PushConsumer
        c = PushConsumer(group, orderly=orderly)
        # Members of one group need distinct instance names, or they share a client id.
        c.set_instance_name(group + "_" + member)
        c.set_namesrv_addr(self.namesrv)
        c.subscribe(topic, collector.callback, expr)
        c.start()
        self.started.append(c)
        return c

    def shutdown(self):
        while self.started:
            self.started.pop().shutdown()


def send_checked(p, s):
    from rocketmq.client import SendStatus
    r = p.send_sync(s.message())
    if r.status != SendStatus.OK or not r.msg_id or r.offset < 0:
        raise Failure("bad send result for %s: %r" % (s.cid, r))


def consume_all(env, scenario, topic, send):
    """Starts one push consumer, runs send(), then checks everything arrived intact."""
    c = Collector()
    env.consumer(env.name("cg", scenario), "m1", topic, "*", c)
    time.sleep(SETTLE_S)
    expected = send()
    wait_for("%d messages" % len(expected), ARRIVAL_TIMEOUT_S,
             lambda: c.distinct() >= len(expected))
    time.sleep(0.5)  # lets a duplicate show up
    detail = verify(expected, c.arrivals(), False)
    return detail, c.arrivals()


def producer_sync(env, name):
    topic = env.topic(name)
    p = env.producer(name)
    msgs = make_messages(env.run_id, topic, 100, ["TagA", "TagB"])

    def send():
        for s in msgs:
            send_checked(p, s)
        return msgs
    detail, got = consume_all(env, name, topic, send)
    return "%s, dense offsets on %d queues" % (detail, check_offsets_dense(got))


def producer_oneway(env, name):
    topic = env.topic(name)
    p = env.producer(name)
    msgs = make_messages(env.run_id, topic, 60, ["TagA", "TagB"])

    def send():
        for s in msgs:
            p.send_oneway(s.message())
        return msgs
    detail, _ = consume_all(env, name, topic, send)
    return detail


def orderly(env, name):
    """Orderly producer (sharding key -> one queue) and orderly push consumer: each key's
    messages arrive in send order, all from one queue."""
    topic = env.topic(name)
    c = Collector()
    env.consumer(env.name("cg", name), "m1", topic, "*", c, orderly=True)
    p = env.producer(name, orderly=True)
    time.sleep(SETTLE_S)
    msgs = make_messages(env.run_id, topic, 100, ["TagA"])
    from rocketmq.client import SendStatus
    for s in msgs:
        s.props["order"] = "order-%d" % (s.idx % 4)
        r = p.send_orderly_with_sharding_key(s.message(), s.props["order"])
        if r.status != SendStatus.OK or not r.msg_id:
            raise Failure("bad orderly send result for %s: %r" % (s.cid, r))
    wait_for("%d messages" % len(msgs), ARRIVAL_TIMEOUT_S, lambda: c.distinct() >= len(msgs))
    time.sleep(0.5)
    got = c.arrivals()
    detail = verify(msgs, got, False)
    by_order, queue_of = {}, {}
    for r in got:
        order = "order-%d" % (int(r["props"]["idx"]) % 4)
        by_order.setdefault(order, []).append(int(r["props"]["idx"]))
        queue_of.setdefault(order, set()).add(r["queue_id"])
    for order, idxs in sorted(by_order.items()):
        if idxs != sorted(idxs):
            raise Failure("%s out of order: %s" % (order, idxs[:12]))
        if len(queue_of[order]) != 1:
            raise Failure("%s spread over queues %s" % (order, sorted(queue_of[order])))
    return "%s, 4 orders in order" % detail


def push_clustering(env, name):
    """Two members of one group split the queues; every TagA/TagB message arrives at one of
    them, each member gets some, TagC is filtered out."""
    topic = env.topic(name)
    group = env.name("cg", name)
    a, b = Collector(), Collector()
    env.consumer(group, "a", topic, "TagA || TagB", a)
    env.consumer(group, "b", topic, "TagA || TagB", b)
    time.sleep(SETTLE_S)
    p = env.producer(name)
    msgs = make_messages(env.run_id, topic, 150, ["TagA", "TagB", "TagC"])
    for s in msgs:
        send_checked(p, s)
    expected = [s for s in msgs if s.tags != "TagC"]

    def union():
        return len({r["props"]["cid"] for r in a.arrivals() + b.arrivals()})
    wait_for("%d messages across both members" % len(expected), ARRIVAL_TIMEOUT_S,
             lambda: union() >= len(expected))
    time.sleep(0.5)  # lets a wrongly delivered TagC message show up
    detail = verify(expected, a.arrivals() + b.arrivals(), True)
    if not a.distinct() or not b.distinct():
        raise Failure("queues not split: member a got %d, member b got %d" % (a.distinct(), b.distinct()))
    return "%s, split %d/%d" % (detail, a.distinct(), b.distinct())


def late_consumer(env, name):
    """A new group that starts after the messages were stored still gets all of them (the
    broker answers its first offset query with 0 while the queue's messages are at hand)."""
    topic = env.topic(name)
    p = env.producer(name)
    msgs = make_messages(env.run_id, topic, 40, ["TagA"])
    for s in msgs:
        send_checked(p, s)
    c = Collector()
    env.consumer(env.name("cg", name), "m1", topic, "*", c)
    wait_for("%d messages" % len(msgs), ARRIVAL_TIMEOUT_S, lambda: c.distinct() >= len(msgs))
    time.sleep(0.5)
    return verify(msgs, c.arrivals(), False)


def resume(env, name):
    """A group's committed offsets survive its members: a consumer that stops after the first
    batch and a new member that starts later get each message once between them."""
    topic = env.topic(name)
    group = env.name("cg", name)
    p = env.producer(name)
    msgs = make_messages(env.run_id, topic, 60, ["TagA"])
    first, second = msgs[:30], msgs[30:]
    c1 = Collector()
    member1 = env.consumer(group, "m1", topic, "*", c1)
    time.sleep(SETTLE_S)
    for s in first:
        send_checked(p, s)
    wait_for("first %d messages" % len(first), ARRIVAL_TIMEOUT_S, lambda: c1.distinct() >= len(first))
    env.started.remove(member1)
    member1.shutdown()  # commits the group's offsets at the broker
    for s in second:
        send_checked(p, s)
    c2 = Collector()
    env.consumer(group, "m2", topic, "*", c2)
    wait_for("second %d messages" % len(second), ARRIVAL_TIMEOUT_S, lambda: c2.distinct() >= len(second))
    time.sleep(1.0)  # lets a wrongly redelivered first-batch message show up
    d1 = verify(first, c1.arrivals(), False)
    d2 = verify(second, c2.arrivals(), False)
    return "first member: %s; second member: %s" % (d1, d2)


def retry(env, name):
    """RECONSUME_LATER sends a message back (CONSUMER_SEND_MSG_BACK): it comes again through
    the group's retry topic, intact, with its reconsume count raised."""
    topic = env.topic(name)
    c = Collector(retry_first=lambda rec: int(rec["props"]["idx"]) % 5 == 0)
    env.consumer(env.name("cg", name), "m1", topic, "*", c)
    p = env.producer(name)
    time.sleep(SETTLE_S)
    msgs = make_messages(env.run_id, topic, 20, ["TagA"])
    for s in msgs:
        send_checked(p, s)
    retried = [s for s in msgs if s.idx % 5 == 0]

    def redelivered():
        got = c.arrivals()
        return sum(1 for s in retried if sum(r["props"]["cid"] == s.cid for r in got) >= 2)
    wait_for("%d redeliveries (retry delay level 3 is 10 s)" % len(retried), ARRIVAL_TIMEOUT_S,
             lambda: redelivered() >= len(retried) and c.distinct() >= len(msgs))
    got = c.arrivals()
    detail = verify(msgs, got, True)
    problems = []
    for s in retried:
        again = [r for r in got if r["props"]["cid"] == s.cid][1:]
        problems.extend(compare(s, again[0]))
        if again[0]["reconsume"] < 1:
            problems.append("cid=%s: redelivered with reconsume times %d" % (s.cid, again[0]["reconsume"]))
    if problems:
        raise Failure("; ".join(problems[:8]))
    return "%s, %d redelivered intact" % (detail, len(retried))


SCENARIOS = [
    ("py_producer_sync", producer_sync),
    ("py_producer_oneway", producer_oneway),
    ("py_orderly", orderly),
    ("py_push_clustering", push_clustering),
    ("py_late_consumer", late_consumer),
    ("py_resume", resume),
    ("py_retry", retry),
]


def run_child(args):
    """Runs one scenario in this process and prints one RESULT line for the parent."""
    fn = dict(SCENARIOS)[args.scenario]
    env = Env(args.namesrv, args.broker, args.run_id)
    try:
        try:
            detail = fn(env, args.scenario)
        finally:
            env.shutdown()
        line = "RESULT PASS " + detail
    except (Failure, remoting.RemotingError) as e:
        line = "RESULT FAIL %s" % e
    except Exception as e:  # a client error (ffi_check raises plain exceptions) fails too
        line = "RESULT FAIL %s: %s" % (type(e).__name__, e)
    sys.stdout.write(line + "\n")
    sys.stdout.flush()
    # Skip interpreter teardown: the native library's static destructors are not needed.
    os._exit(0)


def run_parent(args, names):
    print("rocketmq-client-python 0.5.0rc2 (C++ client 1.x) against name server %s (broker %s)"
          % (args.namesrv, args.broker))
    run_id = uuid.uuid4().hex[:8]
    passed, failed = 0, []
    for name in names:
        start = time.monotonic()
        cmd = [sys.executable, os.path.abspath(__file__), "--namesrv", args.namesrv,
               "--broker", args.broker, "--scenario", name, "--run-id", run_id]
        try:
            out = subprocess.run(cmd, stdout=subprocess.PIPE, timeout=SCENARIO_TIMEOUT_S).stdout
            lines = [l for l in out.decode("utf-8", "replace").splitlines() if l.startswith("RESULT ")]
            result = lines[-1][len("RESULT "):] if lines else "FAIL scenario process printed no result"
        except subprocess.TimeoutExpired:
            result = "FAIL timed out after %ds" % SCENARIO_TIMEOUT_S
        ms = int((time.monotonic() - start) * 1000)
        verdict, _, detail = result.partition(" ")
        if verdict == "PASS":
            passed += 1
            print("PASS %-28s (%5d ms) %s" % (name, ms, detail))
        else:
            failed.append(name)
            print("FAIL %-28s (%5d ms): %s" % (name, ms, detail))
        sys.stdout.flush()
    if failed:
        print("failed scenarios: " + ", ".join(failed))
    print("%d passed, %d failed" % (passed, len(failed)))
    return 1 if failed else 0


def main():
    ap = argparse.ArgumentParser(description="C++ client 1.x compatibility scenarios")
    ap.add_argument("--namesrv", required=True)
    ap.add_argument("--broker", default="")
    ap.add_argument("--only", default="")
    ap.add_argument("--scenario", help=argparse.SUPPRESS)
    ap.add_argument("--run-id", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if not args.broker:
        args.broker = args.namesrv.rpartition(":")[0] + ":10911"
    if args.scenario:
        run_child(args)
    names = [n for n, _ in SCENARIOS]
    if args.only:
        unknown = [n for n in args.only.split(",") if n not in names]
        if unknown:
            print("error: unknown scenario %s" % ", ".join(unknown), file=sys.stderr)
            return 2
        names = args.only.split(",")
    return run_parent(args, names)


if __name__ == "__main__":
    sys.exit(main())
