'use strict';
// One scenario of mqgate's Node.js end-to-end tests, run by node_test.go
// and internal/e2e/mesh (through e2eutil.RunNode):
//
//   node scenarios.js <scenario>
//
// with MQ_ENDPOINT (mqgate's gRPC address, or a proxy's), MQ_TOPIC,
// MQ_GROUP, MQ_N and MQ_SSL in the environment (and MQ_ACCESS_KEY and
// MQ_SECRET_KEY when mqgate runs with --auth-file). It drives mqgate with the
// official RocketMQ 5 Node.js client only, and prints one JSON object on
// its last stdout line: the facts the Go test checks (sent and received
// messages, error codes, timings). A failure prints {"error": ...,
// "code": ...} and exits 1.

const {
  Producer, SimpleConsumer, PushConsumer, ConsumeResult, FilterExpression,
} = require('rocketmq-client-nodejs');
const { FilterType } = require('rocketmq-client-nodejs/proto/apache/rocketmq/v2/definition_pb');

const env = (k, d) => process.env[k] || d;
const endpoints = env('MQ_ENDPOINT');
const topic = env('MQ_TOPIC');
const group = env('MQ_GROUP');
const n = Number(env('MQ_N', '10'));
// The shortest invisible duration a receive may ask for.
const minInvisibleMs = 10000;

// Every client gets a logger that keeps quiet: the default one writes
// under $HOME and is shared, so the first shutdown closes it for all.
const quiet = { info() {}, warn() {}, error() {}, debug() {} };
// MQ_SSL=1: TLS to the endpoint (trusting GRPC_DEFAULT_SSL_ROOTS_FILE_PATH).
// MQ_ACCESS_KEY and MQ_SECRET_KEY: the credentials every client signs its
// calls with (the client's sessionCredentials: it sends x-mq-date-time and
// authorization: MQv2-HMAC-SHA1 Credential=<AK>, ..., Signature=<hex>).
const base = {
  endpoints, namespace: '', logger: quiet, requestTimeout: 10000, sslEnabled: env('MQ_SSL') === '1',
  sessionCredentials: process.env.MQ_ACCESS_KEY
    ? { accessKey: env('MQ_ACCESS_KEY'), accessSecret: env('MQ_SECRET_KEY', '') } : undefined,
};

const started = [];
async function start(client) {
  await client.startup();
  started.push(client);
  return client;
}

function view(m) {
  return {
    id: m.messageId,
    topic: m.topic,
    tag: m.tag || '',
    keys: m.keys,
    group: m.messageGroup || '',
    body: m.body.toString('utf8'),
    props: Object.fromEntries(m.properties || new Map()),
    attempt: m.deliveryAttempt,
    corrupted: m.corrupted === true,
    bornHost: m.bornHost,
    offset: m.offset,
    deliveryTimestamp: m.deliveryTimestamp ? m.deliveryTimestamp.getTime() : 0,
  };
}

// failure runs fn and returns how it failed: the v2 status code and the
// message of the first error in the cause chain that names a code ({code:
// 0} when fn succeeds, code -1 when no error names one). Most calls throw
// a ClientException with the code; recallMessage throws an Error whose
// message ends "(code: N)"; startup wraps the route query's
// ClientException in two Errors (err.cause.cause).
async function failure(fn) {
  try {
    await fn();
    return { code: 0, message: '' };
  } catch (e) {
    for (let c = e; c; c = c.cause) {
      if (typeof c.code === 'number') return { code: c.code, message: String(c.message) };
      const m = /\(code: (\d+)\)$/.exec(String(c.message));
      if (m) return { code: Number(m[1]), message: String(c.message) };
    }
    return { code: -1, message: String(e && e.stack || e) };
  }
}

// errorCode runs fn and returns the v2 status code of its failure (see
// failure).
async function errorCode(fn) {
  return (await failure(fn)).code;
}

// receiveUntil receives (and acks, unless ack is false) until want
// messages arrived or the deadline passed. With retryErrors a failed
// receive is tried again (until the deadline) instead of failing.
async function receiveUntil(consumer, want, {
  ack = true, invisibleMs = 30000, deadlineMs = 30000, retryErrors = false,
} = {}) {
  const got = [];
  const end = Date.now() + deadlineMs;
  while (got.length < want && Date.now() < end) {
    let msgs;
    try {
      msgs = await consumer.receive(Math.min(32, want - got.length), invisibleMs);
    } catch (e) {
      if (!retryErrors || Date.now() > end) throw e;
      await new Promise((res) => setTimeout(res, 200));
      continue;
    }
    for (const m of msgs) {
      if (ack) await consumer.ack(m);
      got.push(m);
    }
  }
  return got;
}

function simpleConsumer(filter, awaitDuration = 2000) {
  return start(new SimpleConsumer({
    ...base, consumerGroup: group, awaitDuration,
    subscriptions: new Map().set(topic, filter),
  }));
}

// sendGroups sends n messages in each of the message groups g1 and g2,
// interleaved, with bodies "<group>-<i>".
async function sendGroups(producer) {
  const sent = [];
  for (let i = 0; i < n; i++) {
    for (const g of ['g1', 'g2']) {
      const body = `${g}-${i}`;
      const r = await producer.send({ topic, messageGroup: g, body: Buffer.from(body) });
      sent.push({ id: r.messageId, group: g, body });
    }
  }
  return sent;
}

// pushConsumer starts a PushConsumer whose listener records every
// delivery and fails the ones fail(view) picks. until resolves once count
// deliveries were seen, or after 60 s.
async function pushConsumer(count, fail) {
  const seen = [];
  let done;
  const until = new Promise((res) => { done = res; });
  setTimeout(done, 60000);
  await start(new PushConsumer({
    ...base, consumerGroup: group,
    subscriptions: new Map([[topic, '*']]),
    messageListener: {
      async consume(m) {
        const v = view(m);
        seen.push(v);
        const failed = fail(v);
        if (seen.length >= count) done();
        return failed ? ConsumeResult.FAILURE : ConsumeResult.SUCCESS;
      },
    },
  }));
  return { seen, until };
}

const scenarios = {
  // Send n messages alternating two tags, with keys and properties;
  // receive and ack the tagA half through a tag filter; then a receive
  // must find nothing more.
  async normal() {
    const consumer = await simpleConsumer('tagA');
    const producer = await start(new Producer({ ...base, topics: [topic] }));
    const sent = [];
    for (let i = 0; i < n; i++) {
      const tag = i % 2 === 0 ? 'tagA' : 'tagB';
      const body = `node message ${i} ` + 'x'.repeat(i * 37);
      const r = await producer.send({
        topic, tag, keys: [`key-${i}`, `alt-${i}`], body: Buffer.from(body),
        properties: new Map([['seq', String(i)], ['lang', 'node']]),
      });
      sent.push({ id: r.messageId, tag, body, offset: r.offset });
    }
    const want = sent.filter((s) => s.tag === 'tagA').length;
    const got = await receiveUntil(consumer, want);
    const more = await consumer.receive(32, 30000);
    return { sent, received: got.map(view), extra: more.map(view) };
  },

  // n messages with properties a = 1..n and region alternating eu/us,
  // tagged x then y; a SimpleConsumer with an SQL92 filter over them (and
  // the TAGS property) receives and acks what matches; then a receive
  // must find nothing more.
  async sql() {
    const producer = await start(new Producer({ ...base, topics: [topic] }));
    const sent = [];
    for (let i = 1; i <= n; i++) {
      const region = i % 2 === 1 ? 'eu' : 'us';
      const tag = i <= n / 2 ? 'x' : 'y';
      const r = await producer.send({
        topic, tag, body: Buffer.from(`sql ${i}`),
        properties: new Map([['a', String(i)], ['region', region]]),
      });
      sent.push({ id: r.messageId, a: i, region, tag });
    }
    const consumer = await simpleConsumer(new FilterExpression(env('MQ_SQL'), FilterType.SQL));
    const want = Number(env('MQ_SQL_WANT'));
    const got = await receiveUntil(consumer, want);
    const more = await consumer.receive(32, 30000);
    return { sent, received: got.map(view), extra: more.map(view) };
  },

  // Receive without acking and wait for the redelivery; extend the second
  // delivery with changeInvisibleDuration; the old handle must then fail
  // and the new one ack.
  async redelivery() {
    const consumer = await simpleConsumer('*');
    const producer = await start(new Producer({ ...base, topics: [topic] }));
    const r = await producer.send({ topic, tag: 'r', body: Buffer.from('redeliver me') });
    const [first] = await receiveUntil(consumer, 1, { ack: false, invisibleMs: minInvisibleMs });
    const t0 = Date.now();
    const [second] = await receiveUntil(consumer, 1, { ack: false, invisibleMs: 20000 });
    const redeliveredAfterMs = Date.now() - t0;
    const staleFirst = await errorCode(() => consumer.ack(first));
    const oldHandle = second.receiptHandle;
    await consumer.changeInvisibleDuration(second, 20000);
    const stale = Object.assign(Object.create(Object.getPrototypeOf(second)), second, { receiptHandle: oldHandle });
    const oldHandleAck = await errorCode(() => consumer.ack(stale));
    const newHandleAck = await errorCode(() => consumer.ack(second));
    const more = await consumer.receive(1, 30000);
    return {
      sentId: r.messageId, first: view(first), second: view(second), redeliveredAfterMs,
      staleFirst, oldHandleAck, newHandleAck, handleChanged: oldHandle !== second.receiptHandle,
      extra: more.map(view),
    };
  },

  // n messages in each of two message groups, interleaved, to a FIFO topic
  // consumed by a FIFO group: each group's order must hold.
  async fifo() {
    const consumer = await simpleConsumer('*');
    const producer = await start(new Producer({ ...base, topics: [topic] }));
    const sent = await sendGroups(producer);
    const got = await receiveUntil(consumer, sent.length);
    return { sent, received: got.map(view) };
  },

  // Two messages delayed by MQ_DELAY_MS, one of them recalled: the other
  // is delivered, not before its time, and the recalled one never is.
  async delay() {
    const delayMs = Number(env('MQ_DELAY_MS', '3000'));
    const consumer = await simpleConsumer('*');
    const producer = await start(new Producer({ ...base, topics: [topic] }));
    const sentAt = Date.now();
    const r = await producer.send({ topic, tag: 'd', delay: delayMs, body: Buffer.from('later') });
    const rr = await producer.send({ topic, tag: 'd', delay: delayMs, body: Buffer.from('recalled') });
    const recall = await producer.recallMessage(topic, rr.recallHandle);
    const recallAgain = await errorCode(() => producer.recallMessage(topic, rr.recallHandle));
    const got = await receiveUntil(consumer, 1, { deadlineMs: delayMs + 30000 });
    const receivedAt = Date.now();
    const more = await consumer.receive(32, 30000);
    return {
      sentId: r.messageId, recalledId: rr.messageId, recallReceiptId: recall.messageId, recallAgain,
      sentAt, receivedAt, delayMs, received: got.map(view), extra: more.map(view),
    };
  },

  // One transaction committed, one rolled back: only the committed message
  // is delivered.
  async transaction() {
    const consumer = await simpleConsumer('*');
    const checker = { async check() { throw new Error('no orphaned transaction expected'); } };
    const producer = await start(new Producer({ ...base, topics: [topic], checker }));
    const commit = producer.beginTransaction();
    const rc = await producer.send({ topic, tag: 'tx', body: Buffer.from('committed') }, commit);
    const rollback = producer.beginTransaction();
    const rr = await producer.send({ topic, tag: 'tx', body: Buffer.from('rolled back') }, rollback);
    await rollback.rollback();
    await commit.commit();
    const got = await receiveUntil(consumer, 1);
    const more = await consumer.receive(32, 30000);
    return { committedId: rc.messageId, rolledBackId: rr.messageId, received: got.map(view), extra: more.map(view) };
  },

  // A PushConsumer's listener sees all n messages; the first delivery of
  // every third one fails and must come back with attempt 2.
  async push() {
    const failed = new Set();
    const { seen, until } = await pushConsumer(n + Math.ceil(n / 3), (v) => {
      const seq = Number(v.body.split(' ')[1]);
      if (seq % 3 !== 0 || failed.has(seq)) return false;
      failed.add(seq);
      return true;
    });
    const producer = await start(new Producer({ ...base, topics: [topic] }));
    const sent = [];
    for (let i = 0; i < n; i++) {
      const r = await producer.send({ topic, tag: 'p', body: Buffer.from(`push ${i}`) });
      sent.push({ id: r.messageId, body: `push ${i}` });
    }
    await until;
    return { sent, seen };
  },

  // A PushConsumer of a FIFO group: n messages in each of two message
  // groups, and the listener fails the first delivery of message 2 of g1.
  // Each group must still be consumed in order: g1's message 2 again
  // (attempt 2) before g1's message 3.
  async pushFifo() {
    let failedOnce = false;
    const { seen, until } = await pushConsumer(2 * n + 1, (v) => {
      if (v.body !== 'g1-2' || failedOnce) return false;
      failedOnce = true;
      return true;
    });
    const producer = await start(new Producer({ ...base, topics: [topic] }));
    const sent = await sendGroups(producer);
    await until;
    return { sent, seen };
  },

  // A message never acked by a group with 2 delivery attempts: delivered
  // twice (attempt 1, then 2 after the invisible duration), then moved to
  // %DLQ%<group>, where another group (MQ_DLQ_GROUP) reads it.
  async dlq() {
    const consumer = await simpleConsumer('*');
    const producer = await start(new Producer({ ...base, topics: [topic] }));
    const r = await producer.send({ topic, tag: 'd', keys: ['dead-key'], body: Buffer.from('dead letter') });
    const deliveries = [];
    const end = Date.now() + 60000;
    // Receive without acking. The message moves to the dead-letter queue
    // when a receive pops it after its second invisible duration, so keep
    // receiving until one has looked past that deadline.
    let lastAt = 0;
    while (Date.now() < end) {
      const msgs = await consumer.receive(1, minInvisibleMs);
      deliveries.push(...msgs.map(view));
      if (msgs.length > 0) lastAt = Date.now();
      if (deliveries.length >= 2 && Date.now() - lastAt > minInvisibleMs + 2000) break;
    }
    // The DLQ topic exists once the message moved; a consumer of it may
    // need a moment to find its route.
    const dlqTopic = `%DLQ%${group}`;
    let reader;
    for (;;) {
      try {
        reader = await start(new SimpleConsumer({
          ...base, consumerGroup: env('MQ_DLQ_GROUP'), awaitDuration: 2000,
          subscriptions: new Map().set(dlqTopic, '*'),
        }));
        break;
      } catch (e) {
        if (Date.now() > end) throw e;
        await new Promise((res) => setTimeout(res, 500));
      }
    }
    const dead = await receiveUntil(reader, 1, { retryErrors: true });
    return { sentId: r.messageId, deliveries, dlqTopic, dead: dead.map(view) };
  },

  // The same producer and consumer across a restart of mqgate: 5 messages
  // sent, received and acked; "READY" on stdout; the test kills and
  // restarts mqgate on the same address and data dir and answers "GO" on
  // stdin; then 5 more (sends retried until the server is back for up to
  // 30 s), received and acked by the same consumer.
  async restart() {
    const consumer = await simpleConsumer('*');
    const producer = await start(new Producer({ ...base, topics: [topic] }));
    const sendAll = async (label) => {
      const sent = [];
      let failed = 0;
      const end = Date.now() + 30000;
      while (sent.length < 5) {
        const body = `${label}-${sent.length}`;
        try {
          const r = await producer.send({ topic, body: Buffer.from(body) });
          sent.push({ id: r.messageId, body });
        } catch (e) {
          if (Date.now() > end) throw e;
          failed++;
          await new Promise((res) => setTimeout(res, 200));
        }
      }
      return { sent, failed };
    };
    const before = await sendAll('before');
    const got1 = await receiveUntil(consumer, 5);
    process.stdout.write('READY\n');
    await new Promise((res) => process.stdin.once('data', res));
    const after = await sendAll('after');
    const got2 = await receiveUntil(consumer, 5, { deadlineMs: 60000, retryErrors: true });
    const more = await consumer.receive(32, 30000);
    return {
      before: before.sent, after: after.sent, failedAfter: after.failed,
      receivedBefore: got1.map(view), receivedAfter: got2.map(view), extra: more.map(view),
    };
  },

  // A cluster member dies under the clients: 5 messages sent, received
  // and acked through MQ_ENDPOINT (a member); "READY" on stdout; the test
  // kills that member (kill -9, it stays down) and answers "GO"; then 5
  // more are sent (each retried until answered OK, for up to 60 s) and
  // received by the same producer and consumer. moveMs is the time from
  // "GO" to the first send answered OK, receiveMs to the last of the 5
  // received; failedAfter counts the sends that failed meanwhile.
  async failover() {
    const consumer = await simpleConsumer('*');
    const producer = await start(new Producer({ ...base, topics: [topic] }));
    const sendAll = async (label, deadlineMs) => {
      const sent = [];
      let failed = 0;
      let firstOk = 0;
      const end = Date.now() + deadlineMs;
      while (sent.length < 5) {
        const body = `${label}-${sent.length}`;
        try {
          const r = await producer.send({ topic, body: Buffer.from(body) });
          sent.push({ id: r.messageId, body });
          if (!firstOk) firstOk = Date.now();
        } catch (e) {
          if (Date.now() > end) throw e;
          failed++;
          await new Promise((res) => setTimeout(res, 100));
        }
      }
      return { sent, failed, firstOk };
    };
    const before = await sendAll('before', 30000);
    const got1 = await receiveUntil(consumer, 5);
    process.stdout.write('READY\n');
    await new Promise((res) => process.stdin.once('data', res));
    const go = Date.now();
    const after = await sendAll('after', 60000);
    const got2 = await receiveUntil(consumer, 5, { deadlineMs: 60000, retryErrors: true });
    return {
      before: before.sent, after: after.sent, failedAfter: after.failed, moveMs: after.firstOk - go,
      receiveMs: Date.now() - go, receivedBefore: got1.map(view), receivedAfter: got2.map(view),
    };
  },

  // mqgate with --auth-file; MQ_ACCESS_KEY may publish to and consume
  // MQ_TOPIC as MQ_GROUP, consume but not publish to MQ_READONLY_TOPIC,
  // and neither publish to nor consume MQ_DENIED_TOPIC, nor use
  // MQ_DENIED_GROUP. A producer with a wrong secret cannot start (its route
  // query is refused) and an unsigned one cannot send; the user's producer
  // is refused both other topics and still sends to its own afterwards;
  // its SimpleConsumer receives and acks all n messages, then finds
  // nothing more; a consumer of the denied group is refused (when it
  // starts or when it receives). Refusals are reported as {code, message}.
  async auth() {
    const { accessKey, accessSecret } = base.sessionCredentials;
    // Its startup retries the route query with a 3 s backoff in all: the
    // rest runs meanwhile.
    const wrongSecretDone = failure(() => start(new Producer({
      ...base, topics: [topic], sessionCredentials: { accessKey, accessSecret: `${accessSecret}-wrong` },
    })));
    const unsigned = await failure(async () => {
      const p = await start(new Producer({ ...base, sessionCredentials: undefined }));
      await p.send({ topic, body: Buffer.from('unsigned') });
    });
    const consumer = await simpleConsumer('*');
    const producer = await start(new Producer({ ...base, topics: [topic] }));
    const sent = [];
    const sendSome = async (count) => {
      for (let i = 0; i < count; i++) {
        const body = `auth ${sent.length}`;
        const r = await producer.send({ topic, tag: 'a', body: Buffer.from(body) });
        sent.push({ id: r.messageId, tag: 'a', body });
      }
    };
    await sendSome(Math.ceil(n / 2));
    const deniedTopic = await failure(() => producer.send({ topic: env('MQ_DENIED_TOPIC'), body: Buffer.from('denied') }));
    const readOnlyTopic = await failure(() => producer.send({ topic: env('MQ_READONLY_TOPIC'), body: Buffer.from('read only') }));
    await sendSome(n - sent.length);
    const got = await receiveUntil(consumer, n);
    const more = await consumer.receive(32, 30000);
    let deniedGroupStarted = false;
    const deniedGroup = await failure(async () => {
      const c = await start(new SimpleConsumer({
        ...base, consumerGroup: env('MQ_DENIED_GROUP'), awaitDuration: 500,
        subscriptions: new Map().set(topic, '*'),
      }));
      deniedGroupStarted = true;
      await c.receive(1, minInvisibleMs);
    });
    const wrongSecret = await wrongSecretDone;
    return {
      wrongSecret, unsigned, deniedTopic, readOnlyTopic, deniedGroup, deniedGroupStarted,
      sent, received: got.map(view), extra: more.map(view),
    };
  },

  // Errors the client gets back, as v2 status codes. The forged handle
  // differs from the real one in its last characters (the MAC). A
  // malformed SQL92 filter gets ILLEGAL_FILTER_EXPRESSION.
  async errors() {
    const producer = await start(new Producer({ ...base }));
    const noTopic = await errorCode(() => producer.send({ topic: env('MQ_MISSING_TOPIC'), body: Buffer.from('x') }));
    const badTag = await errorCode(() => producer.send({ topic, tag: 'a|b', body: Buffer.from('x') }));
    const consumer = await simpleConsumer('*', 500);
    const shortInvisible = await errorCode(() => consumer.receive(1, 2000));
    await producer.send({ topic, body: Buffer.from('forge me') });
    const [m] = await receiveUntil(consumer, 1, { ack: false });
    const forged = Object.assign(Object.create(Object.getPrototypeOf(m)), m,
      { receiptHandle: m.receiptHandle.slice(0, -4) + (m.receiptHandle.endsWith('AAAA') ? 'BBBB' : 'AAAA') });
    const forgedAck = await errorCode(() => consumer.ack(forged));
    const realAck = await errorCode(() => consumer.ack(m));
    const sql = await start(new SimpleConsumer({
      ...base, consumerGroup: group, awaitDuration: 500,
      subscriptions: new Map().set(topic, new FilterExpression('a > ', FilterType.SQL)),
    }));
    const sqlReceive = await errorCode(() => sql.receive(1, minInvisibleMs));
    return { noTopic, badTag, shortInvisible, forgedAck, realAck, sqlReceive };
  },
};

(async () => {
  const name = process.argv[2];
  if (!scenarios[name]) throw new Error(`unknown scenario ${name}`);
  const result = await scenarios[name]();
  for (const c of started.reverse()) {
    try { await c.shutdown(); } catch (_) { /* reported by the server's side, not here */ }
  }
  process.stdout.write(JSON.stringify(result) + '\n');
  process.exit(0);
})().catch((e) => {
  process.stdout.write(JSON.stringify({ error: String(e && e.stack || e), code: e && e.code }) + '\n');
  process.exit(1);
});
