"""Scenarios of the official RocketMQ 5 Python SDK (PyPI rocketmq-python-client) against the gateway.

Runs ONLY in the SDK's own virtual environment (``make sdks``: .tools/rmq5-python), never in the workspace's: the
SDK's generated stubs register the same protobuf symbols as the project's, and one process cannot hold both.

Usage: ``python python_sdk_scenarios.py SCENARIO CONFIG_JSON``. The last stdout line is one JSON object with
what happened (ids, bodies, properties, delivery attempts, elapsed seconds) for tests/v2/test_v2_sdk_python.py
to assert on; everything else the SDK says goes to its log under $HOME/logs. Every wait is bounded by the
config's ``deadline_s``; a scenario that cannot finish exits 1 with the reason on stderr.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from rocketmq import (
    ClientConfiguration,
    ConsumeResult,
    Credentials,
    FilterExpression,
    Message,
    MessageListener,
    Producer,
    PushConsumer,
    SimpleConsumer,
)

RECEIVE_BATCH = 32
POLL_S = 0.2


def config_of(cfg: dict[str, Any]) -> ClientConfiguration:
    """The SDK's configuration; ``access_key``/``secret_key`` in ``cfg`` sign every call (SessionCredentials).
    ``tls`` in ``cfg`` turns TLS on (the Producer's/SimpleConsumer's tls_enable; the CA from the environment's
    GRPC_DEFAULT_SSL_ROOTS_FILE_PATH)."""
    credentials = Credentials(cfg.get("access_key", ""), cfg.get("secret_key", ""))
    return ClientConfiguration(cfg["endpoints"], credentials, request_timeout=cfg.get("request_timeout_s", 3))


def view(message: Any) -> dict[str, Any]:
    """What a received message carried, as JSON."""
    return {
        "message_id": message.message_id,
        "topic": message.topic,
        "body": message.body.decode(),
        "tag": message.tag,
        "keys": sorted(message.keys),
        "properties": dict(message.properties),
        "delivery_attempt": message.delivery_attempt,
    }


def produce(cfg: dict[str, Any]) -> dict[str, Any]:
    """Send each of ``messages`` [{body, tag, keys, properties}] to ``topic``: their SendReceipts."""
    producer = Producer(config_of(cfg), (cfg["topic"],), tls_enable=cfg.get("tls", False))
    producer.startup()
    try:
        receipts = []
        for spec in cfg["messages"]:
            message = Message()
            message.topic = cfg["topic"]
            message.body = spec["body"].encode()
            if spec.get("tag"):
                message.tag = spec["tag"]
            for key in spec.get("keys", []):
                message.keys = key
            for name, value in spec.get("properties", {}).items():
                message.add_property(name, value)
            receipt = producer.send(message)
            receipts.append({"message_id": receipt.message_id, "offset": receipt.offset})
        return {"receipts": receipts}
    finally:
        producer.shutdown()


def simple_consumer(cfg: dict[str, Any]) -> SimpleConsumer:
    subscription = {cfg["topic"]: FilterExpression(cfg.get("filter", "*"))}
    await_s, tls = cfg.get("await_s", 5), cfg.get("tls", False)
    consumer = SimpleConsumer(config_of(cfg), cfg["group"], subscription, await_duration=await_s, tls_enable=tls)
    consumer.startup()
    return consumer


def receive_until(consumer: SimpleConsumer, cfg: dict[str, Any], done: Callable[[list[Any]], bool]) -> list[Any]:
    """Receive (invisible ``invisible_s``) until ``done(received)`` or the deadline (then exit 1)."""
    received: list[Any] = []
    deadline = time.monotonic() + cfg["deadline_s"]
    while not done(received):
        if time.monotonic() > deadline:
            fail(f"deadline passed with {len(received)} message(s): {[view(m) for m in received]}")
        received += consumer.receive(RECEIVE_BATCH, cfg.get("invisible_s", 20))
    return received


def drain(cfg: dict[str, Any]) -> dict[str, Any]:
    """Receive and ack until ``count`` distinct messages came: their views (plus any redelivery seen)."""
    consumer = simple_consumer(cfg)
    try:
        received: list[Any] = []
        deadline = time.monotonic() + cfg["deadline_s"]
        while len({m.message_id for m in received}) < cfg["count"]:
            if time.monotonic() > deadline:
                fail(f"deadline passed with {len(received)} message(s): {[view(m) for m in received]}")
            batch = consumer.receive(RECEIVE_BATCH, cfg.get("invisible_s", 20))
            for message in batch:  # acked at once: handles stay fresh however long the receiving takes
                consumer.ack(message)
            received += batch
        return {"messages": [view(m) for m in received]}
    finally:
        consumer.shutdown()


class SimpleRun:
    """The simple scenario's state: the first delivery of each message, redeliveries, the changed and left one."""

    def __init__(self, consumer: SimpleConsumer, cfg: dict[str, Any]) -> None:
        self.consumer, self.cfg = consumer, cfg
        self.first: list[Any] = []
        self.again: list[Any] = []
        self.changed: dict[str, Any] = {}
        self.left: Any = None
        self.left_at = self.again_after_s = 0.0

    def done(self) -> bool:
        left_back = self.left is not None and any(m.message_id == self.left.message_id for m in self.again)
        return len(self.first) >= self.cfg["count"] and left_back

    def take(self, message: Any, received_at: float) -> None:
        """Ack at once (handles stay fresh however long the receiving takes), except: the first message gets
        change_invisible_duration then is acked with the new handle; the second is left unacked."""
        if any(m.message_id == message.message_id for m in self.first):
            self.again.append(message)
            self.again_after_s = received_at - self.left_at
            self.consumer.ack(message)
            return
        self.first.append(message)
        if not self.changed:
            old_handle = message.receipt_handle
            self.consumer.change_invisible_duration(message, self.cfg["change_s"])
            self.changed = {"message_id": message.message_id, "handle_changed": old_handle != message.receipt_handle}
            self.consumer.ack(message)
        elif self.left is None:
            self.left, self.left_at = message, received_at
        else:
            self.consumer.ack(message)


def simple(cfg: dict[str, Any]) -> dict[str, Any]:
    """Receive ``count`` messages (invisible ``invisible_s``), acking each at once but two: the first gets
    change_invisible_duration(``change_s``) and is acked with the new handle; the second is left unacked and
    received again once its invisible time passed, then acked; a last receive must come back empty."""
    consumer = simple_consumer(cfg)
    try:
        run = SimpleRun(consumer, cfg)
        deadline = time.monotonic() + cfg["deadline_s"]
        while not run.done():
            if time.monotonic() > deadline:
                fail(f"deadline passed: first {[view(m) for m in run.first]}, again {[view(m) for m in run.again]}")
            batch = consumer.receive(RECEIVE_BATCH, cfg["invisible_s"])
            received_at = time.monotonic()
            for message in batch:
                run.take(message, received_at)
        after = consumer.receive(RECEIVE_BATCH, cfg["invisible_s"])
        return {
            "first": [view(m) for m in run.first],
            "changed": run.changed,
            "left": run.left.message_id,
            "again": [view(m) for m in run.again],
            "again_after_s": run.again_after_s,
            "after": [view(m) for m in after],
        }
    finally:
        consumer.shutdown()


def empty(cfg: dict[str, Any]) -> dict[str, Any]:
    """One receive on a topic with nothing to deliver: what came back and how long it took."""
    consumer = simple_consumer(cfg)
    try:
        started = time.monotonic()
        messages = consumer.receive(RECEIVE_BATCH, cfg.get("invisible_s", 20))
        return {"messages": [view(m) for m in messages], "elapsed_s": time.monotonic() - started}
    finally:
        consumer.shutdown()


class RecordingListener(MessageListener):
    """Fails every message whose body contains "fail"; records each delivery (on the SDK's consume threads)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.deliveries: list[dict[str, Any]] = []

    def consume(self, message: Message) -> ConsumeResult:
        with self.lock:
            self.deliveries.append(view(message))
        return ConsumeResult.FAILURE if "fail" in message.body.decode() else ConsumeResult.SUCCESS

    def snapshot(self) -> list[dict[str, Any]]:
        with self.lock:
            return list(self.deliveries)


def push_done(deliveries: list[dict[str, Any]], cfg: dict[str, Any]) -> bool:
    bodies = {d["body"] for d in deliveries}
    last_attempts = {d["body"] for d in deliveries if d["delivery_attempt"] >= cfg["max_attempts"]}
    return set(cfg["ok_bodies"]) <= bodies and set(cfg["fail_bodies"]) <= last_attempts


def push(cfg: dict[str, Any]) -> dict[str, Any]:
    """A PushConsumer whose listener fails the "fail" bodies: every delivery, once the ok bodies were consumed
    and each failing body was delivered ``max_attempts`` times (then ``linger_s`` more, to see any extra one)."""
    listener = RecordingListener()
    subscription = {cfg["topic"]: FilterExpression(cfg.get("filter", "*"))}
    consumer = PushConsumer(config_of(cfg), cfg["group"], listener, subscription)
    consumer.startup()
    try:
        deadline = time.monotonic() + cfg["deadline_s"]
        while not push_done(listener.snapshot(), cfg):
            if time.monotonic() > deadline:
                fail(f"deadline passed; deliveries: {listener.snapshot()}")
            time.sleep(POLL_S)
        time.sleep(cfg.get("linger_s", 0))
        return {"deliveries": listener.snapshot()}
    finally:
        consumer.shutdown()


SCENARIOS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "produce": produce,
    "drain": drain,
    "simple": simple,
    "empty": empty,
    "push": push,
}


def fail(reason: str) -> None:
    print(reason, file=sys.stderr, flush=True)
    raise SystemExit(1)


def main() -> None:
    scenario, cfg = sys.argv[1], json.loads(sys.argv[2])
    result = SCENARIOS[scenario](cfg)
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
