'use strict';
// RocketMQ's 5.x gRPC Node.js SDK (npm rocketmq-client-nodejs) through Apache RocketMQ's proxy.
//
//   node compat_grpc.js --endpoint HOST:PORT --topic T --group G [--only a,b]
//
// The topic (NORMAL) and the consumer group are created beforehand at the brokers (run.sh
// does it with the Java harness's `setup`). Every message carries a user property `cid` unique
// to the run; each arrival is matched by it and compared with what was sent: topic, body
// bytes, tag, keys, every user property and the message id of the send receipt. Prints
// "PASS name (ms)" or "FAIL name: reason" per scenario and "N passed, N failed"; exits 1 on
// any failure.

const { Producer, SimpleConsumer } = require('rocketmq-client-nodejs');

const ARRIVAL_WAIT_MS = 60000;
const INVISIBLE_MS = 20000;
const SHORT_INVISIBLE_MS = 10000; // the proxy's minimum invisible duration for a receive

class Failure extends Error {}

function that(condition, message) {
  if (!condition) throw new Failure(message);
}

function args() {
  const out = { only: '' };
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; i += 2) {
    const key = argv[i].replace(/^--/, '');
    if (!['endpoint', 'topic', 'group', 'only'].includes(key) || argv[i + 1] === undefined) {
      console.error(`compat_grpc.js: bad option ${argv[i]}`);
      process.exit(2);
    }
    out[key] = argv[i + 1];
  }
  for (const k of ['endpoint', 'topic', 'group']) {
    if (!out[k]) {
      console.error(`compat_grpc.js: --${k} is required`);
      process.exit(2);
    }
  }
  return out;
}

// Message i: alternating tag, two keys on odd messages, a non-ASCII property with '=', an
// 8 KiB body on every 25th message.
function make(runId, topic, i, tag) {
  const cid = `${runId}-${topic}-${i}`;
  const size = i % 25 === 0 ? 8192 : 64 + i;
  let body = `body ${cid} `;
  for (let n = 0; body.length < size; n++) body += String.fromCharCode(97 + ((n * 7 + i) % 26));
  const keys = i % 2 === 1 ? [`k${i}-${runId}`, `alt${i}-${runId}`] : [`k${i}-${runId}`];
  const props = new Map([['cid', cid], ['idx', String(i)], ['note', `naïve=ü ${i}`]]);
  return { cid, topic, tag, keys, body: Buffer.from(body), props, id: null };
}

function mismatch(s, m) {
  if (m.topic !== s.topic) return `topic ${m.topic} != ${s.topic}`;
  if (!Buffer.from(m.body).equals(s.body)) {
    return `body differs (${m.body.length} bytes, sent ${s.body.length})`;
  }
  if (m.tag !== s.tag) return `tag ${m.tag} != ${s.tag}`;
  const keys = [...m.keys].sort().join(' ');
  if (keys !== [...s.keys].sort().join(' ')) return `keys ${keys} != ${s.keys.join(' ')}`;
  for (const [k, v] of s.props) {
    if (m.properties.get(k) !== v) return `property ${k}=${m.properties.get(k)} != ${v}`;
  }
  if (m.messageId !== s.id) return `message id ${m.messageId} != the send receipt's ${s.id}`;
  if (!(m.deliveryAttempt >= 1)) return `delivery attempt ${m.deliveryAttempt}`;
  return null;
}

const quietLogger = {
  info() {},
  debug() {},
  warn(...a) { console.error('[sdk warn]', ...a); },
  error(...a) { console.error('[sdk error]', ...a); },
};

class Suite {
  constructor(o) {
    this.o = o;
    this.runId = (Date.now() % 100000000).toString(36);
    const base = { endpoints: o.endpoint, namespace: '', sslEnabled: false, requestTimeout: 10000,
      logger: quietLogger };
    // The consumer exists before anything is sent, as an application's would.
    this.consumer = new SimpleConsumer({ ...base, consumerGroup: o.group,
      subscriptions: new Map([[o.topic, '*']]), awaitDuration: 5000 });
    this.producer = new Producer({ ...base, topic: o.topic });
  }

  async start() {
    await this.consumer.startup();
    await this.producer.startup();
  }

  async stop() {
    for (const c of [this.producer, this.consumer]) {
      try { await c.shutdown(); } catch (e) { console.error('shutdown:', e); }
    }
  }

  async send(sent) {
    for (const s of sent) {
      const r = await this.producer.send({ topic: s.topic, tag: s.tag, keys: s.keys,
        body: s.body, properties: s.props });
      s.id = r.messageId;
    }
    that(new Set(sent.map(s => s.id)).size === sent.length,
      'the send receipts do not carry distinct message ids');
  }

  record(byCid, m) {
    const cid = m.properties.get('cid');
    const s = byCid.get(cid);
    that(s !== undefined, `a message never sent arrived: id ${m.messageId} cid ${cid}`);
    const bad = mismatch(s, m);
    that(bad === null, `${cid}: ${bad}`);
    return cid;
  }

  // 30 messages sent, each received once with everything intact, and acked.
  async producerNormal() {
    const sent = [];
    for (let i = 0; i < 30; i++) {
      sent.push(make(this.runId, this.o.topic, i, i % 2 ? 'TagB' : 'TagA'));
    }
    const byCid = new Map(sent.map(s => [s.cid, s]));
    await this.send(sent);
    const got = new Set();
    const deadline = Date.now() + ARRIVAL_WAIT_MS;
    while (got.size < sent.length) {
      that(Date.now() < deadline, `${got.size} of ${sent.length} arrived`);
      for (const m of await this.consumer.receive(16, INVISIBLE_MS)) {
        const cid = this.record(byCid, m);
        that(!got.has(cid), `${cid} arrived twice`);
        got.add(cid);
        await this.consumer.ack(m);
      }
    }
  }

  // 6 messages received with a 10 s invisible duration: the 3 acked never come back, the 3
  // not acked come back (delivery attempt 2) after it.
  async simpleConsumerInvisible() {
    const sent = [];
    for (let i = 0; i < 6; i++) sent.push(make(this.runId, this.o.topic, 100 + i, 'TagI'));
    const byCid = new Map(sent.map(s => [s.cid, s]));
    await this.send(sent);
    const left = new Map();
    const seen = new Set();
    let deadline = Date.now() + ARRIVAL_WAIT_MS;
    while (seen.size < sent.length) {
      that(Date.now() < deadline, `first receipt: ${seen.size} of ${sent.length}`);
      for (const m of await this.consumer.receive(16, SHORT_INVISIBLE_MS)) {
        const cid = this.record(byCid, m);
        that(!seen.has(cid), `${cid} came back within its invisible duration`);
        that(m.deliveryAttempt === 1, `${cid}: first delivery attempt ${m.deliveryAttempt}`);
        seen.add(cid);
        if (Number(byCid.get(cid).props.get('idx')) % 2 === 1) {
          await this.consumer.ack(m);
        } else {
          left.set(cid, Date.now());
        }
      }
    }
    const back = new Set();
    deadline = Date.now() + ARRIVAL_WAIT_MS;
    while (back.size < left.size) {
      that(Date.now() < deadline, `only ${[...back]} of ${[...left.keys()]} came back`);
      for (const m of await this.consumer.receive(16, SHORT_INVISIBLE_MS)) {
        const cid = this.record(byCid, m);
        that(left.has(cid), `acked message ${cid} came back`);
        that(!back.has(cid), `${cid} came back twice`);
        const after = Date.now() - left.get(cid);
        that(after >= SHORT_INVISIBLE_MS - 1000,
          `${cid} came back ${after} ms after, within its invisible duration`);
        that(m.deliveryAttempt === 2,
          `${cid} came back with delivery attempt ${m.deliveryAttempt}`);
        back.add(cid);
        await this.consumer.ack(m);
      }
    }
    const end = Date.now() + SHORT_INVISIBLE_MS + 3000;
    while (Date.now() < end) {
      for (const m of await this.consumer.receive(16, SHORT_INVISIBLE_MS)) {
        throw new Failure(`${m.properties.get('cid')} came back after being acked `
          + `(attempt ${m.deliveryAttempt})`);
      }
    }
  }
}

async function main() {
  const o = args();
  const suite = new Suite(o);
  const scenarios = [['node_producer_normal', () => suite.producerNormal()],
    ['node_simple_consumer_invisible', () => suite.simpleConsumerInvisible()]];
  const only = new Set(o.only.split(',').filter(Boolean));
  for (const name of only) {
    if (!scenarios.some(([n]) => n === name)) {
      console.error(`compat_grpc.js: unknown scenario ${name}`);
      return 2;
    }
  }
  const wanted = scenarios.filter(([n]) => only.size === 0 || only.has(n));
  let passed = 0;
  let failed = 0;
  try {
    await suite.start();
  } catch (e) {
    console.error(e);
    for (const [name] of wanted) console.log(`FAIL ${name}: clients did not start: ${e}`);
    return 1;
  }
  try {
    for (const [name, run] of wanted) {
      const start = Date.now();
      try {
        await run();
        passed++;
        console.log(`PASS ${name} (${Date.now() - start} ms)`);
      } catch (e) {
        failed++;
        if (!(e instanceof Failure)) console.error(e);
        console.log(`FAIL ${name}: ${e instanceof Failure ? e.message : e}`);
      }
    }
  } finally {
    await suite.stop();
  }
  console.log(`${passed} passed, ${failed} failed`);
  return failed === 0 && passed > 0 ? 0 : 1;
}

main().then(
  code => process.exit(code),
  e => { console.error(e); process.exit(1); },
);
