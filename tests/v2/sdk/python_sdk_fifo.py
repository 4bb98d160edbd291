"""FIFO scenarios of the official RocketMQ 5 Python SDK (rocketmq-python-client 5.1.2) against the gateway.

Runs ONLY in the SDK's own virtual environment, as python_sdk_scenarios.py (whose helpers it uses). Usage:
``python python_sdk_fifo.py SCENARIO CONFIG_JSON``; the last stdout line is one JSON object for
tests/v2/test_v2_sdk_fifo.py. Both scenarios first send ``groups`` x ``per_group`` messages "g<i>-<j>" with
message_group "g<i>", interleaved (j outer), from one Producer. Scenarios:

- ``hold``: a SimpleConsumer (one message a receive, invisible ``invisible_s``) acks every message except the
  first delivery of "g0-0", until every message was acked (then ``deadline_s`` ends it with exit 1): each
  delivery in arrival order with its delivery_attempt and arrival ms.
- ``push``: a PushConsumer (FIFO by the group's settings) whose listener fails the first delivery of "g1-3":
  every delivery in consume order, once each message was consumed successfully.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import Any

from python_sdk_scenarios import config_of, fail, simple_consumer
from rocketmq import ConsumeResult, FilterExpression, Message, MessageListener, Producer, PushConsumer

POLL_S = 0.1


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def send_groups(cfg: dict[str, Any]) -> list[str]:
    producer = Producer(config_of(cfg), (cfg["topic"],))
    producer.startup()
    try:
        sent = []
        for j in range(cfg["per_group"]):
            for i in range(cfg["groups"]):
                message = Message()
                message.topic = cfg["topic"]
                message.body = f"g{i}-{j}".encode()
                message.message_group = f"g{i}"
                producer.send(message)
                sent.append(f"g{i}-{j}")
        return sent
    finally:
        producer.shutdown()


def hold(cfg: dict[str, Any]) -> dict[str, Any]:
    sent = send_groups(cfg)
    consumer = simple_consumer(cfg)
    deliveries: list[dict[str, Any]] = []
    acked: set[str] = set()
    held = False
    try:
        deadline = time.monotonic() + cfg["deadline_s"]
        while acked != set(sent):
            if time.monotonic() > deadline:
                fail(f"deadline passed; deliveries: {deliveries}")
            for message in consumer.receive(1, cfg["invisible_s"]):
                body = message.body.decode()
                deliveries.append({"body": body, "delivery_attempt": message.delivery_attempt, "ms": now_ms()})
                if body == "g0-0" and not held:
                    held = True  # never acked: it must come back before any later g0 message
                    continue
                consumer.ack(message)
                acked.add(body)
    finally:
        consumer.shutdown()
    return {"sent": sent, "deliveries": deliveries}


class OrderListener(MessageListener):
    """Records each delivery (on the SDK's consume threads); fails the first delivery of "g1-3"."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.deliveries: list[dict[str, Any]] = []
        self.failed = False

    def consume(self, message: Message) -> ConsumeResult:
        body = message.body.decode()
        with self.lock:
            self.deliveries.append({"body": body, "delivery_attempt": message.delivery_attempt})
            if body == "g1-3" and not self.failed:
                self.failed = True
                return ConsumeResult.FAILURE
        return ConsumeResult.SUCCESS

    def consumed(self) -> set[str]:
        with self.lock:
            bodies = [d["body"] for d in self.deliveries]
            return set(bodies) - ({"g1-3"} if bodies.count("g1-3") < 2 else set())


def push(cfg: dict[str, Any]) -> dict[str, Any]:
    sent = send_groups(cfg)
    listener = OrderListener()
    consumer = PushConsumer(config_of(cfg), cfg["group"], listener, {cfg["topic"]: FilterExpression("*")})
    consumer.startup()
    try:
        deadline = time.monotonic() + cfg["deadline_s"]
        while listener.consumed() != set(sent):
            if time.monotonic() > deadline:
                fail(f"deadline passed; deliveries: {listener.deliveries}")
            time.sleep(POLL_S)
        return {"sent": sent, "fifo": consumer.fifo, "deliveries": list(listener.deliveries)}
    finally:
        consumer.shutdown()


SCENARIOS = {"hold": hold, "push": push}

if __name__ == "__main__":
    name, raw = sys.argv[1], sys.argv[2]
    print(json.dumps(SCENARIOS[name](json.loads(raw))), flush=True)
