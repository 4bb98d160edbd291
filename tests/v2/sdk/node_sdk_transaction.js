// Transaction scenarios of the official RocketMQ 5 Node.js SDK (npm rocketmq-client-nodejs) against the gateway.
//
// Run with node and NODE_PATH=.tools/rmq5-node/node_modules (`make sdks`). Usage: node node_sdk_transaction.js
// SCENARIO CONFIG_JSON; the last stdout line is one JSON object for tests/v2/test_v2_sdk_transaction.py. Scenarios
// as python_sdk_transaction.py:
// - commit_rollback: "committed" in a transaction that is committed, "rolled-back" in one rolled back, then a
//   SimpleConsumer receives (and acks) for listen_s seconds: the transaction ids, the checks asked, what came.
// - checked: "open-one" in a transaction never ended, the Producer stays up (its checker answers COMMIT) while a
//   SimpleConsumer receives until it arrives or deadline_s passes.
"use strict";

const { Producer, SimpleConsumer } = require("rocketmq-client-nodejs");

const RECEIVE_BATCH = 32;
const COMMIT = 1; // apache.rocketmq.v2.TransactionResolution.COMMIT

function clientOptions(cfg) {
  return { endpoints: cfg.endpoints, namespace: "", requestTimeout: (cfg.request_timeout_s ?? 3) * 1000 };
}

function producerWithChecker(cfg, asked) {
  const checker = {
    async check(messageView) {
      asked.push(messageView.body.toString());
      return COMMIT;
    },
  };
  return new Producer({ ...clientOptions(cfg), topics: [cfg.topic], checker });
}

async function receiveFor(cfg, done) {
  const consumer = new SimpleConsumer({
    ...clientOptions(cfg),
    consumerGroup: cfg.group,
    subscriptions: new Map([[cfg.topic, "*"]]),
    awaitDuration: (cfg.await_s ?? 5) * 1000,
  });
  await consumer.startup();
  const received = [];
  try {
    while (!done(received)) {
      for (const message of await consumer.receive(RECEIVE_BATCH, 20 * 1000)) {
        received.push({ message_id: message.messageId, body: message.body.toString(), topic: message.topic });
        await consumer.ack(message);
      }
    }
  } finally {
    await consumer.shutdown();
  }
  return received;
}

async function commitRollback(cfg) {
  const asked = [];
  const producer = producerWithChecker(cfg, asked);
  await producer.startup();
  const ids = {};
  try {
    for (const [body, end] of [["committed", "commit"], ["rolled-back", "rollback"]]) {
      const transaction = producer.beginTransaction();
      const receipt = await producer.send({ topic: cfg.topic, body: Buffer.from(body) }, transaction);
      ids[body] = receipt.transactionId;
      await transaction[end]();
    }
  } finally {
    await producer.shutdown();
  }
  const until = Date.now() + cfg.listen_s * 1000;
  const received = await receiveFor(cfg, () => Date.now() >= until);
  return { transaction_ids: ids, asked, received };
}

async function checked(cfg) {
  const asked = [];
  const producer = producerWithChecker(cfg, asked);
  await producer.startup();
  try {
    const transaction = producer.beginTransaction();
    await producer.send({ topic: cfg.topic, body: Buffer.from("open-one") }, transaction);
    const until = Date.now() + cfg.deadline_s * 1000;
    const received = await receiveFor(cfg, (got) => got.length > 0 || Date.now() >= until);
    return { asked, received };
  } finally {
    await producer.shutdown();
  }
}

const SCENARIOS = { commit_rollback: commitRollback, checked };

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
