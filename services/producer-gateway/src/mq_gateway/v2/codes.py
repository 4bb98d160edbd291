"""The one table from RocketMQ ResponseCode (broker / name server / client side) to the v2 ``Code`` the 5.x proxy
answers, and the error type the v2 handlers raise and turn into a ``Status``.

Mirrors org.apache.rocketmq.proxy.grpc.v2.common.ResponseBuilder (its RESPONSE_CODE_MAPPING and buildStatus), the
proxy's SendMessageActivity send-status mapping and its receipt-handle refusals, extended with the codes the proxy
leaves to INTERNAL_SERVER_ERROR where the v2 enum has a truer one (a client's retry logic reads the code). Pure
functions; any thread.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final, TypeAlias

from apache.rocketmq.v2 import definition_pb2
from mq_common.errors import MQError, RemotingTimeoutError, internal_error_remark
from mq_common.logging import get_logger
from mq_common.response_code import ResponseCode

log = get_logger("mq_gateway.v2.codes")

Code = definition_pb2.Code
_OK_CODE: Final = Code.OK  # read once: the enum wrapper's attribute lookup costs a microsecond per call
# The type of one v2 Code value (an int at run time).
V2Code: TypeAlias = definition_pb2.Code.ValueType

# ResponseCode -> v2 Code. A code missing here answers INTERNAL_SERVER_ERROR, as the proxy does.
RESPONSE_CODE_TO_V2: Final[Mapping[int, V2Code]] = MappingProxyType(
    {
        ResponseCode.SUCCESS: Code.OK,
        ResponseCode.SYSTEM_ERROR: Code.INTERNAL_SERVER_ERROR,
        ResponseCode.SYSTEM_BUSY: Code.TOO_MANY_REQUESTS,
        ResponseCode.REQUEST_CODE_NOT_SUPPORTED: Code.NOT_IMPLEMENTED,
        ResponseCode.TRANSACTION_FAILED: Code.INTERNAL_SERVER_ERROR,
        ResponseCode.FLUSH_DISK_TIMEOUT: Code.MASTER_PERSISTENCE_TIMEOUT,
        ResponseCode.SLAVE_NOT_AVAILABLE: Code.HA_NOT_AVAILABLE,
        ResponseCode.FLUSH_SLAVE_TIMEOUT: Code.SLAVE_PERSISTENCE_TIMEOUT,
        ResponseCode.MESSAGE_ILLEGAL: Code.BAD_REQUEST,
        ResponseCode.SERVICE_NOT_AVAILABLE: Code.INTERNAL_SERVER_ERROR,
        ResponseCode.VERSION_NOT_SUPPORTED: Code.VERSION_UNSUPPORTED,
        ResponseCode.NO_PERMISSION: Code.FORBIDDEN,
        ResponseCode.TOPIC_NOT_EXIST: Code.TOPIC_NOT_FOUND,
        ResponseCode.TOPIC_EXIST_ALREADY: Code.BAD_REQUEST,
        ResponseCode.PULL_NOT_FOUND: Code.MESSAGE_NOT_FOUND,
        ResponseCode.PULL_RETRY_IMMEDIATELY: Code.MESSAGE_NOT_FOUND,
        ResponseCode.PULL_OFFSET_MOVED: Code.ILLEGAL_OFFSET,
        ResponseCode.QUERY_NOT_FOUND: Code.MESSAGE_NOT_FOUND,
        ResponseCode.SUBSCRIPTION_PARSE_FAILED: Code.ILLEGAL_FILTER_EXPRESSION,
        ResponseCode.SUBSCRIPTION_NOT_EXIST: Code.CONSUMER_GROUP_NOT_FOUND,
        ResponseCode.SUBSCRIPTION_NOT_LATEST: Code.BAD_REQUEST,
        ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST: Code.CONSUMER_GROUP_NOT_FOUND,
        ResponseCode.INVALID_PARAMETER: Code.BAD_REQUEST,
        ResponseCode.NO_BUYER_ID: Code.FORBIDDEN,
        ResponseCode.NOT_IN_CURRENT_UNIT: Code.FORBIDDEN,
        ResponseCode.CONSUMER_NOT_ONLINE: Code.NOT_FOUND,
        ResponseCode.CONSUME_MSG_TIMEOUT: Code.PROXY_TIMEOUT,
        ResponseCode.NO_MESSAGE: Code.MESSAGE_NOT_FOUND,
        ResponseCode.POLLING_FULL: Code.TOO_MANY_REQUESTS,
        ResponseCode.POLLING_TIMEOUT: Code.MESSAGE_NOT_FOUND,
        ResponseCode.BROKER_NOT_EXIST: Code.NOT_FOUND,
        ResponseCode.FLOW_CONTROL: Code.TOO_MANY_REQUESTS,
        ResponseCode.ILLEGAL_OPERATION: Code.FORBIDDEN,
        ResponseCode.RPC_UNKNOWN: Code.INTERNAL_SERVER_ERROR,
        ResponseCode.RPC_ADDR_IS_NULL: Code.INTERNAL_SERVER_ERROR,
        ResponseCode.RPC_SEND_TO_CHANNEL_FAILED: Code.INTERNAL_SERVER_ERROR,
        ResponseCode.RPC_TIME_OUT: Code.PROXY_TIMEOUT,
    }
)

# Where the RPC carries a receipt handle (Ack, ChangeInvisibleDuration, ForwardMessageToDeadLetterQueue), the
# broker's "not yours / not in flight any more" codes mean the handle is spent: the proxy answers
# INVALID_RECEIPT_HANDLE, and push consumers then stop retrying that ack.
RECEIPT_HANDLE_OVERRIDES: Final[Mapping[int, V2Code]] = MappingProxyType(
    {
        ResponseCode.INVALID_PARAMETER: Code.INVALID_RECEIPT_HANDLE,
        ResponseCode.NO_MESSAGE: Code.INVALID_RECEIPT_HANDLE,
    }
)


def v2_code_for(response_code: int, overrides: Mapping[int, V2Code] | None = None) -> V2Code:
    """The v2 ``Code`` for a RocketMQ ``response_code``: ``overrides`` first, then RESPONSE_CODE_TO_V2, else
    INTERNAL_SERVER_ERROR (50001)."""
    if overrides is not None and response_code in overrides:
        return overrides[response_code]
    return RESPONSE_CODE_TO_V2.get(response_code, Code.INTERNAL_SERVER_ERROR)


class V2Error(Exception):
    """A refusal with a v2 ``code`` and a ``message`` for the client; handlers raise it and answer it as the
    response's ``Status`` (gRPC OK). Mirrors org.apache.rocketmq.proxy.grpc.v2.common.GrpcProxyException."""

    def __init__(self, code: V2Code, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def status_of(exc: BaseException, overrides: Mapping[int, V2Code] | None = None) -> definition_pb2.Status:
    """The v2 Status for an exception a handler met: V2Error as it is; MQError by its ``code`` through
    :func:`v2_code_for` (RemotingTimeoutError -> PROXY_TIMEOUT 50400); anything else INTERNAL_SERVER_ERROR with a
    message in words (the exception itself is logged, never answered).
    Mirrors ResponseBuilder#buildStatus(Throwable)."""
    if isinstance(exc, V2Error):
        return definition_pb2.Status(code=exc.code, message=exc.message)
    if isinstance(exc, RemotingTimeoutError):
        return definition_pb2.Status(code=Code.PROXY_TIMEOUT, message=exc.remark)
    if isinstance(exc, MQError):
        return definition_pb2.Status(code=v2_code_for(exc.code, overrides), message=exc.remark or str(exc.code))
    log.error("v2_request_failed", exc_info=exc)
    return definition_pb2.Status(code=Code.INTERNAL_SERVER_ERROR, message=internal_error_remark("the request"))


def ok_status() -> definition_pb2.Status:
    """``Status{code: OK, message: "OK"}`` (a new message: the caller may change it)."""
    return definition_pb2.Status(code=_OK_CODE, message="OK")
