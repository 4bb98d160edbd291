"""The official Python SDK's own throughput through the gateway, for bench_v2.py (not a pytest module).

Runs ONLY in the SDK's virtual environment (``.tools/rmq5-python/bin/python``, PyPI rocketmq-python-client): the
SDK's stubs register the same protobuf symbols as the workspace's ``apache.rocketmq.v2`` stubs, so it must never
share a process with them. Rows, each bounded by ``--seconds`` and ``--max-messages``:

- Producer.send (synchronous, 1 KiB body) from 1 thread, then from 16 threads sharing one Producer;
- one SimpleConsumer drains everything those rows sent: ``--consumer-threads`` threads each receive(32, 15 s) and
  ack every message with SimpleConsumer.ack (one AckMessage each), until the count is reached.

Prints ONE JSON line: {"rows": [{"api", "threads", "messages", "failed", "seconds"}], "error"?}.
"""

from __future__ import annotations

import argparse
import json
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from rocketmq import ClientConfiguration, Credentials, FilterExpression, Message, Producer, SimpleConsumer

BODY = os.urandom(1024)
RECEIVE_BATCH = 32
INVISIBLE_S = 15
AWAIT_S = 5
DRAIN_IDLE_LIMIT = 3


def run_threads(threads: int, worker: Callable[[], None]) -> float:
    """Run ``worker`` in ``threads`` threads until all return; returns when they started (time.monotonic)."""
    began = time.monotonic()
    pool = [threading.Thread(target=worker) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    return began


def send_row(producer: Any, topic: str, threads: int, seconds: float, max_messages: int) -> dict[str, Any]:
    counts = {"sent": 0, "failed": 0, "started": 0}
    lock = threading.Lock()
    end = time.monotonic() + seconds

    def worker() -> None:
        while time.monotonic() < end:
            with lock:
                if counts["started"] >= max_messages:
                    return
                counts["started"] += 1
            message = Message()
            message.topic = topic
            message.body = BODY
            try:
                producer.send(message)
                key = "sent"
            except Exception:  # the SDK raises its own exception family; count and go on
                key = "failed"
            with lock:
                counts[key] += 1

    began = run_threads(threads, worker)
    secs = time.monotonic() - began
    return {"api": "SDK Producer.send", "threads": threads, "messages": counts["sent"], "failed": counts["failed"],
            "seconds": secs}  # fmt: skip


def drain_row(consumer: Any, count: int, threads: int, timeout_s: float) -> dict[str, Any]:
    counts = {"acked": 0, "failed": 0, "idle": 0}
    drained_at: list[float] = []  # when the count was reached: threads still long-polling after it do not count
    lock = threading.Lock()
    end = time.monotonic() + timeout_s

    def worker() -> None:
        while time.monotonic() < end:
            with lock:
                if counts["acked"] >= count or counts["idle"] >= DRAIN_IDLE_LIMIT:
                    return
            try:
                messages = consumer.receive(RECEIVE_BATCH, INVISIBLE_S)
            except Exception:
                messages = []
                with lock:
                    counts["failed"] += 1
            acked = 0
            for message in messages:
                try:
                    consumer.ack(message)
                    acked += 1
                except Exception:
                    with lock:
                        counts["failed"] += 1
            with lock:
                counts["acked"] += acked
                counts["idle"] = 0 if messages else counts["idle"] + 1
                if counts["acked"] >= count and not drained_at:
                    drained_at.append(time.monotonic())

    began = run_threads(threads, worker)
    secs = (drained_at[0] if drained_at else time.monotonic()) - began
    return {"api": f"SDK SimpleConsumer receive({RECEIVE_BATCH}) + ack", "threads": threads,
            "messages": counts["acked"], "failed": counts["failed"], "seconds": secs}  # fmt: skip


def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    config = ClientConfiguration(args.endpoint, Credentials(), request_timeout=10)
    rows = []
    producer = Producer(config, (args.topic,))
    producer.startup()
    try:
        for threads in (1, 16):
            rows.append(send_row(producer, args.topic, threads, args.seconds, args.max_messages))
    finally:
        producer.shutdown()
    sent = sum(r["messages"] for r in rows)
    consumer = SimpleConsumer(config, args.group, {args.topic: FilterExpression()}, await_duration=AWAIT_S)
    consumer.startup()
    try:
        rows.append(drain_row(consumer, sent, args.consumer_threads, args.drain_timeout))
    finally:
        consumer.shutdown()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--endpoint", required=True, help="the gateway, host:port")
    parser.add_argument("--topic", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--seconds", type=float, default=5.0, help="seconds per producer row")
    parser.add_argument("--max-messages", type=int, default=20_000, help="messages per producer row at most")
    parser.add_argument("--consumer-threads", type=int, default=4)
    parser.add_argument("--drain-timeout", type=float, default=120.0)
    args = parser.parse_args()
    try:
        out: dict[str, Any] = {"rows": run(args)}
    except Exception as exc:  # reported to the parent as JSON, not a traceback
        out = {"rows": [], "error": f"{type(exc).__name__}: {exc}"}
    print(json.dumps(out), flush=True)
    os._exit(0)  # the SDK's non-daemon threads (schedulers, its event loop) must not keep the process alive


if __name__ == "__main__":
    main()
