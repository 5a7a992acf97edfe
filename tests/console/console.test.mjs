// Drives Comet's web console in Debian's headless Chromium (playwright-core, no browser
// download) against the standalone broker tests/console/run.sh started: puts known data in
// with comet-admin and comet-bench, visits every page, checks what it shows against the
// data, resets a group's offsets through the form and sees the lag change, and saves a
// screenshot of each page under docs/console/.
//
// Environment (set by run.sh): CONSOLE_URL, NAMESRV, BROKER_ADDR, BIN_DIR, SHOTS_DIR,
// CHROMIUM.

import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import assert from 'node:assert/strict';
import { chromium } from 'playwright-core';

const env = (name) => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set (run tests/console/run.sh)`);
  return value;
};
const CONSOLE_URL = env('CONSOLE_URL');
const NAMESRV = env('NAMESRV');
const BROKER_ADDR = env('BROKER_ADDR');
const BIN_DIR = env('BIN_DIR');
const SHOTS_DIR = env('SHOTS_DIR');
const CHROMIUM = env('CHROMIUM');

const TOPIC = 'ConsoleDemo';
const QUEUES = 4;
const OFFLINE_GROUP = 'console-demo-group';
const LIVE_GROUP = 'console-live-group';
const KEY = 'order-42';
const BODY = 'Hello from the console test: order 42, 3 items';
// Messages comet-bench sends before the offline group's offsets are set to the end, and
// after (each run adds its warm-up message: the test counts what the broker holds).
const BEFORE = 20;
const AFTER = 30;
// How long a page may take to show what the test waits for.
const WAIT_MS = 30_000;

const children = [];

function admin(...args) {
  return execFileSync(path.join(BIN_DIR, 'comet-admin'), ['-n', NAMESRV, ...args],
    { encoding: 'utf8', timeout: 60_000 });
}

function bench(...args) {
  execFileSync(path.join(BIN_DIR, 'comet-bench'), ['--namesrv', NAMESRV, '--quiet', ...args],
    { stdio: ['ignore', 'ignore', 'inherit'], timeout: 120_000 });
}

// A comet-bench run in the background, stopped at the end of the test at the latest.
function benchInBackground(...args) {
  const child = spawn(path.join(BIN_DIR, 'comet-bench'),
    ['--namesrv', NAMESRV, '--quiet', ...args], { stdio: ['ignore', 'ignore', 'inherit'] });
  children.push(child);
  return child;
}

async function api(apiPath) {
  const response = await fetch(new URL(apiPath, CONSOLE_URL));
  assert.equal(response.status, 200, `${apiPath}: HTTP ${response.status}`);
  return response.json();
}

async function poll(what, probe) {
  const deadline = Date.now() + WAIT_MS;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

async function groupLag(group) {
  const data = await api(`/api/group?group=${group}`);
  return data.totalLag;
}

// ---- data -------------------------------------------------------------------------------

// Messages the topic holds, as the broker reports them (GET_TOPIC_STATS_INFO).
async function held() {
  return (await api(`/api/topic?topic=${TOPIC}`)).messages;
}

// Puts the data in; returns sendMessage's report and the offline group's expected lag and
// the topic's total.
async function putData() {
  admin('updateTopic', '-t', TOPIC, '-b', BROKER_ADDR, '-q', String(QUEUES));
  admin('updateSubGroup', '-b', BROKER_ADDR, '-g', OFFLINE_GROUP);
  bench('produce', '--topic', TOPIC, '--messages', String(BEFORE), '--threads', '1',
    '--size', '64');
  await poll('the topic route', async () => (await api('/api/topics')).topics
    .some((t) => t.topic === TOPIC));
  const before = await held();
  assert.ok(before >= BEFORE, `${before} messages held`);
  // The offline group starts at the end of every queue: what follows is its lag.
  admin('resetOffsetByTime', '-g', OFFLINE_GROUP, '-t', TOPIC, '-s', '-1');
  assert.equal(await groupLag(OFFLINE_GROUP), 0);
  bench('produce', '--topic', TOPIC, '--messages', String(AFTER - 1), '--threads', '1',
    '--size', '64', '--keys');
  const report = JSON.parse(admin('--json', 'sendMessage', '-t', TOPIC, '-p', BODY, '-k', KEY,
    '-c', 'TagConsole'));
  const total = await held();
  assert.ok(total >= before + AFTER, `${total} messages held`);
  return { report, lag: total - before, total };
}

// The offset message id of comet-admin's sendMessage report (its `sent` table).
function offsetMsgId(report) {
  const text = JSON.stringify(report);
  const ids = text.match(/"[0-9A-F]{32}"/g) || [];
  // The table holds the client id (UNIQ_KEY) and then the offset id; the offset id is
  // the one whose first 8 hex digits are the broker's address.
  const [host, port] = BROKER_ADDR.split(':');
  const prefix = host.split('.').map((n) => Number(n).toString(16).padStart(2, '0')).join('')
    .toUpperCase() + Number(port).toString(16).padStart(8, '0').toUpperCase();
  const id = ids.map((quoted) => quoted.slice(1, -1)).find((candidate) =>
    candidate.startsWith(prefix));
  assert.ok(id, `no offset message id of ${BROKER_ADDR} in ${text}`);
  return id;
}

// ---- pages ------------------------------------------------------------------------------

async function visit(page, hash, ready) {
  // A change of fragment only redraws the page: forget the last view's mark first.
  if (page.url().startsWith(CONSOLE_URL)) {
    await page.evaluate(() => { delete document.body.dataset.ready; });
  }
  const url = `${CONSOLE_URL}#/${hash}`;
  // The same fragment again is no navigation: load the page afresh.
  if (page.url() === url) await page.reload();
  else await page.goto(url);
  await page.waitForFunction((name) => document.body.dataset.ready === name, ready,
    { timeout: WAIT_MS });
}

async function shoot(page, name) {
  await page.screenshot({ path: path.join(SHOTS_DIR, `${name}.png`), fullPage: true });
  console.log(`screenshot ${name}.png`);
}

async function text(page, selector) {
  return page.locator(selector).innerText();
}

async function main() {
  mkdirSync(SHOTS_DIR, { recursive: true });
  const { report, lag, total } = await putData();
  const msgId = offsetMsgId(report);
  // A live member of its own group (it consumes everything, so its lag stays near 0).
  benchInBackground('consume', '--topic', TOPIC, '--group', LIVE_GROUP, '--threads', '2',
    '--duration', '600');

  const profile = mkdtempSync(path.join(tmpdir(), 'comet-console-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    viewport: { width: 1360, height: 820 },
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  try {
    const page = context.pages()[0] || await context.newPage();
    const pageErrors = [];
    page.on('pageerror', (error) => pageErrors.push(String(error)));
    page.on('console', (message) => {
      if (message.type() === 'error') pageErrors.push(message.text());
    });

    // Cluster.
    await visit(page, 'cluster', 'cluster');
    const cluster = await text(page, 'main');
    assert.match(cluster, new RegExp(BROKER_ADDR.replace(/\./g, '\\.')));
    assert.match(cluster, /master/);
    assert.match(cluster, /answering/);
    assert.doesNotMatch(cluster, /no answer/);
    await shoot(page, 'cluster');

    // Topics, then the topic's queues with the offsets the API reports.
    await visit(page, 'topics', 'topics');
    assert.match(await text(page, 'main'), new RegExp(TOPIC));
    // The topic registered under the cluster's name is the broker's own: shown on demand.
    const clusterName = (await api('/api/cluster')).clusters[0].name;
    const ownRow = page.locator('tbody tr')
      .filter({ has: page.getByRole('link', { name: clusterName, exact: true }) });
    assert.equal(await ownRow.count(), 0);
    await page.check('#topic-system');
    assert.match(await ownRow.first().innerText(), /system/);
    await shoot(page, 'topics');
    await page.evaluate(() => { delete document.body.dataset.ready; });
    await page.getByRole('link', { name: TOPIC, exact: true }).click();
    await page.waitForFunction(() => document.body.dataset.ready === 'topic',
      null, { timeout: WAIT_MS });
    const stats = await api(`/api/topic?topic=${TOPIC}`);
    assert.equal(stats.messages, total);
    assert.equal(stats.queues.length, QUEUES);
    const topicText = await text(page, 'main');
    assert.match(topicText, new RegExp(`Messages held\\s+${total}\\b`, 'i'));
    const rows = await page.locator('tbody tr').allInnerTexts();
    for (const queue of stats.queues) {
      const cells = [queue.brokerName, queue.queueId, queue.minOffset, queue.maxOffset];
      assert.ok(rows.some((row) => row.split('\t').slice(0, 4).join('|') === cells.join('|')),
        `queue row ${cells.join('|')} in ${rows.join(' / ')}`);
    }
    await shoot(page, 'topic');

    // Groups: the list, then the offline group's lag, reset to the earliest message.
    await visit(page, 'groups', 'groups');
    const groupsText = await text(page, 'main');
    assert.match(groupsText, new RegExp(OFFLINE_GROUP));
    assert.doesNotMatch(groupsText, /TOOLS_CONSUMER/);
    await poll('the live group', async () => {
      const data = await api('/api/groups');
      return data.groups.some((g) => g.group === LIVE_GROUP);
    });
    await visit(page, 'groups', 'groups');
    assert.match(await text(page, 'main'), new RegExp(LIVE_GROUP));
    await shoot(page, 'groups');

    assert.equal(await groupLag(OFFLINE_GROUP), lag);
    await visit(page, `group/${OFFLINE_GROUP}`, 'group');
    assert.match(await text(page, 'main'), new RegExp(`Total lag\\s+${lag}\\b`, 'i'));
    await shoot(page, 'group');
    await page.selectOption('#reset-topic', TOPIC);
    await page.selectOption('#reset-to', '0');
    await page.click('#reset-form button[type=submit]');
    await page.locator('#reset-result .note').waitFor({ timeout: WAIT_MS });
    assert.match(await text(page, '#reset-result'), new RegExp(`Reset ${QUEUES} queues`));
    await page.waitForFunction(
      (expected) => /Total lag\s+(\d[\d,]*)/i.exec(document.querySelector('main').innerText)?.[1]
        === String(expected), total, { timeout: WAIT_MS });
    assert.equal(await groupLag(OFFLINE_GROUP), total);
    await shoot(page, 'group-reset');

    // The live group: its member is online.
    const live = await poll('a live member', async () => {
      const data = await api(`/api/group?group=${LIVE_GROUP}`);
      return data.connections.length > 0 && data;
    });
    await visit(page, `group/${LIVE_GROUP}`, 'group');
    const liveText = await text(page, 'main');
    assert.match(liveText, new RegExp(`Members online\\s+${live.connections.length}\\b`, 'i'));
    assert.ok(liveText.includes(live.connections[0].clientId), liveText);
    await shoot(page, 'group-live');

    // Messages: by offset message id, by key, by queue offset.
    await visit(page, 'messages', 'messages');
    await page.fill('#m-id', msgId);
    await page.click('#by-id button');
    await page.locator('#message-result pre.body').waitFor({ timeout: WAIT_MS });
    assert.equal(await text(page, '#message-result pre.body'), BODY);
    assert.match(await text(page, '#message-result'), /TagConsole/);
    await shoot(page, 'messages');
    await page.fill('#k-topic', TOPIC);
    await page.fill('#k-key', KEY);
    await page.click('#by-key button');
    await page.waitForFunction(() => /1 message found/.test(
      document.querySelector('#message-result').innerText), null, { timeout: WAIT_MS });
    assert.equal(await text(page, '#message-result pre.body'), BODY);
    const found = (await api(`/api/message/key?topic=${TOPIC}&key=${KEY}`)).messages[0];
    await page.fill('#o-topic', TOPIC);
    await page.fill('#o-broker', found.brokerName);
    await page.fill('#o-queue', String(found.queueId));
    await page.fill('#o-offset', String(found.queueOffset));
    await page.click('#by-offset button');
    await page.waitForFunction((offset) => document.querySelector('#message-result')
      .innerText.includes(`Queue offset\n${offset}`), found.queueOffset, { timeout: WAIT_MS });
    assert.equal(await text(page, '#message-result pre.body'), BODY);
    await shoot(page, 'messages-offset');

    // Throughput: a steady producer, a second one for a while, and the chart's rates.
    benchInBackground('produce', '--topic', TOPIC, '--rate', '150', '--duration', '60',
      '--threads', '4', '--size', '256');
    await visit(page, 'throughput', 'throughput');
    const inRate = (above) => page.waitForFunction((limit) => {
      const cells = [...document.querySelectorAll('#rates tbody tr td:nth-child(4)')];
      return cells.some((cell) => Number(cell.innerText) > limit);
    }, above, { timeout: WAIT_MS });
    await inRate(100);
    await page.waitForTimeout(8000);
    benchInBackground('produce', '--topic', TOPIC, '--rate', '150', '--duration', '10',
      '--threads', '4', '--size', '256');
    await inRate(200);
    // Let the chart show the second producer stop.
    await page.waitForTimeout(16000);
    await shoot(page, 'throughput');

    assert.deepEqual(pageErrors, [], 'the page logged errors');
    console.log('console browser test: passed');
  } finally {
    await context.close();
    rmSync(profile, { recursive: true, force: true });
  }
}

try {
  await main();
} finally {
  for (const child of children) {
    if (child.exitCode === null) child.kill('SIGTERM');
  }
}
