"""TopicPublishInfo: queues from a route (MQClientInstance#topicRouteData2TopicPublishInfo), round robin
(ThreadLocalIndex) with avoid-last-broker, TBW102 adaptation and route change detection."""

from __future__ import annotations

import random

from mq_client.producer.testing import make_route
from mq_client.producer.topic_publish_info import (
    SendWhichQueue,
    TopicPublishInfo,
    default_topic_route,
    topic_route_data_changed,
    topic_route_data_to_publish_info,
)
from mq_common.constants import PermName
from mq_common.protocol import BrokerData, MessageQueue, QueueData, TopicRouteData

RW = PermName.PERM_READ | PermName.PERM_WRITE


def names(queues: tuple[MessageQueue, ...]) -> list[str]:
    return [f"{q.broker_name[-1]}{q.queue_id}" for q in queues]


def test_queues_sorted_by_broker_name_write_queue_nums_each() -> None:
    route = TopicRouteData(
        queue_datas=(QueueData("broker-b", 8, 2, RW), QueueData("broker-a", 4, 3, RW)),
        broker_datas=(BrokerData("c", "broker-a", {0: "a:1"}), BrokerData("c", "broker-b", {0: "b:1"})),
    )
    info = topic_route_data_to_publish_info("T", route)
    assert names(info.message_queues) == ["a0", "a1", "a2", "b0", "b1"]
    assert all(q.topic == "T" for q in info.message_queues)
    assert info.ok()
    assert info.have_topic_router_info
    assert not info.order_topic


def test_unwritable_or_masterless_or_unknown_brokers_are_skipped() -> None:
    route = TopicRouteData(
        queue_datas=(
            QueueData("broker-a", 4, 4, PermName.PERM_READ),  # read only
            QueueData("broker-b", 4, 2, RW),  # slave only
            QueueData("broker-c", 4, 2, RW),  # no BrokerData
            QueueData("broker-d", 4, 1, RW),
        ),
        broker_datas=(
            BrokerData("c", "broker-a", {0: "a:1"}),
            BrokerData("c", "broker-b", {1: "b-slave:1"}),
            BrokerData("c", "broker-d", {0: "d:1", 1: "d-slave:1"}),
        ),
    )
    info = topic_route_data_to_publish_info("T", route)
    assert names(info.message_queues) == ["d0"]
    assert info.write_queue_nums_by_broker("broker-a") == -1  # not writable
    assert info.write_queue_nums_by_broker("broker-d") == 1
    assert info.write_queue_nums_by_broker("broker-z") == -1


def test_no_writable_queue_is_not_ok() -> None:
    info = topic_route_data_to_publish_info("T", make_route({"broker-a": 4}, perm=PermName.PERM_READ))
    assert not info.ok()
    assert info.have_topic_router_info


def test_order_topic_conf_gives_the_queue_list() -> None:
    route = TopicRouteData(queue_datas=(), broker_datas=(), order_topic_conf="broker-b:2;broker-a:1")
    info = topic_route_data_to_publish_info("T", route)
    assert names(info.message_queues) == ["b0", "b1", "a0"]
    assert info.order_topic


def test_send_which_queue_increments_and_masks() -> None:
    index = SendWhichQueue(start=5)
    assert [index.increment_and_get() for _ in range(3)] == [6, 7, 8]
    wrap = SendWhichQueue(start=0x7FFFFFFF)
    assert wrap.increment_and_get() == 0  # Java int overflow & POSITIVE_MASK
    seeded = SendWhichQueue(rng=random.Random(7))
    assert 0 <= seeded.value <= 0x7FFFFFFF


def eight_queue_info(start: int) -> TopicPublishInfo:
    return topic_route_data_to_publish_info(
        "T", make_route({"broker-a": 4, "broker-b": 4}), SendWhichQueue(start=start)
    )


def test_round_robin_golden_sequence() -> None:
    info = eight_queue_info(start=5)
    picks = [info.select_one_message_queue() for _ in range(6)]
    # indexes 6, 7, 8, 9, 10, 11 over [a0 a1 a2 a3 b0 b1 b2 b3]
    assert names(tuple(picks)) == ["b2", "b3", "a0", "a1", "a2", "a3"]


def test_avoid_last_broker_golden_sequence() -> None:
    info = eight_queue_info(start=1)
    # index 2 -> a2 (broker-a, skipped), 3 -> a3 (skipped), 4 -> b0
    assert info.select_one_message_queue("broker-a") == MessageQueue("T", "broker-b", 0)
    # index 5 -> b1: not broker-a, taken
    assert info.select_one_message_queue("broker-a") == MessageQueue("T", "broker-b", 1)
    # index 6 -> b2 is the last broker, 7 -> b3 too, 8 -> a0
    assert info.select_one_message_queue("broker-b") == MessageQueue("T", "broker-a", 0)
    assert info.send_which_queue.value == 8


def test_avoid_last_broker_with_a_single_broker_falls_back() -> None:
    info = topic_route_data_to_publish_info("T", make_route({"broker-a": 2}), SendWhichQueue(start=0))
    # indexes 1, 2 probed (both broker-a), then plain round robin takes index 3
    assert info.select_one_message_queue("broker-a") == MessageQueue("T", "broker-a", 1)
    assert info.send_which_queue.value == 3


def test_default_topic_route_uses_min_of_default_and_read_queues() -> None:
    tbw = TopicRouteData(
        queue_datas=(QueueData("broker-a", 8, 8, RW), QueueData("broker-b", 2, 8, RW)),
        broker_datas=(BrokerData("c", "broker-a", {0: "a:1"}), BrokerData("c", "broker-b", {0: "b:1"})),
    )
    adapted = default_topic_route(tbw, 4)
    assert [(q.read_queue_nums, q.write_queue_nums) for q in adapted.queue_datas] == [(4, 4), (2, 2)]
    assert adapted.broker_datas == tbw.broker_datas
    info = topic_route_data_to_publish_info("NewTopic", adapted, from_default_topic=True)
    assert names(info.message_queues) == ["a0", "a1", "a2", "a3", "b0", "b1"]
    assert info.from_default_topic


def test_route_change_detection_ignores_order() -> None:
    a = make_route({"broker-a": 4, "broker-b": 4})
    b = TopicRouteData(queue_datas=tuple(reversed(a.queue_datas)), broker_datas=tuple(reversed(a.broker_datas)))
    assert not topic_route_data_changed(a, b)
    assert topic_route_data_changed(None, a)
    assert topic_route_data_changed(a, make_route({"broker-a": 4, "broker-b": 8}))
    assert topic_route_data_changed(a, make_route({"broker-a": 4, "broker-b": 4}, addrs={"broker-b": "b:2"}))
    assert topic_route_data_changed(a, make_route({"broker-a": 4}))
