// Delay-message scenarios of the official RocketMQ 5 Node.js SDK (npm rocketmq-client-nodejs) against the gateway.
//
// Run with node and NODE_PATH=.tools/rmq5-node/node_modules (`make sdks`). Usage: node node_sdk_delay.js SCENARIO
// CONFIG_JSON; the last stdout line is one JSON object for tests/v2/test_v2_sdk_delay.py. Scenarios:
// - delay: a Producer sends "kept" and "recalled" (deliveryTimestamp: delay_s seconds from the next whole second),
//   recalls "recalled" by its receipt's recallHandle, then a SimpleConsumer receives (and acks) until late_s after
//   the due time: the receipts, the recall's answer and each received message with the wall-clock ms it came at
//   and its deliveryTimestamp.
// - refused: a Producer sends a DELAY message to a NORMAL topic: the error's name, code and message.
"use strict";

const { Producer, SimpleConsumer } = require("rocketmq-client-nodejs");

const RECEIVE_BATCH = 32;

function clientOptions(cfg) {
  return { endpoints: cfg.endpoints, namespace: "", requestTimeout: (cfg.request_timeout_s ?? 3) * 1000 };
}

async function withProducer(cfg, body) {
  const producer = new Producer({ ...clientOptions(cfg), topics: [cfg.topic] });
  await producer.startup();
  try {
    return await body(producer);
  } finally {
    await producer.shutdown();
  }
}

async function delay(cfg) {
  const dueMs = (Math.floor(Date.now() / 1000) + 1 + cfg.delay_s) * 1000;
  const sent = await withProducer(cfg, async (producer) => {
    const receipts = {};
    for (const body of ["kept", "recalled"]) {
      const receipt = await producer.send({
        topic: cfg.topic,
        body: Buffer.from(body),
        deliveryTimestamp: new Date(dueMs),
      });
      receipts[body] = { message_id: receipt.messageId, recall_handle: receipt.recallHandle ?? null };
    }
    const recall = await producer.recallMessage(cfg.topic, receipts.recalled.recall_handle);
    return { receipts, recalled: recall.messageId };
  });
  const consumer = new SimpleConsumer({
    ...clientOptions(cfg),
    consumerGroup: cfg.group,
    subscriptions: new Map([[cfg.topic, "*"]]),
    awaitDuration: (cfg.await_s ?? 5) * 1000,
  });
  await consumer.startup();
  const received = [];
  try {
    while (Date.now() < dueMs + cfg.late_s * 1000) {
      const batch = await consumer.receive(RECEIVE_BATCH, (cfg.invisible_s ?? 20) * 1000);
      const receivedMs = Date.now();
      for (const message of batch) {
        received.push({
          message_id: message.messageId,
          body: message.body.toString(),
          received_ms: receivedMs,
          delivery_timestamp: message.deliveryTimestamp ? message.deliveryTimestamp.getTime() : null,
        });
        await consumer.ack(message);
      }
    }
  } finally {
    await consumer.shutdown();
  }
  return { due_ms: dueMs, ...sent, received };
}

async function refused(cfg) {
  return withProducer(cfg, async (producer) => {
    try {
      await producer.send({
        topic: cfg.topic,
        body: Buffer.from("delay-on-normal"),
        deliveryTimestamp: new Date(Date.now() + 3000),
      });
    } catch (err) {
      return { error: err.name ?? null, code: err.code ?? null, text: String(err.message ?? err) };
    }
    throw new Error("a DELAY message to a NORMAL topic was sent");
  });
}

const SCENARIOS = { delay, refused };

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
