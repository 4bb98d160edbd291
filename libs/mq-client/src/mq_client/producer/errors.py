"""Producer-side errors that are not in mq_common.errors.

Mirrors the MQClientException cases of DefaultMQProducerImpl (state not OK, broker not exist, "Send [n]
times, still failed"). All subclass :class:`mq_common.errors.MQClientError`, so callers map them to a
response code through ``code`` like every other MQError.
"""

from __future__ import annotations

from collections.abc import Sequence

from mq_common.errors import MQClientError, MQError
from mq_common.response_code import ResponseCode


class ProducerStateError(MQClientError):
    """The producer is not RUNNING (never started, start failed, or shut down): SERVICE_NOT_AVAILABLE (14).

    Mirrors DefaultMQProducerImpl#makeSureStateOK / #start's "The producer service state not OK".
    """

    code = ResponseCode.SERVICE_NOT_AVAILABLE


class BrokerNotFoundError(MQClientError):
    """No master address is known for a selected broker: BROKER_NOT_EXIST (211). Retried on another broker.

    Mirrors sendKernelImpl's ``MQClientException("The broker[...] not exist")``, which sendDefaultImpl retries.
    """

    code = ResponseCode.BROKER_NOT_EXIST
    retriable = True


class SendFailedError(MQClientError):
    """Every attempt of a send failed, or the send timeout budget ran out.

    ``code`` is the last attempt's error code (RPC_TIME_OUT, -1006, when the budget was spent before the next
    attempt); ``cause`` is that last error (None if no attempt was made). The remark follows RocketMQ:
    ``Send [2] times, still failed, cost [3004]ms, Topic: T, BrokersSent: [broker-a, broker-b]``.
    Mirrors the MQClientException thrown at the end of DefaultMQProducerImpl#sendDefaultImpl.
    """

    def __init__(
        self,
        *,
        times: int,
        cost_ms: int,
        topic: str,
        brokers_sent: Sequence[str],
        cause: MQError | None,
        budget_spent: bool,
    ) -> None:
        remark = (
            f"Send [{times}] times, still failed, cost [{cost_ms}]ms, Topic: {topic}, "
            f"BrokersSent: [{', '.join(brokers_sent)}]"
        )
        if budget_spent:
            remark += "; send timeout budget spent"
        if cause is not None:
            remark += f"; last error: {cause}"
        if budget_spent or cause is None:
            code: int = ResponseCode.RPC_TIME_OUT
        else:
            code = cause.code
        super().__init__(remark, code)
        self.times = times
        self.cost_ms = cost_ms
        self.topic = topic
        self.brokers_sent = tuple(brokers_sent)
        self.cause = cause
        self.budget_spent = budget_spent
        self.broker_name = brokers_sent[-1] if brokers_sent else ""


class FlowControlError(MQClientError):
    """The producer's in-flight limits stayed full for the whole wait: FLOW_CONTROL (215). Nothing was sent.

    Mirrors the RemotingTooMuchRequestException of DefaultMQProducerImpl#executeAsyncMessageSend ("send
    message tryAcquire semaphoreAsyncNum timeout"). Not retried.
    """

    code = ResponseCode.FLOW_CONTROL
