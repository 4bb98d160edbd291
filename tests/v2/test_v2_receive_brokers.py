"""ReceiveActivity's choice of broker calls, with a fake route cache and fake broker calls: a topic on one broker
is long-polled at once (one pop: the broker pops before it parks), a topic on several brokers is popped without
waiting on each before the named broker is long-polled, and a receive without a poll time pops once."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

from mq_common.constants import PermName
from mq_common.protocol import (
    BrokerData,
    ConsumeInitMode,
    PopMessageRequestHeader,
    PopResult,
    PopStatus,
    QueueData,
    TopicRouteData,
)
from mq_gateway.v2.consumer.config import ConsumerActivityConfig
from mq_gateway.v2.consumer.receive import PopPlan, ReceiveActivity

TOPIC = "T"
RW = PermName.PERM_READ | PermName.PERM_WRITE


@dataclass
class FakeRoutes:
    route_data: TopicRouteData

    async def route(self, topic: str) -> TopicRouteData:
        assert topic == TOPIC
        return self.route_data


@dataclass
class FakePops:
    """Answers FOUND for the brokers in ``holding``, NO_NEW_MSG for the others; records (broker, poll time)."""

    holding: set[str] = field(default_factory=set)
    calls: list[tuple[str, int]] = field(default_factory=list)

    async def pop_message(self, addr: str, header: PopMessageRequestHeader, timeout_ms: int, name: str) -> PopResult:
        self.calls.append((name, header.poll_time_ms))
        return PopResult(PopStatus.FOUND if name in self.holding else PopStatus.NO_NEW_MSG)


def _route(*brokers: str) -> TopicRouteData:
    return TopicRouteData(
        tuple(QueueData(b, 4, 4, RW) for b in brokers),
        tuple(BrokerData("c", b, {0: f"127.0.0.21:{10911 + i}"}) for i, b in enumerate(brokers)),
    )


def _activity(route: TopicRouteData, pops: FakePops) -> ReceiveActivity:
    fake: Any = None
    return ReceiveActivity(cast(Any, FakeRoutes(route)), cast(Any, pops), fake, fake, ConsumerActivityConfig())


def _plan(poll_ms: int) -> PopPlan:
    header = PopMessageRequestHeader(
        consumer_group="G", topic=TOPIC, max_msg_nums=32, invisible_time_ms=60_000, queue_id=-1,
        poll_time_ms=poll_ms, expression="*", init_mode=ConsumeInitMode.LAST,
    )  # fmt: skip
    return PopPlan("broker-a", "127.0.0.21:10911", header, 30_000)


async def test_a_topic_on_one_broker_is_long_polled_at_once() -> None:
    pops = FakePops()
    plan, result = await _activity(_route("broker-a"), pops)._pop_any(_plan(20_000))
    assert pops.calls == [("broker-a", 20_000)]
    assert (plan.broker_name, result.status) == ("broker-a", PopStatus.NO_NEW_MSG)


async def test_other_brokers_are_popped_without_waiting_before_the_long_poll() -> None:
    empty = FakePops()
    await _activity(_route("broker-a", "broker-b"), empty)._pop_any(_plan(20_000))
    assert empty.calls == [("broker-a", 0), ("broker-b", 0), ("broker-a", 20_000)]
    holding = FakePops(holding={"broker-b"})
    plan, result = await _activity(_route("broker-a", "broker-b"), holding)._pop_any(_plan(20_000))
    assert holding.calls == [("broker-a", 0), ("broker-b", 0)]
    assert (plan.broker_name, result.status) == ("broker-b", PopStatus.FOUND)


async def test_a_receive_without_poll_time_pops_its_broker_once() -> None:
    pops = FakePops(holding={"broker-b"})
    await _activity(_route("broker-a", "broker-b"), pops)._pop_any(_plan(0))
    assert pops.calls == [("broker-a", 0)]
