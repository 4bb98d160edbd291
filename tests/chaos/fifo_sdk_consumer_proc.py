"""The v2 FIFO consumer process of test_fifo_kill.py: the official RocketMQ 5 Python SDK's SimpleConsumer
(rocketmq-python-client, unmodified, from ``make sdks``) through the gateway, on a group with
consumeMessageOrderly=true (FIFO by the group's settings). Runs ONLY in the SDK's own virtual environment:
``python fifo_sdk_consumer_proc.py <gateway> <topic> <group> <log> <name> <seed>``; receives batches of 8 (invisible
2 s), handles each message in turn (10-30 ms of work) and acks it (stopping at a refused ack), until SIGKILLed.

It writes the event log of fifo_consumer_proc.py (R, S, A, F lines; O_APPEND, one write per line); the UNIQ_KEY is
rebuilt from the body ``group-<g>:<seq>`` (the key test_fifo_kill.py gave it).
"""

from __future__ import annotations

import os
import random
import sys
import time

from rocketmq import ClientConfiguration, Credentials, FilterExpression, SimpleConsumer

BATCH = 8
INVISIBLE_S = 2
AWAIT_S = 1
WORK_S = (0.01, 0.03)


def key_of(body: bytes) -> str:
    group, seq = body.decode().removeprefix("group-").split(":")
    return f"G{int(group):02d}-{int(seq):05d}"


def line(fd: int, text: str) -> None:
    os.write(fd, (text + "\n").encode())


def main() -> None:
    gateway, topic, group, log_path, name, seed = sys.argv[1:7]
    fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    rng = random.Random(seed)
    config = ClientConfiguration(gateway, Credentials("", ""), request_timeout=5)
    consumer = SimpleConsumer(config, group, {topic: FilterExpression("*")}, await_duration=AWAIT_S)
    consumer.startup()
    batch = 0
    while True:
        try:
            messages = consumer.receive(BATCH, INVISIBLE_S)
        except Exception:
            time.sleep(0.2)
            continue
        batch += 1
        for message in messages:
            key = key_of(message.body)
            line(fd, f"R {name} {key} {message.delivery_attempt} {batch}")
            time.sleep(rng.uniform(*WORK_S))
            line(fd, f"S {name} {key}")
            try:
                consumer.ack(message)
            except Exception:
                line(fd, f"F {name} {key}")
                break
            line(fd, f"A {name} {key}")


if __name__ == "__main__":
    main()
