// mqgate console: polls the REST API (through /console/v1/) and the
// console endpoints (/console/api/), keeps a rolling window of samples and
// draws them on canvases. No dependencies.
"use strict";

const POLL_MS = 1000;
const WINDOW = 120; // samples kept (two minutes at one a second)

const samples = []; // {t, send, recv, backlog}
let lastTotals = null;
let dlqGroup = "";

// BASE is the console's URL without the user:password@ a sign-in URL may
// carry: fetch refuses URLs with credentials, and the browser sends the
// ones it was given with the page on its own.
const BASE = location.origin + location.pathname.replace(/[^/]*$/, "");

function $(sel) { return document.querySelector(sel); }

function setStatus(text, isError) {
  const s = $("#status");
  s.textContent = text;
  s.className = isError ? "error" : "";
}

// call fetches a JSON endpoint and throws an Error carrying the server's
// message on a non-2xx answer.
async function call(method, path, body) {
  const init = { method, headers: { "X-Mq-Console": "1" } };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const r = await fetch(BASE + path, init);
  const text = await r.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch (e) { data = null; }
  if (!r.ok) {
    const msg = (data && (data.message || data.error)) || text || r.statusText;
    throw new Error(method + " " + path + ": " + r.status + " " + msg);
  }
  return data;
}

const enc = encodeURIComponent;
const num = (v) => Number(v || 0); // protojson writes int64 as strings

function cell(tr, text, cls) {
  const td = document.createElement("td");
  td.textContent = text;
  if (cls) td.className = cls;
  tr.appendChild(td);
  return td;
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

// bodyPreview decodes a base64 body as UTF-8 text (bytes it cannot decode
// show as U+FFFD), cut to 200 characters.
function bodyPreview(b64, truncated) {
  if (!b64) return "";
  const bin = atob(b64);
  const bytes = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
  let text = new TextDecoder("utf-8").decode(bytes);
  if (text.length > 200) { text = text.slice(0, 200); truncated = true; }
  return truncated ? text + "…" : text;
}

function isSystemTopic(name) { return name.startsWith("%"); }

async function refresh() {
  const [stats, topics, groups] = await Promise.all([
    call("GET", "api/stats"),
    call("GET", "v1/topics"),
    call("GET", "v1/groups"),
  ]);
  const userTopics = (topics.topics || []).filter((t) => !isSystemTopic(t.name));
  const topicStatus = await Promise.all(userTopics.map((t) => call("GET", "v1/topics/" + enc(t.name) + "/status").catch(() => null)));
  const groupStatus = await Promise.all((groups.groups || []).map((g) => Promise.all([
    call("GET", "v1/groups/" + enc(g.name) + "/status").catch(() => null),
    call("GET", "api/groups/" + enc(g.name) + "/deadletters?max=1").catch(() => null),
  ])));

  const topicRows = userTopics.map((t, i) => {
    const st = topicStatus[i];
    const backlog = st ? (st.groups || []).reduce((s, g) => s + num(g.backlog), 0) : 0;
    const tr = document.createElement("tr");
    tr.dataset.topic = t.name;
    cell(tr, t.name, "name");
    cell(tr, t.type);
    cell(tr, String(t.queues));
    cell(tr, st ? String(num(st.messages)) : "?", "num stored");
    cell(tr, String(backlog), "num backlog");
    const td = cell(tr, "");
    if (t.type === "LITE") {
      button(td, "Lite topics", () => showLiteTopics(t.name), "show-lite");
      td.appendChild(document.createTextNode(" "));
    }
    button(td, "Delete", () => deleteTopic(t.name), "danger delete");
    return tr;
  });
  fill($("#topics tbody"), topicRows, 6, "no topics");

  let totalBacklog = 0;
  const groupRows = (groups.groups || []).map((g, i) => {
    const [st, dl] = groupStatus[i];
    let backlog = 0, inFlight = 0;
    for (const t of (st && st.topics) || []) {
      if (isSystemTopic(t.topic)) continue; // the dead-letter position: shown as dead letters
      backlog += num(t.backlog);
      inFlight += num(t.inFlight);
    }
    totalBacklog += backlog;
    const tr = document.createElement("tr");
    tr.dataset.group = g.name;
    cell(tr, g.name, "name");
    cell(tr, g.fifo ? "yes" : "no");
    cell(tr, String(g.maxDeliveryAttempts), "num");
    cell(tr, String(backlog), "num backlog");
    cell(tr, String(inFlight), "num inflight");
    cell(tr, dl ? String(num(dl.pending)) : "?", "num dlq");
    const td = cell(tr, "");
    button(td, "Dead letters", () => showDeadLetters(g.name), "show-dlq");
    td.appendChild(document.createTextNode(" "));
    button(td, "Delete", () => deleteGroup(g.name), "danger delete");
    return tr;
  });
  fill($("#groups tbody"), groupRows, 7, "no groups");

  addSample(stats, totalBacklog);
  if (dlqGroup) await loadDeadLetters();
  if (liteParent) await loadLiteTopics();
}

let liteParent = "";

async function showLiteTopics(topic) {
  liteParent = topic;
  $("#lite-topic").textContent = topic;
  $("#lite-section").hidden = false;
  try {
    await loadLiteTopics();
  } catch (e) {
    setStatus(e.message, true);
  }
}

// loadLiteTopics shows the first 200 lite topics of liteParent, one row
// per lite topic and group that consumed it.
async function loadLiteTopics() {
  const topic = liteParent;
  const page = await call("GET", "v1/topics/" + enc(topic) + "/liteTopics?pageSize=200");
  if (topic !== liteParent) return;
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
      cell(tr, lt.lastStored ? new Date(lt.lastStored).toLocaleString() : "");
      cell(tr, lt.expireTime ? new Date(lt.expireTime).toLocaleString() : "never");
      cell(tr, g ? g.group : "-", "group");
      cell(tr, g ? String(num(g.ready)) : "-", "num ready");
      cell(tr, g ? String(num(g.inFlight)) : "-", "num inflight");
      cell(tr, String((lt.subscribers || []).length), "num");
      rows.push(tr);
    }
  }
  fill($("#lite tbody"), rows, 9, "no lite topics");
}

function addSample(stats, backlog) {
  const cur = { t: num(stats.timeMillis), put: num(stats.put), get: num(stats.get) };
  if (lastTotals && cur.t > lastTotals.t) {
    const dt = (cur.t - lastTotals.t) / 1000;
    samples.push({
      t: cur.t,
      send: Math.max(0, cur.put - lastTotals.put) / dt,
      recv: Math.max(0, cur.get - lastTotals.get) / dt,
      backlog,
    });
    while (samples.length > WINDOW) samples.shift();
  }
  lastTotals = cur;
  drawRates();
  drawBacklog();
}

// drawChart plots series (arrays of numbers, one per sample) on a canvas
// with a zero-based y axis scaled to the largest value.
function drawChart(canvas, series, colors) {
  const ctx = canvas.getContext("2d");
  const w = canvas.width, h = canvas.height;
  const left = 44, right = 8, top = 8, bottom = 20;
  ctx.clearRect(0, 0, w, h);
  let max = 0;
  for (const s of series) for (const v of s) max = Math.max(max, v);
  max = niceCeil(max);
  ctx.strokeStyle = "#e3e7ee";
  ctx.fillStyle = "#6a7383";
  ctx.font = "11px system-ui, sans-serif";
  ctx.lineWidth = 1;
  for (let i = 0; i <= 4; i++) {
    const y = top + (h - top - bottom) * (1 - i / 4);
    ctx.beginPath(); ctx.moveTo(left, y); ctx.lineTo(w - right, y); ctx.stroke();
    ctx.textAlign = "right";
    ctx.fillText(fmt(max * i / 4), left - 4, y + 4);
  }
  ctx.textAlign = "left";
  ctx.fillText("-" + WINDOW + " s", left, h - 4);
  ctx.textAlign = "right";
  ctx.fillText("now", w - right, h - 4);
  const step = (w - left - right) / (WINDOW - 1);
  series.forEach((s, k) => {
    if (s.length === 0) return;
    ctx.strokeStyle = colors[k];
    ctx.fillStyle = colors[k];
    ctx.lineWidth = 2;
    ctx.beginPath();
    s.forEach((v, i) => {
      const x = left + (WINDOW - s.length + i) * step;
      const y = top + (h - top - bottom) * (1 - (max ? v / max : 0));
      if (i === 0) ctx.moveTo(x, y); else ctx.lineTo(x, y);
    });
    ctx.stroke();
    if (s.length === 1) {
      const x = left + (WINDOW - 1) * step;
      const y = top + (h - top - bottom) * (1 - (max ? s[0] / max : 0));
      ctx.beginPath(); ctx.arc(x, y, 2.5, 0, 2 * Math.PI); ctx.fill();
    }
  });
}

function niceCeil(v) {
  if (v <= 0) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 5, 10]) if (v <= m * p) return m * p;
  return 10 * p;
}

function fmt(v) { return String(Number(v.toFixed(v >= 100 ? 0 : 2))); }

function cssVar(name) { return getComputedStyle(document.documentElement).getPropertyValue(name).trim(); }

function drawRates() {
  const c = $("#rates");
  const send = samples.map((s) => s.send), recv = samples.map((s) => s.recv);
  drawChart(c, [send, recv], [cssVar("--send"), cssVar("--recv")]);
  c.dataset.points = String(samples.length);
  c.dataset.maxSend = String(Math.max(0, ...send));
  c.dataset.maxRecv = String(Math.max(0, ...recv));
}

function drawBacklog() {
  const c = $("#backlog");
  drawChart(c, [samples.map((s) => s.backlog)], [cssVar("--backlog")]);
  c.dataset.points = String(samples.length);
  c.dataset.last = samples.length ? String(samples[samples.length - 1].backlog) : "0";
}

async function act(what, fn) {
  try {
    const msg = await fn();
    setStatus(typeof msg === "string" ? msg : what);
    await refresh();
  } catch (e) {
    setStatus(e.message, true);
  }
}

function deleteTopic(name) {
  if (!confirm("Delete topic " + name + " and its messages?")) return;
  act("deleted topic " + name, () => call("DELETE", "v1/topics/" + enc(name)));
}

function deleteGroup(name) {
  if (!confirm("Delete consumer group " + name + "?")) return;
  act("deleted group " + name, () => call("DELETE", "v1/groups/" + enc(name)));
}

async function showDeadLetters(group) {
  dlqGroup = group;
  $("#dlq-group").textContent = group;
  $("#dlq-section").hidden = false;
  try {
    await loadDeadLetters();
  } catch (e) {
    setStatus(e.message, true);
  }
}

async function loadDeadLetters() {
  const group = dlqGroup;
  const page = await call("GET", "api/groups/" + enc(group) + "/deadletters?max=100");
  if (group !== dlqGroup) return;
  $("#dlq-pending").textContent = String(page.pending);
  const rows = page.messages.map((m) => {
    const tr = document.createElement("tr");
    tr.dataset.messageId = m.messageId;
    cell(tr, m.messageId);
    cell(tr, m.originTopic, "origin");
    cell(tr, m.tag || "");
    cell(tr, (m.keys || []).join(", "));
    cell(tr, String(m.reconsumeTimes), "num");
    cell(tr, new Date(m.storeTime).toLocaleString());
    cell(tr, bodyPreview(m.body, m.bodyTruncated), "body");
    return tr;
  });
  fill($("#dlq tbody"), rows, 7, "no dead letters");
}

function initForms() {
  $("#create-topic").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const f = ev.target;
    const body = { name: f.name.value.trim(), type: f.type.value, queues: Number(f.queues.value || 0) };
    act("created topic " + body.name, async () => { await call("POST", "v1/topics", body); f.name.value = ""; });
  });
  $("#create-group").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const f = ev.target;
    const body = { name: f.name.value.trim(), fifo: f.fifo.checked, maxDeliveryAttempts: Number(f.maxDeliveryAttempts.value || 0) };
    act("created group " + body.name, async () => { await call("POST", "v1/groups", body); f.name.value = ""; });
  });
  $("#lookup").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const f = ev.target;
    const q = new URLSearchParams();
    for (const k of ["messageId", "key", "topic"]) if (f[k].value.trim()) q.set(k, f[k].value.trim());
    try {
      const res = await call("GET", "v1/messages?" + q.toString());
      const rows = (res.messages || []).map((m) => {
        const tr = document.createElement("tr");
        tr.dataset.messageId = m.messageId;
        cell(tr, m.topic);
        cell(tr, m.messageId);
        cell(tr, m.tag || "");
        cell(tr, (m.keys || []).join(", "));
        cell(tr, m.state);
        cell(tr, m.storeTime ? new Date(m.storeTime).toLocaleString() : "");
        cell(tr, String(m.bodySize), "num");
        cell(tr, bodyPreview(m.body, m.bodyTruncated), "body");
        return tr;
      });
      fill($("#lookup-results tbody"), rows, 8, "no message found");
      setStatus("found " + rows.length + " message(s)");
    } catch (e) {
      setStatus(e.message, true);
    }
  });
  $("#dlq-redrive").addEventListener("click", () => {
    const group = dlqGroup;
    act("redrove the dead letters of " + group, async () => {
      let n = 0;
      for (;;) { // 256 a call, until none is left
        const res = await call("POST", "api/groups/" + enc(group) + "/deadletters/redrive?max=256");
        n += res.redriven.length;
        if (res.redriven.length === 0 || res.pending === 0) break;
      }
      return "redrove " + n + " dead letter(s) of " + group;
    });
  });
  $("#dlq-close").addEventListener("click", () => { dlqGroup = ""; $("#dlq-section").hidden = true; });
  $("#lite-close").addEventListener("click", () => { liteParent = ""; $("#lite-section").hidden = true; });
}

async function loop() {
  try {
    await refresh();
    if ($("#status").className === "error" && $("#status").dataset.poll === "1") setStatus("");
    $("#status").dataset.poll = "0";
  } catch (e) {
    setStatus(e.message, true);
    $("#status").dataset.poll = "1";
  }
  setTimeout(loop, POLL_MS);
}

initForms();
loop();
