"""A slave's calls to its master for SlaveSynchronize: the GET_ALL_* admin RPCs of mq.broker.v1.Broker, and
ListUser / ListAcl for the master's users and ACLs.

Mirrors org.apache.rocketmq.broker.out.BrokerOuterAPI (#getAllTopicConfig, #getAllConsumerOffset,
#getAllDelayOffset, #getAllSubscriptionGroupConfig); :meth:`MasterCalls.get_all_users` and
:meth:`MasterCalls.get_all_acls` go beyond RocketMQ (see mq_broker.ha.slave_synchronize). A client adapter: it
alone touches the protobuf types and translates them with mq_common.protocol.convert / auth_convert. Calls go
through the broker's ChannelPool (its TLS client certificate is the component identity the master checks) and
carry the broker's inner credentials when given (signed requests). Event loop. Every method raises MQError: the
master's code (error_for_code, e.g. NO_PERMISSION 16) or a transport error (RemotingError, RemotingTimeoutError).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from mq.broker.v1 import broker_pb2, broker_pb2_grpc
from mq_common.auth.model import Acl, User
from mq_common.channels import ChannelPool, seconds
from mq_common.errors import error_for_code
from mq_common.grpc_errors import invoke
from mq_common.protocol import ConsumerQueueOffset, DataVersion, SubscriptionGroupConfig, TopicConfig
from mq_common.protocol.auth_convert import acl_from_proto, user_from_proto
from mq_common.protocol.convert import (
    consumer_queue_offset_from_proto,
    data_version_from_proto,
    subscription_group_config_from_proto,
    topic_config_from_proto,
)
from mq_common.response_code import ResponseCode

MASTER_CALL_TIMEOUT_MS: Final = 3_000
"""Deadline of one GET_ALL_* call (BrokerOuterAPI's 3 s)."""


@dataclass(frozen=True, slots=True)
class TopicConfigWrapper:
    """TopicConfigSerializeWrapper: a master's topic table and its data version."""

    topic_config_table: dict[str, TopicConfig]
    data_version: DataVersion


@dataclass(frozen=True, slots=True)
class SubscriptionGroupWrapper:
    """SubscriptionGroupWrapper: a master's subscription groups and their data version."""

    configs: tuple[SubscriptionGroupConfig, ...]
    data_version: DataVersion


@dataclass(frozen=True, slots=True)
class ConsumerOffsetWrapper:
    """ConsumerOffsetSerializeWrapper: a master's committed offsets and their data version."""

    offsets: tuple[ConsumerQueueOffset, ...]
    data_version: DataVersion


def _check(code: int, remark: str, addr: str) -> None:
    if code != ResponseCode.SUCCESS:
        raise error_for_code(code, remark, addr)


class MasterCalls:
    """GET_ALL_* calls to a master at ``addr`` (``host:port``), each bounded by ``timeout_ms``."""

    def __init__(self, pool: ChannelPool, timeout_ms: int) -> None:
        assert timeout_ms > 0
        self._pool = pool
        self._timeout_s = seconds(timeout_ms)

    def _stub(self, addr: str) -> broker_pb2_grpc.BrokerAsyncStub:
        return broker_pb2_grpc.BrokerStub(self._pool.get(addr))

    async def get_all_topic_config(self, addr: str) -> TopicConfigWrapper:
        call = self._stub(addr).GetAllTopicConfig(broker_pb2.GetAllTopicConfigRequest(), timeout=self._timeout_s)
        resp = await invoke(call, addr)
        _check(resp.code, resp.remark, addr)
        table = {c.topic_name: c for c in map(topic_config_from_proto, resp.topic_configs)}
        return TopicConfigWrapper(table, data_version_from_proto(resp.data_version))

    async def get_all_subscription_groups(self, addr: str) -> SubscriptionGroupWrapper:
        request = broker_pb2.GetAllSubscriptionGroupsRequest()
        resp = await invoke(self._stub(addr).GetAllSubscriptionGroups(request, timeout=self._timeout_s), addr)
        _check(resp.code, resp.remark, addr)
        configs = tuple(subscription_group_config_from_proto(c) for c in resp.configs)
        return SubscriptionGroupWrapper(configs, data_version_from_proto(resp.data_version))

    async def get_all_consumer_offset(self, addr: str) -> ConsumerOffsetWrapper:
        request = broker_pb2.GetAllConsumerOffsetRequest()
        resp = await invoke(self._stub(addr).GetAllConsumerOffset(request, timeout=self._timeout_s), addr)
        _check(resp.code, resp.remark, addr)
        offsets = tuple(consumer_queue_offset_from_proto(o) for o in resp.offsets)
        return ConsumerOffsetWrapper(offsets, data_version_from_proto(resp.data_version))

    async def get_all_delay_offset(self, addr: str) -> tuple[str, str]:
        """The master's config/delayOffset.json and config/timerCheckpoint.json texts ('' for a missing one)."""
        call = self._stub(addr).GetAllDelayOffset(broker_pb2.GetAllDelayOffsetRequest(), timeout=self._timeout_s)
        resp = await invoke(call, addr)
        _check(resp.code, resp.remark, addr)
        return resp.delay_offset_json, resp.timer_checkpoint_json

    async def get_all_users(self, addr: str) -> tuple[User, ...]:
        """Every user of the master with its password (ListUser without a filter: a master serves passwords to
        components and super users only, and refuses anyone else with NO_PERMISSION 16). Raises ValueError when a
        user comes without its password or is malformed (the text names the user, never a secret)."""
        resp = await invoke(self._stub(addr).ListUser(broker_pb2.ListUserRequest(), timeout=self._timeout_s), addr)
        _check(resp.code, resp.remark, addr)
        return tuple(user_from_proto(u) for u in resp.users)

    async def get_all_acls(self, addr: str) -> tuple[Acl, ...]:
        """Every ACL of the master, whole (ListAcl without filters). Raises ValueError for a malformed ACL."""
        resp = await invoke(self._stub(addr).ListAcl(broker_pb2.ListAclRequest(), timeout=self._timeout_s), addr)
        _check(resp.code, resp.remark, addr)
        return tuple(acl_from_proto(a) for a in resp.acls)
