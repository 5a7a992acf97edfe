// Comet's web console: one page, its views chosen by the URL fragment (#/cluster,
// #/topic/<name>, ...), everything drawn from the JSON API under /api/. Data is only ever
// set as text (textContent, input values), never parsed as markup.
'use strict';

const main = document.getElementById('main');
const statusLine = document.getElementById('status');
// The view drawn last: an answer for an older view is dropped.
let generation = 0;
// The throughput page's poller, stopped when the view changes.
let poller = null;

// An element with attributes (`on*` keys are listeners) and children (strings become text).
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith('on')) node.addEventListener(key.slice(2), value);
    else if (key === 'className') node.className = value;
    else node.setAttribute(key, value === true ? '' : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function num(value) {
  if (value === undefined || value === null || value === '') return '–';
  const n = Number(value);
  return Number.isFinite(n) ? n.toLocaleString('en-US') : String(value);
}

function time(ms) {
  const n = Number(ms);
  if (!Number.isFinite(n) || n <= 0) return '–';
  return new Date(n).toISOString().replace('T', ' ').replace(/\.\d+Z$/, ' UTC');
}

function link(hash, text) {
  return el('a', { href: hash }, text);
}

// GET (or POST a form) and parse the JSON answer; an answer with `error` throws it.
async function api(path, form) {
  const init = form
    ? { method: 'POST', body: new URLSearchParams(form),
        // The console's mark: a form another site posts cannot carry it (docs/operations.md).
        headers: { 'Content-Type': 'application/x-www-form-urlencoded',
          'X-Comet-Console': '1' } }
    : {};
  const response = await fetch(path, init);
  let body;
  try {
    body = await response.json();
  } catch (error) {
    throw new Error(`${path}: HTTP ${response.status}, not JSON`);
  }
  if (body && typeof body.error === 'string') throw new Error(body.error);
  return body;
}

function table(headers, rows, empty) {
  const head = el('tr', null, headers.map((h) => {
    const [label, numeric] = Array.isArray(h) ? h : [h, false];
    return el('th', { className: numeric ? 'num' : null }, label);
  }));
  const numeric = headers.map((h) => Array.isArray(h) && h[1]);
  const body = rows.length
    ? rows.map((cells) => el('tr', null, cells.map((cell, i) =>
      el('td', { className: numeric[i] ? 'num' : null }, cell))))
    : [el('tr', null, el('td', { colspan: headers.length, className: 'muted' }, empty || 'None'))];
  return el('div', { className: 'tablewrap' }, el('table', null, el('thead', null, head),
    el('tbody', null, body)));
}

function errorList(errors) {
  return (errors || []).map((e) =>
    el('div', { className: 'error' }, `${e.brokerName} (${e.addr}): ${e.error}`));
}

function card(label, value) {
  return el('div', { className: 'card' }, el('div', { className: 'label' }, label),
    el('div', { className: 'value' }, value));
}

function show(...nodes) {
  main.replaceChildren(...nodes.flat(Infinity).filter((node) => node !== null && node !== undefined));
}

function failed(error) {
  show(el('div', { className: 'error' }, String(error.message || error)));
}

// The first figure of a "10s 1min 10min" TPS triple.
function firstTps(text) {
  if (!text) return '–';
  const first = String(text).trim().split(/\s+/)[0];
  const n = Number(first);
  return Number.isFinite(n) ? n.toFixed(1) : first;
}

// ---- Cluster ----------------------------------------------------------------------------

async function clusterPage(gen) {
  const data = await api('/api/cluster');
  if (gen !== generation) return;
  const all = data.clusters.flatMap((c) => c.brokers);
  const answering = all.filter((b) => !b.error).length;
  const nodes = [el('h1', null, 'Cluster'),
    el('div', { className: 'cards' }, card('Clusters', data.clusters.length),
      card('Broker processes', all.length), card('Answering', `${answering} / ${all.length}`))];
  if (!all.length) nodes.push(el('div', { className: 'note' }, 'No broker is registered.'));
  for (const cluster of data.clusters) {
    nodes.push(el('h2', null, `Cluster ${cluster.name}`));
    nodes.push(table(['Broker', ['ID', true], 'Role', 'Address', 'Version', ['Put TPS', true],
      ['Get TPS', true], ['Put today', true], ['Got today', true], ['Disk used', true],
      ['Heartbeat', true], 'State'],
    cluster.brokers.map((b) => {
      const r = b.runtime || {};
      const ratio = Number(r.commitLogDiskRatio);
      return [b.brokerName, b.brokerId,
        el('span', { className: `tag ${b.role}` }, b.role), b.addr,
        r.brokerVersionDesc || '–', firstTps(r.putTps), firstTps(r.getTransferredTps),
        num(r.msgPutTotalTodayNow), num(r.msgGetTotalTodayNow),
        Number.isFinite(ratio) && ratio >= 0 ? `${(ratio * 100).toFixed(1)} %` : '–',
        b.heartbeatAgeMs === null ? '–' : `${(b.heartbeatAgeMs / 1000).toFixed(0)} s ago`,
        b.error ? el('span', { className: 'tag bad', title: b.error }, 'no answer')
          : el('span', { className: 'tag ok' }, 'answering')];
    })));
    for (const b of cluster.brokers.filter((x) => x.error)) {
      nodes.push(el('div', { className: 'error' }, `${b.brokerName} (${b.addr}): ${b.error}`));
    }
  }
  show(nodes);
}

// ---- Topics -----------------------------------------------------------------------------

async function topicsPage(gen) {
  const data = await api('/api/topics');
  if (gen !== generation) return;
  const filter = el('input', { type: 'search', placeholder: 'Filter topics', id: 'topic-filter' });
  const system = el('input', { type: 'checkbox', id: 'topic-system' });
  const holder = el('div');
  const draw = () => {
    const text = filter.value.trim().toLowerCase();
    const rows = data.topics
      .filter((t) => system.checked || t.kind === 'normal')
      .filter((t) => !text || t.topic.toLowerCase().includes(text))
      .map((t) => [link(`#/topic/${encodeURIComponent(t.topic)}`, t.topic),
        t.brokers.map((b) => b.brokerName).join(', '),
        t.brokers.reduce((sum, b) => sum + b.readQueues, 0),
        t.brokers.reduce((sum, b) => sum + b.writeQueues, 0),
        t.kind === 'normal' ? '' : el('span', { className: 'tag sys' }, t.kind)]);
    holder.replaceChildren(table(['Topic', 'Brokers', ['Read queues', true],
      ['Write queues', true], ''], rows, 'No topic matches'));
  };
  filter.addEventListener('input', draw);
  system.addEventListener('change', draw);
  draw();
  show(el('h1', null, 'Topics'),
    el('div', { className: 'toolbar' }, filter,
      el('label', null, system, ' show retry, dead-letter and system topics'),
      el('span', { className: 'muted' }, `${data.topics.length} topics in all`)),
    holder);
}

async function topicPage(gen, topic) {
  const data = await api(`/api/topic?topic=${encodeURIComponent(topic)}`);
  if (gen !== generation) return;
  const brokers = new Set(data.queues.map((q) => q.brokerName));
  show(el('h1', null, link('#/topics', 'Topics'), ' / ', topic),
    el('div', { className: 'cards' }, card('Queues', data.queues.length),
      card('Brokers', brokers.size), card('Messages held', num(data.messages))),
    errorList(data.errors),
    table(['Broker', ['Queue', true], ['Min offset', true], ['Max offset', true],
      ['Messages', true], 'Last stored', ''],
    data.queues.map((q) => [q.brokerName, q.queueId, num(q.minOffset), num(q.maxOffset),
      num(q.messages), time(q.lastUpdateTimestamp),
      q.maxOffset > q.minOffset
        ? link(`#/messages?topic=${encodeURIComponent(topic)}&broker=${encodeURIComponent(
          q.brokerName)}&queue=${q.queueId}&offset=${q.maxOffset - 1}`, 'last message')
        : '']),
    'No queue answered'));
}

// ---- Groups -----------------------------------------------------------------------------

async function groupsPage(gen) {
  const data = await api('/api/groups');
  if (gen !== generation) return;
  const system = el('input', { type: 'checkbox', id: 'group-system' });
  const holder = el('div');
  const draw = () => {
    const rows = data.groups.filter((g) => system.checked || !g.system)
      .map((g) => [link(`#/group/${encodeURIComponent(g.group)}`, g.group),
        g.brokers.join(', '), g.consumeEnable ? 'yes' : 'no', g.retryMaxTimes,
        g.system ? el('span', { className: 'tag sys' }, 'built-in') : '']);
    holder.replaceChildren(table(['Group', 'Brokers', 'Consume enabled',
      ['Retry max', true], ''], rows, 'No consumer group'));
  };
  system.addEventListener('change', draw);
  draw();
  show(el('h1', null, 'Consumer groups'), errorList(data.errors),
    el('div', { className: 'toolbar' }, el('label', null, system, ' show built-in groups'),
      el('span', { className: 'muted' }, `${data.groups.length} groups in all`)),
    holder);
}

// The reset form; `notice` (nodes) is the last reset's outcome, kept across the redraw
// `onDone` makes with the new offsets.
function resetForm(group, topics, notice, onDone) {
  const topic = el('select', { name: 'topic', id: 'reset-topic' },
    topics.map((t) => el('option', { value: t }, t)));
  const topicInput = topics.length ? topic
    : el('input', { name: 'topic', id: 'reset-topic', placeholder: 'topic', required: true });
  const to = el('select', { id: 'reset-to' }, el('option', { value: '0' }, 'the earliest message'),
    el('option', { value: '-1' }, 'the end (skip everything)'),
    el('option', { value: 'time' }, 'a time…'));
  const when = el('input', { type: 'datetime-local', id: 'reset-time', step: 1, disabled: true });
  to.addEventListener('change', () => { when.disabled = to.value !== 'time'; });
  const result = el('div', { id: 'reset-result' }, notice || []);
  const form = el('form', { className: 'inline', id: 'reset-form' },
    el('label', null, 'Topic', topicInput), el('label', null, 'Reset to', to),
    el('label', null, 'Time (local)', when),
    el('button', { type: 'submit', className: 'danger' }, 'Reset offsets'));
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    let timestamp = to.value;
    if (timestamp === 'time') {
      const ms = new Date(when.value).getTime();
      if (!Number.isFinite(ms)) {
        result.replaceChildren(el('div', { className: 'error' }, 'Pick a time first.'));
        return;
      }
      timestamp = String(ms);
    }
    try {
      const answer = await api('/api/group/reset',
        { group, topic: topicInput.value, timestamp });
      await onDone([el('div', { className: 'note' },
        `Reset ${answer.offsets.length} queues of ${answer.topic}: ` +
        answer.offsets.map((o) => `${o.brokerName}/${o.queueId} → ${o.offset}`).join(', ')),
      ...errorList(answer.errors)]);
    } catch (error) {
      result.replaceChildren(el('div', { className: 'error' }, String(error.message)));
    }
  });
  return el('div', { className: 'panel' }, el('h2', null, 'Reset offsets'),
    el('p', { className: 'muted' }, 'Moves the group to the first message stored at or after ' +
      'the time, on every broker of the topic; online members are told to follow.'),
    form, result);
}

// RocketMQ's consume types by the names its users know them.
const CONSUME_TYPES = { CONSUME_PASSIVELY: 'push', CONSUME_ACTIVELY: 'pull', CONSUME_POP: 'pop' };

async function groupPage(gen, group, notice) {
  const data = await api(`/api/group?group=${encodeURIComponent(group)}`);
  if (gen !== generation) return;
  const topics = [...new Set(data.queues.map((q) => q.topic))].sort();
  const settings = data.settings || {};
  const subs = (settings.subscriptions || []).map((s) => `${s.topic} (${s.expression})`);
  show(el('h1', null, link('#/groups', 'Groups'), ' / ', group),
    el('div', { className: 'cards' }, card('Total lag', num(data.totalLag)),
      card('Members online', data.connections.length), card('Queues', data.queues.length),
      card('Consume type', CONSUME_TYPES[settings.consumeType] || settings.consumeType || '–'),
      card('Model', (settings.messageModel || '–').toLowerCase())),
    errorList(data.errors),
    el('h2', null, 'Connections'),
    subs.length ? el('p', { className: 'muted' }, `Subscriptions: ${subs.join(', ')}`) : null,
    table(['Client id', 'Address', 'Language', ['Version', true], 'Brokers'],
      data.connections.map((c) => [c.clientId, c.clientAddr, c.language, c.version,
        c.brokers.join(', ')]), 'No member is online'),
    el('h2', null, 'Lag per queue'),
    table(['Topic', 'Broker', ['Queue', true], ['Broker offset', true],
      ['Consumer offset', true], ['Lag', true], 'Last consumed'],
    data.queues.map((q) => [link(`#/topic/${encodeURIComponent(q.topic)}`, q.topic),
      q.brokerName, q.queueId, num(q.brokerOffset), num(q.consumerOffset), num(q.lag),
      time(q.lastTimestamp)]), 'The group has no offsets'),
    resetForm(group, topics, notice, async (nodes) => {
      generation += 1;
      await groupPage(generation, group, nodes);
    }));
}

// ---- Messages ---------------------------------------------------------------------------

function messageView(m) {
  const fields = [['Topic', m.topic], ['Broker', m.brokerName], ['Queue', m.queueId],
    ['Queue offset', m.queueOffset], ['Commit-log offset', m.commitLogOffset],
    ['Message id', m.msgId], ['Client id (UNIQ_KEY)', m.uniqKey || '–'],
    ['Keys', (m.keys || []).join(' ') || '–'], ['Tags', m.tags || '–'],
    ['Born', `${time(m.bornTimestamp)} from ${m.bornHost}`],
    ['Stored', `${time(m.storeTimestamp)} on ${m.storeHost}`],
    ['Reconsume times', m.reconsumeTimes], ['Size', `${m.storeSize} bytes stored, ` +
      `${m.bodyBytes} bytes body`]];
  const props = Object.entries(m.properties || {}).sort(([a], [b]) => a.localeCompare(b));
  return el('div', { className: 'panel message' },
    el('div', { className: 'two' },
      el('dl', { className: 'fields' }, fields.map(([k, v]) => [el('dt', null, k),
        el('dd', null, String(v))])),
      el('div', null, el('h2', null, 'Properties'),
        table(['Name', 'Value'], props.map(([k, v]) => [k, v])))),
    el('h2', null, `Body (${m.bodyEncoding}${m.bodyTruncated ? ', cut' : ''})`),
    el('pre', { className: 'body' }, m.body));
}

function messagesPage(gen, params) {
  const result = el('div', { id: 'message-result' });
  const run = async (path) => {
    result.replaceChildren(el('p', { className: 'muted' }, 'Looking…'));
    try {
      const data = await api(path);
      if (gen !== generation) return;
      const found = data.messages.length;
      result.replaceChildren(el('p', { className: 'muted' },
        `${found} message${found === 1 ? '' : 's'} found`), ...errorList(data.errors),
      ...data.messages.map(messageView));
    } catch (error) {
      result.replaceChildren(el('div', { className: 'error' }, String(error.message)));
    }
  };
  const input = (name, label, value, extra) => el('label', null, label,
    el('input', Object.assign({ name, id: `m-${name}`, value: value || '' }, extra || {})));
  const form = (id, fields, button, path) => {
    const node = el('form', { className: 'inline', id }, fields,
      el('button', { type: 'submit' }, button));
    node.addEventListener('submit', (event) => {
      event.preventDefault();
      const values = new URLSearchParams(new FormData(node));
      run(`${path}?${values}`);
    });
    return node;
  };
  const byId = form('by-id', [input('id', 'Offset message id', params.get('id'),
    { size: 36 })], 'Find by id', '/api/message/id');
  const byKey = form('by-key', [input('topic', 'Topic', params.get('topic')),
    input('key', 'Key or client id', params.get('key'))], 'Find by key', '/api/message/key');
  const byOffset = form('by-offset', [input('topic', 'Topic', params.get('topic')),
    input('broker', 'Broker', params.get('broker')),
    input('queue', 'Queue', params.get('queue'), { size: 4 }),
    input('offset', 'Offset', params.get('offset'), { size: 8 })],
  'Find by offset', '/api/message/offset');
  for (const node of byKey.querySelectorAll('input')) node.id = `k-${node.name}`;
  for (const node of byOffset.querySelectorAll('input')) node.id = `o-${node.name}`;
  show(el('h1', null, 'Messages'),
    el('div', { className: 'panel' }, el('h2', null, 'By message id'), byId),
    el('div', { className: 'panel' }, el('h2', null, 'By key'), byKey),
    el('div', { className: 'panel' }, el('h2', null, 'By queue offset'), byOffset),
    result);
  if (params.get('id')) run(`/api/message/id?${new URLSearchParams({ id: params.get('id') })}`);
  else if (params.get('offset')) {
    run(`/api/message/offset?${new URLSearchParams(new FormData(byOffset))}`);
  } else if (params.get('key')) {
    run(`/api/message/key?${new URLSearchParams(new FormData(byKey))}`);
  }
}

// ---- Throughput -------------------------------------------------------------------------

const WINDOW_POINTS = 120;
// Rates are taken over this many one-second samples: the brokers' counters move in steps,
// so a single interval may see two steps or none.
const RATE_SPAN = 3;

function throughputPage(gen) {
  const canvas = el('canvas', { id: 'chart', width: 1200, height: 320 });
  const rates = el('div', { id: 'rates' });
  const samples = [];
  // The last RATE_SPAN + 1 samples' counters, oldest first.
  const history = [];
  show(el('h1', null, 'Throughput'),
    el('p', { className: 'muted' }, 'Messages per second over every broker, sampled each ' +
      `second from the brokers' counters (rates over the last ${RATE_SPAN} s).`),
    el('div', { className: 'panel' }, canvas,
      el('div', { className: 'legend' }, el('span', { className: 'in' }, 'in (stored)'),
        el('span', { className: 'out' }, 'out (delivered)'))),
    rates);
  const tick = async () => {
    let data;
    try {
      data = await api('/api/throughput');
    } catch (error) {
      rates.replaceChildren(el('div', { className: 'error' }, String(error.message)));
      return;
    }
    if (gen !== generation) return;
    const rows = [];
    let putRate = 0;
    let getRate = 0;
    for (const b of data.brokers) {
      const key = `${b.brokerName}/${b.brokerId}`;
      const last = history[0];
      const before = last && last.byKey[key];
      let put = null;
      let got = null;
      if (before && !b.error && data.timeMs > last.timeMs) {
        const seconds = (data.timeMs - last.timeMs) / 1000;
        // Counters restart at midnight and with the broker: no negative rates.
        put = Math.max(0, (b.putTotal - before.putTotal) / seconds);
        got = Math.max(0, (b.getTotal - before.getTotal) / seconds);
        putRate += put;
        getRate += got;
      }
      rows.push([b.brokerName, b.brokerId, b.addr,
        b.error ? el('span', { className: 'tag bad', title: b.error }, 'no answer')
          : put === null ? '…' : put.toFixed(1),
        b.error || got === null ? '…' : got.toFixed(1), num(b.putTotal), num(b.getTotal)]);
    }
    const byKey = {};
    for (const b of data.brokers) byKey[`${b.brokerName}/${b.brokerId}`] = b;
    if (history.length) {
      samples.push({ timeMs: data.timeMs, put: putRate, got: getRate });
      if (samples.length > WINDOW_POINTS) samples.shift();
    }
    history.push({ timeMs: data.timeMs, byKey });
    if (history.length > RATE_SPAN + 1) history.shift();
    rates.replaceChildren(table(['Broker', ['ID', true], 'Address', ['In / s', true],
      ['Out / s', true], ['Stored today', true], ['Delivered today', true]], rows,
    'No broker is registered'));
    draw(canvas, samples);
  };
  tick();
  poller = setInterval(tick, 1000);
}

function draw(canvas, samples) {
  const ratio = window.devicePixelRatio || 1;
  const width = canvas.clientWidth || 1200;
  const height = canvas.clientHeight || 320;
  canvas.width = width * ratio;
  canvas.height = height * ratio;
  const g = canvas.getContext('2d');
  g.scale(ratio, ratio);
  g.clearRect(0, 0, width, height);
  const left = 60;
  const right = 12;
  const top = 12;
  const bottom = 28;
  const plotW = width - left - right;
  const plotH = height - top - bottom;
  const peak = Math.max(1, ...samples.map((s) => Math.max(s.put, s.got)));
  const scale = niceCeiling(peak);
  g.font = '12px system-ui, sans-serif';
  g.strokeStyle = '#e1e4ea';
  g.fillStyle = '#687086';
  g.lineWidth = 1;
  for (let i = 0; i <= 4; i += 1) {
    const y = top + plotH - (plotH * i) / 4;
    g.beginPath();
    g.moveTo(left, y);
    g.lineTo(left + plotW, y);
    g.stroke();
    g.textAlign = 'right';
    g.fillText(formatRate((scale * i) / 4), left - 8, y + 4);
  }
  g.textAlign = 'center';
  for (let s = 0; s <= WINDOW_POINTS; s += 30) {
    const x = left + plotW - (plotW * s) / WINDOW_POINTS;
    g.fillText(s === 0 ? 'now' : `-${s} s`, x, height - 8);
  }
  const line = (key, color, dash) => {
    if (samples.length < 2) return;
    g.strokeStyle = color;
    g.lineWidth = 2;
    g.setLineDash(dash);
    g.beginPath();
    samples.forEach((sample, i) => {
      const age = samples.length - 1 - i;
      const x = left + plotW - (plotW * age) / WINDOW_POINTS;
      const y = top + plotH - (plotH * sample[key]) / scale;
      if (i === 0) g.moveTo(x, y);
      else g.lineTo(x, y);
    });
    g.stroke();
  };
  // Out is dashed: at a steady state it runs on top of in.
  line('put', '#3b5bdb', []);
  line('got', '#2b8a3e', [7, 5]);
  g.setLineDash([]);
  if (samples.length < 2) {
    g.fillStyle = '#687086';
    g.textAlign = 'center';
    g.fillText('Collecting samples…', left + plotW / 2, top + plotH / 2);
  }
}

function niceCeiling(value) {
  const power = 10 ** Math.floor(Math.log10(value));
  for (const step of [1, 2, 5, 10]) if (step * power >= value) return step * power;
  return 10 * power;
}

function formatRate(value) {
  if (value >= 1e6) return `${(value / 1e6).toFixed(1)}M`;
  if (value >= 1e3) return `${(value / 1e3).toFixed(1)}k`;
  return value % 1 === 0 ? String(value) : value.toFixed(1);
}

// ---- Routing ----------------------------------------------------------------------------

async function route() {
  generation += 1;
  const gen = generation;
  if (poller) {
    clearInterval(poller);
    poller = null;
  }
  const hash = location.hash.replace(/^#\/?/, '') || 'cluster';
  const [pathPart, query] = hash.split('?');
  const parts = pathPart.split('/');
  const page = parts[0];
  const name = parts.slice(1).join('/');
  for (const a of document.querySelectorAll('#nav a')) {
    a.classList.toggle('active', a.dataset.page === page.replace(/s?$/, 's')
      || a.dataset.page === page);
  }
  statusLine.textContent = `${location.host} · ${new Date().toLocaleTimeString('en-GB')}`;
  try {
    if (page === 'cluster') await clusterPage(gen);
    else if (page === 'topics') await topicsPage(gen);
    else if (page === 'topic') await topicPage(gen, decodeURIComponent(name));
    else if (page === 'groups') await groupsPage(gen);
    else if (page === 'group') await groupPage(gen, decodeURIComponent(name));
    else if (page === 'messages') messagesPage(gen, new URLSearchParams(query || ''));
    else if (page === 'throughput') throughputPage(gen);
    else show(el('div', { className: 'error' }, `No page ${page}`));
  } catch (error) {
    if (gen === generation) failed(error);
  }
  if (gen === generation) document.body.dataset.ready = page;
}

window.addEventListener('hashchange', route);
route();
