"""Shared helpers of the gateway fault tests: a bounded concurrent publisher that records every outcome with
its start/finish time (monotonic seconds), cluster specs, and outcome classification.

Everything runs on the test's asyncio loop; every loop is bounded by a message count and a deadline.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import grpc
from mq.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from mq_common.grpc_server import CHANNEL_OPTIONS
from mq_common.response_code import ResponseCode
from mq_local.cluster import ClusterSpec
from mq_local.testing import spec_for_tests

FAULTS_DIR: Final = Path(__file__).resolve().parent
RPC_TIMEOUT_S: Final = 30.0
BUDGET_SPENT_REMARK: Final = "send timeout budget spent"

if TYPE_CHECKING:
    GatewayStub = gateway_pb2_grpc.ProducerGatewayAsyncStub
BeforeSend = Callable[[int], Awaitable[None]]


def env_int(name: str, default: int) -> int:
    """``int(os.environ[name])`` when set (long runs), else ``default``."""
    raw = os.environ.get(name, "").strip()
    return int(raw) if raw else default


def fault_spec(data_dir: Path, *, isolation: bool, **overrides: Any) -> ClusterSpec:
    """A two-broker SYNC_FLUSH spec on free ports; ``isolation`` sets MQ_GATEWAY_SEND_LATENCY_FAULT_ENABLE."""
    gateway_env = {"MQ_GATEWAY_SEND_LATENCY_FAULT_ENABLE": "true" if isolation else "false"}
    gateway_env.update(overrides.pop("gateway_env", {}))
    return spec_for_tests(data_dir, gateway_env=gateway_env, **overrides)


@asynccontextmanager
async def gateway_stub(addr: str) -> AsyncIterator[GatewayStub]:
    """A ProducerGateway stub on ``addr``; the channel closes on exit."""
    async with grpc.aio.insecure_channel(addr, options=CHANNEL_OPTIONS) as channel:
        yield gateway_pb2_grpc.ProducerGatewayStub(channel)


@dataclass(frozen=True, slots=True)
class SendRecord:
    """One message's outcome: message index, start/finish of its call (time.monotonic seconds) and the gateway's
    SendResult (``queue_offset`` -1 when unknown)."""

    index: int
    started_s: float
    finished_s: float
    code: int
    remark: str
    broker_name: str
    queue_id: int
    queue_offset: int = -1

    @property
    def ok(self) -> bool:
        return self.code == ResponseCode.SUCCESS


def body_of(index: int) -> bytes:
    return b"m-%d" % index


def budget_ran_out(record: SendRecord) -> bool:
    """True for a failure whose whole send budget ran out: RPC_TIME_OUT (-1006) and the producer's remark."""
    return record.code == ResponseCode.RPC_TIME_OUT and BUDGET_SPENT_REMARK in record.remark


def brokers_of(records: Iterable[SendRecord]) -> Counter[str]:
    """Successful sends per broker."""
    return Counter(r.broker_name for r in records if r.ok)


class Publisher:
    """``workers`` concurrent callers of Send, each taking the next message index until ``count`` are sent,
    :meth:`stop` is called, or ``deadline_s`` (monotonic) passes. ``before_send(i)`` runs before message i is
    sent (a fault controller may trigger a fault there, or hold the caller). ``send_timeout_ms`` 0 = the
    gateway's budget. Indices start at ``first_index`` (to continue a numbering)."""

    def __init__(
        self,
        stub: GatewayStub,
        topic: str,
        *,
        workers: int,
        send_timeout_ms: int = 0,
        before_send: BeforeSend | None = None,
        first_index: int = 0,
    ) -> None:
        self.stub = stub
        self.topic = topic
        self.workers = workers
        self.send_timeout_ms = send_timeout_ms
        self.before_send = before_send
        self.records: list[SendRecord] = []
        self._next = first_index
        self._stopped = False

    def stop(self) -> None:
        self._stopped = True

    async def run(self, count: int, deadline_s: float) -> list[SendRecord]:
        """Send messages ``first_index`` .. ``count - 1``; returns the records sorted by index."""
        await asyncio.gather(*(self._worker(count, deadline_s) for _ in range(self.workers)))
        return sorted(self.records, key=lambda r: r.index)

    async def _worker(self, count: int, deadline_s: float) -> None:
        while not self._stopped and self._next < count and time.monotonic() < deadline_s:
            index = self._next
            self._next += 1
            if self.before_send is not None:
                await self.before_send(index)
            self.records.append(await self.send_one(index))

    async def send_one(self, index: int) -> SendRecord:
        message = gateway_pb2.Message(topic=self.topic, body=body_of(index))
        request = gateway_pb2.SendRequest(message=message, send_timeout_ms=self.send_timeout_ms)
        started = time.monotonic()
        r = (await self.stub.Send(request, timeout=RPC_TIMEOUT_S)).result
        finished = time.monotonic()
        return SendRecord(index, started, finished, r.code, r.remark, r.broker_name, r.queue_id, r.queue_offset)
