"""ConsumerActivity on a cluster whose brokers do not create consumer groups on first use
(MQ_BROKER_AUTO_CREATE_SUBSCRIPTION_GROUP=false): an unknown group is CONSUMER_GROUP_NOT_FOUND 40403 for receive
and the pull API, subscription_group_config raises, and once the group exists its messages are all there."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from apache.rocketmq.v2 import definition_pb2, service_pb2
from mq_client.producer import DefaultMQProducer, ProducerConfig
from mq_common.channels import ChannelPool
from mq_common.errors import MQError
from mq_common.protocol import SubscriptionGroupConfig
from mq_common.response_code import ResponseCode
from mq_gateway.v2.consumer import ConsumerActivity
from mq_local.cluster import LocalCluster
from mq_local.testing import make_topic

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

from v2_consumer_testkit import (  # noqa: E402  (importable only after the path insert)
    CTX,
    ack_request,
    new_activity,
    receive,
    receive_request,
    receive_until,
    resource,
    send_all,
    started_cluster,
    update_group,
)

pytestmark = pytest.mark.integration
Code = definition_pb2.Code
BROKERS = ("broker-a", "broker-b")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    data_dir = tmp_path_factory.mktemp("v2-consumer-no-auto-group")
    with started_cluster(data_dir, MQ_BROKER_AUTO_CREATE_SUBSCRIPTION_GROUP="false") as started:
        yield started


@pytest.fixture
async def activity(cluster: LocalCluster, pool: ChannelPool) -> AsyncIterator[ConsumerActivity]:
    made = new_activity(cluster, pool)
    try:
        yield made
    finally:
        await made.close()


async def test_unknown_group_is_refused_until_it_exists(
    cluster: LocalCluster, pool: ChannelPool, activity: ConsumerActivity, request: pytest.FixtureRequest
) -> None:
    topic = await make_topic(cluster, request.node.name)
    producer = DefaultMQProducer.connect(ProducerConfig(producer_group="v2c_ng_producer"), [cluster.namesrv_addr])
    await producer.start()
    try:
        sent = await send_all(producer, topic, 4)
    finally:
        await producer.shutdown()
    group = "v2c_not_created"
    for broker in BROKERS:
        refused = await receive(activity, receive_request(group, topic, broker_name=broker))
        assert refused.status.code == Code.CONSUMER_GROUP_NOT_FOUND, refused.status
    queue = definition_pb2.MessageQueue(topic=resource(topic), id=0, broker=definition_pb2.Broker(name="broker-a"))
    pull = service_pb2.PullMessageRequest(group=resource(group), message_queue=queue, offset=0, batch_size=4)
    (only,) = [r async for r in activity.pull_message(pull, CTX, 10_000.0)]
    assert only.status.code == Code.CONSUMER_GROUP_NOT_FOUND
    with pytest.raises(MQError) as unknown:
        await activity.subscription_group_config(group, topic=topic)
    assert unknown.value.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST

    await update_group(cluster, pool, topic, SubscriptionGroupConfig(group))
    fresh = new_activity(cluster, pool)
    config = await fresh.subscription_group_config(group, topic=topic)
    assert (config.group_name, config.retry_max_times) == (group, 16)
    requests = [receive_request(group, topic, broker_name=b) for b in BROKERS]
    got = await receive_until(fresh, requests, 4)
    assert {m.system_properties.message_id for m in got} == set(sent)
    assert (await fresh.ack_message(ack_request(group, topic, got), CTX)).status.code == Code.OK
    await fresh.close()
