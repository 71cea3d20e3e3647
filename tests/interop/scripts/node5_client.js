// Drives the official 5.x Node.js client (npm `rocketmq-client-nodejs`, gRPC) through one
// scenario against a proxy, printing JSON lines as `python5_client.py` does (the same scenarios,
// the same line and summary shapes), so one test runs both clients.
//
//     node node5_client.js SCENARIO PROXY TOPIC GROUP [COUNT]
'use strict';

const {
  Producer, SimpleConsumer, PushConsumer, FilterExpression, ConsumeResult,
} = require('rocketmq-client-nodejs');
const { TransactionResolution } = require('rocketmq-client-nodejs/proto/apache/rocketmq/v2/definition_pb');

const WAIT_MS = 60000;

function say(fields) {
  const sorted = {};
  for (const key of Object.keys(fields).sort()) sorted[key] = fields[key];
  process.stdout.write(JSON.stringify(sorted) + '\n');
}

function options(proxy) {
  return { endpoints: proxy, namespace: '', requestTimeout: 10000, logger: quiet };
}

const quiet = { info() {}, warn() {}, debug() {}, error(...args) { process.stderr.write(args.join(' ') + '\n'); } };

function seen(message, extra = {}) {
  const line = {
    message_id: message.messageId,
    body: message.body.toString(),
    tag: message.tag === undefined ? null : message.tag,
    keys: [...(message.keys || [])].sort(),
    properties: Object.fromEntries(message.properties || new Map()),
    attempt: message.deliveryAttempt,
    group: message.messageGroup === undefined ? null : message.messageGroup,
    handle: message.receiptHandle,
    t: Date.now() / 1000,
    ...extra,
  };
  say(line);
  return line;
}

function message(topic, body, extra = {}) {
  const built = {
    topic,
    body: Buffer.from(body),
    tag: 'TagA',
    keys: [`key-${body}`],
    properties: new Map([['origin', 'node5']]),
  };
  if (extra.group !== undefined) built.messageGroup = extra.group;
  if (extra.deliverAt !== undefined) built.deliveryTimestamp = new Date(extra.deliverAt * 1000);
  return built;
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function produce(proxy, topic, count, extra = {}) {
  const producer = new Producer({ ...options(proxy), topic: [topic] });
  await producer.startup();
  try {
    const ids = [];
    for (let i = 0; i < count; i++) {
      const groupOf = extra.fifo ? { group: `g${i % 3}` } : {};
      const receipt = await producer.send(message(topic, `m${i}`, { ...extra, ...groupOf }));
      ids.push(receipt.messageId);
    }
    return ids;
  } finally {
    await producer.shutdown();
  }
}

function simpleConsumer(proxy, topic, group, awaitMs) {
  return new SimpleConsumer({
    ...options(proxy),
    consumerGroup: group,
    subscriptions: new Map([[topic, FilterExpression.SUB_ALL]]),
    awaitDuration: awaitMs,
  });
}

async function receiveAll(proxy, topic, group, count) {
  const consumer = simpleConsumer(proxy, topic, group, 5000);
  await consumer.startup();
  const got = [];
  try {
    const deadline = Date.now() + WAIT_MS;
    while (got.length < count && Date.now() < deadline) {
      for (const received of await consumer.receive(16, 15000)) {
        got.push(seen(received));
        await consumer.ack(received);
      }
    }
  } finally {
    await consumer.shutdown();
  }
  return got;
}

async function receiveOne(consumer, deadline) {
  while (Date.now() < deadline) {
    const batch = await consumer.receive(1, 30000);
    if (batch.length) return batch[0];
  }
  throw new Error('nothing to receive');
}

async function redeliver(proxy, topic, group) {
  const consumer = simpleConsumer(proxy, topic, group, 5000);
  await consumer.startup();
  try {
    const deadline = Date.now() + WAIT_MS;
    const first = await receiveOne(consumer, deadline);
    seen(first, { phase: 'first' });
    const firstAttempt = first.deliveryAttempt;
    await consumer.changeInvisibleDuration(first, 1000);
    const changedAt = Date.now();
    const again = await receiveOne(consumer, deadline);
    seen(again, { phase: 'again' });
    await consumer.ack(again);
    let stale = null;
    try {
      await consumer.ack(first);
    } catch (error) {
      stale = error.name || 'Error';
    }
    return {
      same_message: first.messageId === again.messageId,
      attempts: [firstAttempt, again.deliveryAttempt],
      back_after_s: Math.round((Date.now() - changedAt) / 100) / 10,
      stale_ack: stale,
    };
  } finally {
    await consumer.shutdown();
  }
}

async function deadLetter(proxy, topic, group) {
  const consumer = simpleConsumer(proxy, topic, group, 3000);
  await consumer.startup();
  try {
    const attempts = [];
    const deadline = Date.now() + WAIT_MS;
    let last = 0;
    while (Date.now() < deadline) {
      const batch = await consumer.receive(1, 10000);
      if (!batch.length) {
        // 3 s without a redelivery, where one takes milliseconds.
        if (attempts.length && Date.now() - last >= 3000) break;
        continue;
      }
      last = Date.now();
      attempts.push(seen(batch[0]).attempt);
      await consumer.changeInvisibleDuration(batch[0], 0);
    }
    return { attempts };
  } finally {
    await consumer.shutdown();
  }
}

async function transaction(proxy, topic, group) {
  const checked = [];
  const checker = {
    async check(view) {
      checked.push(view.body.toString());
      say({ checked: view.body.toString() });
      return TransactionResolution.COMMIT;
    },
  };
  const producer = new Producer({ ...options(proxy), topic: [topic], checker });
  await producer.startup();
  try {
    for (const [body, outcome] of [['commit', 'commit'], ['rollback', 'rollback'], ['orphan', null]]) {
      const tx = producer.beginTransaction();
      await producer.send(message(topic, body), tx);
      if (outcome === 'commit') await tx.commit();
      if (outcome === 'rollback') await tx.rollback();
    }
    const deadline = Date.now() + WAIT_MS;
    while (!checked.length && Date.now() < deadline) await sleep(200);
    // The client answers a check on its own once the checker returns: the producer stays up
    // until the orphan's commit can be read (by a group of its own), or stopping it could cut
    // the answer off and leave the orphan a half with no producer to ask.
    const probe = simpleConsumer(proxy, topic, `${group}-probe`, 5000);
    await probe.startup();
    try {
      let committed = false;
      while (!committed && Date.now() < deadline) {
        const batch = await probe.receive(16, 15000);
        committed = batch.some((received) => received.body.toString() === 'orphan');
      }
    } finally {
      await probe.shutdown();
    }
    return { checked };
  } finally {
    await producer.shutdown();
  }
}

async function push(proxy, topic, group, count, failFirst) {
  const lines = [];
  const consumer = new PushConsumer({
    ...options(proxy),
    consumerGroup: group,
    subscriptions: new Map([[topic, FilterExpression.SUB_ALL]]),
    messageListener: {
      consume(view) {
        lines.push(seen(view));
        if (failFirst && view.deliveryAttempt === 1) return ConsumeResult.FAILURE;
        return ConsumeResult.SUCCESS;
      },
    },
  });
  await consumer.startup();
  try {
    const wanted = count * (failFirst ? 2 : 1);
    const deadline = Date.now() + WAIT_MS;
    while (lines.length < wanted && Date.now() < deadline) await sleep(100);
    return lines;
  } finally {
    await consumer.shutdown();
  }
}

async function main() {
  const [scenario, proxy, topic, group, countText] = process.argv.slice(2);
  const count = countText ? Number(countText) : 3;
  let summary;
  if (scenario === 'produce') summary = { sent: await produce(proxy, topic, count) };
  else if (scenario === 'fifo') summary = { sent: await produce(proxy, topic, count, { fifo: true }) };
  else if (scenario === 'delay') {
    const at = Math.floor(Date.now() / 1000) + 2;
    summary = { sent: await produce(proxy, topic, count, { deliverAt: at }), at };
  } else if (scenario === 'receive') {
    summary = { received: (await receiveAll(proxy, topic, group, count)).map((l) => l.message_id) };
  } else if (scenario === 'redeliver') summary = await redeliver(proxy, topic, group);
  else if (scenario === 'dead-letter') summary = await deadLetter(proxy, topic, group);
  else if (scenario === 'transaction') summary = await transaction(proxy, topic, group);
  else if (scenario === 'push' || scenario === 'push-fifo') {
    const lines = await push(proxy, topic, group, count, scenario === 'push');
    summary = { consumed: lines.map((l) => [l.body, l.attempt, l.group]) };
  } else throw new Error(`unknown scenario ${scenario}`);
  say({ summary });
  process.exit(0);
}

main().catch((error) => {
  process.stderr.write(`${error.stack || error}\n`);
  process.exit(1);
});
