'use strict';
// Shared parts of the Node.js compatibility suites: run ids, topic creation, the messages
// every scenario sends, arrival collection and the comparison of what arrived with what was
// sent. Every message carries a unique cid (in a property where the client has properties,
// else at the start of its body); arrivals are matched by it.

const { execFileSync } = require('child_process');
const crypto = require('crypto');
const path = require('path');

const QUEUES = 4;
const LARGE_BODY_BYTES = 8 * 1024; // above the clients' 4 KiB compression threshold
const ARRIVAL_TIMEOUT_MS = 45000;
const SCENARIO_TIMEOUT_MS = 150000;
const SETTLE_MS = 3000; // lets new consumers register and rebalance before the first send
const NOTE = 'h\u00e9llo w\u00f6rld \u2713 a=b';

class Failure extends Error {}

function parseArgs(argv, usage) {
  const args = { namesrv: '', broker: '', only: '' };
  for (let i = 0; i < argv.length; i += 2) {
    const key = argv[i].replace(/^--/, '');
    if (!(key in args) || argv[i + 1] === undefined) {
      process.stderr.write(`error: bad argument ${argv[i]}\n${usage}\n`);
      process.exit(2);
    }
    args[key] = argv[i + 1];
  }
  if (!args.namesrv) {
    process.stderr.write(`error: --namesrv is required\n${usage}\n`);
    process.exit(2);
  }
  if (!args.broker) args.broker = args.namesrv.replace(/:\d+$/, ':10911');
  return args;
}

// The clients under test have no admin API; the Python suite's stdlib remoting helper sends
// UPDATE_AND_CREATE_TOPIC and waits for the route, as the Java admin tool would.
function createTopic(env, topic) {
  const helper = path.join(__dirname, '..', 'python', 'remoting.py');
  try {
    execFileSync('python3', [ helper, 'create-topic', '--namesrv', env.namesrv, '--broker', env.broker,
      '--topic', topic, '--queues', String(QUEUES) ], { stdio: [ 'ignore', 'ignore', 'pipe' ], timeout: 60000 });
  } catch (err) {
    throw new Failure(`create topic ${topic}: ${(err.stderr || err.message).toString().trim()}`);
  }
  return topic;
}

function newEnv(args) {
  return { namesrv: args.namesrv, broker: args.broker, runId: crypto.randomBytes(4).toString('hex') };
}

function name(env, prefix, scenario) {
  return `${prefix}_${scenario}_${env.runId}`;
}

// n messages cycling through tags; every 25th body is 8 KiB (compressed by the client), odd
// ones carry two keys. The body starts with the cid so clients without properties match too.
function makeMessages(env, topic, n, tags) {
  const out = [];
  for (let i = 0; i < n; i++) {
    const cid = `${env.runId}-${topic}-${i}`;
    const size = i % 25 === 0 ? LARGE_BODY_BYTES : 100 + (i % 300);
    let body = `${cid} body `;
    while (body.length < size) body += String.fromCharCode(97 + ((body.length * 7 + i) % 26));
    const keys = [ `k${i}-${env.runId}` ];
    if (i % 2 === 1) keys.push(`alt${i}-${env.runId}`);
    out.push({ cid, idx: i, topic, tags: tags[i % tags.length], keys, body,
      props: { cid, idx: String(i), note: NOTE } });
  }
  return out;
}

function cidOfBody(body) {
  return body.slice(0, body.indexOf(' '));
}

// Records arrivals of one consumer member as plain records:
// { cid, topic, tags, keys, body (string), msgId, props (or null), queueId, queueOffset }.
class Collector {
  constructor() { this.got = []; this.cids = new Set(); }
  add(rec) { this.got.push(rec); this.cids.add(rec.cid); }
  distinct() { return this.cids.size; }
}

function sleep(ms) { return new Promise(resolve => setTimeout(resolve, ms)); }

async function waitFor(what, timeoutMs, done) {
  const deadline = Date.now() + timeoutMs;
  while (!done()) {
    if (Date.now() > deadline) throw new Failure(`timed out after ${timeoutMs / 1000}s waiting for ${what}`);
    await sleep(50);
  }
}

function compare(s, r) {
  const p = [];
  const id = `cid=${s.cid}: `;
  if (r.topic !== s.topic) p.push(`${id}topic ${r.topic}`);
  if (r.body !== s.body) p.push(`${id}body differs (${r.body.length} chars, sent ${s.body.length})`);
  if (r.tags !== s.tags) p.push(`${id}tags ${JSON.stringify(r.tags)} != ${JSON.stringify(s.tags)}`);
  if (r.keys !== s.keys.join(' ')) p.push(`${id}keys ${JSON.stringify(r.keys)} != ${JSON.stringify(s.keys.join(' '))}`);
  if (r.props) {
    for (const [ k, v ] of Object.entries(s.props)) {
      if (r.props[k] !== v) p.push(`${id}property ${k}=${JSON.stringify(r.props[k])} != ${JSON.stringify(v)}`);
    }
  }
  if (!r.msgId) p.push(`${id}no msgId`);
  if (r.queueOffset !== undefined && !(r.queueOffset >= 0)) p.push(`${id}bad queue offset ${r.queueOffset}`);
  return p;
}

// Every expected message arrived intact and nothing else arrived; duplicates fail unless
// allowed (clustering is at-least-once around a rebalance).
function verify(expected, got, allowDup) {
  const byCid = new Map(expected.map(s => [ s.cid, s ]));
  const seen = new Map();
  const problems = [];
  let dups = 0;
  for (const r of got) {
    const s = byCid.get(r.cid);
    if (!s) {
      problems.push(`unexpected message cid=${r.cid} tags=${r.tags}`);
      continue;
    }
    seen.set(r.cid, (seen.get(r.cid) || 0) + 1);
    if (seen.get(r.cid) > 1) {
      dups++;
      continue;
    }
    problems.push(...compare(s, r));
  }
  const missing = expected.filter(s => !seen.has(s.cid)).map(s => s.cid);
  problems.push(...missing.slice(0, 3).map(c => `missing cid=${c}`));
  if (missing.length > 3) problems.push(`... ${missing.length} missing in all`);
  if (dups && !allowDup) problems.push(`${dups} duplicate deliveries`);
  if (problems.length) throw new Failure(problems.slice(0, 8).join('; '));
  return `${expected.length} msgs intact${dups ? `, ${dups} dup` : ''}`;
}

function withTimeout(promise, ms, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Failure(`${what} timed out after ${ms / 1000}s`)), ms);
  });
  return Promise.race([ promise, timeout ]).finally(() => clearTimeout(timer));
}

// Runs the scenarios one after the other, each bounded, and prints PASS/FAIL lines and the
// closing "N passed, N failed". Every scenario registers what it starts in env.started, and
// those are closed (bounded too) whatever happens.
async function runAll(title, args, scenarios) {
  console.log(`${title} against name server ${args.namesrv} (broker ${args.broker})`);
  let chosen = scenarios;
  if (args.only) {
    const names = args.only.split(',');
    const unknown = names.filter(n => !scenarios.some(s => s.name === n));
    if (unknown.length) {
      process.stderr.write(`error: unknown scenario ${unknown.join(', ')}\n`);
      process.exit(2);
    }
    chosen = scenarios.filter(s => names.includes(s.name));
  }
  const env = newEnv(args);
  let passed = 0;
  const failed = [];
  for (const s of chosen) {
    const start = Date.now();
    env.started = [];
    let detail;
    let error;
    try {
      detail = await withTimeout(s.run(env, s.name), SCENARIO_TIMEOUT_MS, 'scenario');
    } catch (err) {
      error = err instanceof Failure ? err.message : `${err.name}: ${err.message}`;
    }
    for (const close of env.started.reverse()) {
      try {
        await withTimeout(close(), 30000, 'client shutdown');
      } catch (err) {
        error = error || `shutdown: ${err.message}`;
      }
    }
    const ms = String(Date.now() - start).padStart(5);
    if (error) {
      failed.push(s.name);
      console.log(`FAIL ${s.name.padEnd(28)} (${ms} ms): ${error}`);
    } else {
      passed++;
      console.log(`PASS ${s.name.padEnd(28)} (${ms} ms) ${detail}`);
    }
  }
  if (failed.length) console.log(`failed scenarios: ${failed.join(', ')}`);
  console.log(`${passed} passed, ${failed.length} failed`);
  return failed.length ? 1 : 0;
}

module.exports = {
  QUEUES, ARRIVAL_TIMEOUT_MS, SETTLE_MS, Failure, Collector, parseArgs, createTopic, name,
  makeMessages, cidOfBody, sleep, waitFor, verify, runAll,
};
