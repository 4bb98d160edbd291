// FIFO scenarios of the official RocketMQ 5 Node.js SDK (npm rocketmq-client-nodejs) against the gateway.
//
// Run with node and NODE_PATH=.tools/rmq5-node/node_modules (`make sdks`). Usage: node node_sdk_fifo.js SCENARIO
// CONFIG_JSON; the last stdout line is one JSON object for tests/v2/test_v2_sdk_fifo.py. Both scenarios first send
// `groups` x `per_group` messages "g<i>-<j>" with messageGroup "g<i>", interleaved (j outer), from one Producer.
// - hold: a SimpleConsumer (one message a receive, invisible invisible_s) acks every message except the first
//   delivery of "g0-0", until every message was acked (deadline_s ends it with exit 1): each delivery in arrival
//   order with its deliveryAttempt and arrival ms.
// - push: a PushConsumer (FIFO by the group's settings) whose listener fails the first delivery of "g1-3": every
//   delivery in consume order, once each message was delivered. The SDK does not implement the CUSTOMIZED backoff
//   the gateway's settings give consumers (PushSubscriptionSettings#sync), so its FIFO retry allows one attempt:
//   the failed message goes to the DLQ (ForwardMessageToDeadLetterQueue) and the group moves on.
"use strict";

const { Producer, SimpleConsumer, PushConsumer, ConsumeResult } = require("rocketmq-client-nodejs");

const POLL_MS = 100;

function clientOptions(cfg) {
  return { endpoints: cfg.endpoints, namespace: "", requestTimeout: (cfg.request_timeout_s ?? 3) * 1000 };
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function sendGroups(cfg) {
  const producer = new Producer({ ...clientOptions(cfg), topics: [cfg.topic] });
  await producer.startup();
  try {
    const sent = [];
    for (let j = 0; j < cfg.per_group; j++) {
      for (let i = 0; i < cfg.groups; i++) {
        const body = `g${i}-${j}`;
        await producer.send({ topic: cfg.topic, body: Buffer.from(body), messageGroup: `g${i}` });
        sent.push(body);
      }
    }
    return sent;
  } finally {
    await producer.shutdown();
  }
}

async function hold(cfg) {
  const sent = await sendGroups(cfg);
  const consumer = new SimpleConsumer({
    ...clientOptions(cfg),
    consumerGroup: cfg.group,
    subscriptions: new Map([[cfg.topic, "*"]]),
    awaitDuration: (cfg.await_s ?? 5) * 1000,
  });
  await consumer.startup();
  const deliveries = [];
  const acked = new Set();
  let held = false;
  try {
    const deadline = Date.now() + cfg.deadline_s * 1000;
    while (acked.size < sent.length) {
      if (Date.now() > deadline) throw new Error(`deadline passed; deliveries: ${JSON.stringify(deliveries)}`);
      for (const message of await consumer.receive(1, cfg.invisible_s * 1000)) {
        const body = message.body.toString();
        deliveries.push({ body, delivery_attempt: message.deliveryAttempt ?? null, ms: Date.now() });
        if (body === "g0-0" && !held) {
          held = true; // never acked: it must come back before any later g0 message
          continue;
        }
        await consumer.ack(message);
        acked.add(body);
      }
    }
  } finally {
    await consumer.shutdown();
  }
  return { sent, deliveries };
}

async function push(cfg) {
  const sent = await sendGroups(cfg);
  const deliveries = [];
  let failed = false;
  const consumer = new PushConsumer({
    ...clientOptions(cfg),
    consumerGroup: cfg.group,
    subscriptions: new Map([[cfg.topic, "*"]]),
    messageListener: {
      consume(message) {
        const body = message.body.toString();
        deliveries.push({ body, delivery_attempt: message.deliveryAttempt ?? null });
        if (body === "g1-3" && !failed) {
          failed = true;
          return ConsumeResult.FAILURE;
        }
        return ConsumeResult.SUCCESS;
      },
    },
  });
  await consumer.startup();
  const consumed = () => sent.every((b) => deliveries.some((d) => d.body === b));
  try {
    const deadline = Date.now() + cfg.deadline_s * 1000;
    while (!consumed()) {
      if (Date.now() > deadline) throw new Error(`deadline passed; deliveries: ${JSON.stringify(deliveries)}`);
      await sleep(POLL_MS);
    }
    return { sent, deliveries: [...deliveries] };
  } finally {
    await consumer.shutdown();
  }
}

const SCENARIOS = { hold, push };

async function main() {
  const [scenario, config] = process.argv.slice(2);
  const result = await SCENARIOS[scenario](JSON.parse(config));
  console.log(JSON.stringify(result));
  // The SDK keeps timers and channels after shutdown on some paths: the answer is out, so leave now.
  process.exit(0);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
