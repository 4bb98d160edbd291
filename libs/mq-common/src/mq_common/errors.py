"""Typed errors and the one table that maps response codes to them.

Mirrors org.apache.rocketmq.client.exception.{MQClientException, MQBrokerException, RemotingException}.
Retry logic reads only the attributes of these classes (``code``, ``retriable``), never message text.
"""

from __future__ import annotations

from mq_common.response_code import ResponseCode

# Codes after which DefaultMQProducerImpl#sendDefaultImpl tries again (its MQBrokerException case),
# plus SYSTEM_BUSY, which RocketMQ 5 also retries.
RETRIABLE_BROKER_CODES: frozenset[int] = frozenset(
    {
        ResponseCode.TOPIC_NOT_EXIST,
        ResponseCode.SERVICE_NOT_AVAILABLE,
        ResponseCode.SYSTEM_ERROR,
        ResponseCode.NO_PERMISSION,
        ResponseCode.NO_BUYER_ID,
        ResponseCode.NOT_IN_CURRENT_UNIT,
        ResponseCode.SYSTEM_BUSY,
    }
)


class MQError(Exception):
    """Base of every PyRocketMQ error: a response ``code`` and a human ``remark``."""

    code: int = ResponseCode.SYSTEM_ERROR
    retriable: bool = False

    def __init__(self, remark: str, code: int | None = None) -> None:
        super().__init__(remark)
        if code is not None:
            self.code = code
        self.remark = remark

    def __str__(self) -> str:
        return f"CODE: {self.code} ({ResponseCode.name_of(self.code)}) DESC: {self.remark}"


class MQClientError(MQError):
    """A failure found on the client side (validation, no route, budget spent). Mirrors MQClientException."""

    retriable = False


class MQBrokerError(MQError):
    """A broker answered with a non-success code. Mirrors MQBrokerException.

    ``retriable`` is true for the codes in :data:`RETRIABLE_BROKER_CODES`.
    """

    def __init__(self, remark: str, code: int, broker_name: str = "") -> None:
        super().__init__(remark, code)
        self.broker_name = broker_name
        self.retriable = code in RETRIABLE_BROKER_CODES


class RemotingError(MQError):
    """Transport failure: connection refused, reset or deadline. Always retriable. Mirrors RemotingException."""

    code = ResponseCode.RPC_SEND_TO_CHANNEL_FAILED
    retriable = True


class RemotingTimeoutError(RemotingError):
    """The call's deadline passed. Mirrors RemotingTimeoutException."""

    code = ResponseCode.RPC_TIME_OUT


class MessageIllegalError(MQClientError):
    """Topic or body refused by validation (MESSAGE_ILLEGAL, 13). Mirrors Validators#checkMessage."""

    code = ResponseCode.MESSAGE_ILLEGAL


class TopicNotExistError(MQClientError):
    """No route for the topic (TOPIC_NOT_EXIST, 17)."""

    code = ResponseCode.TOPIC_NOT_EXIST


class ServiceNotAvailableError(MQError):
    """The store or service refuses work (SERVICE_NOT_AVAILABLE, 14): disk full, read-only, shutting down."""

    code = ResponseCode.SERVICE_NOT_AVAILABLE
    retriable = True


class NoPermissionError(MQError):
    """The topic or broker is not writable/readable (NO_PERMISSION, 16)."""

    code = ResponseCode.NO_PERMISSION


class InvalidParameterError(MQError):
    """A request field is out of range (INVALID_PARAMETER, 29)."""

    code = ResponseCode.INVALID_PARAMETER


# The one code -> class table. Codes missing here map to MQBrokerError.
_ERROR_BY_CODE: dict[int, type[MQError]] = {
    ResponseCode.MESSAGE_ILLEGAL: MessageIllegalError,
    ResponseCode.SERVICE_NOT_AVAILABLE: ServiceNotAvailableError,
    ResponseCode.NO_PERMISSION: NoPermissionError,
    ResponseCode.INVALID_PARAMETER: InvalidParameterError,
    ResponseCode.TOPIC_NOT_EXIST: TopicNotExistError,
    ResponseCode.RPC_TIME_OUT: RemotingTimeoutError,
    ResponseCode.RPC_SEND_TO_CHANNEL_FAILED: RemotingError,
}


def error_for_code(code: int, remark: str, broker_name: str = "") -> MQError:
    """Build the typed error for a response ``code`` received from a broker or name server.

    Broker answers become :class:`MQBrokerError` (so ``retriable`` follows RETRIABLE_BROKER_CODES) unless
    the code is a transport code.
    """
    cls = _ERROR_BY_CODE.get(code)
    if cls is not None and issubclass(cls, RemotingError):
        return cls(remark)
    return MQBrokerError(remark, code, broker_name)


def internal_error_remark(rpc: str) -> str:
    """The remark (or v2 Status message) of an unexpected failure in ``rpc``: what failed, in words; never the
    exception's type, text or traceback, which go to the service's log instead."""
    return f"{rpc} failed on an internal error; the service logged the cause"
