"""Delay-message scenarios of the official RocketMQ 5 Python SDK (rocketmq-python-client 5.1.2) against the gateway.

Runs ONLY in the SDK's own virtual environment, as python_sdk_scenarios.py (whose helpers it uses). Usage:
``python python_sdk_delay.py SCENARIO CONFIG_JSON``; the last stdout line is one JSON object for
tests/v2/test_v2_sdk_delay.py. Scenarios:

- ``delay``: a Producer sends "kept-ms" (``delivery_timestamp`` in ms, as the SDK documents it), "kept-s" (in
  seconds: the SDK writes the value into the Timestamp's seconds) and "recalled", all due ``delay_s`` seconds from
  the next whole second, recalls "recalled" by its receipt's recall_handle, then a SimpleConsumer receives (and
  acks) until ``late_s`` after the due time: the receipts, the recall's answer and each received message with the
  wall-clock ms it came at and its delivery_timestamp.
- ``refused``: a Producer sends a DELAY message to a NORMAL topic: the exception's type, code and text.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from python_sdk_scenarios import config_of, fail, simple_consumer, view
from rocketmq import Message, Producer

RECEIVE_BATCH = 32


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def delay(cfg: dict[str, Any]) -> dict[str, Any]:
    producer = Producer(config_of(cfg), (cfg["topic"],))
    producer.startup()
    try:
        due_s = int(time.time()) + 1 + cfg["delay_s"]
        receipts: dict[str, dict[str, Any]] = {}
        for body, stamp in (("kept-ms", due_s * 1000), ("kept-s", due_s), ("recalled", due_s * 1000)):
            message = Message()
            message.topic = cfg["topic"]
            message.body = body.encode()
            message.delivery_timestamp = stamp
            receipt = producer.send(message)
            receipts[body] = {"message_id": receipt.message_id, "recall_handle": receipt.recall_handle}
        recalled = producer.recall_message(cfg["topic"], receipts["recalled"]["recall_handle"])
    finally:
        producer.shutdown()
    consumer = simple_consumer(cfg)
    received: list[dict[str, Any]] = []
    try:
        until_ms = due_s * 1000 + cfg["late_s"] * 1000
        while now_ms() < until_ms:
            for message in consumer.receive(RECEIVE_BATCH, cfg.get("invisible_s", 20)):
                got = {**view(message), "received_ms": now_ms(), "delivery_timestamp": message.delivery_timestamp}
                received.append(got)
                consumer.ack(message)
    finally:
        consumer.shutdown()
    return {"due_ms": due_s * 1000, "receipts": receipts, "recalled": recalled, "received": received}


def refused(cfg: dict[str, Any]) -> dict[str, Any]:
    producer = Producer(config_of(cfg), (cfg["topic"],))
    producer.startup()
    try:
        message = Message()
        message.topic = cfg["topic"]
        message.body = b"delay-on-normal"
        message.delivery_timestamp = now_ms() + 3_000
        try:
            producer.send(message)
        except Exception as exc:  # the SDK's refusal, whatever its type
            return {"error": type(exc).__name__, "code": getattr(exc, "code", None), "text": str(exc)}
        fail("a DELAY message to a NORMAL topic was sent")
        return {}
    finally:
        producer.shutdown()


SCENARIOS = {"delay": delay, "refused": refused}

if __name__ == "__main__":
    name, raw = sys.argv[1], sys.argv[2]
    print(json.dumps(SCENARIOS[name](json.loads(raw))), flush=True)
