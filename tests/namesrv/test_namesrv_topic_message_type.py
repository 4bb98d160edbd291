"""The name server keeps each broker group's topic message type (its message.type attribute) in the route table and
answers it in the route; a new data version with another type replaces it."""

from __future__ import annotations

from mq_common.protocol import BrokerRegistration, DataVersion, TopicConfig
from mq_namesrv.route_info_manager import RouteInfoManager


def registration(broker_name: str, addr: str, attributes: dict[str, str], counter: int) -> BrokerRegistration:
    return BrokerRegistration(
        cluster_name="DefaultCluster",
        broker_name=broker_name,
        broker_id=0,
        broker_addr=addr,
        topic_configs={"Typed": TopicConfig("Typed", 2, 2, attributes=attributes)},
        data_version=DataVersion(0, counter, counter),
    )


def test_route_carries_and_follows_the_message_type() -> None:
    manager = RouteInfoManager(lambda: 1_000, broker_channel_expired_ms=120_000)
    manager.register_broker(registration("broker-a", "127.0.0.1:10911", {"message.type": "DELAY"}, 1))
    manager.register_broker(registration("broker-b", "127.0.0.1:10921", {}, 1))
    route = manager.pickup_topic_route_data("Typed")
    assert [(q.broker_name, q.message_type) for q in route.queue_datas] == [("broker-a", "DELAY"), ("broker-b", "")]
    assert route.topic_message_type().value == "DELAY"
    # the same version again changes nothing; a new version with the type removed does
    manager.register_broker(registration("broker-a", "127.0.0.1:10911", {"message.type": "FIFO"}, 1))
    assert manager.pickup_topic_route_data("Typed").queue_datas[0].message_type == "DELAY"
    manager.register_broker(registration("broker-a", "127.0.0.1:10911", {"message.type": "MIXED"}, 2))
    assert manager.pickup_topic_route_data("Typed").queue_datas[0].message_type == "MIXED"
