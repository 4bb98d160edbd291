// Load generator for bench_v2.py's SendMessage row: closed-loop v2 SendMessage calls, one message each, from
// `concurrency` callers spread over `channels` grpc-js channels. Cheaper than a Python client on the same 2 cores.
//
// The request bytes come pre-serialised from Python (a SendMessageRequest with one 1 KiB message); each call copies
// them and writes a fresh counter (16 hex digits) over the message_id's tail at `idOffset`, so every message has a
// unique id. Answers are not decoded: the top-level Status code is read straight from the bytes
// (SendMessageResponse field 1 = Status, its field 1 = code).
//
// Protocol with the parent: argv[2] = JSON config; after `warmupCalls` calls it prints `READY` and waits for a line
// on stdin; then it runs until `maxMessages` calls completed or `maxSeconds` passed and prints ONE JSON line
// {calls, ok, failed, codes, seconds, cpuUs, latenciesUs}. Run with NODE_PATH naming a node_modules that has @grpc/grpc-js.
"use strict";
const grpc = require("@grpc/grpc-js");
const readline = require("readline");

const METHOD = "/apache.rocketmq.v2.MessagingService/SendMessage";
const OK = 20000;
const config = JSON.parse(process.argv[2]);
const template = Buffer.from(config.templateHex, "hex");
const identity = (b) => b;

function readVarint(buf, at) {
  let value = 0;
  let shift = 0;
  for (;;) {
    const byte = buf[at++];
    if (byte === undefined) return [-1, at];
    value += (byte & 0x7f) * 2 ** shift;
    if (byte < 0x80) return [value, at];
    shift += 7;
  }
}

// The top-level status code of a serialised SendMessageResponse; 0 when absent.
function statusCode(buf) {
  if (buf.length < 2 || buf[0] !== 0x0a) return 0;
  let [, at] = readVarint(buf, 1);
  if (buf[at] !== 0x08) return 0;
  return readVarint(buf, at + 1)[0];
}

const baseMetadata = new grpc.Metadata();
for (const [key, value] of Object.entries(config.metadata)) baseMetadata.set(key, value);

function metadata(counter) {
  const md = baseMetadata.clone();
  md.set("x-mq-request-id", `${config.idPrefix}-${counter}`);
  return md;
}

function request(counter) {
  const buf = Buffer.allocUnsafe(template.length);
  template.copy(buf);
  buf.write(counter.toString(16).toUpperCase().padStart(16, "0"), config.idOffset, 16, "latin1");
  return buf;
}

const clients = [];
for (let i = 0; i < config.channels; i++) {
  clients.push(new grpc.Client(config.addr, grpc.credentials.createInsecure(), { "grpc.use_local_subchannel_pool": 1 }));
}

let counter = 0;
function call(client) {
  const n = counter++;
  return new Promise((resolve) => {
    const deadline = new Date(Date.now() + config.rpcTimeoutMs);
    client.makeUnaryRequest(METHOD, identity, identity, request(n), metadata(n), { deadline }, (err, reply) => {
      resolve(err ? -(err.code || 1) : statusCode(reply));
    });
  });
}

async function warmUp() {
  for (let i = 0; i < config.warmupCalls; i++) {
    const code = await call(clients[i % clients.length]);
    if (code !== OK) throw new Error(`warm-up call answered ${code}`);
  }
}

async function measure() {
  const latenciesUs = [];
  const codes = {};
  let ok = 0;
  let calls = 0;
  const began = process.hrtime.bigint();
  const cpuBegan = process.cpuUsage();
  const end = Date.now() + config.maxSeconds * 1000;
  async function caller(client) {
    while (calls < config.maxMessages && Date.now() < end) {
      calls++;
      const started = process.hrtime.bigint();
      const code = await call(client);
      latenciesUs.push(Number(process.hrtime.bigint() - started) / 1000);
      if (code === OK) ok++;
      else codes[code] = (codes[code] || 0) + 1;
    }
  }
  const callers = [];
  for (let i = 0; i < config.concurrency; i++) callers.push(caller(clients[i % clients.length]));
  await Promise.all(callers);
  const seconds = Number(process.hrtime.bigint() - began) / 1e9;
  const cpu = process.cpuUsage(cpuBegan);
  return { calls, ok, failed: calls - ok, codes, seconds, cpuUs: cpu.user + cpu.system, latenciesUs };
}

async function main() {
  await warmUp();
  process.stdout.write("READY\n");
  const lines = readline.createInterface({ input: process.stdin });
  await new Promise((resolve) => lines.once("line", resolve));
  lines.close();
  const result = await measure();
  process.stdout.write(JSON.stringify(result) + "\n");
  for (const client of clients) client.close();
}

main().catch((err) => {
  process.stdout.write(JSON.stringify({ error: String(err && err.stack ? err.stack : err) }) + "\n");
  process.exit(1);
});
