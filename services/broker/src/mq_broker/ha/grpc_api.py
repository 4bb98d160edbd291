"""gRPC face of what a master serves its slaves' SlaveSynchronize: GetAllTopicConfig, GetAllConsumerOffset and
GetAllDelayOffset (GetAllSubscriptionGroups is the consumer side's), and of GetBrokerRuntimeInfo (the runtime KV
table of mq_broker.ha.runtime_info, mqadmin clusterList's source). A mixin of mq_broker.grpc_api.BrokerServicer
that translates the tables of :class:`~mq_broker.ha.slave_synchronize.MetadataTables` and the runtime table to
mq.broker.v1, nothing else.

Mirrors AdminBrokerProcessor#getAllTopicConfig, #getAllConsumerOffset, #getAllDelayOffset and
#getBrokerRuntimeInfo. Each is an admin RPC:
with auth on it needs a super user or a component (a slave presents the broker's component certificate or signs
with the inner credentials), else NO_PERMISSION 16. Without tables (or without a runtime table):
REQUEST_CODE_NOT_SUPPORTED. Handlers run on
the service's asyncio loop (the delay offset file is read in a worker thread) and never raise into gRPC.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import grpc
from mq.broker.v1 import broker_pb2
from mq_common.errors import MQError
from mq_common.protocol.convert import consumer_queue_offset_to_proto, data_version_to_proto, topic_config_to_proto
from mq_common.response_code import ResponseCode

from mq_broker.auth.grpc_api import AuthServicerMixin
from mq_broker.ha.delay_offset_file import read_delay_offset_json
from mq_broker.ha.slave_synchronize import MetadataTables
from mq_broker.timer.timer_message_store import TIMER_CHECKPOINT_FILE_NAME

_Context = grpc.aio.ServicerContext[object, object]


class MetadataServicerMixin(AuthServicerMixin):
    """The GET_ALL_* handlers over ``_metadata_tables`` (set by the servicer; None: not served)."""

    _metadata_tables: MetadataTables | None
    _runtime_info: Callable[[], dict[str, str]] | None

    def _tables(self) -> MetadataTables:
        if self._metadata_tables is None:
            raise MQError("this broker serves no metadata tables", ResponseCode.REQUEST_CODE_NOT_SUPPORTED)
        return self._metadata_tables

    async def GetAllTopicConfig(
        self, request: broker_pb2.GetAllTopicConfigRequest, context: _Context
    ) -> broker_pb2.GetAllTopicConfigResponse:
        async def handle() -> broker_pb2.GetAllTopicConfigResponse:
            self._admin_caller(context, "GetAllTopicConfig")
            topics = self._tables().topics
            return broker_pb2.GetAllTopicConfigResponse(
                code=ResponseCode.SUCCESS,
                topic_configs=[topic_config_to_proto(c) for _, c in sorted(topics.topic_config_table.items())],
                data_version=data_version_to_proto(topics.data_version),
            )

        return await self._run("GetAllTopicConfig", broker_pb2.GetAllTopicConfigResponse, handle)

    async def GetAllConsumerOffset(
        self, request: broker_pb2.GetAllConsumerOffsetRequest, context: _Context
    ) -> broker_pb2.GetAllConsumerOffsetResponse:
        async def handle() -> broker_pb2.GetAllConsumerOffsetResponse:
            self._admin_caller(context, "GetAllConsumerOffset")
            offsets = self._tables().offsets
            return broker_pb2.GetAllConsumerOffsetResponse(
                code=ResponseCode.SUCCESS,
                offsets=[consumer_queue_offset_to_proto(o) for o in offsets.all_offsets()],
                data_version=data_version_to_proto(offsets.data_version),
            )

        return await self._run("GetAllConsumerOffset", broker_pb2.GetAllConsumerOffsetResponse, handle)

    async def GetAllDelayOffset(
        self, request: broker_pb2.GetAllDelayOffsetRequest, context: _Context
    ) -> broker_pb2.GetAllDelayOffsetResponse:
        async def handle() -> broker_pb2.GetAllDelayOffsetResponse:
            self._admin_caller(context, "GetAllDelayOffset")
            config_dir = self._tables().config_dir
            text = await asyncio.to_thread(read_delay_offset_json, config_dir)
            timer = await asyncio.to_thread(read_delay_offset_json, config_dir, TIMER_CHECKPOINT_FILE_NAME)
            return broker_pb2.GetAllDelayOffsetResponse(
                code=ResponseCode.SUCCESS, delay_offset_json=text, timer_checkpoint_json=timer
            )

        return await self._run("GetAllDelayOffset", broker_pb2.GetAllDelayOffsetResponse, handle)

    async def GetBrokerRuntimeInfo(
        self, request: broker_pb2.GetBrokerRuntimeInfoRequest, context: _Context
    ) -> broker_pb2.GetBrokerRuntimeInfoResponse:
        async def handle() -> broker_pb2.GetBrokerRuntimeInfoResponse:
            self._admin_caller(context, "GetBrokerRuntimeInfo")
            if self._runtime_info is None:
                raise MQError("this broker serves no runtime info", ResponseCode.REQUEST_CODE_NOT_SUPPORTED)
            return broker_pb2.GetBrokerRuntimeInfoResponse(code=ResponseCode.SUCCESS, table=self._runtime_info())

        return await self._run("GetBrokerRuntimeInfo", broker_pb2.GetBrokerRuntimeInfoResponse, handle)
