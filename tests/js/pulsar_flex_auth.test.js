// pulsar-flex with a JWT (its `jwt` option: CONNECT with auth method "token"), against a broker
// started by `with_broker.py --auth-token` (AUTH_SECRET_KEY, the HS256 key in base64;
// AUTH_SUPER_USER_TOKEN, a token of the super-user role). Skipped without them.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const { Producer, Consumer, logLevel } = require('pulsar-flex');
const { BROKER } = require('./env');

const KEY = process.env.AUTH_SECRET_KEY ? Buffer.from(process.env.AUTH_SECRET_KEY, 'base64') : null;
const SUPER = process.env.AUTH_SUPER_USER_TOKEN;
const skip = KEY && SUPER ? false : 'needs with_broker.py --auth-token';

const quiet = { logLevel: logLevel.NOTHING };

function b64url(buf) {
  return Buffer.from(buf).toString('base64url');
}

// An HS256 token with subject `role`, signed with `key`.
function token(role, key = KEY) {
  const head = b64url(JSON.stringify({ alg: 'HS256' }));
  const body = b64url(JSON.stringify({ sub: role }));
  const sig = crypto.createHmac('sha256', key).update(`${head}.${body}`).digest();
  return `${head}.${body}.${b64url(sig)}`;
}

function uniqueTopic(name) {
  return `persistent://public/default/flex-auth-${name}-${crypto.randomBytes(4).toString('hex')}`;
}

test('super-user token produces and consumes', { skip, timeout: 60000 }, async () => {
  const topic = uniqueTopic('super');
  const consumer = new Consumer({
    topic,
    subscription: 's',
    subType: Consumer.SUB_TYPES.EXCLUSIVE,
    consumerName: 'c',
    discoveryServers: [BROKER],
    jwt: SUPER,
    receiveQueueSize: 10,
    ...quiet,
  });
  await consumer.subscribe();
  const producer = new Producer({ topic, discoveryServers: [BROKER], jwt: SUPER, ...quiet });
  await producer.create();
  for (let i = 0; i < 10; i++) await producer.sendMessage({ payload: `m${i}` });
  const got = await new Promise((resolve, reject) => {
    const all = [];
    const timer = setTimeout(() => reject(new Error(`timeout: received ${all.length}`)), 30000);
    consumer.run({
      autoAck: false,
      onMessage: async ({ ack, message }) => {
        all.push(message.toString());
        await ack();
        if (all.length === 10) {
          clearTimeout(timer);
          resolve(all);
        }
      },
    });
  });
  assert.deepEqual(got, [...Array(10).keys()].map((i) => `m${i}`));
  await producer.close();
  producer._client.getCnx().close(); // pulsar-flex keeps the socket open after CLOSE_PRODUCER
  await consumer.unsubscribe();
});

test('a role without permission is refused on lookup', { skip, timeout: 60000 }, async () => {
  const producer = new Producer({
    topic: uniqueTopic('denied'),
    discoveryServers: [BROKER],
    jwt: token(`role-${crypto.randomBytes(4).toString('hex')}`),
    ...quiet,
  });
  await assert.rejects(producer.create(), (e) => e.name === 'PulsarFlexTopicLookupError');
});

test('a token signed with another key is refused on connect', { skip, timeout: 60000 }, async () => {
  const producer = new Producer({
    topic: uniqueTopic('wrong-key'),
    discoveryServers: [BROKER],
    jwt: token('admin', crypto.randomBytes(32)),
    ...quiet,
  });
  await assert.rejects(producer.create(), (e) => e.name === 'PulsarFlexConnectionError');
});
