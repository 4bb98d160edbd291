"""In-memory stand-ins for the name server and the brokers, for tests and demos of the producer core.

:class:`InMemoryNameServer` satisfies :class:`~mq_client.producer.route_manager.NameServerLookup` and
:class:`ScriptedBrokerTransport` satisfies :class:`~mq_client.producer.kernel.BrokerTransport`. No network.
Both run on the caller's asyncio loop; :class:`FakeClock` makes budgets and fault items deterministic.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from mq_common.batch_codec import decode_batch
from mq_common.codec import split_host_port
from mq_common.constants import MixAll, PermName
from mq_common.errors import MQError, TopicNotExistError
from mq_common.message_id import create_offset_msg_id
from mq_common.protocol import (
    BrokerData,
    QueueData,
    SendMessageBatchRequestHeader,
    SendMessageBatchResponseHeader,
    SendMessageRequestHeader,
    SendMessageResponseHeader,
    TopicRouteData,
)
from mq_common.response_code import ResponseCode


class FakeClock:
    """A settable millisecond clock (callable like ``monotonic_ms``)."""

    def __init__(self, now_ms: int = 1_000_000) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms

    def advance(self, ms: int) -> None:
        self.now_ms += ms


class FixedStartRandom(random.Random):
    """A Random whose ``randrange`` always returns ``start``: every round-robin index starts there."""

    def __init__(self, start: int) -> None:
        super().__init__(0)
        self.start = start

    def randrange(self, start: int, stop: int | None = None, step: int = 1) -> int:
        return self.start


def make_route(
    write_queues: Mapping[str, int],
    *,
    addrs: Mapping[str, str] | None = None,
    perm: int = PermName.PERM_READ | PermName.PERM_WRITE,
    cluster: str = MixAll.DEFAULT_CLUSTER,
) -> TopicRouteData:
    """A route with ``write_queues[broker name]`` read/write queues per broker; master address
    ``addrs[name]`` (default ``"<name>:10911"``)."""
    addrs = addrs or {}
    return TopicRouteData(
        queue_datas=tuple(QueueData(name, n, n, perm) for name, n in write_queues.items()),
        broker_datas=tuple(
            BrokerData(cluster, name, {MixAll.MASTER_ID: addrs.get(name, f"{name}:10911")}) for name in write_queues
        ),
    )


class InMemoryNameServer:
    """Routes from a dict; unknown topics raise TopicNotExistError; ``error`` (if set) is raised instead."""

    def __init__(self, routes: Mapping[str, TopicRouteData] | None = None) -> None:
        self.routes: dict[str, TopicRouteData] = dict(routes or {})
        self.error: MQError | None = None
        self.queries: list[str] = []

    async def get_route_info_by_topic(self, topic: str, timeout_ms: int = 3000) -> TopicRouteData:
        self.queries.append(topic)
        await asyncio.sleep(0)
        if self.error is not None:
            raise self.error
        route = self.routes.get(topic)
        if route is None:
            raise TopicNotExistError(f"No topic route info in name server for the topic: {topic}")
        return route


@dataclass(frozen=True, slots=True)
class Step:
    """How a broker answers one call: ``error`` raised for the whole call (transport failure), else each
    request gets ``code`` (or ``code_for(request)``); ``latency_ms`` advances the FakeClock; ``hang`` never
    answers (the caller's deadline fires)."""

    code: int = ResponseCode.SUCCESS
    code_for: Callable[[SendMessageRequestHeader], int] | None = None
    error: MQError | None = None
    latency_ms: int = 0
    hang: bool = False


@dataclass(frozen=True, slots=True)
class Call:
    """One call the transport received."""

    addr: str
    requests: tuple[SendMessageRequestHeader, ...]
    timeout_ms: int
    batch: bool
    message_batch: bool = False  # a SendMessageBatch: ``requests`` are its decoded messages


@dataclass
class ScriptedBrokerTransport:
    """Brokers by address: each call takes the address's next scripted Step (default: SUCCESS with no
    latency). Successful requests are kept in ``stored`` with per-queue offsets like a broker's."""

    clock: FakeClock | None = None
    scripts: dict[str, list[Step]] = field(default_factory=dict)
    default_steps: dict[str, Step] = field(default_factory=dict)
    calls: list[Call] = field(default_factory=list)
    stored: list[tuple[str, SendMessageRequestHeader]] = field(default_factory=list)
    _offsets: dict[tuple[str, str, int], int] = field(default_factory=dict)

    def script(self, addr: str, *steps: Step) -> None:
        """Append one-shot steps for ``addr``."""
        self.scripts.setdefault(addr, []).extend(steps)

    def always(self, addr: str, step: Step) -> None:
        """``step`` for every call to ``addr`` once its one-shot steps are used up."""
        self.default_steps[addr] = step

    async def send_message(
        self, addr: str, request: SendMessageRequestHeader, timeout_ms: int
    ) -> SendMessageResponseHeader:
        return (await self._call(addr, [request], timeout_ms, batch=False))[0]

    async def send_batch(
        self, addr: str, requests: Sequence[SendMessageRequestHeader], timeout_ms: int
    ) -> list[SendMessageResponseHeader]:
        return await self._call(addr, requests, timeout_ms, batch=True)

    async def send_message_batch(
        self, addr: str, request: SendMessageBatchRequestHeader, timeout_ms: int
    ) -> SendMessageBatchResponseHeader:
        """A MessageBatch: its messages are decoded and stored together (one Step for the whole batch)."""
        requests = [
            SendMessageRequestHeader(
                producer_group=request.producer_group,
                topic=request.topic,
                queue_id=request.queue_id,
                sys_flag=request.sys_flag,
                born_timestamp_ms=request.born_timestamp_ms,
                flag=item.flag,
                properties=item.properties + request.properties,
                body=item.body,
            )
            for item in decode_batch(request.body)
        ]
        answers = await self._call(addr, requests, timeout_ms, batch=True, message_batch=True)
        first = answers[0]
        if any(a.code != first.code for a in answers) or first.code not in (ResponseCode.SUCCESS, 10, 11, 12):
            bad = next(a for a in answers if a.code not in (ResponseCode.SUCCESS, 10, 11, 12))
            return SendMessageBatchResponseHeader(bad.code, bad.remark, "", 0, 0, 0)
        msg_ids = ",".join(a.msg_id for a in answers)
        return SendMessageBatchResponseHeader(
            first.code, "", msg_ids, request.queue_id, first.queue_offset, len(answers)
        )

    async def _call(
        self,
        addr: str,
        requests: Sequence[SendMessageRequestHeader],
        timeout_ms: int,
        *,
        batch: bool,
        message_batch: bool = False,
    ) -> list[SendMessageResponseHeader]:
        self.calls.append(Call(addr, tuple(requests), timeout_ms, batch, message_batch))
        queue = self.scripts.get(addr)
        step = queue.pop(0) if queue else self.default_steps.get(addr, Step())
        if self.clock is not None:
            self.clock.advance(step.latency_ms)
        await asyncio.sleep(0)
        if step.hang:
            await asyncio.Event().wait()
        if step.error is not None:
            raise step.error
        return [self._answer(addr, r, step.code_for(r) if step.code_for else step.code) for r in requests]

    def _answer(self, addr: str, request: SendMessageRequestHeader, code: int) -> SendMessageResponseHeader:
        if code not in (ResponseCode.SUCCESS, 10, 11, 12):
            return SendMessageResponseHeader(code, f"scripted code {code}", "", 0, 0)
        key = (addr, request.topic, request.queue_id)
        offset = self._offsets.get(key, 0)
        self._offsets[key] = offset + 1
        self.stored.append((addr, request))
        host, port = split_host_port(addr) if addr[:1].isdigit() else ("127.0.0.1", 10911)
        msg_id = create_offset_msg_id(host, port, len(self.stored) * 100)
        return SendMessageResponseHeader(code, "", msg_id, request.queue_id, offset)
