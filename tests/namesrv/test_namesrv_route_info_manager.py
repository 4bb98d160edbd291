"""RouteInfoManager: register, route by topic, data version, unregister, expiry (injectable clock), delete topic."""

from __future__ import annotations

import pytest
from mq_common.constants import PermName
from mq_common.errors import InvalidParameterError, TopicNotExistError
from mq_common.protocol import BrokerRegistration, DataVersion, QueueData, TopicConfig
from mq_common.response_code import ResponseCode
from mq_namesrv.route_info_manager import RouteInfoManager

V1 = DataVersion(0, 1, 1)


class FakeClock:
    def __init__(self, now_ms: int = 1_000_000) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms


def reg(
    broker_name: str = "broker-a",
    broker_addr: str = "127.0.0.1:10911",
    *,
    broker_id: int = 0,
    cluster: str = "DefaultCluster",
    topics: dict[str, TopicConfig] | None = None,
    version: DataVersion = V1,
    heartbeat_timeout_ms: int = 0,
    ha_server_addr: str = "",
) -> BrokerRegistration:
    return BrokerRegistration(
        cluster_name=cluster,
        broker_name=broker_name,
        broker_id=broker_id,
        broker_addr=broker_addr,
        topic_configs=topics if topics is not None else {"TopicA": TopicConfig("TopicA", 4, 4, 6)},
        data_version=version,
        ha_server_addr=ha_server_addr,
        heartbeat_timeout_ms=heartbeat_timeout_ms,
    )


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def manager(clock: FakeClock) -> RouteInfoManager:
    return RouteInfoManager(clock, broker_channel_expired_ms=120_000)


def test_register_then_route_by_topic(manager: RouteInfoManager) -> None:
    manager.register_broker(reg("broker-b", "127.0.0.1:10921"))
    manager.register_broker(reg("broker-a", "127.0.0.1:10911", topics={"TopicA": TopicConfig("TopicA", 8, 2, 6)}))

    route = manager.pickup_topic_route_data("TopicA")

    assert route.queue_datas == (QueueData("broker-a", 8, 2, 6), QueueData("broker-b", 4, 4, 6))
    assert [b.broker_name for b in route.broker_datas] == ["broker-a", "broker-b"]
    assert route.broker_datas[0].broker_addrs == {0: "127.0.0.1:10911"}
    assert route.broker_datas[0].cluster == "DefaultCluster"


def test_unknown_topic_raises_topic_not_exist_with_rocketmq_remark(manager: RouteInfoManager) -> None:
    manager.register_broker(reg())
    with pytest.raises(TopicNotExistError) as info:
        manager.pickup_topic_route_data("Nope")
    assert info.value.code == ResponseCode.TOPIC_NOT_EXIST
    assert info.value.remark == "No topic route info in name server for the topic: Nope"


def test_cluster_info_and_topic_list(manager: RouteInfoManager, clock: FakeClock) -> None:
    manager.register_broker(
        reg("broker-a", "127.0.0.1:10911", topics={"T2": TopicConfig("T2"), "T1": TopicConfig("T1")})
    )
    manager.register_broker(reg("broker-b", "127.0.0.1:10921", cluster="Other", topics={"T3": TopicConfig("T3")}))

    info = manager.get_all_cluster_info()

    assert info.cluster_addr_table == {"DefaultCluster": ("broker-a",), "Other": ("broker-b",)}
    assert set(info.broker_addr_table) == {"broker-a", "broker-b"}
    assert info.broker_live_table["127.0.0.1:10911"].last_update_timestamp_ms == clock.now_ms
    assert info.broker_live_table["127.0.0.1:10911"].heartbeat_timeout_ms == 120_000
    assert manager.get_all_topic_list() == ["T1", "T2", "T3"]


def test_slave_topics_are_ignored_and_slave_learns_master(manager: RouteInfoManager) -> None:
    manager.register_broker(reg(ha_server_addr="127.0.0.1:10912"))
    result = manager.register_broker(
        reg(broker_addr="127.0.0.1:10915", broker_id=1, topics={"SlaveOnly": TopicConfig("SlaveOnly")})
    )

    assert result.master_addr == "127.0.0.1:10911"
    assert result.ha_server_addr == "127.0.0.1:10912"
    assert manager.get_all_topic_list() == ["TopicA"]
    route = manager.pickup_topic_route_data("TopicA")
    assert route.broker_datas[0].broker_addrs == {0: "127.0.0.1:10911", 1: "127.0.0.1:10915"}


def test_same_data_version_does_not_reapply_changed_configs(manager: RouteInfoManager) -> None:
    manager.register_broker(reg(version=DataVersion(0, 100, 1)))
    # Same version: the (different) configs are not applied to topics this broker already has.
    manager.register_broker(reg(version=DataVersion(0, 100, 1), topics={"TopicA": TopicConfig("TopicA", 16, 16)}))
    assert manager.pickup_topic_route_data("TopicA").queue_datas[0].read_queue_nums == 4

    # A new version is applied.
    manager.register_broker(reg(version=DataVersion(0, 200, 2), topics={"TopicA": TopicConfig("TopicA", 16, 16)}))
    assert manager.pickup_topic_route_data("TopicA").queue_datas[0].read_queue_nums == 16


def test_same_data_version_still_adds_new_topic(manager: RouteInfoManager) -> None:
    manager.register_broker(reg(version=DataVersion(0, 100, 1)))
    manager.register_broker(
        reg(version=DataVersion(0, 100, 1), topics={"TopicA": TopicConfig("TopicA"), "TopicB": TopicConfig("TopicB")})
    )
    assert manager.get_all_topic_list() == ["TopicA", "TopicB"]


def test_stale_state_version_for_same_broker_id_is_ignored(manager: RouteInfoManager) -> None:
    manager.register_broker(reg(broker_addr="127.0.0.1:10911", version=DataVersion(5, 1, 1)))
    manager.register_broker(reg(broker_addr="127.0.0.1:20911", version=DataVersion(3, 1, 1)))

    route = manager.pickup_topic_route_data("TopicA")
    assert route.broker_datas[0].broker_addrs == {0: "127.0.0.1:10911"}
    assert set(manager.get_all_cluster_info().broker_live_table) == {"127.0.0.1:10911"}


def test_slave_promoted_to_master_keeps_one_entry_per_address(manager: RouteInfoManager) -> None:
    manager.register_broker(reg(broker_addr="127.0.0.1:10915", broker_id=1))
    manager.register_broker(reg(broker_addr="127.0.0.1:10915", broker_id=0))
    route = manager.pickup_topic_route_data("TopicA")
    assert route.broker_datas[0].broker_addrs == {0: "127.0.0.1:10915"}


def test_unregister_last_address_drops_group_cluster_and_topics(manager: RouteInfoManager) -> None:
    manager.register_broker(reg("broker-a", "127.0.0.1:10911"))
    manager.register_broker(
        reg("broker-b", "127.0.0.1:10921", topics={"TopicA": TopicConfig("TopicA"), "OnlyB": TopicConfig("OnlyB")})
    )

    assert manager.unregister_broker("DefaultCluster", "127.0.0.1:10921", "broker-b", 0) is True

    assert manager.get_all_topic_list() == ["TopicA"]
    route = manager.pickup_topic_route_data("TopicA")
    assert [q.broker_name for q in route.queue_datas] == ["broker-a"]
    info = manager.get_all_cluster_info()
    assert info.cluster_addr_table == {"DefaultCluster": ("broker-a",)}
    assert "broker-b" not in info.broker_addr_table

    manager.unregister_broker("DefaultCluster", "127.0.0.1:10911", "broker-a", 0)
    assert manager.get_all_cluster_info().cluster_addr_table == {}
    with pytest.raises(TopicNotExistError):
        manager.pickup_topic_route_data("TopicA")


def test_unregister_slave_keeps_master_route(manager: RouteInfoManager) -> None:
    manager.register_broker(reg())
    manager.register_broker(reg(broker_addr="127.0.0.1:10915", broker_id=1))
    manager.unregister_broker("DefaultCluster", "127.0.0.1:10915", "broker-a", 1)
    route = manager.pickup_topic_route_data("TopicA")
    assert route.broker_datas[0].broker_addrs == {0: "127.0.0.1:10911"}


def test_unregister_unknown_is_harmless(manager: RouteInfoManager) -> None:
    assert manager.unregister_broker("DefaultCluster", "127.0.0.1:1", "ghost", 0) is False


def test_scan_removes_expired_brokers_and_their_queue_data(manager: RouteInfoManager, clock: FakeClock) -> None:
    manager.register_broker(reg("broker-a", "127.0.0.1:10911"))
    manager.register_broker(reg("broker-b", "127.0.0.1:10921", heartbeat_timeout_ms=10_000))

    clock.now_ms += 10_000
    assert manager.scan_not_active_broker() == []  # exactly at the deadline: still live
    clock.now_ms += 1
    assert manager.scan_not_active_broker() == ["127.0.0.1:10921"]
    assert [q.broker_name for q in manager.pickup_topic_route_data("TopicA").queue_datas] == ["broker-a"]

    clock.now_ms += 60_000
    manager.register_broker(reg("broker-a", "127.0.0.1:10911"))  # heartbeat refreshes the timestamp
    clock.now_ms += 119_000
    assert manager.scan_not_active_broker() == []
    clock.now_ms += 2_000
    assert manager.scan_not_active_broker() == ["127.0.0.1:10911"]
    assert manager.get_all_topic_list() == []
    assert manager.get_all_cluster_info().broker_live_table == {}


@pytest.mark.parametrize(
    ("registration", "fragment"),
    [
        (reg(broker_name=""), "brokerName is blank"),
        (reg(broker_addr=""), "host:port"),
        (reg(broker_addr="127.0.0.1"), "host:port"),
        (reg(broker_addr="127.0.0.1:notaport"), "host:port"),
        (reg(broker_addr="127.0.0.1:70000"), "out of range"),
        (reg(broker_addr="bad host:1"), "host:port"),
        (reg(cluster=" "), "clusterName is blank"),
        (reg(broker_id=-1), "brokerId"),
        (reg(heartbeat_timeout_ms=-5), "heartbeatTimeoutMillis"),
        (reg(topics={"T": TopicConfig("T", read_queue_nums=-1)}), "readQueueNums"),
        (reg(topics={"T": TopicConfig("U")}), "differs"),
    ],
)
def test_bad_registration_is_refused_and_changes_nothing(
    manager: RouteInfoManager, registration: BrokerRegistration, fragment: str
) -> None:
    with pytest.raises(InvalidParameterError) as info:
        manager.register_broker(registration)
    assert info.value.code == ResponseCode.INVALID_PARAMETER
    assert fragment in info.value.remark
    assert manager.get_all_cluster_info().broker_addr_table == {}
    assert manager.get_all_topic_list() == []


def test_ipv6_and_dns_addresses_are_accepted(manager: RouteInfoManager) -> None:
    manager.register_broker(reg("broker-a", "[::1]:10911"))
    manager.register_broker(reg("broker-b", "broker-b-0.broker.mq.svc:10911"))
    assert len(manager.pickup_topic_route_data("TopicA").broker_datas) == 2


def test_topic_perm_is_carried_into_queue_data(manager: RouteInfoManager) -> None:
    manager.register_broker(reg(topics={"RO": TopicConfig("RO", 2, 2, PermName.PERM_READ, topic_sys_flag=3)}))
    assert manager.pickup_topic_route_data("RO").queue_datas == (QueueData("broker-a", 2, 2, PermName.PERM_READ, 3),)


def two_clusters(manager: RouteInfoManager) -> None:
    """broker-a (DefaultCluster) and broker-b (Other) both serve TopicA; broker-a also Keep."""
    both = {"TopicA": TopicConfig("TopicA"), "Keep": TopicConfig("Keep")}
    manager.register_broker(reg("broker-a", "127.0.0.1:10911", topics=both))
    manager.register_broker(reg("broker-b", "127.0.0.1:10921", cluster="Other"))


def test_delete_topic_without_cluster_drops_the_whole_route(manager: RouteInfoManager) -> None:
    two_clusters(manager)

    assert manager.delete_topic("TopicA") == ("broker-a", "broker-b")

    with pytest.raises(TopicNotExistError):
        manager.pickup_topic_route_data("TopicA")
    assert manager.get_all_topic_list() == ["Keep"]
    assert manager.get_all_cluster_info().cluster_addr_table == {
        "DefaultCluster": ("broker-a",),
        "Other": ("broker-b",),
    }


def test_delete_topic_of_a_cluster_drops_only_its_brokers_queue_data(manager: RouteInfoManager) -> None:
    two_clusters(manager)

    assert manager.delete_topic("TopicA", "DefaultCluster") == ("broker-a",)
    route = manager.pickup_topic_route_data("TopicA")
    assert [q.broker_name for q in route.queue_datas] == ["broker-b"]
    assert [b.broker_name for b in route.broker_datas] == ["broker-b"]

    assert manager.delete_topic("TopicA", "Other") == ("broker-b",)  # the last QueueData: the topic goes
    assert manager.get_all_topic_list() == ["Keep"]


def test_delete_unknown_topic_or_cluster_changes_nothing(manager: RouteInfoManager) -> None:
    two_clusters(manager)

    assert manager.delete_topic("Nope") == ()
    assert manager.delete_topic("Nope", "DefaultCluster") == ()
    assert manager.delete_topic("TopicA", "NoSuchCluster") == ()
    assert manager.delete_topic("TopicA", "") == ("broker-a", "broker-b")  # "" is no cluster
    assert manager.get_all_topic_list() == ["Keep"]


def test_deleted_topic_comes_back_only_when_a_broker_registers_it_again(manager: RouteInfoManager) -> None:
    manager.register_broker(reg(topics={"TopicA": TopicConfig("TopicA"), "Gone": TopicConfig("Gone")}))
    manager.delete_topic("TopicA")

    manager.register_broker(reg(topics={"Gone": TopicConfig("Gone")}))  # same DataVersion, without TopicA
    assert manager.get_all_topic_list() == ["Gone"]
    manager.register_broker(reg(topics={"TopicA": TopicConfig("TopicA", 2, 2)}))  # same DataVersion, with it
    assert manager.pickup_topic_route_data("TopicA").queue_datas == (QueueData("broker-a", 2, 2, 6),)


def test_registration_without_a_topic_keeps_its_route(manager: RouteInfoManager) -> None:
    # RocketMQ's namesrvConfig.deleteTopicWithBrokerRegistration is false by default: only a delete drops it.
    manager.register_broker(reg(topics={"TopicA": TopicConfig("TopicA"), "Gone": TopicConfig("Gone")}))
    manager.register_broker(reg(topics={"TopicA": TopicConfig("TopicA")}, version=DataVersion(0, 2, 2)))
    assert manager.get_all_topic_list() == ["Gone", "TopicA"]


@pytest.mark.parametrize(
    ("topic", "cluster", "fragment"),
    [
        ("", None, "The specified topic is blank."),
        ("bad topic", None, "contains illegal characters"),
        ("T" * 128, "DefaultCluster", "longer than topic max length"),
        ("TopicA", "bad cluster", "clusterName contains whitespace"),
    ],
)
def test_delete_topic_refuses_bad_names_and_changes_nothing(
    manager: RouteInfoManager, topic: str, cluster: str | None, fragment: str
) -> None:
    manager.register_broker(reg())
    with pytest.raises(InvalidParameterError) as info:
        manager.delete_topic(topic, cluster)
    assert fragment in info.value.remark
    assert manager.get_all_topic_list() == ["TopicA"]
