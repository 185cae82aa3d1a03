// mqgate console: a single page over the REST API (/v1/...), the same
// admin and messaging endpoints the CLI and the MCP server use. With auth
// on it asks for an access key and secret key, keeps them in this tab's
// memory only, and signs every call as the REST API expects
// (X-Mq-Date-Time and an MQv2-HMAC-SHA1 Authorization). No dependencies.
"use strict";

const POLL_MS = 1000;
const WINDOW = 120; // samples kept (two minutes at one a second)
// The REST API's base: the console is served at <base>console/.
const API = location.pathname.replace(/console\/.*$/, "");

const S = {
  creds: null, // {accessKey, secretKey} once signed in (auth on)
  ready: false, // whoami answered
  auth: false,
  admin: true,
  accessKey: "",
  page: "",
  args: [],
  stats: null, // the latest /v1/stats
  prevStats: null,
  samples: [], // {t, send, recv, backlog}
  topicSamples: {}, // topic → [{t, rate, stored}]
  topics: [],
  groups: [],
  groupStatus: {}, // group → /v1/groups/{g}/status
  dlqPending: {}, // group → pending dead letters
  loaded: false, // the first poll finished
  dlqGroup: "",
  liteParent: "", // the LITE topic whose lite topics are shown
  browse: null, // the last browse: {topic, queue, start, next, min, max, count}
  view: null, // the message shown: StoredMessage
  bodyView: "text",
};

function $(sel, root) { return (root || document).querySelector(sel); }
function $$(sel, root) { return [...(root || document).querySelectorAll(sel)]; }
const enc = encodeURIComponent;
const num = (v) => Number(v || 0); // protojson writes 64-bit integers as strings

// ---- SHA-1 and HMAC-SHA1 (RFC 3174, RFC 2104). WebCrypto is missing on
// plain-HTTP pages that are not on localhost, so the console carries its
// own.

function sha1(bytes) {
  const ml = bytes.length;
  const size = ((ml + 9 + 63) >> 6) << 6;
  const buf = new Uint8Array(size);
  buf.set(bytes);
  buf[ml] = 0x80;
  const dv = new DataView(buf.buffer);
  dv.setUint32(size - 4, (ml * 8) >>> 0);
  dv.setUint32(size - 8, Math.floor((ml * 8) / 4294967296));
  let h0 = 0x67452301, h1 = 0xefcdab89, h2 = 0x98badcfe, h3 = 0x10325476, h4 = 0xc3d2e1f0;
  const w = new Uint32Array(80);
  for (let off = 0; off < size; off += 64) {
    for (let i = 0; i < 16; i++) w[i] = dv.getUint32(off + i * 4);
    for (let i = 16; i < 80; i++) {
      const x = w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16];
      w[i] = (x << 1) | (x >>> 31);
    }
    let a = h0, b = h1, c = h2, d = h3, e = h4;
    for (let i = 0; i < 80; i++) {
      let f, k;
      if (i < 20) { f = (b & c) | (~b & d); k = 0x5a827999; }
      else if (i < 40) { f = b ^ c ^ d; k = 0x6ed9eba1; }
      else if (i < 60) { f = (b & c) | (b & d) | (c & d); k = 0x8f1bbcdc; }
      else { f = b ^ c ^ d; k = 0xca62c1d6; }
      const t = (((a << 5) | (a >>> 27)) + f + e + k + w[i]) >>> 0;
      e = d; d = c; c = ((b << 30) | (b >>> 2)) >>> 0; b = a; a = t;
    }
    h0 = (h0 + a) >>> 0; h1 = (h1 + b) >>> 0; h2 = (h2 + c) >>> 0; h3 = (h3 + d) >>> 0; h4 = (h4 + e) >>> 0;
  }
  const out = new Uint8Array(20);
  const o = new DataView(out.buffer);
  [h0, h1, h2, h3, h4].forEach((h, i) => o.setUint32(i * 4, h));
  return out;
}

function hmacSHA1(key, msg) {
  if (key.length > 64) key = sha1(key);
  const k = new Uint8Array(64);
  k.set(key);
  const inner = new Uint8Array(64 + msg.length);
  const outer = new Uint8Array(64 + 20);
  for (let i = 0; i < 64; i++) { inner[i] = k[i] ^ 0x36; outer[i] = k[i] ^ 0x5c; }
  inner.set(msg, 64);
  outer.set(sha1(inner), 64);
  return sha1(outer);
}

function hex(bytes) { return [...bytes].map((b) => b.toString(16).padStart(2, "0")).join(""); }
const utf8 = (s) => new TextEncoder().encode(s);

// signature is the v2 Authorization value for dateTime (yyyyMMddTHHmmssZ).
function signature(accessKey, secretKey, dateTime) {
  return "MQv2-HMAC-SHA1 Credential=" + accessKey + ", SignedHeaders=x-mq-date-time, Signature=" +
    hex(hmacSHA1(utf8(secretKey), utf8(dateTime)));
}

function dateTimeNow() { return new Date().toISOString().replace(/[-:]/g, "").replace(/\.\d+Z$/, "Z"); }

// ---- calls

class APIError extends Error {
  constructor(message, status) { super(message); this.status = status; }
}

// call fetches a REST endpoint (path relative to /v1's base), signed when
// signed in, and throws an APIError carrying the server's message on a
// non-2xx answer.
async function call(method, path, body) {
  const init = { method, headers: { "X-Mq-Client-Id": "mqgate-console" } };
  if (S.creds) {
    const date = dateTimeNow();
    init.headers["X-Mq-Date-Time"] = date;
    init.headers["Authorization"] = signature(S.creds.accessKey, S.creds.secretKey, date);
  }
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let r;
  try {
    r = await fetch(API + path, init);
  } catch (e) {
    throw new APIError(method + " " + path + ": the server did not answer (" + e.message + ")", 0);
  }
  const text = await r.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch (e) { data = null; }
  if (!r.ok) {
    const msg = (data && (data.message || data.error)) || text || r.statusText;
    throw new APIError(msg + " (HTTP " + r.status + ")", r.status);
  }
  return data;
}

// ---- small DOM helpers

function cell(tr, text, cls) {
  const td = document.createElement("td");
  td.textContent = text;
  if (cls) td.className = cls;
  tr.appendChild(td);
  return td;
}

function link(td, text, href) {
  const a = document.createElement("a");
  a.href = href;
  a.textContent = text;
  td.appendChild(a);
  return a;
}

function button(td, label, onClick, cls) {
  const b = document.createElement("button");
  b.type = "button";
  b.textContent = label;
  if (cls) b.className = cls;
  b.addEventListener("click", onClick);
  td.appendChild(b);
  return b;
}

function fill(tbody, rows, cols, empty) {
  tbody.replaceChildren();
  if (rows.length === 0) {
    const tr = document.createElement("tr");
    const td = cell(tr, empty, "empty");
    td.colSpan = cols;
    tbody.appendChild(tr);
  }
  for (const tr of rows) tbody.appendChild(tr);
}

function setMsg(el, text, kind) {
  el.textContent = text;
  el.className = "msg" + (kind ? " " + kind : "");
}

function banner(text) {
  const b = $("#banner");
  b.textContent = text || "";
  b.hidden = !text;
}

function b64bytes(b64) {
  if (!b64) return new Uint8Array(0);
  const bin = atob(b64);
  const bytes = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
  return bytes;
}

// bodyPreview decodes a base64 body as UTF-8 text (bytes it cannot decode
// show as U+FFFD), cut to 200 characters.
function bodyPreview(b64, truncated) {
  let text = new TextDecoder("utf-8").decode(b64bytes(b64));
  if (text.length > 200) { text = text.slice(0, 200); truncated = true; }
  return truncated ? text + "…" : text;
}

function when(ts) { return ts ? new Date(ts).toLocaleString() : ""; }

function ago(ts) {
  if (!ts) return "never";
  const s = (Date.now() - new Date(ts).getTime()) / 1000;
  if (s < 1) return "just now";
  if (s < 90) return Math.round(s) + " s ago";
  if (s < 5400) return Math.round(s / 60) + " min ago";
  return when(ts);
}

function isSystemTopic(name) { return name.startsWith("%"); }

function fmt(v) {
  if (v >= 1e6) return (v / 1e6).toFixed(v >= 1e7 ? 0 : 1) + "M";
  if (v >= 1e4) return (v / 1e3).toFixed(v >= 1e5 ? 0 : 1) + "k";
  return String(Number(v.toFixed(v >= 100 ? 0 : 2)));
}

// ---- charts: a canvas that fills its box, keeps its axes, and says it is
// waiting until it has two samples to draw.

function cssVar(name) { return getComputedStyle(document.documentElement).getPropertyValue(name).trim(); }

function niceCeil(v) {
  if (v <= 0) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 5, 10]) if (v <= m * p) return m * p;
  return 10 * p;
}

function drawChart(canvas, series, colors) {
  const dpr = window.devicePixelRatio || 1;
  const w = canvas.clientWidth, h = canvas.clientHeight;
  if (w === 0 || h === 0) return; // not shown
  if (canvas.width !== Math.round(w * dpr) || canvas.height !== Math.round(h * dpr)) {
    canvas.width = Math.round(w * dpr);
    canvas.height = Math.round(h * dpr);
  }
  const ctx = canvas.getContext("2d");
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.clearRect(0, 0, w, h);
  const left = 48, right = 12, top = 10, bottom = 22;
  const pw = w - left - right, ph = h - top - bottom;
  let max = 0, points = 0;
  for (const s of series) { points = Math.max(points, s.length); for (const v of s) max = Math.max(max, v); }
  max = niceCeil(max);
  ctx.font = "11px system-ui, sans-serif";
  ctx.lineWidth = 1;
  for (let i = 0; i <= 4; i++) {
    const y = Math.round(top + ph * (1 - i / 4)) + 0.5;
    ctx.strokeStyle = i === 0 ? "#9aa3b2" : "#e3e7ee";
    ctx.beginPath(); ctx.moveTo(left, y); ctx.lineTo(w - right, y); ctx.stroke();
    ctx.fillStyle = "#6a7383";
    ctx.textAlign = "right";
    ctx.fillText(fmt(max * i / 4), left - 6, y + 4);
  }
  ctx.strokeStyle = "#9aa3b2";
  ctx.beginPath(); ctx.moveTo(left + 0.5, top); ctx.lineTo(left + 0.5, top + ph); ctx.stroke();
  for (let i = 0; i <= 4; i++) {
    const x = left + pw * i / 4;
    const secs = WINDOW - (WINDOW * i) / 4;
    ctx.textAlign = i === 0 ? "left" : i === 4 ? "right" : "center";
    ctx.fillStyle = "#6a7383";
    ctx.fillText(secs === 0 ? "now" : "-" + secs + " s", x, h - 6);
  }
  if (points < 2) {
    ctx.textAlign = "center";
    ctx.fillStyle = "#9aa3b2";
    ctx.font = "13px system-ui, sans-serif";
    ctx.fillText("Collecting samples…", left + pw / 2, top + ph / 2);
    return;
  }
  const step = pw / (WINDOW - 1);
  series.forEach((s, k) => {
    ctx.strokeStyle = colors[k];
    ctx.lineWidth = 2;
    ctx.lineJoin = "round";
    ctx.beginPath();
    s.forEach((v, i) => {
      const x = left + (WINDOW - s.length + i) * step;
      const y = top + ph * (1 - v / max);
      if (i === 0) ctx.moveTo(x, y); else ctx.lineTo(x, y);
    });
    ctx.stroke();
  });
}

// ---- sampling

// sample turns two /v1/stats answers into rates: the node's and each
// topic's, plus the backlog the groups' statuses add up to.
function sample(stats, backlog) {
  const t = Date.parse(stats.time);
  const prev = S.prevStats;
  S.prevStats = stats;
  if (!prev || prev.startTime !== stats.startTime) return; // the counters started again
  const dt = (t - Date.parse(prev.time)) / 1000;
  if (!(dt > 0)) return;
  S.samples.push({ t, send: Math.max(0, num(stats.sent) - num(prev.sent)) / dt,
    recv: Math.max(0, num(stats.delivered) - num(prev.delivered)) / dt, backlog });
  while (S.samples.length > WINDOW) S.samples.shift();
  const before = {};
  for (const ts of prev.topics || []) before[ts.topic] = ts;
  for (const ts of stats.topics || []) {
    const p = before[ts.topic];
    const list = S.topicSamples[ts.topic] || (S.topicSamples[ts.topic] = []);
    list.push({ t, rate: p ? Math.max(0, num(ts.sent) - num(p.sent)) / dt : 0, stored: num(ts.stored) });
    while (list.length > WINDOW) list.shift();
  }
}

// poll reads what every page shows: counters, topics, groups and their
// progress and dead letters.
async function poll() {
  const [stats, topics, groups] = await Promise.all([call("GET", "v1/stats"), call("GET", "v1/topics"), call("GET", "v1/groups")]);
  const gs = groups.groups || [];
  const answers = await Promise.all(gs.map((g) => Promise.all([
    call("GET", "v1/groups/" + enc(g.name) + "/status").catch(() => null),
    call("GET", "v1/groups/" + enc(g.name) + "/deadLetters?max=1").catch(() => null),
  ])));
  S.topics = topics.topics || [];
  S.groups = gs;
  S.groupStatus = {};
  S.dlqPending = {};
  let backlog = 0;
  gs.forEach((g, i) => {
    const [st, dl] = answers[i];
    S.groupStatus[g.name] = st;
    S.dlqPending[g.name] = dl ? num(dl.pending) : null;
    for (const t of (st && st.topics) || []) if (!isSystemTopic(t.topic)) backlog += num(t.backlog);
  });
  S.stats = stats;
  sample(stats, backlog);
  S.loaded = true;
}

function groupTotals(name) {
  const st = S.groupStatus[name];
  let backlog = 0, inFlight = 0;
  for (const t of (st && st.topics) || []) {
    if (isSystemTopic(t.topic)) continue; // the dead-letter position: shown as dead letters
    backlog += num(t.backlog);
    inFlight += num(t.inFlight);
  }
  return { st, backlog, inFlight };
}

function topicBacklog(name) {
  let n = 0;
  for (const g of S.groups) {
    for (const t of (S.groupStatus[g.name] && S.groupStatus[g.name].topics) || []) if (t.topic === name) n += num(t.backlog);
  }
  return n;
}

function statsOf(topic) {
  for (const ts of (S.stats && S.stats.topics) || []) if (ts.topic === topic) return ts;
  return null;
}

function lastRate(topic) {
  const l = S.topicSamples[topic];
  return l && l.length ? l[l.length - 1].rate : 0;
}

// ---- pages

const pages = {
  overview: { render: renderOverview },
  topics: { render: renderTopics, load: loadLiteTopics },
  topic: { render: renderTopic, load: loadTopic },
  groups: { render: renderGroups },
  messages: { render: renderMessages, enter: enterMessages },
  clients: { render: renderClients, load: loadClients, admin: true },
  cluster: { render: renderCluster, load: loadCluster, admin: true },
};

function renderOverview() {
  const user = S.topics.filter((t) => !isSystemTopic(t.name));
  let stored = 0;
  for (const t of user) { const ts = statsOf(t.name); if (ts) stored += num(ts.stored); }
  let backlog = 0, dlq = 0;
  for (const g of S.groups) {
    backlog += groupTotals(g.name).backlog;
    dlq += S.dlqPending[g.name] || 0;
  }
  $("#tile-topics").textContent = String(user.length);
  $("#tile-stored").textContent = String(stored);
  $("#tile-groups").textContent = String(S.groups.length);
  $("#tile-backlog").textContent = String(backlog);
  $("#tile-dlq").textContent = String(dlq);
  const c = $("#rates");
  const send = S.samples.map((s) => s.send), recv = S.samples.map((s) => s.recv);
  drawChart(c, [send, recv], [cssVar("--send"), cssVar("--recv")]);
  c.dataset.points = String(S.samples.length);
  c.dataset.maxSend = String(Math.max(0, ...send));
  c.dataset.maxRecv = String(Math.max(0, ...recv));
  const b = $("#backlog");
  drawChart(b, [S.samples.map((s) => s.backlog)], [cssVar("--backlog")]);
  b.dataset.points = String(S.samples.length);
  b.dataset.last = S.samples.length ? String(S.samples[S.samples.length - 1].backlog) : "0";
  const busy = user.map((t) => ({ name: t.name, rate: lastRate(t.name), stored: num((statsOf(t.name) || {}).stored) }))
    .sort((x, y) => y.rate - x.rate || y.stored - x.stored || x.name.localeCompare(y.name)).slice(0, 5);
  fill($("#ov-topics tbody"), busy.map((t) => {
    const tr = document.createElement("tr");
    tr.dataset.topic = t.name;
    link(cell(tr, "", "name"), t.name, "#/topics/" + enc(t.name));
    cell(tr, fmt(t.rate), "num");
    cell(tr, String(t.stored), "num");
    cell(tr, String(topicBacklog(t.name)), "num");
    return tr;
  }), 4, "no topics yet");
  const heavy = S.groups.map((g) => ({ name: g.name, ...groupTotals(g.name), dlq: S.dlqPending[g.name] || 0 }))
    .sort((x, y) => y.backlog - x.backlog || y.dlq - x.dlq || x.name.localeCompare(y.name)).slice(0, 5);
  fill($("#ov-groups tbody"), heavy.map((g) => {
    const tr = document.createElement("tr");
    tr.dataset.group = g.name;
    link(cell(tr, "", "name"), g.name, "#/groups");
    cell(tr, String(g.backlog), "num");
    cell(tr, String(g.inFlight), "num");
    cell(tr, String(g.dlq), "num");
    return tr;
  }), 4, "no consumer groups yet");
}

function renderTopics() {
  const user = S.topics.filter((t) => !isSystemTopic(t.name));
  const rows = user.map((t) => {
    const ts = statsOf(t.name);
    const tr = document.createElement("tr");
    tr.dataset.topic = t.name;
    link(cell(tr, "", "name"), t.name, "#/topics/" + enc(t.name));
    cell(tr, t.type);
    cell(tr, String(t.queues), "num");
    cell(tr, ts ? String(num(ts.stored)) : "?", "num stored");
    cell(tr, fmt(lastRate(t.name)), "num rate");
    cell(tr, String(topicBacklog(t.name)), "num backlog");
    const td = cell(tr, "");
    if (t.type === "LITE" && S.admin) { // ListLiteTopics is for admins
      button(td, "Lite topics", () => showLiteTopics(t.name), "show-lite");
      td.appendChild(document.createTextNode(" "));
    }
    if (S.admin) button(td, "Delete", () => deleteTopic(t.name, tr), "danger delete");
    return tr;
  });
  fill($("#topics tbody"), rows, 7, "no topics yet: create one below, or send with --auto-create");
}

async function showLiteTopics(topic) {
  S.liteParent = topic;
  $("#lite-topic").textContent = topic;
  $("#lite-section").hidden = false;
  fill($("#lite tbody"), [], 9, "Loading…");
  setMsg($("#lite-msg"), "");
  try {
    await loadLiteTopics();
  } catch (e) {
    setMsg($("#lite-msg"), e.message, "error");
  }
}

// loadLiteTopics shows the first 200 lite topics of a LITE topic, one row
// per lite topic and group that consumed it.
async function loadLiteTopics() {
  const topic = S.liteParent;
  if (!topic) return;
  const page = await call("GET", "v1/topics/" + enc(topic) + "/liteTopics?pageSize=200");
  if (topic !== S.liteParent) return;
  $("#lite-total").textContent = String(num(page.total));
  const rows = [];
  for (const lt of page.liteTopics || []) {
    const groups = (lt.groups && lt.groups.length) ? lt.groups : [null];
    for (const g of groups) {
      const tr = document.createElement("tr");
      tr.dataset.lite = lt.name;
      cell(tr, lt.name, "name");
      cell(tr, String(lt.queue || 0), "num");
      cell(tr, String(num(lt.maxOffset) - num(lt.minOffset)), "num kept");
      cell(tr, when(lt.lastStored));
      cell(tr, lt.expireTime ? when(lt.expireTime) : "never");
      cell(tr, g ? g.group : "-", "group");
      cell(tr, g ? String(num(g.ready)) : "-", "num ready");
      cell(tr, g ? String(num(g.inFlight)) : "-", "num inflight");
      cell(tr, String((lt.subscribers || []).length), "num");
      rows.push(tr);
    }
  }
  fill($("#lite tbody"), rows, 9, "no lite topics");
}

async function deleteTopic(name) {
  const msg = $("#create-topic .msg");
  if (!confirm("Delete topic " + name + " and its messages?")) return;
  try {
    await call("DELETE", "v1/topics/" + enc(name));
    setMsg(msg, "deleted topic " + name, "ok");
    await refresh();
  } catch (e) {
    setMsg(msg, "deleting " + name + ": " + e.message, "error");
  }
}

let topicDesc = null;

async function loadTopic() {
  const name = S.args[0];
  const d = await call("GET", "v1/topics/" + enc(name) + "/status");
  if (S.page === "topic" && S.args[0] === name) topicDesc = d;
}

function renderTopic() {
  const name = S.args[0];
  $("#topic-name").textContent = name;
  const samples = S.topicSamples[name] || [];
  const rc = $("#topic-rate"), sc = $("#topic-stored");
  drawChart(rc, [samples.map((s) => s.rate)], [cssVar("--send")]);
  drawChart(sc, [samples.map((s) => s.stored)], [cssVar("--stored")]);
  rc.dataset.points = sc.dataset.points = String(samples.length);
  rc.dataset.max = String(Math.max(0, ...samples.map((s) => s.rate)));
  sc.dataset.last = samples.length ? String(samples[samples.length - 1].stored) : "0";
  const d = topicDesc;
  if (!d || !d.topic || d.topic.name !== name) return;
  $("#topic-meta").textContent = d.topic.type + ", " + d.topic.queues + " queues, " + num(d.messages) + " messages stored";
  const qrows = (d.queues || []).map((q) => {
    const tr = document.createElement("tr");
    tr.dataset.queue = String(q.queueId);
    cell(tr, String(q.queueId), "num");
    cell(tr, String(num(q.minOffset)), "num min");
    cell(tr, String(num(q.maxOffset)), "num max");
    cell(tr, String(num(q.maxOffset) - num(q.minOffset)), "num");
    link(cell(tr, ""), "Browse", "#/messages/" + enc(name) + "/" + q.queueId);
    return tr;
  });
  fill($("#topic-queues tbody"), qrows, 5, "no queues");
  const head = $("#topic-lag thead tr");
  head.replaceChildren();
  const th = document.createElement("th");
  th.textContent = "Group";
  head.appendChild(th);
  for (const q of d.queues || []) {
    const h = document.createElement("th");
    h.className = "num";
    h.textContent = "queue " + q.queueId;
    head.appendChild(h);
  }
  const total = document.createElement("th");
  total.className = "num";
  total.textContent = "in flight";
  head.appendChild(total);
  const lrows = (d.groups || []).map((g) => {
    const tr = document.createElement("tr");
    tr.dataset.group = g.group;
    link(cell(tr, "", "name"), g.group, "#/groups");
    for (const q of g.queues || []) {
      const lag = num(q.ready);
      const td = cell(tr, lag + " (at " + num(q.consumedOffset) + ")", "num " + (lag ? "lagN" : "lag0"));
      td.dataset.queue = String(q.queueId);
      td.dataset.lag = String(lag);
    }
    cell(tr, String(num(g.inFlight)), "num");
    return tr;
  });
  fill($("#topic-lag tbody"), lrows, 2 + (d.queues || []).length, "no group has consumed this topic");
}

function renderGroups() {
  const rows = S.groups.map((g) => {
    const { st, backlog, inFlight } = groupTotals(g.name);
    const dl = S.dlqPending[g.name];
    const tr = document.createElement("tr");
    tr.dataset.group = g.name;
    cell(tr, g.name, "name");
    cell(tr, g.fifo ? "yes" : "no");
    cell(tr, String(g.maxDeliveryAttempts), "num");
    cell(tr, st ? String(backlog) : "?", "num backlog");
    cell(tr, st ? String(inFlight) : "?", "num inflight");
    cell(tr, dl === null ? "?" : String(dl), "num dlq");
    const td = cell(tr, "");
    button(td, "Dead letters", () => showDeadLetters(g.name), "show-dlq");
    if (S.admin) {
      td.appendChild(document.createTextNode(" "));
      button(td, "Delete", () => deleteGroup(g.name), "danger delete");
    }
    return tr;
  });
  fill($("#groups tbody"), rows, 7, "no consumer groups yet: create one below");
}

async function deleteGroup(name) {
  const msg = $("#create-group .msg");
  if (!confirm("Delete consumer group " + name + "?")) return;
  try {
    await call("DELETE", "v1/groups/" + enc(name));
    setMsg(msg, "deleted group " + name, "ok");
    await refresh();
  } catch (e) {
    setMsg(msg, "deleting " + name + ": " + e.message, "error");
  }
}

async function showDeadLetters(group) {
  S.dlqGroup = group;
  $("#dlq-group").textContent = group;
  $("#dlq-section").hidden = false;
  fill($("#dlq tbody"), [], 7, "Loading…");
  setMsg($("#dlq-msg"), "");
  try {
    await loadDeadLetters();
  } catch (e) {
    setMsg($("#dlq-msg"), e.message, "error");
  }
}

async function loadDeadLetters() {
  const group = S.dlqGroup;
  const page = await call("GET", "v1/groups/" + enc(group) + "/deadLetters?max=100");
  if (group !== S.dlqGroup) return;
  $("#dlq-pending").textContent = String(num(page.pending));
  const rows = (page.messages || []).map((m) => {
    const tr = document.createElement("tr");
    tr.dataset.messageId = m.messageId;
    cell(tr, m.messageId);
    cell(tr, m.dlqOriginTopic || "", "origin");
    cell(tr, m.tag || "");
    cell(tr, (m.keys || []).join(", "));
    cell(tr, String(m.reconsumeTimes || 0), "num");
    cell(tr, when(m.storeTime));
    cell(tr, bodyPreview(m.body, m.bodyTruncated), "body");
    return tr;
  });
  fill($("#dlq tbody"), rows, 7, "no dead letters");
}

// ---- messages

function enterMessages() {
  const [topic, queue] = S.args;
  fillTopicSelects();
  if (topic) {
    const f = $("#browse");
    f.topic.value = topic;
    fillQueues();
    f.queue.value = queue || "0";
    f.from.value = "offset";
    f.offset.value = "0";
    fromChanged();
    browse(0);
  }
}

function fillTopicSelects() {
  const names = S.topics.map((t) => t.name).sort((a, b) => isSystemTopic(a) - isSystemTopic(b) || a.localeCompare(b));
  for (const sel of [$("#browse select[name=topic]"), $("#send select[name=topic]")]) {
    const keep = sel.value;
    const sys = sel.closest("form").id === "browse";
    sel.replaceChildren();
    for (const n of names) {
      if (!sys && isSystemTopic(n)) continue;
      const o = document.createElement("option");
      o.textContent = n;
      sel.appendChild(o);
    }
    if (names.includes(keep)) sel.value = keep;
  }
  fillQueues();
}

function fillQueues() {
  const f = $("#browse");
  const t = S.topics.find((x) => x.name === f.topic.value);
  const keep = f.queue.value;
  f.queue.replaceChildren();
  for (let q = 0; q < (t ? t.queues : 0); q++) {
    const o = document.createElement("option");
    o.textContent = String(q);
    f.queue.appendChild(o);
  }
  if (t && Number(keep) < t.queues) f.queue.value = keep;
}

function fromChanged() {
  const f = $("#browse");
  const byTime = f.from.value === "time";
  f.offset.hidden = byTime;
  f.time.hidden = !byTime;
  if (byTime && !f.time.value) {
    const d = new Date(Date.now() - 3600e3);
    f.time.value = new Date(d.getTime() - d.getTimezoneOffset() * 60e3).toISOString().slice(0, 19);
  }
}

function renderMessages() {
  if (!$("#browse select[name=topic]").options.length && S.topics.length) fillTopicSelects();
}

// browse reads a page of the chosen queue: from the form's offset or time,
// or from offset when given (the previous and next buttons).
async function browse(offset) {
  const f = $("#browse");
  const msg = $(".msg", f);
  const topic = f.topic.value, queue = f.queue.value;
  if (!topic) { setMsg(msg, "pick a topic", "error"); return; }
  const max = Math.min(256, Math.max(1, Number(f.max.value) || 20));
  const q = new URLSearchParams({ max: String(max), maxBodyBytes: "512" });
  if (offset !== undefined) q.set("offset", String(offset));
  else if (f.from.value === "time") {
    const t = new Date(f.time.value);
    if (isNaN(t)) { setMsg(msg, "enter a store time", "error"); return; }
    q.set("time", t.toISOString());
  } else q.set("offset", String(Math.max(0, Number(f.offset.value) || 0)));
  setMsg(msg, "reading…", "busy");
  try {
    const res = await call("GET", "v1/topics/" + enc(topic) + "/queues/" + enc(queue) + "/messages?" + q.toString());
    const ms = res.messages || [];
    S.browse = { topic, queue, start: num(res.startOffset), next: num(res.nextOffset), min: num(res.minOffset), max: num(res.maxOffset), count: max };
    $("#browse-range").textContent = "Queue " + queue + " of " + topic + " holds offsets " + num(res.minOffset) + " to " + (num(res.maxOffset) - 1) +
      (ms.length ? "; showing " + num(res.startOffset) + " to " + (num(res.nextOffset) - 1) + "." : "; nothing from offset " + num(res.startOffset) + ".");
    if (num(res.maxOffset) === num(res.minOffset)) $("#browse-range").textContent = "Queue " + queue + " of " + topic + " is empty.";
    const rows = ms.map((m) => {
      const tr = document.createElement("tr");
      tr.className = "click";
      tr.dataset.offset = String(num(m.queueOffset));
      tr.dataset.messageId = m.messageId;
      cell(tr, String(num(m.queueOffset)), "num");
      cell(tr, m.messageId, "id");
      cell(tr, m.tag || "");
      cell(tr, (m.keys || []).join(", "));
      cell(tr, when(m.storeTime));
      cell(tr, String(m.bodySize), "num");
      cell(tr, bodyPreview(m.body, m.bodyTruncated), "body");
      tr.addEventListener("click", () => openMessage(topic, queue, num(m.queueOffset)));
      return tr;
    });
    fill($("#browse-results tbody"), rows, 7, "no message there");
    $("#browse-prev").disabled = S.browse.start <= S.browse.min;
    $("#browse-next").disabled = S.browse.next >= S.browse.max;
    setMsg(msg, ms.length + " message(s)", "ok");
  } catch (e) {
    setMsg(msg, e.message, "error");
  }
}

async function openMessage(topic, queue, offset) {
  try {
    const res = await call("GET", "v1/topics/" + enc(topic) + "/queues/" + enc(queue) + "/messages?offset=" + offset + "&max=1");
    const m = (res.messages || [])[0];
    if (!m) throw new APIError("offset " + offset + " is no longer stored", 404);
    showMessage(m);
  } catch (e) {
    setMsg($("#browse .msg"), e.message, "error");
  }
}

function showMessage(m) {
  S.view = m;
  $("#message-view").hidden = false;
  $("#mv-id").textContent = m.messageId;
  const fields = [
    ["Topic", m.topic], ["Queue", String(m.queueId)], ["Offset", String(num(m.queueOffset))], ["State", m.state],
    ["Type", m.type || ""], ["Tag", m.tag || ""], ["Keys", (m.keys || []).join(", ")], ["Message group", m.messageGroup || ""],
    ["Born", when(m.bornTime) + (m.bornHost ? " on " + m.bornHost : "")], ["Stored", when(m.storeTime)],
    ["Delivery time", when(m.deliveryTime)], ["Attempts recorded", String(m.reconsumeTimes || 0)],
    ["Dead letter of", m.dlqOriginTopic ? m.dlqOriginTopic + " (" + (m.dlqOriginMessageId || "") + ")" : ""],
  ].filter(([, v]) => v !== "");
  const rows = fields.map(([k, v]) => {
    const tr = document.createElement("tr");
    const th = document.createElement("th");
    th.textContent = k;
    tr.appendChild(th);
    cell(tr, v);
    return tr;
  });
  fill($("#mv-fields tbody"), rows, 2, "");
  const props = Object.entries(m.properties || {}).sort().map(([k, v]) => {
    const tr = document.createElement("tr");
    const th = document.createElement("th");
    th.textContent = k;
    tr.appendChild(th);
    cell(tr, v);
    return tr;
  });
  fill($("#mv-props tbody"), props, 2, "no properties");
  const bytes = b64bytes(m.body);
  $("#mv-size").textContent = m.bodySize + " bytes" + (m.bodyTruncated ? ", the first " + bytes.length + " shown" : "");
  showBody();
  $("#message-view").scrollIntoView({ block: "nearest" });
}

function hexDump(bytes) {
  const lines = [];
  for (let off = 0; off < bytes.length; off += 16) {
    const chunk = bytes.slice(off, off + 16);
    const hexs = [...chunk].map((b) => b.toString(16).padStart(2, "0"));
    const ascii = [...chunk].map((b) => (b >= 0x20 && b < 0x7f ? String.fromCharCode(b) : ".")).join("");
    lines.push(off.toString(16).padStart(8, "0") + "  " + hexs.slice(0, 8).join(" ").padEnd(23) + "  " + hexs.slice(8).join(" ").padEnd(23) + "  |" + ascii + "|");
  }
  return lines.join("\n");
}

function showBody() {
  const m = S.view;
  if (!m) return;
  const bytes = b64bytes(m.body);
  const pre = $("#mv-body");
  pre.dataset.view = S.bodyView;
  for (const b of $$(".tabs button")) b.className = b.dataset.view === S.bodyView ? "on" : "";
  if (S.bodyView === "hex") {
    pre.textContent = hexDump(bytes);
  } else if (S.bodyView === "json") {
    const text = new TextDecoder("utf-8").decode(bytes);
    try {
      pre.textContent = JSON.stringify(JSON.parse(text), null, 2);
    } catch (e) {
      pre.textContent = "Not JSON" + (m.bodyTruncated ? " (the body shown is cut)" : "") + ": " + e.message;
    }
  } else {
    pre.textContent = new TextDecoder("utf-8").decode(bytes);
  }
}

// ---- clients

let clientList = null;

async function loadClients() { clientList = await call("GET", "v1/clients"); }

function renderClients() {
  if (!clientList) return;
  const rows = (clientList.clients || []).map((c) => {
    const tr = document.createElement("tr");
    tr.dataset.client = c.clientId;
    cell(tr, c.protocol, "protocol");
    cell(tr, c.clientId, "id");
    cell(tr, (c.roles || []).join(", "), "roles");
    cell(tr, c.protocol === "remoting" && c.version ? c.language + " (version code " + c.version + ")" : [c.language, c.version].filter(Boolean).join(" "), "language");
    cell(tr, c.address + (c.hostname ? " (" + c.hostname + ")" : ""), "address");
    cell(tr, (c.topics || []).join(", "), "topics");
    cell(tr, (c.groups || []).join(", "), "groups");
    cell(tr, when(c.since));
    cell(tr, ago(c.lastSeen));
    return tr;
  });
  fill($("#clients tbody"), rows, 9, "no client is connected");
}

// ---- cluster

let clusterStatus = null;
let transferring = null; // {group, to, until, msg}

async function loadCluster() { clusterStatus = await call("GET", "v1/cluster"); }

function renderCluster() {
  const c = clusterStatus;
  if (!c) return;
  $("#cluster-id").textContent = c.clustered ? "cluster " + c.clusterId + ", answered by member " + num(c.nodeId) : "single node";
  const leaders = {};
  for (const g of c.groups || []) leaders[num(g.leader)] = true;
  const rows = (c.members || []).map((m) => {
    const tr = document.createElement("tr");
    tr.dataset.member = String(num(m.id));
    cell(tr, c.clustered ? String(num(m.id)) : "–", "num");
    const role = cell(tr, "", "role");
    const b = document.createElement("span");
    b.className = "badge" + (m.role === "LEADER" ? " leader" : "");
    b.textContent = m.role;
    role.appendChild(b);
    if (m.self) role.appendChild(document.createTextNode(" answering"));
    const h = cell(tr, m.health, "health " + (m.health === "UP" ? "up" : "down"));
    if (m.healthDetail) h.title = m.healthDetail;
    if (m.healthDetail) h.textContent += ": " + m.healthDetail;
    cell(tr, m.peerAddress || "–");
    cell(tr, m.grpcAddress || "");
    cell(tr, m.httpAddress || "");
    cell(tr, m.remotingAddress || "");
    return tr;
  });
  fill($("#members tbody"), rows, 7, "no members");
  const box = $("#raft-groups");
  if (!c.clustered || !(c.groups || []).length) {
    if (!box.dataset.single) {
      box.replaceChildren();
      const s = document.createElement("section");
      s.innerHTML = "<h2>Raft groups</h2><p class=\"muted\">None: this is a single node. Members started with <code>--cluster-id</code> replicate the broker in a raft group, listed here with each replica's progress.</p>";
      box.appendChild(s);
      box.dataset.single = "1";
    }
    return;
  }
  delete box.dataset.single;
  for (const g of c.groups) renderRaftGroup(box, g, c);
}

function renderRaftGroup(box, g, c) {
  let s = box.querySelector("section[data-group='" + CSS.escape(g.name) + "']");
  if (!s) {
    s = document.createElement("section");
    s.dataset.group = g.name;
    s.innerHTML = "<h2>Raft group <span class=\"gname\"></span></h2><p class=\"gmeta muted\"></p>" +
      "<table class=\"replicas\"><thead><tr><th class=\"num\">Member</th><th>Votes</th><th class=\"num\">Match index</th><th class=\"num\">Applied index</th><th class=\"num\">Lag</th><th>Last contact</th><th>Replication</th></tr></thead><tbody></tbody></table>" +
      "<form class=\"transfer\" data-admin><label>Transfer leadership to <select name=\"to\" aria-label=\"member to lead\"></select></label><button type=\"submit\">Transfer</button><span class=\"msg\" role=\"status\"></span></form>";
    $(".gname", s).textContent = g.name;
    $("form", s).addEventListener("submit", (ev) => { ev.preventDefault(); transfer(g.name, s); });
    box.appendChild(s);
  }
  const leader = num(g.leader);
  s.dataset.leader = String(leader);
  $(".gmeta", s).textContent = (leader ? "Leader: member " + leader : "No leader (an election is under way, or a majority is down)") +
    ", term " + num(g.term) + ", commit index " + num(g.commitIndex) + (num(g.leadTransferee) ? ", handing over to member " + num(g.leadTransferee) : "");
  const rows = (g.replicas || []).map((r) => {
    const tr = document.createElement("tr");
    tr.dataset.member = String(num(r.member));
    cell(tr, String(num(r.member)) + (num(r.member) === leader ? " (leader)" : ""), "num");
    cell(tr, r.voter ? "voter" : "learner");
    cell(tr, String(num(r.matchIndex)), "num match");
    cell(tr, String(num(r.appliedIndex)), "num applied");
    cell(tr, String(num(r.lag)), "num lag " + (num(r.lag) ? "lagN" : "lag0"));
    cell(tr, num(r.member) === leader ? "–" : ago(r.lastContact), "contact");
    cell(tr, (r.replicationState || "").toLowerCase());
    return tr;
  });
  fill($("tbody", s), rows, 7, "no replicas");
  const form = $("form", s);
  form.hidden = !S.admin;
  const sel = form.to;
  const keep = sel.value;
  const options = (g.replicas || []).filter((r) => r.voter && num(r.member) !== leader).map((r) => String(num(r.member)));
  if ([...sel.options].map((o) => o.value).join() !== options.join()) {
    sel.replaceChildren();
    for (const id of options) {
      const o = document.createElement("option");
      o.value = id;
      o.textContent = "member " + id;
      sel.appendChild(o);
    }
    if (options.includes(keep)) sel.value = keep;
  }
  $("button", form).disabled = options.length === 0 || !!transferring;
  if (transferring && transferring.group === g.name) {
    if (leader === transferring.to) {
      setMsg($(".msg", form), "member " + leader + " leads now", "ok");
      transferring = null;
    } else if (Date.now() > transferring.until) {
      setMsg($(".msg", form), "member " + transferring.to + " did not take over within 20 s (member " + leader + " leads); try again", "error");
      transferring = null;
    }
  }
}

// transfer asks the leader to hand over. It answers at once; the old
// leader then stops serving, so its connection may drop before the
// answer arrives: either way the page watches the cluster status until
// the member asked for leads.
async function transfer(group, s) {
  const form = $("form", s);
  const to = Number(form.to.value);
  const msg = $(".msg", form);
  if (!to) return;
  setMsg(msg, "asking member " + num(s.dataset.leader) + " to hand over to member " + to + "…", "busy");
  try {
    await call("POST", "v1/cluster/groups/" + enc(group) + ":transferLeadership", { to: String(to) });
  } catch (e) {
    if (e.status !== 0) { setMsg(msg, e.message, "error"); return; }
  }
  transferring = { group, to, until: Date.now() + 20000 };
  $("button", form).disabled = true;
}

// ---- routing and the poll loop

function parseRoute() {
  const parts = location.hash.replace(/^#\/?/, "").split("/").filter(Boolean).map(decodeURIComponent);
  let page = parts.shift() || "overview";
  if (page === "topics" && parts.length) page = "topic";
  if (!pages[page]) page = "overview";
  return { page, args: parts };
}

async function route() {
  const { page, args } = parseRoute();
  const changed = page !== S.page || args.join("/") !== S.args.join("/");
  S.page = page;
  S.args = args;
  for (const a of $$("#nav a")) a.className = a.dataset.page === (page === "topic" ? "topics" : page) ? "on" : "";
  for (const p of $$(".page")) p.hidden = p.id !== "page-" + page;
  if (changed) {
    topicDesc = null;
    if (page === "topic") {
      fill($("#topic-queues tbody"), [], 5, "Loading…");
      fill($("#topic-lag tbody"), [], 2, "Loading…");
      $("#topic-meta").textContent = "";
    }
    if (pages[page].enter) pages[page].enter();
  }
  if (pages[page].admin && !S.admin) {
    banner("The " + page + " page is for admin users.");
    return;
  }
  await update();
}

let timer = null;

// update loads what the page shows beyond the common poll, and draws it.
async function update() {
  const p = pages[S.page];
  if (p.load && !(p.admin && !S.admin)) await p.load();
  if (S.loaded) p.render();
}

async function refresh() {
  await poll();
  await update();
}

async function loop() {
  clearTimeout(timer);
  if (!S.ready) return;
  try {
    await refresh();
    banner("");
  } catch (e) {
    if (e.status === 401 && S.auth) { signOut("Your credentials were refused: " + e.message); return; }
    banner(e.message);
  }
  $("#loading").hidden = true;
  timer = setTimeout(loop, POLL_MS);
}

// ---- sign-in

async function whoami() {
  const me = await call("GET", "v1/whoami");
  S.auth = !!me.authEnabled;
  S.admin = !!me.admin;
  S.accessKey = me.accessKey || "";
  S.ready = true;
  $("#signin").hidden = true;
  $("#nav").hidden = false;
  $("#signout").hidden = !S.auth;
  $("#who").textContent = S.auth ? S.accessKey + (S.admin ? " (admin)" : "") : "authentication off";
  for (const el of $$("[data-admin]")) el.hidden = !S.admin;
  document.body.dataset.admin = S.admin ? "1" : "0";
  $("#loading").hidden = false;
  await route();
  loop();
}

function showSignIn(message) {
  S.ready = false;
  $("#loading").hidden = true;
  $("#nav").hidden = true;
  for (const p of $$(".page")) p.hidden = true;
  $("#signin").hidden = false;
  $("#who").textContent = "";
  $("#signout").hidden = true;
  setMsg($("#signin .msg"), message || "", message ? "error" : "");
  $("#signin input[name=accessKey]").focus();
}

function signOut(message) {
  clearTimeout(timer);
  S.creds = null;
  S.samples = [];
  S.topicSamples = {};
  S.prevStats = null;
  S.loaded = false;
  banner("");
  showSignIn(message);
}

function initForms() {
  $("#signin-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const f = ev.target;
    S.creds = { accessKey: f.accessKey.value.trim(), secretKey: f.secretKey.value };
    setMsg($(".msg", f), "checking…", "busy");
    try {
      await whoami();
      f.secretKey.value = "";
      setMsg($(".msg", f), "");
    } catch (e) {
      S.creds = null;
      setMsg($(".msg", f), e.status === 401 ? "Refused: " + e.message : e.message, "error");
    }
  });
  $("#signout").addEventListener("click", () => signOut(""));
  $("#create-topic").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const f = ev.target;
    const body = { name: f.name.value.trim(), type: f.type.value, queues: Number(f.queues.value || 8) };
    try {
      await call("POST", "v1/topics", body);
      setMsg($(".msg", f), "created topic " + body.name, "ok");
      f.name.value = "";
      await refresh();
    } catch (e) {
      setMsg($(".msg", f), e.message, "error");
    }
  });
  $("#create-group").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const f = ev.target;
    const body = { name: f.name.value.trim(), fifo: f.fifo.checked, maxDeliveryAttempts: Number(f.maxDeliveryAttempts.value || 17) };
    try {
      await call("POST", "v1/groups", body);
      setMsg($(".msg", f), "created group " + body.name, "ok");
      f.name.value = "";
      await refresh();
    } catch (e) {
      setMsg($(".msg", f), e.message, "error");
    }
  });
  $("#dlq-redrive").addEventListener("click", async () => {
    const group = S.dlqGroup;
    const msg = $("#dlq-msg");
    setMsg(msg, "redriving…", "busy");
    try {
      let n = 0;
      for (;;) { // 256 a call, until none is left
        const res = await call("POST", "v1/groups/" + enc(group) + "/deadLetters:redrive", { max: 256 });
        n += (res.redriven || []).length;
        if (!(res.redriven || []).length || num(res.pending) === 0) break;
      }
      setMsg(msg, "redrove " + n + " dead letter(s) of " + group, "ok");
      await loadDeadLetters();
      await refresh();
    } catch (e) {
      setMsg(msg, e.message, "error");
    }
  });
  $("#dlq-close").addEventListener("click", () => { S.dlqGroup = ""; $("#dlq-section").hidden = true; });
  $("#lite-close").addEventListener("click", () => { S.liteParent = ""; $("#lite-section").hidden = true; });
  $("#lookup").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const f = ev.target;
    const q = new URLSearchParams();
    for (const k of ["messageId", "key", "topic"]) if (f[k].value.trim()) q.set(k, f[k].value.trim());
    if (!q.has("messageId") && !q.has("key")) { setMsg($(".msg", f), "enter a message id or a key", "error"); return; }
    try {
      const res = await call("GET", "v1/messages?" + q.toString());
      const rows = (res.messages || []).map((m) => {
        const tr = document.createElement("tr");
        tr.className = "click";
        tr.dataset.messageId = m.messageId;
        cell(tr, m.topic);
        cell(tr, m.messageId);
        cell(tr, m.tag || "");
        cell(tr, (m.keys || []).join(", "));
        cell(tr, m.state);
        cell(tr, when(m.storeTime));
        cell(tr, String(m.bodySize), "num");
        cell(tr, bodyPreview(m.body, m.bodyTruncated), "body");
        tr.addEventListener("click", () => showMessage(m));
        return tr;
      });
      fill($("#lookup-results tbody"), rows, 8, "no message found");
      setMsg($(".msg", f), "found " + rows.length + " message(s)", rows.length ? "ok" : "");
    } catch (e) {
      setMsg($(".msg", f), e.message, "error");
    }
  });
  $("#send").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const f = ev.target;
    const m = { text: f.text.value };
    if (f.tag.value.trim()) m.tag = f.tag.value.trim();
    const keys = f.keys.value.split(",").map((k) => k.trim()).filter(Boolean);
    if (keys.length) m.keys = keys;
    try {
      const res = await call("POST", "v1/topics/" + enc(f.topic.value) + "/messages", { messages: [m] });
      const r = (res.results || [])[0] || {};
      const st = r.status || {};
      if (st.code !== undefined && num(st.code) !== 20000) throw new APIError(st.name + ": " + st.message, 200);
      setMsg($(".msg", f), "sent " + r.messageId + " to " + f.topic.value, "ok");
      f.text.value = "";
    } catch (e) {
      setMsg($(".msg", f), e.message, "error");
    }
  });
  const bf = $("#browse");
  bf.addEventListener("submit", (ev) => { ev.preventDefault(); browse(); });
  bf.topic.addEventListener("change", fillQueues);
  bf.from.addEventListener("change", fromChanged);
  $("#browse-prev").addEventListener("click", () => S.browse && browse(Math.max(S.browse.min, S.browse.start - S.browse.count)));
  $("#browse-next").addEventListener("click", () => S.browse && browse(S.browse.next));
  $("#mv-close").addEventListener("click", () => { S.view = null; $("#message-view").hidden = true; });
  for (const b of $$(".tabs button")) b.addEventListener("click", () => { S.bodyView = b.dataset.view; showBody(); });
  window.addEventListener("hashchange", () => { banner(""); route().catch((e) => banner(e.message)); });
  window.addEventListener("resize", () => { if (S.loaded) pages[S.page].render(); });
}

async function start() {
  initForms();
  try {
    await whoami();
  } catch (e) {
    if (e.status === 401) showSignIn("");
    else {
      $("#loading").hidden = true;
      banner(e.message);
    }
  }
}

start();
