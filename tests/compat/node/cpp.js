'use strict';
// Compatibility scenarios of npm rocketmq-nodejs 1.1.2, the Node.js binding of the RocketMQ
// C++ client 3.0 (prebuilt N-API addon shipped in the package):
//
//   node cpp.js --namesrv 127.0.0.1:9876 [--broker 127.0.0.1:10911] [--only a,b]
//
// The binding sends tags, keys and a body and hands the consumer topic, tags, keys, body and
// msgId (no user properties), so the cid starts each body. Scenarios: sequential sends,
// concurrent sends, and two clustering push-consumer members that split the queues and
// filter by tag. Prints PASS/FAIL per scenario and "N passed, N failed"; exits 1 on failure.

const { Producer, PushConsumer } = require('rocketmq-nodejs');
const c = require('./common');

const USAGE = 'usage: node cpp.js --namesrv HOST:PORT [--broker HOST:PORT] [--only a,b]';
const LOG_LEVEL = process.env.COMPAT_NODE_LOG || 'warn';

async function startProducer(env, scenario) {
  const p = new Producer(c.name(env, 'pg', scenario), c.name(env, 'prod', scenario),
    { nameServer: env.namesrv, sendMessageTimeout: 10000, logLevel: LOG_LEVEL });
  await p.start();
  env.started.push(() => p.shutdown());
  return p;
}

// Members of one group need distinct instance names, or they would share a client id.
// A collector with retryFirst(rec) answers ack.done(false) to the first delivery of the
// messages it picks, so the client sends them back for a later retry.
async function startConsumer(env, group, member, topic, expr, collector) {
  const pc = new PushConsumer(group, `${group}_${member}`,
    { nameServer: env.namesrv, threadCount: 2, logLevel: LOG_LEVEL });
  pc.subscribe(topic, expr);
  pc.on('message', (msg, ack) => {
    const rec = { cid: c.cidOfBody(msg.body), topic: msg.topic, tags: msg.tags, keys: msg.keys,
      body: msg.body, msgId: msg.msgId, props: null };
    const first = !collector.cids.has(rec.cid);
    collector.add(rec);
    ack.done(!(first && collector.retryFirst && collector.retryFirst(rec)));
  });
  await pc.start();
  env.started.push(() => pc.shutdown());
  return pc;
}

function checkResult(s, r) {
  if (!r || r.status !== 0 || r.statusStr !== 'OK' || !r.msgId || !(r.offset >= 0)) {
    throw new c.Failure(`bad send result for ${s.cid}: ${JSON.stringify(r)}`);
  }
}

function send(p, s) {
  return p.send(s.topic, s.body, { tags: s.tags, keys: s.keys.join(' ') });
}

// Starts one push consumer, runs sendAll, then checks everything arrived intact, once.
async function consumeAll(env, scenario, topic, msgs, sendAll) {
  const col = new c.Collector();
  await startConsumer(env, c.name(env, 'cg', scenario), 'm1', topic, '*', col);
  await c.sleep(c.SETTLE_MS);
  await sendAll();
  await c.waitFor(`${msgs.length} messages`, c.ARRIVAL_TIMEOUT_MS, () => col.distinct() >= msgs.length);
  await c.sleep(500); // lets a duplicate show up
  return c.verify(msgs, col.got, false);
}

async function producerSequential(env, scenario) {
  const topic = c.createTopic(env, c.name(env, 't', scenario));
  const p = await startProducer(env, scenario);
  const msgs = c.makeMessages(env, topic, 100, [ 'TagA', 'TagB' ]);
  return consumeAll(env, scenario, topic, msgs, async () => {
    for (const s of msgs) checkResult(s, await send(p, s));
  });
}

async function producerConcurrent(env, scenario) {
  const topic = c.createTopic(env, c.name(env, 't', scenario));
  const p = await startProducer(env, scenario);
  const msgs = c.makeMessages(env, topic, 100, [ 'TagA', 'TagB' ]);
  return consumeAll(env, scenario, topic, msgs, async () => {
    const results = await Promise.all(msgs.map(s => send(p, s)));
    results.forEach((r, i) => checkResult(msgs[i], r));
  });
}

async function pushClustering(env, scenario) {
  const topic = c.createTopic(env, c.name(env, 't', scenario));
  const group = c.name(env, 'cg', scenario);
  const a = new c.Collector();
  const b = new c.Collector();
  await startConsumer(env, group, 'a', topic, 'TagA || TagB', a);
  await startConsumer(env, group, 'b', topic, 'TagA || TagB', b);
  await c.sleep(c.SETTLE_MS);
  const p = await startProducer(env, scenario);
  const msgs = c.makeMessages(env, topic, 150, [ 'TagA', 'TagB', 'TagC' ]);
  for (const s of msgs) checkResult(s, await send(p, s));
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
  for (const s of msgs) checkResult(s, await send(p, s));
  const col = new c.Collector();
  await startConsumer(env, c.name(env, 'cg', scenario), 'm1', topic, '*', col);
  await c.waitFor(`${msgs.length} messages`, c.ARRIVAL_TIMEOUT_MS, () => col.distinct() >= msgs.length);
  await c.sleep(500);
  return c.verify(msgs, col.got, false);
}

// A failed consumption (ack.done(false)) sends the message back; it comes again, intact.
async function retry(env, scenario) {
  const topic = c.createTopic(env, c.name(env, 't', scenario));
  const col = new c.Collector();
  col.retryFirst = rec => Number(rec.cid.slice(rec.cid.lastIndexOf('-') + 1)) % 5 === 0;
  await startConsumer(env, c.name(env, 'cg', scenario), 'm1', topic, '*', col);
  const p = await startProducer(env, scenario);
  await c.sleep(c.SETTLE_MS);
  const msgs = c.makeMessages(env, topic, 20, [ 'TagA' ]);
  for (const s of msgs) checkResult(s, await send(p, s));
  const retried = msgs.filter(s => s.idx % 5 === 0);
  const again = s => col.got.filter(r => r.cid === s.cid).slice(1);
  await c.waitFor(`${retried.length} redeliveries (retry delay level 3 is 10 s)`, c.ARRIVAL_TIMEOUT_MS,
    () => col.distinct() >= msgs.length && retried.every(s => again(s).length > 0));
  const detail = c.verify(msgs, col.got, true);
  for (const s of retried) c.verify([ s ], again(s).slice(0, 1), false); // the redelivery is intact
  return `${detail}, ${retried.length} redelivered intact`;
}

const SCENARIOS = [
  { name: 'cpp3_producer_sequential', run: producerSequential },
  { name: 'cpp3_producer_concurrent', run: producerConcurrent },
  { name: 'cpp3_push_clustering', run: pushClustering },
  { name: 'cpp3_late_consumer', run: lateConsumer },
  { name: 'cpp3_retry', run: retry },
];

// The addon's static EventLoop destructor joins a thread parked in epoll_wait, so a normal
// exit hangs for about two minutes (against any broker). Once everything is reported and
// every client is shut down, the process ends itself with SIGKILL instead; run.sh then reads
// the outcome from the closing "N passed, N failed" line.
function hardExit() {
  process.stdout.write('', () => process.kill(process.pid, 'SIGKILL'));
}

c.runAll('rocketmq-nodejs 1.1.2 (C++ client 3.0)', c.parseArgs(process.argv.slice(2), USAGE), SCENARIOS)
  .then(hardExit, err => {
    console.log(`FAIL setup: ${err.stack}`);
    console.log('0 passed, 1 failed');
    hardExit();
  });
