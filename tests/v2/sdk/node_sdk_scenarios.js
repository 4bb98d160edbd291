// Scenarios of the official RocketMQ 5 Node.js SDK (npm rocketmq-client-nodejs) against the gateway.
//
// Run with node and NODE_PATH=.tools/rmq5-node/node_modules (`make sdks` installs it there).
// Usage: node node_sdk_scenarios.js SCENARIO CONFIG_JSON. The last stdout line is one JSON object with what
// happened (ids, bodies, properties, delivery attempts, elapsed seconds) for tests/v2/test_v2_sdk_node.py to
// assert on; the SDK logs under $HOME/logs. Every wait is bounded by the config's deadline_s; a scenario that
// cannot finish exits 1 with the reason on stderr. Durations given to the SDK are in milliseconds.
"use strict";

const { Producer, SimpleConsumer, PushConsumer, ConsumeResult } = require("rocketmq-client-nodejs");

const RECEIVE_BATCH = 32;
const POLL_MS = 200;

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const now = () => performance.now() / 1000;

// access_key/secret_key in cfg sign every call (the SDK's sessionCredentials: accessKey, accessSecret).
function clientOptions(cfg) {
  const options = { endpoints: cfg.endpoints, namespace: "", requestTimeout: (cfg.request_timeout_s ?? 3) * 1000 };
  // tls: the SDK's sslEnabled (the CA from GRPC_DEFAULT_SSL_ROOTS_FILE_PATH in the environment).
  if (cfg.tls) {
    options.sslEnabled = true;
  }
  if (cfg.access_key) {
    options.sessionCredentials = { accessKey: cfg.access_key, accessSecret: cfg.secret_key };
  }
  return options;
}

function view(message) {
  return {
    message_id: message.messageId,
    topic: message.topic,
    body: message.body.toString(),
    tag: message.tag ?? null,
    keys: [...message.keys].sort(),
    properties: Object.fromEntries(message.properties),
    delivery_attempt: message.deliveryAttempt ?? null,
  };
}

class DeadlinePassed extends Error {}

async function produce(cfg) {
  const producer = new Producer({ ...clientOptions(cfg), topics: [cfg.topic] });
  await producer.startup();
  try {
    const receipts = [];
    for (const spec of cfg.messages) {
      const receipt = await producer.send({
        topic: cfg.topic,
        body: Buffer.from(spec.body),
        tag: spec.tag,
        keys: spec.keys ?? [],
        properties: new Map(Object.entries(spec.properties ?? {})),
      });
      receipts.push({ message_id: receipt.messageId, offset: Number(receipt.offset) });
    }
    return { receipts };
  } finally {
    await producer.shutdown();
  }
}

async function simpleConsumer(cfg) {
  const consumer = new SimpleConsumer({
    ...clientOptions(cfg),
    consumerGroup: cfg.group,
    subscriptions: new Map([[cfg.topic, cfg.filter ?? "*"]]),
    awaitDuration: (cfg.await_s ?? 5) * 1000,
  });
  await consumer.startup();
  return consumer;
}

async function receiveUntil(consumer, cfg, done, onBatch = async () => {}) {
  const received = [];
  const deadline = now() + cfg.deadline_s;
  while (!done(received)) {
    if (now() > deadline) {
      throw new DeadlinePassed(`deadline passed with ${JSON.stringify(received.map(view))}`);
    }
    const batch = await consumer.receive(RECEIVE_BATCH, (cfg.invisible_s ?? 20) * 1000);
    await onBatch(batch);
    received.push(...batch);
  }
  return received;
}

async function withConsumer(cfg, body) {
  const consumer = await simpleConsumer(cfg);
  try {
    return await body(consumer);
  } finally {
    await consumer.shutdown();
  }
}

// Receive and ack until `count` distinct messages came: their views.
async function drain(cfg) {
  return withConsumer(cfg, async (consumer) => {
    const distinct = (got) => new Set(got.map((m) => m.messageId)).size >= cfg.count;
    // acked at once: handles stay fresh however long the receiving takes
    const ackAll = async (batch) => {
      for (const message of batch) await consumer.ack(message);
    };
    const received = await receiveUntil(consumer, cfg, distinct, ackAll);
    return { messages: received.map(view) };
  });
}

// Receive `count` messages (invisible invisible_s), acking each at once (handles stay fresh however long the
// receiving takes) but two: the first gets changeInvisibleDuration(change_s) and is acked with the new handle; the
// second is left unacked and received again once its invisible time passed, then acked; a last receive must come
// back empty.
async function simple(cfg) {
  return withConsumer(cfg, async (consumer) => {
    const first = [];
    const again = [];
    let changed = null;
    let left = null;
    let leftAt = 0;
    let againAfter = 0;
    const seen = (message) => first.some((m) => m.messageId === message.messageId);
    const done = () => first.length >= cfg.count && left !== null && again.some((m) => m.messageId === left.messageId);
    const deadline = now() + cfg.deadline_s;
    while (!done()) {
      if (now() > deadline) {
        throw new DeadlinePassed(`deadline passed: ${JSON.stringify({ first: first.map(view), again: again.map(view) })}`);
      }
      const batch = await consumer.receive(RECEIVE_BATCH, cfg.invisible_s * 1000);
      const receivedAt = now();
      for (const message of batch) {
        if (seen(message)) {
          again.push(message);
          againAfter = receivedAt - leftAt;
          await consumer.ack(message);
        } else if (changed === null) {
          first.push(message);
          const oldHandle = message.receiptHandle;
          await consumer.changeInvisibleDuration(message, cfg.change_s * 1000);
          changed = { message_id: message.messageId, handle_changed: oldHandle !== message.receiptHandle };
          await consumer.ack(message);
        } else if (left === null) {
          first.push(message);
          [left, leftAt] = [message, receivedAt];
        } else {
          first.push(message);
          await consumer.ack(message);
        }
      }
    }
    const after = await consumer.receive(RECEIVE_BATCH, cfg.invisible_s * 1000);
    return {
      first: first.map(view),
      changed,
      left: left.messageId,
      again: again.map(view),
      again_after_s: againAfter,
      after: after.map(view),
    };
  });
}

// One receive on a topic with nothing to deliver: what came back and how long it took.
async function empty(cfg) {
  return withConsumer(cfg, async (consumer) => {
    const started = now();
    const messages = await consumer.receive(RECEIVE_BATCH, (cfg.invisible_s ?? 20) * 1000);
    return { messages: messages.map(view), elapsed_s: now() - started };
  });
}

function pushDone(deliveries, cfg) {
  const bodies = new Set(deliveries.map((d) => d.body));
  const last = new Set(deliveries.filter((d) => d.delivery_attempt >= cfg.max_attempts).map((d) => d.body));
  return cfg.ok_bodies.every((b) => bodies.has(b)) && cfg.fail_bodies.every((b) => last.has(b));
}

// A PushConsumer whose listener fails the "fail" bodies: every delivery, once the ok bodies were consumed and
// each failing body was delivered max_attempts times (then linger_s more, to see any extra one).
async function push(cfg) {
  const deliveries = [];
  const consumer = new PushConsumer({
    ...clientOptions(cfg),
    consumerGroup: cfg.group,
    subscriptions: new Map([[cfg.topic, cfg.filter ?? "*"]]),
    messageListener: {
      consume(message) {
        deliveries.push(view(message));
        return message.body.toString().includes("fail") ? ConsumeResult.FAILURE : ConsumeResult.SUCCESS;
      },
    },
  });
  await consumer.startup();
  try {
    const deadline = now() + cfg.deadline_s;
    while (!pushDone(deliveries, cfg)) {
      if (now() > deadline) throw new DeadlinePassed(`deadline passed; deliveries: ${JSON.stringify(deliveries)}`);
      await sleep(POLL_MS);
    }
    await sleep((cfg.linger_s ?? 0) * 1000);
    return { deliveries: [...deliveries] };
  } finally {
    await consumer.shutdown();
  }
}

// A send expected to be refused (e.g. a wrong secret): the root cause's exception name and response code (the
// SDK wraps a refused route query in "Startup ... failed" and "Failed to fetch topic routes" errors) and every
// message of the chain.
async function refused(cfg) {
  try {
    await produce(cfg);
  } catch (err) {
    const messages = [];
    let root = err;
    for (let depth = 0; depth < 8; depth++) {
      messages.push(String(root.message ?? root));
      if (!root.cause) break;
      root = root.cause;
    }
    return { refused: true, name: root.name ?? null, code: root.code ?? null, message: messages.join(" <- ") };
  }
  return { refused: false };
}

const SCENARIOS = { produce, drain, simple, empty, push, refused };

async function main() {
  const [scenario, config] = process.argv.slice(2);
  const result = await SCENARIOS[scenario](JSON.parse(config));
  console.log(JSON.stringify(result));
  // The SDK keeps timers and channels after shutdown on some paths: the answer is out, so leave now.
  process.exit(0);
}

main().catch((err) => {
  console.error(err instanceof DeadlinePassed ? err.message : err);
  process.exit(1);
});
