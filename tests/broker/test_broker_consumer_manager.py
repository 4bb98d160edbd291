"""ConsumerManager: heartbeats register instances, unregister, expiry scan, bounds, connection info."""

from __future__ import annotations

import pytest
from mq_broker.consumer import consumer_manager
from mq_broker.consumer.consumer_manager import ConsumerManager
from mq_common.errors import InvalidParameterError, MQError
from mq_common.protocol import ConsumerConnection, ConsumeType, HeartbeatData, MessageModel, SubscriptionData


def beat(client_id: str, group: str = "G", *topics: str, **kw: object) -> HeartbeatData:
    subs = tuple(SubscriptionData(t, "TagA || TagB") for t in topics)
    return HeartbeatData(client_id, group, subscriptions=subs, **kw)  # type: ignore[arg-type]


def test_register_reports_new_instances_only() -> None:
    consumers = ConsumerManager()
    assert consumers.register_consumer(beat("c2", "G", "T"), "1.1.1.1:1", now_ms=1_000)
    assert consumers.register_consumer(beat("c1", "G", "T"), "1.1.1.2:1", now_ms=1_000)
    assert not consumers.register_consumer(beat("c1", "G", "T", "U"), "1.1.1.2:2", now_ms=2_000)
    assert consumers.client_ids("G") == ["c1", "c2"]
    assert consumers.client_ids("other") == []
    assert consumers.groups() == ["G"]
    assert consumers.subscription("G", "U") == SubscriptionData("U", "TagA || TagB")
    assert consumers.subscription("G", "V") is None
    assert consumers.groups_by_topic("U") == {"G"}


def test_connection_info_is_the_latest_heartbeat_of_each_instance() -> None:
    consumers = ConsumerManager()
    assert consumers.connection_info("G") is None
    consumers.register_consumer(beat("c1", "G", "T", consume_type=ConsumeType.CONSUME_POP), "1.1.1.1:1", now_ms=5)
    consumers.register_consumer(
        beat("c0", "G", "T", consume_type=ConsumeType.CONSUME_POP, version="V5_1_0"), "1.1.1.2:1", now_ms=9
    )
    info = consumers.connection_info("G")
    assert info is not None
    assert info.connections == (
        ConsumerConnection("c0", "1.1.1.2:1", "PYTHON", "V5_1_0", 9),
        ConsumerConnection("c1", "1.1.1.1:1", "PYTHON", "", 5),
    )
    assert info.subscriptions == (SubscriptionData("T", "TagA || TagB"),)
    assert (info.consume_type, info.message_model) == (ConsumeType.CONSUME_POP, MessageModel.CLUSTERING)


def test_unregister_removes_the_instance_and_the_empty_group() -> None:
    consumers = ConsumerManager()
    consumers.register_consumer(beat("c1"), "a:1")
    consumers.register_consumer(beat("c2"), "a:2")
    consumers.unregister_consumer("G", "c1")
    consumers.unregister_consumer("G", "nope")
    consumers.unregister_consumer("nope", "c2")
    assert consumers.client_ids("G") == ["c2"]
    consumers.unregister_consumer("G", "c2")
    assert consumers.groups() == []


def test_scan_drops_silent_instances_only() -> None:
    consumers = ConsumerManager(channel_expired_timeout_ms=1_000)
    consumers.register_consumer(beat("old"), "a:1", now_ms=10_000)
    consumers.register_consumer(beat("new"), "a:2", now_ms=10_500)
    consumers.register_consumer(beat("solo", "H"), "a:3", now_ms=10_000)
    assert consumers.scan_not_active_channel(now_ms=11_000) == 0  # exactly the timeout: still alive
    assert consumers.scan_not_active_channel(now_ms=11_001) == 2
    assert consumers.client_ids("G") == ["new"]
    assert consumers.groups() == ["G"]
    consumers.register_consumer(beat("new"), "a:2", now_ms=12_000)  # a heartbeat keeps it alive
    assert consumers.scan_not_active_channel(now_ms=12_900) == 0


def test_a_full_group_refuses_new_instances_with_system_busy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(consumer_manager, "MAX_CLIENTS_PER_GROUP", 2)
    consumers = ConsumerManager()
    consumers.register_consumer(beat("c1"), "a:1")
    consumers.register_consumer(beat("c2"), "a:2")
    with pytest.raises(MQError) as err:
        consumers.register_consumer(beat("c3"), "a:3")
    assert err.value.code == 2
    assert "G" in err.value.remark
    assert not consumers.register_consumer(beat("c2"), "a:2")  # known instances still beat
    assert consumers.client_ids("G") == ["c1", "c2"]


def test_too_many_subscriptions_are_refused() -> None:
    consumers = ConsumerManager()
    with pytest.raises(InvalidParameterError):
        consumers.register_consumer(
            beat("c1", "G", *[f"T{n}" for n in range(consumer_manager.MAX_SUBSCRIPTIONS + 1)]), "a:1"
        )
    assert consumers.groups() == []
