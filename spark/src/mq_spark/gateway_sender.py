"""The Spark writer's client adapter to the producer gateway: ProducerGateway.SendBatch with retries.

Rows are cut into batches of ``batch_size`` messages; up to ``max_in_flight`` SendBatch calls are in
flight per task (sync gRPC futures), so encoding the next rows overlaps the network. When a call returns,
each message's SendResult is read: code 0 counts as published (per broker); a message whose result is an
error is re-sent alone with the other failed messages of that batch, in at most ``max_retries`` further
rounds (pause ``retry_backoff_ms x round``). Results with MESSAGE_ILLEGAL (13) or INVALID_PARAMETER (29)
are final at once. A failed call (UNAVAILABLE, DEADLINE_EXCEEDED, ...) fails every message of it.

The gateway sets UNIQ_KEY; a re-sent message whose first attempt was in fact stored (a lost answer) is
stored twice, so consumers dedup by their own row identity. If any message still fails, the task stops
with :class:`PublishFailedError` (no more rows are sent).

Security: with ``tls`` the channel is a TLS channel verified by ``tlsCaFile`` (else the system roots); with
credentials every call carries ``x-mq-date-time`` + ``authorization`` (MQv2-HMAC-SHA1, mq_common.auth.signature),
computed once per second and reused (no HMAC per message or per call). A refusal (NO_PERMISSION 16: unknown
user, bad signature, or no Pub on the topic) is final: never retried, the task fails at once naming the topic and
the action. The secret never appears in an exception text.

Exactly once (``transaction_id`` given, mq_spark.transactions): every message is a half message of that transaction
(Message.transaction_id, producer group ``producer_group``), and nothing is re-sent by the task: a re-sent message
whose first send was stored would be committed twice, so any failure fails the task (PublishFailedError; after
FAILED_ATTEMPT_PAUSE_S when the failure is retriable, so that Spark's next attempt does not come before a master
failover ends) and Spark's task retry sends the partition again under the next attempt's transaction (the failed
attempt's half messages are rolled back by the job). Its calls wait for the channel to be ready (gRPC
wait_for_ready, within the call's deadline), so an attempt started while the gateway restarts waits for it instead of
failing at once.
Each half message carries CHECK_IMMUNITY_TIME_IN_SECONDS = the option transactionTimeoutSec, so no check-back
touches (or discards) it while the job may still commit.

Mirrors the batching half of DefaultMQProducer#send(Collection) on the client side. Runs on one Spark
task thread; not thread-safe.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import grpc
from mq.common.v1 import common_pb2
from mq.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from mq_common.constants import MessageConst
from mq_common.errors import MQClientError, RemotingError
from mq_common.grpc_errors import transport_error
from mq_common.grpc_options import CHANNEL_OPTIONS
from mq_common.response_code import ResponseCode

from mq_spark.counts import PublishCounts
from mq_spark.encoding import EncodedRow
from mq_spark.options import WriterOptions

if TYPE_CHECKING:
    from mq_common.auth.interceptor import SigningInterceptor

# Extra time the RPC deadline grants beyond the gateway's own send budget (queueing, CPU contention).
RPC_DEADLINE_SLACK_MS: Final = 10_000
FAILED_ATTEMPT_PAUSE_S: Final = 5.0
"""Exactly once: how long a task attempt whose half messages failed for a retriable reason waits before it fails.
Spark launches a failed task's next attempt at once, with no backoff: when a broker master dies, the gateway answers
RPC_SEND_TO_CHANNEL_FAILED within milliseconds until the controller has promoted the slave and the route names it,
and without a pause all 4 attempts (spark.task.maxFailures) fail within those seconds and the job aborts. With it a
task's attempts span >= 15 s: a failover (10 s target) or a gateway restart fits. Nothing is re-sent in the attempt
(a message whose send failed may have been stored)."""
FINAL_RESULT_CODES: Final = frozenset(
    {
        ResponseCode.MESSAGE_ILLEGAL,
        ResponseCode.INVALID_PARAMETER,
        ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
        ResponseCode.VERSION_NOT_SUPPORTED,
        ResponseCode.NO_PERMISSION,
    }
)


class PublishFailedError(MQClientError):
    """Messages still failed after every retry; the Spark task fails with this."""


@dataclass(frozen=True, slots=True)
class _Failure:
    """A message whose last attempt failed, with the code and remark of that attempt."""

    message: gateway_pb2.Message
    code: int
    remark: str
    final: bool


def describe(code: int, remark: str) -> str:
    return f"CODE {code} ({ResponseCode.name_of(code)}) DESC {remark}"


def to_message(row: EncodedRow, topic: str) -> gateway_pb2.Message:
    """The gateway Message for one row: body, TAGS, KEYS and sharding key (both from the key column), user
    properties; the topic is ``topic`` (the option) or, when that is "", the row's topic column."""
    msg = gateway_pb2.Message(topic=topic or row.topic or "", body=row.body)
    if row.tag is not None:
        msg.tag = row.tag
    if row.key is not None:
        msg.keys.append(row.key)
        msg.sharding_key = row.key
    if row.properties:
        msg.properties.update(row.properties)
    return msg


def _rpc_failure_code(exc: grpc.RpcError, gateway_addr: str) -> tuple[int, str, bool]:
    """(code, remark, final) of a failed SendBatch call, through the one status -> MQError mapping."""
    if isinstance(exc, grpc.Call):
        error = transport_error(exc, gateway_addr)
    else:  # a failure before any status (e.g. the channel closed under the call)
        error = RemotingError(f"connect to <{gateway_addr}> failed: {exc}")
    return error.code, f"SendBatch failed: {error}", not error.retriable


def gateway_channel(options: WriterOptions) -> grpc.Channel:
    """A sync channel to ``options.gateway``: TLS (verified by tlsCaFile, else the system roots) or plaintext.
    Raises InvalidParameterError (29) when tlsCaFile cannot be read."""
    if not options.tls:
        return grpc.insecure_channel(options.gateway, options=CHANNEL_OPTIONS)
    credentials = grpc.ssl_channel_credentials(options.tls_ca_bytes())
    return grpc.secure_channel(options.gateway, credentials, options=CHANNEL_OPTIONS)


class GatewaySender:
    """Send rows of one task through one gateway channel; :meth:`finish` returns the counts."""

    def __init__(
        self,
        options: WriterOptions,
        channel: grpc.Channel | None = None,
        *,
        transaction_id: str = "",
        producer_group: str | None = None,
    ) -> None:
        self.options = options
        self.transaction_id = transaction_id
        self.producer_group = producer_group or options.producer_group
        self._channel = channel if channel is not None else gateway_channel(options)
        # Only its per-second cache of signed headers is used (the channel is sync, not grpc.aio). Imported only with
        # credentials: its module loads the gRPC server kit, ~0.1 s of CPU in a cold Spark Python worker.
        self._signer: SigningInterceptor | None = None
        if options.credentials is not None:
            from mq_common.auth.interceptor import SigningInterceptor

            self._signer = SigningInterceptor(options.credentials)
        self._stub = gateway_pb2_grpc.ProducerGatewayStub(self._channel)
        self._pending: list[gateway_pb2.Message] = []
        self._in_flight: deque[tuple[grpc.Future[gateway_pb2.SendBatchResponse], list[gateway_pb2.Message]]] = deque()
        self.counts = PublishCounts()

    def _request(self, messages: list[gateway_pb2.Message]) -> gateway_pb2.SendBatchRequest:
        return gateway_pb2.SendBatchRequest(
            messages=messages, producer_group=self.producer_group, send_timeout_ms=self.options.send_timeout_ms
        )

    def _metadata(self) -> tuple[tuple[str, str], ...] | None:
        """The signed headers of this second, or None without credentials."""
        return self._signer.headers() if self._signer is not None else None

    @property
    def _deadline_s(self) -> float:
        return (self.options.send_timeout_ms + RPC_DEADLINE_SLACK_MS) / 1000

    def add(self, rows: list[EncodedRow]) -> None:
        """Queue ``rows``; sends every full batch (waiting for the oldest call when the window is full)."""
        self.counts.rows += len(rows)
        topic = self.options.topic
        txid = self.transaction_id
        if txid:
            immunity = str(self.options.transaction_timeout_s)
            for row in rows:
                msg = to_message(row, topic)
                msg.transaction_id = txid
                msg.properties[MessageConst.CHECK_IMMUNITY_TIME_IN_SECONDS] = immunity
                self._pending.append(msg)
        else:
            self._pending.extend(to_message(r, topic) for r in rows)
        size = self.options.batch_size
        while len(self._pending) >= size:
            batch, self._pending = self._pending[:size], self._pending[size:]
            self._submit(batch)

    def finish(self) -> PublishCounts:
        """Send what is left, wait for every call. Raises PublishFailedError when a message still failed."""
        if self._pending:
            batch, self._pending = self._pending, []
            self._submit(batch)
        while self._in_flight:
            self._complete_oldest()
        return self.counts

    def close(self) -> None:
        """Cancel calls still in flight and close the channel. Idempotent."""
        for future, _ in self._in_flight:
            future.cancel()
        self._in_flight.clear()
        self._channel.close()

    def _submit(self, batch: list[gateway_pb2.Message]) -> None:
        while len(self._in_flight) >= self.options.max_in_flight:
            self._complete_oldest()
        future = self._stub.SendBatch.future(
            self._request(batch),
            timeout=self._deadline_s,
            metadata=self._metadata(),
            wait_for_ready=bool(self.transaction_id) or None,
        )
        self._in_flight.append((future, batch))

    def _complete_oldest(self) -> None:
        future, batch = self._in_flight.popleft()
        try:
            response = future.result()
        except grpc.RpcError as exc:
            failures = self._all_failed(batch, exc)
        else:
            failures = self._account(batch, response.results)
        self._retry(failures)

    def _all_failed(self, batch: list[gateway_pb2.Message], exc: grpc.RpcError) -> list[_Failure]:
        code, remark, final = _rpc_failure_code(exc, self.options.gateway)
        return [_Failure(m, code, remark, final) for m in batch]

    def _account(self, batch: list[gateway_pb2.Message], results: Iterable[gateway_pb2.SendResult]) -> list[_Failure]:
        """Count successes; return the failed messages. Raises PublishFailedError on a result count mismatch."""
        result_list = list(results)
        if len(result_list) != len(batch):
            raise PublishFailedError(f"gateway returned {len(result_list)} results for {len(batch)} messages")
        failures: list[_Failure] = []
        for msg, result in zip(batch, result_list, strict=True):
            if result.code == ResponseCode.SUCCESS:
                self.counts.published += 1
                self.counts.per_broker[result.broker_name] += 1
                if result.send_status != common_pb2.SEND_STATUS_SEND_OK:
                    self.counts.not_durable += 1
            else:
                failures.append(_Failure(msg, result.code, result.remark, result.code in FINAL_RESULT_CODES))
        return failures

    def _retry(self, failures: list[_Failure]) -> None:
        """Re-send retriable failures for up to ``max_retries`` rounds (none in a transaction); raise when any still
        fails."""
        rounds = 0 if self.transaction_id else self.options.max_retries
        for round_no in range(1, rounds + 1):
            retriable = [f.message for f in failures if not f.final]
            if not retriable:
                break
            time.sleep(self.options.retry_backoff_ms * round_no / 1000)
            self.counts.retried += len(retriable)
            final = [f for f in failures if f.final]
            try:
                response = self._stub.SendBatch(
                    self._request(retriable), timeout=self._deadline_s, metadata=self._metadata()
                )
            except grpc.RpcError as exc:
                failures = final + self._all_failed(retriable, exc)
            else:
                failures = final + self._account(retriable, response.results)
        if failures:
            self._fail(failures)

    def _fail(self, failures: list[_Failure]) -> None:
        self.counts.failed += len(failures)
        first = next((f for f in failures if f.code == ResponseCode.NO_PERMISSION), failures[0])
        self.counts.first_error = describe(first.code, first.remark)
        if first.code == ResponseCode.NO_PERMISSION:
            raise PublishFailedError(
                f"rocketmq writer: gateway {self.options.gateway} refused action Pub on topic {self.options.topic!r} "
                f"for {len(failures)} message(s) (access key {self._access_key()}); not retried; "
                f"{self.counts.first_error}"
            )
        if self.transaction_id:
            if not any(f.final for f in failures):
                time.sleep(FAILED_ATTEMPT_PAUSE_S)  # Spark's next attempt comes after a failover (see the constant)
            raise PublishFailedError(
                f"rocketmq writer: {len(failures)} half message(s) of transaction {self.transaction_id} to topic "
                f"{self.options.topic!r} via gateway {self.options.gateway} failed (not re-sent: the task attempt "
                f"fails and Spark retries it); first error: {self.counts.first_error}"
            )
        raise PublishFailedError(
            f"rocketmq writer: {len(failures)} message(s) to topic {self.options.topic!r} via gateway "
            f"{self.options.gateway} still failed after {self.options.max_retries} retries; first error: "
            f"{self.counts.first_error}"
        )

    def _access_key(self) -> str:
        credentials = self.options.credentials
        return repr(credentials.access_key) if credentials is not None else "none: unsigned calls"
