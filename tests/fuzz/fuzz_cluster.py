"""The fuzz runs' cluster and the checks around them: a real local cluster (mqnamesrv, one mqbroker, mqgateway
processes on 127.0.0.1) with short long polls, the fuzz targets in it, what the broker stores (topics and queue max
offsets), 1,000 idle streams per service and a 100 MiB request."""

from __future__ import annotations

import asyncio
import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import grpc
from apache.rocketmq.v2 import service_pb2
from fuzz_harness import CLIENT_OPTIONS, V2_METADATA, ServiceReport, Target, call_raw, serving
from grpc_health.v1 import health_pb2, health_pb2_grpc
from mq.broker.v1 import broker_pb2, broker_pb2_grpc
from mq.gateway.v1 import gateway_pb2
from mq.namesrv.v1 import namesrv_pb2
from mq_common.constants import MixAll
from mq_local.cluster import ClusterSpec, LocalCluster
from mq_local.testing import spec_for_tests
from proto_grammar import RANDOM_BYTES, FuzzRequest

IDLE_STREAMS: Final = 1000
HUGE_REQUEST_BYTES: Final = 100 * 1024 * 1024
MUTATING_METHODS: Final = frozenset(
    {
        "SendStream",
        "CreateTopic",
        "UpdateTopic",
        "Send",
        "SendBatch",
        "SendOneway",
        "SendMessage",
        "ConsumerSendMsgBack",
        "ForwardMessageToDeadLetterQueue",
        "RecallMessage",
        "EndTransaction",
    }
)
SUCCESS_LABELS: Final = frozenset({"code:0", "v2:OK", "ok"})


def fuzz_spec(data_dir: Path) -> ClusterSpec:
    """One broker group; long polls capped at 1-2 s so that no fuzzed poll outlives a call deadline."""
    return spec_for_tests(
        data_dir,
        broker_groups=1,
        auto_create_topic_enable=True,
        broker_env={
            "MQ_BROKER_BROKER_SUSPEND_MAX_TIME_MS": "1000",
            "MQ_BROKER_POP_POLL_TIME_MAX_MS": "1000",
            "MQ_BROKER_REGISTER_BROKER_INTERVAL_MS": "1000",
        },
        gateway_env={
            "MQ_GATEWAY_LONG_POLLING_TIMEOUT_MIN_MS": "1000",
            "MQ_GATEWAY_LONG_POLLING_TIMEOUT_MAX_MS": "2000",
        },
        log_level="WARNING",
    )


def targets(cluster: LocalCluster) -> list[Target]:
    """The three services of ``cluster`` as fuzz targets."""
    broker_name, broker_addr = next(iter(cluster.broker_addrs.items()))
    return [
        Target(
            "namesrv",
            cluster.namesrv_addr,
            (namesrv_pb2.DESCRIPTOR.services_by_name["NameServer"],),
            cluster.namesrv.pid,
        ),
        Target(
            "broker", broker_addr, (broker_pb2.DESCRIPTOR.services_by_name["Broker"],), cluster.brokers[broker_name].pid
        ),
        Target(
            "gateway",
            cluster.gateway_addr,
            (
                gateway_pb2.DESCRIPTOR.services_by_name["ProducerGateway"],
                service_pb2.DESCRIPTOR.services_by_name["MessagingService"],
            ),
            cluster.gateway.pid,
        ),
    ]


@dataclass(frozen=True, slots=True)
class StoreSnapshot:
    """The broker's topics (topics.json) and every queue's max offset: what a stored request would change."""

    topics: frozenset[str]
    max_offsets: tuple[tuple[str, int, int], ...]

    def without_empty_retry_topics(self) -> StoreSnapshot:
        """The snapshot less the ``%RETRY%<group>`` topics that hold nothing: a consumer's Heartbeat or PopMessage
        creates its group's retry topic (RocketMQ's createTopicInSendMessageBackMethod), whatever the answer, so
        an empty one is consumer metadata of an accepted call, not something stored from a refused request."""
        empty = {
            topic
            for topic in self.topics
            if topic.startswith(MixAll.RETRY_GROUP_TOPIC_PREFIX)
            and all(offset == 0 for name, _queue, offset in self.max_offsets if name == topic)
        }
        kept = tuple(entry for entry in self.max_offsets if entry[0] not in empty)
        return StoreSnapshot(self.topics - empty, kept)


async def store_snapshot(cluster: LocalCluster) -> StoreSnapshot:
    broker_name, broker_addr = next(iter(cluster.broker_addrs.items()))
    path = cluster.spec.broker_store_dir(broker_name) / "config" / "topics.json"
    raw: Any = json.loads(path.read_text()) if path.exists() else {}
    table = raw.get("topicConfigTable", raw) if isinstance(raw, dict) else {}
    topics = frozenset(str(name) for name in table)
    offsets: list[tuple[str, int, int]] = []
    async with grpc.aio.insecure_channel(broker_addr) as channel:
        stub: Any = broker_pb2_grpc.BrokerStub(channel)
        for topic in sorted(topics):
            stats = await stub.GetTopicStats(broker_pb2.GetTopicStatsRequest(topic=topic), timeout=10)
            offsets.extend((topic, o.queue_id, o.max_offset) for o in stats.offsets)
    return StoreSnapshot(topics, tuple(sorted(offsets)))


def write_successes(report: ServiceReport) -> int:
    """How many of the report's answers were successes of a method that stores (a send, a topic change)."""
    return sum(
        n for (method, label), n in report.by_method.items() if method in MUTATING_METHODS and label in SUCCESS_LABELS
    )


async def idle_streams(target: Target, count: int = IDLE_STREAMS) -> bool:
    """Open ``count`` streams on one connection that send nothing (health Watch on the name server, SendStream on
    the broker, Telemetry on the gateway); True when the service still answers a health check meanwhile and after
    they are cancelled."""
    async with grpc.aio.insecure_channel(target.addr, options=CLIENT_OPTIONS) as channel:
        calls: list[Any] = []
        for _ in range(count):
            if target.name == "namesrv":
                calls.append(health_pb2_grpc.HealthStub(channel).Watch(health_pb2.HealthCheckRequest()))  # type: ignore[no-untyped-call]
            elif target.name == "broker":
                calls.append(channel.stream_stream("/mq.broker.v1.Broker/SendStream")(_never()))
            else:
                path = "/apache.rocketmq.v2.MessagingService/Telemetry"
                calls.append(channel.stream_stream(path)(_never(), metadata=V2_METADATA))
        await asyncio.sleep(1.0)
        during = await serving(target.addr)
        for call in calls:
            call.cancel()
    return during and await serving(target.addr)


async def _never() -> Any:
    await asyncio.Event().wait()
    yield b""  # pragma: no cover - never reached


async def huge_request(target: Target) -> str:
    """The label of one 100 MiB request of random bytes to the target's first unary method."""
    method = next(m for s in target.services for m in s.methods if not m.client_streaming and not m.server_streaming)
    data = random.Random(100).randbytes(HUGE_REQUEST_BYTES)
    async with grpc.aio.insecure_channel(target.addr, options=CLIENT_OPTIONS) as channel:
        return (await call_raw(channel, FuzzRequest(method, RANDOM_BYTES, data), V2_METADATA)).label
