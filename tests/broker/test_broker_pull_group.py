"""The pull's subscription group checks through the in-process gRPC broker (PullMessageProcessor#processRequest):
an unknown group is refused when auto-creation is off and created when it is on, a group with consumeEnable false
is refused, and the group checks come before the topic checks, as in RocketMQ."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from broker_grpc_testkit import RunningBrokers, send_request, stream_send
from mq.broker.v1 import broker_pb2, broker_pb2_grpc
from mq_client.broker_client import BrokerClient
from mq_common.channels import ChannelPool
from mq_common.errors import MQBrokerError
from mq_common.protocol import SubscriptionGroupConfig
from mq_common.response_code import ResponseCode

if TYPE_CHECKING:
    Stub = broker_pb2_grpc.BrokerAsyncStub


def pull(group: str, topic: str = "Grouped") -> broker_pb2.PullMessageRequest:
    return broker_pb2.PullMessageRequest(consumer_group=group, topic=topic, queue_id=0, queue_offset=0, max_msg_nums=8)


async def test_unknown_group_is_refused_without_auto_create(brokers: RunningBrokers, tmp_path: Path) -> None:
    controller, stub = await brokers.start(tmp_path / "store", auto_create_subscription_group=False)
    assert (await stream_send(stub, send_request("Grouped", b"x", 0))).code == ResponseCode.SUCCESS
    refused = await stub.PullMessage(pull("NoSuchGroup"))
    assert refused.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
    assert refused.remark.startswith("subscription group [NoSuchGroup] does not exist, ")
    assert (await stub.PullMessage(pull("NoSuchGroup", topic="NoSuchTopic"))).code == (
        ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
    ), "the group is checked before the topic"
    assert controller.subscription_groups is not None
    assert not controller.subscription_groups.contains("NoSuchGroup")

    controller.subscription_groups.update_subscription_group_config(SubscriptionGroupConfig("Created"))
    assert (await stub.PullMessage(pull("Created"))).code == ResponseCode.SUCCESS
    blank = await stub.PullMessage(pull(""))
    assert blank.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST


async def test_unknown_group_is_created_with_auto_create(brokers: RunningBrokers, tmp_path: Path) -> None:
    controller, stub = await brokers.start(tmp_path / "store")
    assert (await stream_send(stub, send_request("Grouped", b"x", 0))).code == ResponseCode.SUCCESS
    assert (await stub.PullMessage(pull("FreshGroup"))).code == ResponseCode.SUCCESS
    assert controller.subscription_groups is not None
    assert controller.subscription_groups.contains("FreshGroup")
    illegal = await stub.PullMessage(pull("bad group!"))
    assert illegal.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, "an illegal name is never auto-created"


async def test_consume_disabled_group_is_refused(brokers: RunningBrokers, tmp_path: Path) -> None:
    controller, stub = await brokers.start(tmp_path / "store")
    assert (await stream_send(stub, send_request("Grouped", b"x", 0))).code == ResponseCode.SUCCESS
    assert controller.subscription_groups is not None
    controller.subscription_groups.update_subscription_group_config(
        SubscriptionGroupConfig("Paused", consume_enable=False)
    )
    refused = await stub.PullMessage(pull("Paused"))
    assert (refused.code, refused.remark) == (ResponseCode.NO_PERMISSION, "subscription group no permission, Paused")

    pool = ChannelPool()
    try:
        client = BrokerClient(pool)
        with pytest.raises(MQBrokerError) as paused:
            await client.pull_message(controller.broker_addr, "Grouped", 0, 0, 8, consumer_group="Paused")
        assert paused.value.code == ResponseCode.NO_PERMISSION
        with pytest.raises(MQBrokerError) as unknown_topic:
            await client.pull_message(controller.broker_addr, "NoSuchTopic", 0, 0, 8, consumer_group="Other")
        assert unknown_topic.value.code == ResponseCode.TOPIC_NOT_EXIST
    finally:
        await pool.close()


async def test_default_group_of_the_client(brokers: RunningBrokers, tmp_path: Path) -> None:
    """BrokerClient.pull_message without a group pulls as DEFAULT_CONSUMER (auto-created)."""
    controller, stub = await brokers.start(tmp_path / "store")
    assert (await stream_send(stub, send_request("Grouped", b"x", 0))).code == ResponseCode.SUCCESS
    pool = ChannelPool()
    try:
        result = await BrokerClient(pool).pull_message(controller.broker_addr, "Grouped", 0, 0, 8)
        assert [m.body for m in result.messages] == [b"x"]
    finally:
        await pool.close()
    assert controller.subscription_groups is not None
    assert controller.subscription_groups.contains("DEFAULT_CONSUMER")


async def test_group_checks_keep_the_broker_permission_first(brokers: RunningBrokers, tmp_path: Path) -> None:
    _, stub = await brokers.start(tmp_path / "store", broker_permission=2, auto_create_subscription_group=False)
    refused = await stub.PullMessage(pull("NoSuchGroup"))
    assert refused.code == ResponseCode.NO_PERMISSION
    assert "pulling message is forbidden" in refused.remark
