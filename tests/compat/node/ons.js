'use strict';
// Compatibility scenarios of npm ali-ons 3.12.0, a pure JavaScript RocketMQ client (it sends
// numbers and booleans where Java sends strings, and enum names in its heartbeats):
//
//   node ons.js --namesrv 127.0.0.1:9876 [--broker 127.0.0.1:10911] [--only a,b]
//
// Scenarios: sequential sends (queue offsets consecutive per queue), concurrent sends, and
// two clustering push-consumer members that split the queues and filter by tag. Every
// message carries user properties (cid, idx, a non-ASCII note), compared on arrival with
// topic, body, tags and keys. Prints PASS/FAIL per scenario and "N passed, N failed".

const { Producer, Consumer, Message } = require('ali-ons');
const c = require('./common');

const USAGE = 'usage: node ons.js --namesrv HOST:PORT [--broker HOST:PORT] [--only a,b]';

// ali-ons insists on an HTTP client, used only to look name servers up from an address
// service; with nameSrv given it is never called, and this one fails loudly if it were.
const httpclient = {
  request() { throw new c.Failure('ali-ons asked the address service although nameSrv is set'); },
};

// ali-ons logs to the console by default; it stays quiet unless COMPAT_NODE_LOG is set
// (error, or info for everything), on stderr so PASS/FAIL lines stay readable.
const LOG = process.env.COMPAT_NODE_LOG || '';
const stamp = (level, args) => console.error(new Date().toISOString(), level, ...args);
const logger = {
  debug(...args) { if (LOG === 'info') stamp('DEBUG', args); },
  info(...args) { if (LOG === 'info') stamp('INFO', args); },
  warn(...args) { if (LOG === 'info') stamp('WARN', args); },
  error(...args) { if (LOG) stamp('ERROR', args); },
};

function clientOptions(env, instanceName) {
  return { httpclient, logger, nameSrv: env.namesrv, instanceName };
}

async function startProducer(env, scenario) {
  const p = new Producer(Object.assign(clientOptions(env, c.name(env, 'prod', scenario)),
    { producerGroup: c.name(env, 'pg', scenario), sendMsgTimeout: 10000 }));
  p.on('error', () => {}); // failures surface as rejected sends
  await p.ready();
  env.started.push(() => p.close());
  return p;
}

// Members of one group need distinct instance names, or they would share a client id.
async function startConsumer(env, group, member, topic, expr, collector) {
  const pc = new Consumer(Object.assign(clientOptions(env, `${group}_${member}`),
    // ali-ons ignores the broker's NOTIFY_CONSUMER_IDS_CHANGED and rebalances on a timer
    // (10 s by default); 1 s lets a second member take its queues within the settle time.
    { consumerGroup: group, rebalanceInterval: 1000 }));
  pc.on('error', err => {
    collector.errors.push(err.message);
    logger.error(err.message);
  });
  // A collector with retryFirst(rec) returns ACTION_RETRY for the first delivery of the
  // messages it picks, so the client sends them back for a later retry.
  pc.subscribe(topic, expr, async msg => {
    const body = msg.body.toString('utf8');
    const rec = { cid: (msg.properties || {}).cid, topic: msg.topic, tags: msg.tags, keys: msg.keys,
      body, msgId: msg.msgId, props: msg.properties || {}, queueId: msg.queueId,
      queueOffset: Number(msg.queueOffset), reconsumeTimes: msg.reconsumeTimes };
    const first = !collector.cids.has(rec.cid);
    collector.add(rec);
    if (first && collector.retryFirst && collector.retryFirst(rec)) return Consumer.ACTION_RETRY;
  });
  await pc.ready();
  env.started.push(() => pc.close());
  return pc;
}

function toMessage(s) {
  const m = new Message(s.topic, s.tags, s.body);
  m.keys = s.keys;
  Object.assign(m.properties, s.props);
  return m;
}

function checkResult(s, r) {
  if (!r || r.sendStatus !== 'SEND_OK' || !r.msgId || !(r.queueOffset >= 0)) {
    throw new c.Failure(`bad send result for ${s.cid}: ${JSON.stringify(r)}`);
  }
}

function newCollector() {
  const col = new c.Collector();
  col.errors = [];
  return col;
}

// Starts one push consumer, runs sendAll, then checks everything arrived intact, once.
async function consumeAll(env, scenario, topic, msgs, sendAll) {
  const col = newCollector();
  await startConsumer(env, c.name(env, 'cg', scenario), 'm1', topic, '*', col);
  await c.sleep(c.SETTLE_MS);
  await sendAll();
  await c.waitFor(`${msgs.length} messages${col.errors.length ? ` (consumer errors: ${col.errors[0]})` : ''}`,
    c.ARRIVAL_TIMEOUT_MS, () => col.distinct() >= msgs.length);
  await c.sleep(500); // lets a duplicate show up
  return c.verify(msgs, col.got, false);
}

async function producerSequential(env, scenario) {
  const topic = c.createTopic(env, c.name(env, 't', scenario));
  const p = await startProducer(env, scenario);
  const msgs = c.makeMessages(env, topic, 100, [ 'TagA', 'TagB' ]);
  const last = new Map();
  const detail = await consumeAll(env, scenario, topic, msgs, async () => {
    for (const s of msgs) {
      const r = await p.send(toMessage(s));
      checkResult(s, r);
      const q = r.messageQueue.queueId;
      if (last.has(q) && r.queueOffset !== last.get(q) + 1) {
        throw new c.Failure(`queue ${q} offsets not consecutive: ${last.get(q)} then ${r.queueOffset}`);
      }
      last.set(q, r.queueOffset);
    }
  });
  return `${detail}, consecutive offsets on ${last.size} queues`;
}

async function producerConcurrent(env, scenario) {
  const topic = c.createTopic(env, c.name(env, 't', scenario));
  const p = await startProducer(env, scenario);
  const msgs = c.makeMessages(env, topic, 100, [ 'TagA', 'TagB' ]);
  return consumeAll(env, scenario, topic, msgs, async () => {
    const results = await Promise.all(msgs.map(s => p.send(toMessage(s))));
    results.forEach((r, i) => checkResult(msgs[i], r));
  });
}

async function pushClustering(env, scenario) {
  const topic = c.createTopic(env, c.name(env, 't', scenario));
  const group = c.name(env, 'cg', scenario);
  const a = newCollector();
  const b = newCollector();
  await startConsumer(env, group, 'a', topic, 'TagA || TagB', a);
  await startConsumer(env, group, 'b', topic, 'TagA || TagB', b);
  await c.sleep(c.SETTLE_MS);
  const p = await startProducer(env, scenario);
  const msgs = c.makeMessages(env, topic, 150, [ 'TagA', 'TagB', 'TagC' ]);
  for (const s of msgs) checkResult(s, await p.send(toMessage(s)));
  const expected = msgs.filter(s => s.tags !== 'TagC');
  const union = () => new Set([ ...a.cids, ...b.cids ]).size;
  await c.waitFor(`${expected.length} messages across both members`, c.ARRIVAL_TIMEOUT_MS,
    () => union() >= expected.length);
  await c.sleep(500); // lets a wrongly delivered TagC message show up
  const detail = c.verify(expected, [ ...a.got, ...b.got ], true);
  if (!a.distinct() || !b.distinct()) {
    throw new c.Failure(`queues not split: member a got ${a.distinct()}, member b got ${b.distinct()}`);
  }
  return `${detail}, split ${a.distinct()}/${b.distinct()}`;
}

// A new group that starts after the messages were stored still gets all of them.
async function lateConsumer(env, scenario) {
  const topic = c.createTopic(env, c.name(env, 't', scenario));
  const p = await startProducer(env, scenario);
  const msgs = c.makeMessages(env, topic, 40, [ 'TagA' ]);
  for (const s of msgs) checkResult(s, await p.send(toMessage(s)));
  const col = newCollector();
  await startConsumer(env, c.name(env, 'cg', scenario), 'm1', topic, '*', col);
  await c.waitFor(`${msgs.length} messages`, c.ARRIVAL_TIMEOUT_MS, () => col.distinct() >= msgs.length);
  await c.sleep(500);
  return c.verify(msgs, col.got, false);
}

// ACTION_RETRY sends the message back (CONSUMER_SEND_MSG_BACK); it comes again through the
// group's retry topic, intact, with its reconsume count raised.
async function retry(env, scenario) {
  const topic = c.createTopic(env, c.name(env, 't', scenario));
  const col = newCollector();
  col.retryFirst = rec => Number(rec.props.idx) % 5 === 0;
  await startConsumer(env, c.name(env, 'cg', scenario), 'm1', topic, '*', col);
  const p = await startProducer(env, scenario);
  await c.sleep(c.SETTLE_MS);
  const msgs = c.makeMessages(env, topic, 20, [ 'TagA' ]);
  for (const s of msgs) checkResult(s, await p.send(toMessage(s)));
  const retried = msgs.filter(s => s.idx % 5 === 0);
  const again = s => col.got.filter(r => r.cid === s.cid).slice(1);
  await c.waitFor(`${retried.length} redeliveries (retry delay level 3 is 10 s)`, c.ARRIVAL_TIMEOUT_MS,
    () => col.distinct() >= msgs.length && retried.every(s => again(s).length > 0));
  const detail = c.verify(msgs, col.got, true);
  for (const s of retried) {
    c.verify([ s ], again(s).slice(0, 1), false); // the redelivery is intact
    if (!(again(s)[0].reconsumeTimes >= 1)) {
      throw new c.Failure(`cid=${s.cid}: redelivered with reconsume times ${again(s)[0].reconsumeTimes}`);
    }
  }
  return `${detail}, ${retried.length} redelivered intact`;
}

const SCENARIOS = [
  { name: 'ons_producer_sequential', run: producerSequential },
  { name: 'ons_producer_concurrent', run: producerConcurrent },
  { name: 'ons_push_clustering', run: pushClustering },
  { name: 'ons_late_consumer', run: lateConsumer },
  { name: 'ons_retry', run: retry },
];

// The client's internal default producer (shared by every consumer) is never closed by the
// library, so the process exits explicitly once the report is printed.
c.runAll('ali-ons 3.12.0 (pure JavaScript)', c.parseArgs(process.argv.slice(2), USAGE), SCENARIOS)
  .then(code => process.exit(code), err => {
    console.log(`FAIL setup: ${err.stack}`);
    console.log('0 passed, 1 failed');
    process.exit(1);
  });
