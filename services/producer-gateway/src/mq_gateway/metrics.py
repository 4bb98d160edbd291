"""The gateway's Prometheus metrics (node_type="proxy", as RocketMQ 5's proxy) and the pieces that feed them.

Series (every one also has cluster, node_type="proxy", node_id=<listen host:port>):

- ``mq_gateway_send_latency_ms`` histogram {mode, result}: one observation per gateway call (a SendBatch is one);
  mode: send, batch, oneway; result: success, partial (a batch with some failed messages), failure,
  flow_control, invalid.
- ``mq_gateway_messages_total`` {mode, result}: messages by outcome (success / failure), counted per call.
- ``mq_gateway_send_retries_total`` {reason}: messages whose broker attempt failed with a retriable outcome (a
  transport error, or a broker code in the producer's retry_response_codes); the producer retries them while
  attempts and budget remain. reason = the ResponseCode name. Counted per broker call under the coalescer, not
  through a per-message SendMessageHook: the hook path costs ~1.5 us per message (a context object and two hook
  calls per message and attempt), a third of the 5 % budget at the gateway's throughput.
- ``mq_gateway_isolated_brokers``: brokers the latency fault strategy currently keeps out.
- ``mq_gateway_route_refreshes_total`` {result}: name-server route queries (ok, error).
- ``mq_gateway_coalesced_batch_messages`` histogram: messages per broker call; ``mq_gateway_broker_call_latency_ms``
  histogram {result}.
- ``mq_gateway_in_flight_messages`` / ``mq_gateway_in_flight_bytes``: what the in-flight limiter holds.
- ``mq_gateway_backpressure_rejections_total`` {mode}: calls refused by flow control.
- ``mq_gateway_auth_failures_total`` {reason, user}: calls refused by authentication (UNAUTHORIZED 40100 /
  NO_PERMISSION 16); reason = mq_common.auth.signature.AuthFailure value; user bounded (mq_gateway.auth_metrics).
- ``mq_gateway_auth_denials_total`` {user, resource_type, action}: calls refused by authorisation (FORBIDDEN
  40300 / NO_PERMISSION 16). No resource-name label (unbounded); the gateway's log line names the resource.
- ``rocketmq_rpc_latency`` histogram {protocol_type, method, response_code, language}: every gRPC call;
  mq.gateway.v1 calls: protocol_type="grpc", response_code a ResponseCode name, language="OTHER";
  apache.rocketmq.v2 calls: protocol_type="grpc_v2", response_code the v2 Code name, language from x-mq-language
  (mq_gateway.v2.metrics.LANGUAGES, else OTHER).

All updates run on the gateway's asyncio loop, once per gateway call or broker call.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from mq_client.producer.kernel import BrokerTransport
from mq_client.producer.route_manager import NameServerLookup
from mq_common.errors import MQError
from mq_common.metrics import BATCH_SIZE_BUCKETS, LATENCY_BUCKETS_MS, NodeIdentity, ServiceMetrics
from mq_common.protocol import (
    SendMessageBatchRequestHeader,
    SendMessageBatchResponseHeader,
    SendMessageRequestHeader,
    SendMessageResponseHeader,
    TopicRouteData,
)
from mq_common.response_code import ResponseCode

if TYPE_CHECKING:
    from mq_client.producer import DefaultMQProducer

MODES = ("send", "batch", "oneway")
# The language label of mq.gateway.v1 calls (they carry no x-mq-language header).
V1_LANGUAGE = "OTHER"


class GatewayMetrics(ServiceMetrics):
    """The gateway's families. :meth:`bind` adds the gauges read from a started producer."""

    def __init__(self, node: NodeIdentity, *, max_topics: int) -> None:
        super().__init__(node, max_topics=max_topics)
        self.send_latency = self.histogram(
            "mq_gateway_send_latency_ms",
            "Gateway send calls in ms (a SendBatch is one call).",
            ("mode", "result"),
            buckets=LATENCY_BUCKETS_MS,
        )
        self.messages = self.counter(
            "mq_gateway_messages", "Messages through the gateway by outcome.", ("mode", "result")
        )
        self.retries = self.counter(
            "mq_gateway_send_retries", "Send attempts that failed with a retriable error, by reason.", ("reason",)
        )
        self.auth_failures = self.counter(
            "mq_gateway_auth_failures", "Calls refused by authentication, by reason and user.", ("reason", "user")
        )
        self.auth_denials = self.counter(
            "mq_gateway_auth_denials",
            "Calls refused by authorisation, by user, resource type and action.",
            ("user", "resource_type", "action"),
        )
        # Exported from the start as 0 (the common first refusals: unsigned calls, anonymous sends), so a scrape
        # and the burst alert see the families before the first refusal.
        self.auth_failures.child("no_credentials", "_anonymous").inc(0)
        self.auth_denials.child("_anonymous", "Topic", "Pub").inc(0)
        self.route_refreshes = self.counter(
            "mq_gateway_route_refreshes", "Topic route queries to the name servers.", ("result",)
        )
        self.coalesced_batch = self.histogram(
            "mq_gateway_coalesced_batch_messages", "Messages per broker call.", buckets=BATCH_SIZE_BUCKETS
        ).child()
        self.broker_call_latency = self.histogram(
            "mq_gateway_broker_call_latency_ms", "Broker send calls in ms.", ("result",), buckets=LATENCY_BUCKETS_MS
        )
        self.rejections = self.counter(
            "mq_gateway_backpressure_rejections", "Calls refused by flow control.", ("mode",)
        )
        self.rpc_latency = self.histogram(
            "rocketmq_rpc_latency",
            "gRPC call latency on the gateway in ms.",
            ("protocol_type", "method", "response_code", "language"),
            buckets=LATENCY_BUCKETS_MS,
        )
        for mode in MODES:  # series exist from the start (rate() and ratios over fresh counters work at once)
            self.rejections.child(mode).inc(0)
            for result in ("success", "failure"):
                self.messages.child(mode, result).inc(0)
        self.retries.child("SYSTEM_ERROR").inc(0)

    def observe_rpc(self, method: str, response_code: str, elapsed_ms: float) -> None:
        """RequestContextInterceptor callback (one per RPC)."""
        self.rpc_latency.child("grpc", method, response_code, V1_LANGUAGE).observe(elapsed_ms)

    def on_call(self, mode: str, result: str, elapsed_s: float, ok: int, failed: int) -> None:
        """One gateway call of ``mode`` ended with ``result``; ``ok`` / ``failed`` messages."""
        self.send_latency.child(mode, result).observe(elapsed_s * 1000.0)
        if ok:
            self.messages.child(mode, "success").inc(ok)
        if failed:
            self.messages.child(mode, "failure").inc(failed)

    def on_rejected(self, mode: str, elapsed_s: float, messages: int) -> None:
        """A call refused by the in-flight limits."""
        self.rejections.child(mode).inc()
        self.on_call(mode, "flow_control", elapsed_s, 0, messages)

    def bind(self, producer: DefaultMQProducer) -> None:
        """Gauges read at scrape time from ``producer``'s limiter and fault strategy."""
        limiter = producer.limiter
        lft = producer.fault_strategy.latency_fault_tolerance
        self.scalar_gauge(
            "mq_gateway_in_flight_messages", "Messages holding in-flight permits.", lambda: limiter.in_flight_messages
        )
        self.scalar_gauge(
            "mq_gateway_in_flight_bytes", "Body bytes holding in-flight permits.", lambda: limiter.in_flight_bytes
        )

        def isolated() -> float:
            now_ms = time.monotonic_ns() // 1_000_000
            return float(sum(1 for _latency, until_ms in lft.items().values() if until_ms > now_ms))

        self.scalar_gauge("mq_gateway_isolated_brokers", "Brokers kept out by latency fault isolation.", isolated)


class ObservedTransport:
    """A BrokerTransport that times each broker call, counts its messages and its retriable failures (under the
    coalescer). ``retry_response_codes``: the producer's (ProducerConfig.retry_response_codes)."""

    def __init__(self, inner: BrokerTransport, metrics: GatewayMetrics, retry_response_codes: frozenset[int]) -> None:
        self.inner = inner
        self._metrics = metrics
        self._retry_codes = retry_response_codes

    def _count_retries(self, responses: Sequence[SendMessageResponseHeader]) -> None:
        if not any(r.code for r in responses):  # the common case: all stored
            return
        for r in responses:
            if r.code in self._retry_codes:
                self._metrics.retries.child(ResponseCode.name_of(r.code)).inc()

    def _count_error(self, exc: BaseException, messages: int) -> None:
        code = exc.code if isinstance(exc, MQError) else ResponseCode.SYSTEM_ERROR
        self._metrics.retries.child(ResponseCode.name_of(code)).inc(messages)

    async def send_message(
        self, addr: str, request: SendMessageRequestHeader, timeout_ms: int
    ) -> SendMessageResponseHeader:
        begin = time.perf_counter()
        result = "error"
        try:
            response = await self.inner.send_message(addr, request, timeout_ms)
            result = "ok"
        except Exception as exc:
            self._count_error(exc, 1)
            raise
        finally:
            self._observe(1, result, begin)
        self._count_retries((response,))
        return response

    async def send_batch(
        self, addr: str, requests: Sequence[SendMessageRequestHeader], timeout_ms: int
    ) -> list[SendMessageResponseHeader]:
        begin = time.perf_counter()
        result = "error"
        try:
            responses = await self.inner.send_batch(addr, requests, timeout_ms)
            result = "ok"
        except Exception as exc:
            self._count_error(exc, len(requests))
            raise
        finally:
            self._observe(len(requests), result, begin)
        self._count_retries(responses)
        return responses

    async def send_message_batch(
        self, addr: str, request: SendMessageBatchRequestHeader, timeout_ms: int
    ) -> SendMessageBatchResponseHeader:
        """One MessageBatch call: timed and counted like a coalesced call of its messages (``message_count`` of the
        request; a failed or refused call counts every message it carried, as each of them is retried)."""
        begin = time.perf_counter()
        result = "error"
        messages = max(request.message_count, 1)
        try:
            response = await self.inner.send_message_batch(addr, request, timeout_ms)
            result = "ok"
            messages = max(response.message_count, messages)
        except Exception as exc:
            self._count_error(exc, messages)
            raise
        finally:
            self._observe(messages, result, begin)
        if response.code in self._retry_codes:
            self._metrics.retries.child(ResponseCode.name_of(response.code)).inc(messages)
        return response

    def _observe(self, messages: int, result: str, begin: float) -> None:
        self._metrics.coalesced_batch.observe(messages)
        self._metrics.broker_call_latency.child(result).observe((time.perf_counter() - begin) * 1000.0)


class ObservedNameServer:
    """A NameServerLookup that counts route queries by result (``mq_gateway_route_refreshes_total``)."""

    def __init__(self, inner: NameServerLookup, metrics: GatewayMetrics) -> None:
        self.inner = inner
        self._metrics = metrics

    async def get_route_info_by_topic(self, topic: str, timeout_ms: int = 3000) -> TopicRouteData:
        try:
            route = await self.inner.get_route_info_by_topic(topic, timeout_ms)
        except Exception:
            self._metrics.route_refreshes.child("error").inc()
            raise
        self._metrics.route_refreshes.child("ok").inc()
        return route
