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
// Messages sent before the offline group's offsets are set to the end, and after.
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

function putData() {
  admin('updateTopic', '-t', TOPIC, '-b', BROKER_ADDR, '-q', String(QUEUES));
  admin('updateSubGroup', '-b', BROKER_ADDR, '-g', OFFLINE_GROUP);
  bench('produce', '--topic', TOPIC, '--messages', String(BEFORE), '--threads', '1',
    '--size', '64');
  // The offline group starts at the end of every queue: what follows is its lag.
  admin('resetOffsetByTime', '-g', OFFLINE_GROUP, '-t', TOPIC, '-s', '-1');
  bench('produce', '--topic', TOPIC, '--messages', String(AFTER - 1), '--threads', '1',
    '--size', '64', '--keys');
  const sent = JSON.parse(admin('--json', 'sendMessage', '-t', TOPIC, '-p', BODY, '-k', KEY,
    '-c', 'TagConsole'));
  return sent;
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
  await page.goto(`${CONSOLE_URL}#/${hash}`);
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
  const report = putData();
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
    await poll('the topic route', async () => (await api('/api/topics')).topics
      .some((t) => t.topic === TOPIC));
    await visit(page, 'topics', 'topics');
    assert.match(await text(page, 'main'), new RegExp(TOPIC));
    await shoot(page, 'topics');
    await page.getByRole('link', { name: TOPIC, exact: true }).click();
    await page.waitForFunction(() => document.body.dataset.ready === 'topic',
      null, { timeout: WAIT_MS });
    const stats = await api(`/api/topic?topic=${TOPIC}`);
    assert.equal(stats.messages, BEFORE + AFTER);
    assert.equal(stats.queues.length, QUEUES);
    const topicText = await text(page, 'main');
    assert.match(topicText, new RegExp(`Messages held\\s+${BEFORE + AFTER}`, 'i'));
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

    assert.equal(await groupLag(OFFLINE_GROUP), AFTER);
    await visit(page, `group/${OFFLINE_GROUP}`, 'group');
    assert.match(await text(page, 'main'), new RegExp(`Total lag\\s+${AFTER}\\b`, 'i'));
    await shoot(page, 'group');
    await page.selectOption('#reset-topic', TOPIC);
    await page.selectOption('#reset-to', '0');
    await page.click('#reset-form button[type=submit]');
    await page.locator('#reset-result .note').waitFor({ timeout: WAIT_MS });
    assert.match(await text(page, '#reset-result'), new RegExp(`Reset ${QUEUES} queues`));
    await page.waitForFunction(
      (lag) => /Total lag\s+(\d[\d,]*)/i.exec(document.querySelector('main').innerText)?.[1]
        === String(lag), BEFORE + AFTER, { timeout: WAIT_MS });
    assert.equal(await groupLag(OFFLINE_GROUP), BEFORE + AFTER);
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

    // Throughput: a steady producer, and the chart's rates above zero.
    benchInBackground('produce', '--topic', TOPIC, '--rate', '200', '--duration', '40',
      '--threads', '4', '--size', '256');
    await visit(page, 'throughput', 'throughput');
    await page.waitForFunction(() => {
      const cells = [...document.querySelectorAll('#rates tbody tr td:nth-child(4)')];
      return cells.some((cell) => Number(cell.innerText) > 50);
    }, null, { timeout: WAIT_MS });
    // Let the chart fill a few seconds.
    await page.waitForTimeout(8000);
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
