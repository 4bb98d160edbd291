"""Transaction scenarios of the official RocketMQ 5 Python SDK (rocketmq-python-client 5.1.2) against the gateway.

Runs ONLY in the SDK's own virtual environment, as python_sdk_scenarios.py (whose helpers it uses). Usage:
``python python_sdk_transaction.py SCENARIO CONFIG_JSON``; the last stdout line is one JSON object for
tests/v2/test_v2_sdk_transaction.py. Scenarios:

- ``commit_rollback``: a Producer with a TransactionChecker (it answers COMMIT and records what it was asked) sends
  "committed" in one transaction and commits it, "rolled-back" in another and rolls it back, then a SimpleConsumer
  receives (and acks) for ``listen_s`` seconds: the receipts' transaction ids, the checks asked, each received
  message.
- ``checked``: the same Producer sends "open-one" in a transaction it never ends and stays up; a SimpleConsumer
  receives until "open-one" arrives (the broker checked it back, the checker said COMMIT) or ``deadline_s``: the
  checks asked and what was received.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from python_sdk_scenarios import config_of, simple_consumer, view
from rocketmq import Message, Producer, TransactionChecker, TransactionResolution

RECEIVE_BATCH = 32


class Checker(TransactionChecker):  # type: ignore[misc]
    def __init__(self) -> None:
        self.asked: list[str] = []

    def check(self, message: Any) -> Any:
        self.asked.append(message.body.decode())
        return TransactionResolution.COMMIT


def _message(topic: str, body: str) -> Message:
    message = Message()
    message.topic = topic
    message.body = body.encode()
    return message


def commit_rollback(cfg: dict[str, Any]) -> dict[str, Any]:
    checker = Checker()
    producer = Producer(config_of(cfg), (cfg["topic"],), checker=checker)
    producer.startup()
    receipts: dict[str, str] = {}
    try:
        for body, end in (("committed", "commit"), ("rolled-back", "rollback")):
            transaction = producer.begin_transaction()
            receipt = producer.send(_message(cfg["topic"], body), transaction)
            receipts[body] = receipt.transaction_id
            getattr(transaction, end)()
    finally:
        producer.shutdown()
    consumer = simple_consumer(cfg)
    received: list[dict[str, Any]] = []
    try:
        until = time.monotonic() + cfg["listen_s"]
        while time.monotonic() < until:
            for message in consumer.receive(RECEIVE_BATCH, 20):
                received.append(view(message))
                consumer.ack(message)
    finally:
        consumer.shutdown()
    return {"transaction_ids": receipts, "asked": checker.asked, "received": received}


def checked(cfg: dict[str, Any]) -> dict[str, Any]:
    checker = Checker()
    producer = Producer(config_of(cfg), (cfg["topic"],), checker=checker)
    producer.startup()
    received: list[dict[str, Any]] = []
    try:
        transaction = producer.begin_transaction()
        producer.send(_message(cfg["topic"], "open-one"), transaction)
        consumer = simple_consumer(cfg)
        try:
            until = time.monotonic() + cfg["deadline_s"]
            while time.monotonic() < until and not received:
                for message in consumer.receive(RECEIVE_BATCH, 20):
                    received.append(view(message))
                    consumer.ack(message)
        finally:
            consumer.shutdown()
    finally:
        producer.shutdown()
    return {"asked": checker.asked, "received": received}


SCENARIOS = {"commit_rollback": commit_rollback, "checked": checked}

if __name__ == "__main__":
    name, raw = sys.argv[1], sys.argv[2]
    print(json.dumps(SCENARIOS[name](json.loads(raw))), flush=True)
