"""Exactly-once publishing for the ``rocketmq`` sink: one RocketMQ transaction per Spark task attempt.

The design (docs/architecture.md, "Transactions"):
- a write job (a batch ``save()`` or one micro-batch of a streaming query) gets its own producer group,
  ``<producerGroup>_<job key>`` (:func:`job_producer_group`); each task attempt sends its rows as half messages of
  the transaction ``<job key>-p<partition>-a<attempt number>-t<task attempt id>`` (:func:`attempt_transaction_id`,
  from Spark's TaskContext; the task attempt id is unique in the application), so two attempts of one partition (a
  retry, a speculative copy, a stage re-run) never share a transaction;
- the attempt reports its transaction id in its WriterCommitMessage; Spark hands ``commit()`` the message of
  exactly one winning attempt per partition (its OutputCommitCoordinator);
- ``commit()`` commits each winner's transaction with one gateway EndTransaction (scope TRANSACTION: every half
  message of the transaction on every broker master, this project's extension of RocketMQ's END_TRANSACTION), then
  rolls back everything else of the job's producer group (scope PRODUCER_GROUP): the half messages of attempts that
  failed, were killed, lost the speculation race or never reported. ``abort()`` rolls back the whole group;
- every half message carries CHECK_IMMUNITY_TIME_IN_SECONDS = the option ``transactionTimeoutSec`` (default 3600):
  the brokers' check-back leaves it alone for that long, so a long job is not discarded before it commits;
- a half message sent after that (a straggling attempt Spark has not killed yet) is never committed: nobody of the
  job's producer group answers its check-back, so once its immunity has passed the broker discards it after
  transactionCheckMax checks (and a later group rollback, e.g. a re-run micro-batch, ends it at once).
A whole-transaction end is idempotent (ending an ended transaction the same way changes nothing, after a broker
restart too: the broker keeps how each whole transaction ended on disk), so ``commit()`` may retry until every
broker answered. Runs where Spark calls it: the helpers in tasks, :class:`TransactionEnder` in the
Python worker of ``commit()`` / ``abort()`` (blocking gRPC on the caller's thread).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from mq_common.errors import MQClientError
from mq_common.response_code import ResponseCode

from mq_spark.options import WriterOptions

if TYPE_CHECKING:  # gRPC is imported where it is used: the workers that only plan a job never load it
    import grpc
    from mq.gateway.v1 import gateway_pb2

END_DEADLINE_S: Final = 120.0
"""How long :class:`TransactionEnder` keeps retrying an end (a broker master failing over, a gateway restarting)."""
END_BACKOFF_S: Final = 0.5
END_TIMEOUT_MS: Final = 60_000
"""The budget of one EndTransaction (the gateway's default max_send_msg_timeout_ms): a transaction of a task holds
tens of thousands of half messages, which a broker ends in seconds, not within one send's budget."""
_RETRIABLE_CODES: Final = frozenset(
    {
        ResponseCode.SYSTEM_ERROR,
        ResponseCode.SYSTEM_BUSY,
        ResponseCode.SERVICE_NOT_AVAILABLE,
        ResponseCode.SLAVE_NOT_AVAILABLE,
        ResponseCode.BROKER_NOT_EXIST,
        ResponseCode.TOPIC_NOT_EXIST,
        ResponseCode.FLUSH_DISK_TIMEOUT,
        ResponseCode.FLUSH_SLAVE_TIMEOUT,
    }
)


class TransactionEndError(MQClientError):
    """A transaction could not be ended (the code and remark of the last answer)."""


def job_key(seed: str) -> str:
    """A short stable key of ``seed`` (a job's uuid, a streaming checkpoint location): 16 hex digits."""
    return hashlib.sha256(seed.encode()).hexdigest()[:16]


def job_producer_group(base: str, key: str) -> str:
    """The producer group of one write job (its half messages' PGROUP)."""
    return f"{base}_{key}"


def attempt_transaction_id(key: str) -> str:
    """The transaction of the running task attempt: ``<key>-p<partition>-a<attempt number>-t<task attempt id>``.
    Call inside a Spark task."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is None:
        return f"{key}-driver"
    return f"{key}-p{ctx.partitionId()}-a{ctx.attemptNumber()}-t{ctx.taskAttemptId()}"


@dataclass(slots=True)
class EndTotals:
    """What the ends of one job did (summed over its transactions)."""

    committed_transactions: int = 0
    ended: int = 0
    already_ended: int = 0
    rolled_back: int = 0
    calls: int = 0
    brokers: set[str] = field(default_factory=set)

    def to_dict(self) -> dict[str, int]:
        return {
            "committed_transactions": self.committed_transactions,
            "committed_half_messages": self.ended,
            "already_committed": self.already_ended,
            "rolled_back_half_messages": self.rolled_back,
            "end_transaction_calls": self.calls,
        }


class TransactionEnder:
    """Commits and rolls back a job's transactions through the gateway's EndTransaction (see the module)."""

    def __init__(
        self,
        options: WriterOptions,
        producer_group: str,
        *,
        deadline_s: float = END_DEADLINE_S,
        channel: grpc.Channel | None = None,
    ) -> None:
        from mq.gateway.v1 import gateway_pb2_grpc
        from mq_common.auth.interceptor import SigningInterceptor

        from mq_spark.gateway_sender import gateway_channel

        self.options = options
        self.producer_group = producer_group
        self.deadline_s = deadline_s
        self._channel = channel if channel is not None else gateway_channel(options)
        self._signer = SigningInterceptor(options.credentials) if options.credentials is not None else None
        self._stub = gateway_pb2_grpc.ProducerGatewayStub(self._channel)
        self.totals = EndTotals()

    def close(self) -> None:
        self._channel.close()

    def commit_all(
        self,
        transaction_ids: Iterable[str],
        published: Mapping[str, int] | None = None,
        brokers: Mapping[str, Iterable[str]] | None = None,
    ) -> EndTotals:
        """Commit each transaction, then roll back the rest of the producer group. ``published``: transaction id ->
        half messages its attempt sent; ``brokers``: transaction id -> the brokers that stored them (both from the
        attempt's counts, when known). A commit is repeated (it is idempotent) until every one of those brokers
        answered and the half messages found cover what was sent: a broker that restarted may be missing from the
        topic's route for a while, and its half messages must not be left out (and then rolled back with the
        group). Raises TransactionEndError when a transaction cannot be committed within the deadline
        (ILLEGAL_OPERATION 604 at once: a half message of it was rolled back or discarded; SYSTEM_ERROR 1: brokers
        or half messages still missing)."""
        from mq.gateway.v1 import gateway_pb2

        for txid in sorted(set(transaction_ids)):
            sent = (published or {}).get(txid, 0)
            needed = set((brokers or {}).get(txid, ()))
            deadline = time.monotonic() + self.deadline_s
            ended, already, answered, attempt = 0, 0, set[str](), 0
            while True:
                attempt += 1
                answer = self._end(gateway_pb2.EndTransactionRequest(transaction_id=txid, commit=True))
                ended += answer.ended_count
                already += answer.already_ended if attempt == 1 else 0
                answered |= set(answer.broker_names)
                missing = needed - answered
                if not missing and ended + already >= sent:
                    break
                if time.monotonic() + END_BACKOFF_S * attempt > deadline:
                    raise TransactionEndError(
                        f"rocketmq writer: transaction {txid} of producer group {self.producer_group} sent {sent} "
                        f"half messages; the brokers ended {ended} (+{already} already ended)"
                        + (f", and broker(s) {sorted(missing)} never answered" if missing else "")
                        + f" (after {attempt} EndTransaction calls)",
                        int(ResponseCode.SYSTEM_ERROR),
                    )
                time.sleep(END_BACKOFF_S * attempt)
            self.totals.committed_transactions += 1
            self.totals.ended += ended
            self.totals.already_ended += already
        self.rollback_group()
        return self.totals

    def rollback_group(self) -> EndTotals:
        """Roll back every open half message of the producer group. Raises TransactionEndError."""
        from mq.gateway.v1 import gateway_pb2

        answer = self._end(gateway_pb2.EndTransactionRequest(whole_producer_group=True, commit=False))
        self.totals.rolled_back += answer.ended_count
        return self.totals

    def _end(self, request: gateway_pb2.EndTransactionRequest) -> gateway_pb2.EndTransactionResponse:
        import grpc

        request.topic = self.options.topic
        request.producer_group = self.producer_group
        request.timeout_ms = END_TIMEOUT_MS
        deadline = time.monotonic() + self.deadline_s
        attempt = 0
        while True:
            attempt += 1
            self.totals.calls += 1
            metadata = self._signer.headers() if self._signer is not None else None
            try:
                answer: gateway_pb2.EndTransactionResponse = self._stub.EndTransaction(
                    request, timeout=END_TIMEOUT_MS / 1000 + 10, metadata=metadata, wait_for_ready=True
                )
            except grpc.RpcError as exc:
                code, remark = int(ResponseCode.SYSTEM_ERROR), f"EndTransaction call failed: {exc}"
            else:
                if answer.code == ResponseCode.SUCCESS:
                    return answer
                code, remark = answer.code, answer.remark
            if code not in _RETRIABLE_CODES or time.monotonic() + END_BACKOFF_S * attempt > deadline:
                what = f"transaction {request.transaction_id}" if request.transaction_id else "the group's leftovers"
                verb = "commit" if request.commit else "roll back"
                raise TransactionEndError(
                    f"rocketmq writer: cannot {verb} {what} of producer group {self.producer_group} on topic "
                    f"{self.options.topic!r} (after {attempt} call(s)): CODE {code} DESC {remark}",
                    code,
                )
            time.sleep(END_BACKOFF_S * attempt)
