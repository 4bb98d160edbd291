"""The retry loop of DefaultMQProducerImpl#sendDefaultImpl, shared by single sends and MessageBatch chunks.

Each of at most ``times_total`` attempts picks a queue (avoiding the broker of the previous attempt unless
the caller pins one), stops when the shared budget (sendMsgTimeout) is spent, sends, and tells the fault
strategy the attempt's latency (a retriable failure counts as isolation, as updateFaultItem(..., true)).
Retried: errors :func:`is_retriable` accepts, except a broker's answer when ``retry_broker_errors`` is off
(ASYNC); a stored but not SEND_OK result when ``retry_not_store_ok`` is on
(retryAnotherBrokerWhenNotStoreOK, SYNC only). Runs on the caller's event loop; no state of its own.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol, TypeVar

from mq_common.errors import MQBrokerError, MQError
from mq_common.protocol import MessageQueue

from mq_client.producer.config import ProducerConfig
from mq_client.producer.errors import SendFailedError
from mq_client.producer.fault_strategy import ClockMs
from mq_client.producer.kernel import SendBudget, is_retriable
from mq_client.producer.send_result import CommunicationMode, SendStatus


class _Stored(Protocol):
    @property
    def send_status(self) -> SendStatus: ...


ResultT = TypeVar("ResultT", bound=_Stored)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How many attempts (timesTotal) and which outcomes are tried again on another queue."""

    times_total: int
    retry_response_codes: frozenset[int]
    retry_not_store_ok: bool
    retry_broker_errors: bool = True


def retry_policy(config: ProducerConfig, mode: CommunicationMode) -> RetryPolicy:
    """The policy of ``mode``: timesTotal 1 + retryTimesWhenSendFailed (SYNC), 1 + retryTimesWhenSendAsyncFailed
    (ASYNC, a broker's answer final), 1 (ONEWAY); retryAnotherBrokerWhenNotStoreOK for SYNC only. Callers build it
    once per mode (the config is frozen), not per send."""
    times_total = {
        CommunicationMode.SYNC: config.times_total_sync,
        CommunicationMode.ASYNC: config.times_total_async,
        CommunicationMode.ONEWAY: 1,
    }[mode]
    return RetryPolicy(
        times_total=times_total,
        retry_response_codes=config.retry_response_codes,
        retry_not_store_ok=mode is CommunicationMode.SYNC and config.retry_another_broker_when_not_store_ok,
        retry_broker_errors=mode is not CommunicationMode.ASYNC,
    )


async def send_with_retries(
    *,
    topic: str,
    policy: RetryPolicy,
    budget: SendBudget,
    clock_ms: ClockMs,
    choose_queue: Callable[[str | None], MessageQueue],
    update_fault_item: Callable[[str, int, bool], None],
    attempt: Callable[[MessageQueue, int], Awaitable[ResultT]],
) -> ResultT:
    """Run ``attempt(queue, remaining_ms)`` until it succeeds or the attempts or the budget run out.

    ``choose_queue(last_broker_name)`` picks each attempt's queue (None before the first attempt).
    Returns the first SEND_OK result, or else the last stored non-OK one. Raises the first error that is
    not retried (unless a non-OK result was stored before it, which is then returned), or SendFailedError
    naming the attempts, the time spent, the topic and the brokers tried (``budget_spent`` when the
    deadline ended the loop).
    """
    brokers_sent: list[str] = []
    mq: MessageQueue | None = None
    last_error: MQError | None = None
    stored: ResultT | None = None
    budget_spent = False
    for _ in range(policy.times_total):
        mq = choose_queue(None if mq is None else mq.broker_name)
        remaining = budget.remaining_ms()
        if remaining <= 0:
            budget_spent = True
            break
        brokers_sent.append(mq.broker_name)
        begin_ms = clock_ms()
        try:
            result = await attempt(mq, remaining)
        except MQError as exc:
            retriable = is_retriable(exc, policy.retry_response_codes)
            update_fault_item(mq.broker_name, clock_ms() - begin_ms, retriable)
            last_error = exc
            if retriable and (policy.retry_broker_errors or not isinstance(exc, MQBrokerError)):
                continue
            if stored is not None:
                return stored
            raise
        update_fault_item(mq.broker_name, clock_ms() - begin_ms, False)
        if result.send_status is not SendStatus.SEND_OK and policy.retry_not_store_ok:
            stored = result
            continue
        return result
    if stored is not None:
        return stored
    raise SendFailedError(
        times=len(brokers_sent),
        cost_ms=budget.elapsed_ms(),
        topic=topic,
        brokers_sent=brokers_sent,
        cause=last_error,
        budget_spent=budget_spent or budget.remaining_ms() <= 0,
    )
