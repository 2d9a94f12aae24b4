// Produce/consume checks with the pure-JS pulsar-flex client (npm), run by `node --test`.
// The broker comes from BROKER_URL (pulsar://host:port) or BROKER_HOST/BROKER_PORT
// (default 127.0.0.1:6650). ADMIN_URL (http://host:port), when set, adds backlog checks.
//
// pulsar-flex features used: Exclusive/Shared/Failover/Key_Shared subscriptions, single and batch
// sends, individual, cumulative and negative acks, redelivery counts. It has no seek, no message
// keys, no consumer close (only unsubscribe) and always subscribes at the Latest position
// (it does not send initialPosition), so every test subscribes before producing.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const { Producer, Consumer, logLevel } = require('pulsar-flex');
const { BROKER } = require('./env');

const ADMIN_URL = process.env.ADMIN_URL;
const N = 10000;
const quiet = { logLevel: logLevel.NOTHING };

// Everything opened, so that a failed test cannot leave sockets or timers keeping node alive.
const opened = { producers: [], consumers: [] };
test.after(() => {
  for (const c of opened.consumers) {
    if (c.getState() !== Consumer.CONSUMER_STATES.UNSUBSCRIBED) dropConsumer(c);
  }
  for (const p of opened.producers) {
    p._created = false;
    if (p._client.getCnx()) p._client.getCnx().close();
  }
});

function uniqueTopic(name) {
  return `persistent://public/default/flex-${name}-${crypto.randomBytes(4).toString('hex')}`;
}

async function newProducer(topic) {
  const producer = new Producer({
    topic,
    discoveryServers: [BROKER],
    producerAccessMode: Producer.ACCESS_MODES.SHARED,
    ...quiet,
  });
  opened.producers.push(producer);
  await producer.create();
  return producer;
}

async function closeProducer(producer) {
  await producer.close();
  producer._client.getCnx().close(); // pulsar-flex keeps the socket open after CLOSE_PRODUCER
}

async function newConsumer(topic, subscription, subType, consumerName, receiveQueueSize = 1000) {
  const consumer = new Consumer({
    topic,
    subscription,
    subType,
    consumerName,
    discoveryServers: [BROKER],
    receiveQueueSize,
    ...quiet,
  });
  opened.consumers.push(consumer);
  await consumer.subscribe();
  return consumer;
}

// Sends payloads in order, up to `window` receipts outstanding (each send is written to the
// socket synchronously, so the wire order is the call order).
async function sendAll(producer, payloads, window = 500) {
  for (let i = 0; i < payloads.length; i += window) {
    await Promise.all(payloads.slice(i, i + window).map((payload) => producer.sendMessage({ payload })));
  }
}

// Runs the consumers until `done(all)` is true, where `all` lists every received message as
// {payload, redeliveryCount, messageId, ack, consumer}. `handle(rec)` processes one message
// (default: individual ack). Resolves with {all, per: [list per consumer]}; rejects on timeout.
function consumeUntil(consumers, { done, handle, timeoutMs = 60000 }) {
  return new Promise((resolve, reject) => {
    const all = [];
    const per = consumers.map(() => []);
    let finished = false;
    const timer = setTimeout(() => {
      finished = true;
      reject(new Error(`timeout: received ${all.length} messages`));
    }, timeoutMs);
    consumers.forEach((consumer, i) => {
      consumer.run({
        autoAck: false,
        onMessage: async ({ ack, message, redeliveryCount, command }) => {
          if (finished) return;
          const rec = { payload: message.toString(), redeliveryCount, messageId: command.messageId, ack, consumer: i };
          all.push(rec);
          per[i].push(rec);
          if (handle) await handle(rec, all);
          else await ack();
          if (!finished && done(all)) {
            finished = true;
            clearTimeout(timer);
            resolve({ all, per });
          }
        },
      });
    });
  });
}

// Drops a consumer without UNSUBSCRIBE (pulsar-flex has no close): marks it unsubscribed so it
// does not reconnect, stops its loop and closes its socket.
function dropConsumer(consumer) {
  consumer._setState(Consumer.CONSUMER_STATES.UNSUBSCRIBED);
  consumer._cleanState();
  consumer._client.getCnx().close();
}

async function backlog(topic, subscription) {
  const path = topic.replace('persistent://', '');
  const res = await fetch(`${ADMIN_URL}/admin/v2/persistent/${path}/stats`);
  assert.equal(res.status, 200);
  return (await res.json()).subscriptions[subscription].msgBacklog;
}

async function waitBacklog(topic, subscription, want) {
  let last;
  for (let i = 0; i < 50; i++) {
    last = await backlog(topic, subscription);
    if (last === want) return;
    await new Promise((r) => setTimeout(r, 200));
  }
  assert.equal(last, want, 'subscription backlog');
}

// The end of a test with one consumer on subscription `sub`: with ADMIN_URL, its backlog drops
// to 0 (the acks reached the broker); then it unsubscribes and the producer closes.
async function finish(topic, consumer, producer) {
  if (ADMIN_URL) await waitBacklog(topic, 'sub', 0);
  await consumer.unsubscribe();
  await closeProducer(producer);
}

const payloads = Array.from({ length: N }, (_, i) => `m-${String(i).padStart(5, '0')}`);

const SUB_TYPES = [
  ['Exclusive', Consumer.SUB_TYPES.EXCLUSIVE],
  ['Shared', Consumer.SUB_TYPES.SHARED],
  ['Failover', Consumer.SUB_TYPES.FAILOVER],
  ['Key_Shared', Consumer.SUB_TYPES.KEY_SHARED],
];

for (const [name, subType] of SUB_TYPES) {
  test(`${name}: 10,000 single messages produced and consumed in order with acks`, { timeout: 120000 }, async () => {
    const topic = uniqueTopic(`single-${name}`);
    const consumer = await newConsumer(topic, 'sub', subType, `c-${name}`);
    const producer = await newProducer(topic);
    await sendAll(producer, payloads);
    const { all: got } = await consumeUntil([consumer], { done: (g) => g.length >= N });
    assert.deepEqual(got.map((m) => m.payload), payloads);
    assert.ok(got.every((m) => m.redeliveryCount === 0));
    await finish(topic, consumer, producer);
  });
}

test('batch sends: 100 batches of 100 consumed in order, batch indexes visible', { timeout: 120000 }, async () => {
  const topic = uniqueTopic('batch');
  // Receive queue as large as the stream: pulsar-flex drops a MESSAGE frame that arrives while its
  // queue holds exactly receiveQueueSize messages, and Pulsar 4.2 may dispatch more messages than
  // the permits when entries are batches (its first read assumes one message per entry: FLOW 1000
  // brought all 100 entries = 10,000 messages, leaving permits at -9000). With a 1000-message
  // queue the client then stalls; that is the client's bug, not the broker's.
  const consumer = await newConsumer(topic, 'sub', Consumer.SUB_TYPES.EXCLUSIVE, 'c-batch', N);
  const producer = await newProducer(topic);
  for (let b = 0; b < 100; b++) {
    const messages = payloads.slice(b * 100, b * 100 + 100).map((payload) => ({ payload, properties: { b: String(b) } }));
    await producer.sendBatch({ messages });
  }
  const { all: got } = await consumeUntil([consumer], { done: (g) => g.length >= N });
  assert.deepEqual(got.map((m) => m.payload), payloads);
  // Messages of one batch share one entry.
  const entries = new Set(got.map((m) => `${m.messageId.ledgerid}:${m.messageId.entryid}`));
  assert.equal(entries.size, 100);
  await finish(topic, consumer, producer);
});

test('cumulative ack of the last message acks everything', { timeout: 60000 }, async () => {
  const topic = uniqueTopic('cumulative');
  const consumer = await newConsumer(topic, 'sub', Consumer.SUB_TYPES.EXCLUSIVE, 'c-cumulative');
  const producer = await newProducer(topic);
  const some = payloads.slice(0, 200);
  await sendAll(producer, some);
  const { all: got } = await consumeUntil([consumer], {
    done: (g) => g.length >= some.length,
    handle: async (rec, all) => {
      if (all.length === some.length) await rec.ack({ type: Consumer.ACK_TYPES.CUMULATIVE });
    },
  });
  assert.deepEqual(got.map((m) => m.payload), some);
  await finish(topic, consumer, producer);
});

test('negative ack on Shared redelivers the message with a higher redelivery count', { timeout: 60000 }, async () => {
  const topic = uniqueTopic('nack');
  const consumer = await newConsumer(topic, 'sub', Consumer.SUB_TYPES.SHARED, 'c-nack');
  const producer = await newProducer(topic);
  await sendAll(producer, ['a', 'b', 'c']);
  let nacks = 0;
  const { all: got } = await consumeUntil([consumer], {
    done: (g) => g.filter((m) => m.payload === 'b').length === 3,
    handle: async (rec) => {
      if (rec.payload === 'b' && nacks < 2) {
        nacks++;
        await rec.ack({ type: Consumer.ACK_TYPES.NEGATIVE });
      } else {
        await rec.ack();
      }
    },
  });
  const bs = got.filter((m) => m.payload === 'b').map((m) => m.redeliveryCount);
  assert.deepEqual(bs, [0, 1, 2]);
  assert.deepEqual(got.filter((m) => m.payload !== 'b').map((m) => m.payload), ['a', 'c']);
  await finish(topic, consumer, producer);
});

test('two Shared consumers split the stream without duplicates', { timeout: 120000 }, async () => {
  const topic = uniqueTopic('shared2');
  const c1 = await newConsumer(topic, 'sub', Consumer.SUB_TYPES.SHARED, 'c1', 100);
  const c2 = await newConsumer(topic, 'sub', Consumer.SUB_TYPES.SHARED, 'c2', 100);
  const producer = await newProducer(topic);
  const some = payloads.slice(0, 2000);
  await sendAll(producer, some);
  const { all, per } = await consumeUntil([c1, c2], { done: (g) => g.length >= some.length });
  assert.deepEqual(all.map((m) => m.payload).sort(), [...some].sort());
  assert.ok(per[0].length > 0 && per[1].length > 0, `both consumers got messages (${per[0].length}, ${per[1].length})`);
  for (const g of per) {
    const p = g.map((m) => m.payload);
    assert.deepEqual(p, [...p].sort(), 'per-consumer order');
  }
  dropConsumer(c1);
  await c2.unsubscribe(); // the last consumer may unsubscribe
  await closeProducer(producer);
});

test('Failover: only the active consumer receives', { timeout: 60000 }, async () => {
  const topic = uniqueTopic('failover2');
  const c1 = await newConsumer(topic, 'sub', Consumer.SUB_TYPES.FAILOVER, 'fa');
  const c2 = await newConsumer(topic, 'sub', Consumer.SUB_TYPES.FAILOVER, 'fb');
  const producer = await newProducer(topic);
  const some = payloads.slice(0, 100);
  await sendAll(producer, some);
  const { all, per } = await consumeUntil([c1, c2], { done: (g) => g.length >= some.length });
  assert.deepEqual(all.map((m) => m.payload), some);
  assert.ok(per[0].length === 0 || per[1].length === 0, `one active consumer (${per[0].length}, ${per[1].length})`);
  dropConsumer(c1);
  dropConsumer(c2);
  await closeProducer(producer);
});

test('partitioned topic: batches sent to each partition are consumed per partition in order', { timeout: 120000 }, async (t) => {
  if (!ADMIN_URL) {
    t.skip('needs ADMIN_URL to create the partitioned topic');
    return;
  }
  // pulsar-flex has no partition routing: it uses the partitions' own names.
  const topic = uniqueTopic('partitioned');
  const path = topic.replace('persistent://', '');
  const P = 3;
  const put = await fetch(`${ADMIN_URL}/admin/v2/persistent/${path}/partitions`, {
    method: 'PUT', headers: { 'Content-Type': 'application/json' }, body: String(P),
  });
  assert.equal(put.status, 204);
  const meta = await (await fetch(`${ADMIN_URL}/admin/v2/persistent/${path}/partitions`)).json();
  assert.equal(meta.partitions, P);
  const parts = Array.from({ length: P }, (_, i) => `${topic}-partition-${i}`);
  const consumers = [];
  for (const p of parts) consumers.push(await newConsumer(p, 'sub', Consumer.SUB_TYPES.EXCLUSIVE, 'c-part', 1000));
  const sent = parts.map((_, i) => Array.from({ length: 200 }, (__, j) => `p${i}-${String(j).padStart(3, '0')}`));
  const producers = [];
  for (let i = 0; i < P; i++) {
    const producer = await newProducer(parts[i]);
    producers.push(producer);
    for (let b = 0; b < 200; b += 20) {
      await producer.sendBatch({ messages: sent[i].slice(b, b + 20).map((payload) => ({ payload })) });
    }
  }
  const { per } = await consumeUntil(consumers, { done: (g) => g.length >= P * 200 });
  for (let i = 0; i < P; i++) {
    assert.deepEqual(per[i].map((m) => m.payload), sent[i], `partition ${i}`);
    assert.equal(new Set(per[i].map((m) => `${m.messageId.ledgerid}:${m.messageId.entryid}`)).size, 10);
    await waitBacklog(parts[i], 'sub', 0);
  }
  for (const c of consumers) await c.unsubscribe();
  for (const p of producers) await closeProducer(p);
});
