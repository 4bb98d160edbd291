"""POP broker calls by address: pop, ack (one or many handles), change of invisible time.

A client adapter like mq_client.broker_client (the only kind of mq_client module that touches generated protobuf
types): it translates with mq_common.protocol.convert, nothing more. Used by mq_client.simple_consumer (and by
anything else that pops: the v2 gateway). Runs on the caller's asyncio loop (channels belong to the loop that
created them).

Error mapping as in mq_client.broker_client: a gRPC status -> mq_common.grpc_errors.transport_error
(RemotingTimeoutError, InvalidParameterError, RemotingError); a business code that is an error ->
mq_common.errors.error_for_code(code, remark, broker_name), raised (see each method).
Mirrors MQClientAPIImpl#popMessageAsync, #ackMessageAsync / #batchAckMessageAsync, #changeInvisibleTimeAsync.
"""

from __future__ import annotations

from mq.broker.v1 import broker_pb2_grpc
from mq_common.channels import DEFAULT_RPC_TIMEOUT_MS, ChannelPool, StubCache
from mq_common.channels import seconds as _seconds
from mq_common.errors import error_for_code
from mq_common.grpc_errors import invoke as _invoke
from mq_common.protocol import (
    AckMessageRequestHeader,
    AckMessageResponseHeader,
    ChangeInvisibleTimeRequestHeader,
    ChangeInvisibleTimeResponseHeader,
    PopMessageRequestHeader,
    PopResult,
    pop_result_of,
)
from mq_common.protocol.convert import (
    ack_request_to_proto,
    ack_response_from_proto,
    change_invisible_request_to_proto,
    change_invisible_response_from_proto,
    pop_request_to_proto,
    pop_response_from_proto,
)
from mq_common.response_code import ResponseCode

__all__ = ["PopBrokerCalls"]


class PopBrokerCalls:
    """The POP RPCs of the Broker service, one method each; stubs cached per channel of ``pool``."""

    def __init__(self, pool: ChannelPool) -> None:
        self._stubs: StubCache[broker_pb2_grpc.BrokerAsyncStub] = StubCache(pool, broker_pb2_grpc.BrokerStub)

    def _stub(self, addr: str) -> broker_pb2_grpc.BrokerAsyncStub:
        return self._stubs.get(addr)

    async def pop_message(
        self,
        addr: str,
        request: PopMessageRequestHeader,
        timeout_ms: int = DEFAULT_RPC_TIMEOUT_MS,
        broker_name: str = "",
    ) -> PopResult:
        """POP_MESSAGE. The call's deadline is ``timeout_ms`` plus the request's poll time (the broker holds the
        call that long when nothing is there). Returns a PopResult (FOUND, POLLING_NOT_FOUND, POLLING_FULL);
        raises error_for_code(...) for a refusal (e.g. INVALID_PARAMETER 29, SUBSCRIPTION_GROUP_NOT_EXIST 26),
        MQClientError (SYSTEM_ERROR) for records that do not decode, and transport errors."""
        deadline_ms = timeout_ms + request.poll_time_ms
        call = self._stub(addr).PopMessage(pop_request_to_proto(request), timeout=_seconds(deadline_ms))
        return pop_result_of(pop_response_from_proto(await _invoke(call, addr)), broker_name)

    async def ack_message(
        self,
        addr: str,
        request: AckMessageRequestHeader,
        timeout_ms: int = DEFAULT_RPC_TIMEOUT_MS,
        broker_name: str = "",
    ) -> AckMessageResponseHeader:
        """ACK_MESSAGE / BATCH_ACK_MESSAGE: one code per handle in the answer (a refused handle is not raised).
        Raises error_for_code(...) for a request-level refusal (no per-handle codes: TOPIC_NOT_EXIST 17,
        INVALID_PARAMETER 29, ...) and transport errors."""
        call = self._stub(addr).AckMessage(ack_request_to_proto(request), timeout=_seconds(timeout_ms))
        answer = ack_response_from_proto(await _invoke(call, addr))
        if answer.code != ResponseCode.SUCCESS and len(answer.codes) != len(request.receipt_handles):
            raise error_for_code(answer.code, answer.remark, broker_name)
        return answer

    async def change_invisible_time(
        self,
        addr: str,
        request: ChangeInvisibleTimeRequestHeader,
        timeout_ms: int = DEFAULT_RPC_TIMEOUT_MS,
        broker_name: str = "",
    ) -> ChangeInvisibleTimeResponseHeader:
        """CHANGE_MESSAGE_INVISIBLETIME: the answer with the new receipt handle. Raises error_for_code(...) for a
        refusal (NO_MESSAGE 208 / INVALID_PARAMETER 29 for a handle not in flight or invalid) and transport
        errors."""
        call = self._stub(addr).ChangeInvisibleTime(
            change_invisible_request_to_proto(request), timeout=_seconds(timeout_ms)
        )
        answer = change_invisible_response_from_proto(await _invoke(call, addr))
        if answer.code != ResponseCode.SUCCESS:
            raise error_for_code(answer.code, answer.remark, broker_name)
        return answer
