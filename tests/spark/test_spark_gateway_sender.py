"""GatewaySender against an in-process fake ProducerGateway: batching, per-message retries, final failures."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent import futures
from pathlib import Path

import grpc
import pytest
import trustme
from mq.common.v1 import common_pb2
from mq.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from mq_common.auth.settings import Credentials
from mq_common.auth.signature import AUTHORIZATION, DATE_TIME, hmac_sha1_hex, parse_authorization
from mq_common.response_code import ResponseCode
from mq_local.ports import free_port
from mq_spark.encoding import EncodedRow
from mq_spark.gateway_sender import GatewaySender, PublishFailedError
from mq_spark.options import WriterOptions

# (message, how many times this body was received before, including this time) -> (code, broker name)
Decide = Callable[[gateway_pb2.Message, int], tuple[int, str]]


class FakeGateway(gateway_pb2_grpc.ProducerGatewayServicer):
    """Answers SendBatch per message with ``decide``; records every call's bodies."""

    def __init__(self, decide: Decide) -> None:
        self.decide = decide
        self.calls: list[list[bytes]] = []
        self.headers: list[dict[str, str]] = []
        self.seen: dict[bytes, int] = {}
        self.lock = threading.Lock()

    def Send(self, request: gateway_pb2.SendRequest, context: grpc.ServicerContext) -> gateway_pb2.SendResponse:
        context.abort(grpc.StatusCode.UNIMPLEMENTED, "the fake gateway only batches")

    def SendBatch(
        self, request: gateway_pb2.SendBatchRequest, context: grpc.ServicerContext
    ) -> gateway_pb2.SendBatchResponse:
        results = []
        with self.lock:
            self.calls.append([m.body for m in request.messages])
            self.headers.append({k: str(v) for k, v in context.invocation_metadata()})
            for msg in request.messages:
                self.seen[msg.body] = self.seen.get(msg.body, 0) + 1
                code, broker = self.decide(msg, self.seen[msg.body])
                if code == ResponseCode.SUCCESS:
                    results.append(
                        gateway_pb2.SendResult(
                            code=0, send_status=common_pb2.SEND_STATUS_SEND_OK, broker_name=broker, msg_id="X"
                        )
                    )
                else:
                    results.append(gateway_pb2.SendResult(code=code, remark=f"fake refusal {code}"))
        return gateway_pb2.SendBatchResponse(results=results)


@pytest.fixture
def serve() -> Iterator[Callable[..., tuple[FakeGateway, str]]]:
    servers: list[grpc.Server] = []

    def start(decide: Decide, tls: grpc.ServerCredentials | None = None) -> tuple[FakeGateway, str]:
        fake = FakeGateway(decide)
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        gateway_pb2_grpc.add_ProducerGatewayServicer_to_server(fake, server)
        port = server.add_insecure_port("127.0.0.1:0") if tls is None else server.add_secure_port("127.0.0.1:0", tls)
        server.start()
        servers.append(server)
        return fake, f"127.0.0.1:{port}"

    yield start
    for server in servers:
        server.stop(grace=None)


def _rows(n: int) -> list[EncodedRow]:
    return [EncodedRow(f'{{"row_id":{i}}}'.encode(), f"K{i % 7}", "T") for i in range(n)]


def _options(addr: str, **kw: object) -> WriterOptions:
    base: dict[str, object] = {"gateway": addr, "topic": "flights", "batch_size": 10, "retry_backoff_ms": 0}
    base.update(kw)
    return WriterOptions(**base)  # type: ignore[arg-type]


def _send(options: WriterOptions, rows: list[EncodedRow], chunk: int = 7) -> GatewaySender:
    sender = GatewaySender(options)
    try:
        for i in range(0, len(rows), chunk):
            sender.add(rows[i : i + chunk])
        sender.finish()
    finally:
        sender.close()
    return sender


def test_all_rows_are_sent_in_batches_and_counted_per_broker(
    serve: Callable[[Decide], tuple[FakeGateway, str]],
) -> None:
    fake, addr = serve(lambda m, n: (0, "broker-a" if int(m.body[10:-1]) % 2 else "broker-b"))
    sender = _send(_options(addr), _rows(95))
    assert sorted(b for call in fake.calls for b in call) == sorted(r.body for r in _rows(95))
    assert [len(c) for c in fake.calls].count(10) == 9
    counts = sender.counts
    assert (counts.rows, counts.published, counts.failed, counts.retried) == (95, 95, 0, 0)
    assert dict(counts.per_broker) == {"broker-a": 47, "broker-b": 48}


def test_messages_carry_key_as_sharding_key_and_keys_and_tag(
    serve: Callable[[Decide], tuple[FakeGateway, str]],
) -> None:
    got: list[gateway_pb2.Message] = []

    def decide(m: gateway_pb2.Message, n: int) -> tuple[int, str]:
        got.append(m)
        return 0, "broker-a"

    _, addr = serve(decide)
    _send(_options(addr), [EncodedRow(b"{}", "N1", "UA"), EncodedRow(b"{}", None, None)])
    assert (got[0].topic, got[0].sharding_key, list(got[0].keys), got[0].tag) == ("flights", "N1", ["N1"], "UA")
    assert (got[1].sharding_key, list(got[1].keys), got[1].tag) == ("", [], "")


def test_half_messages_carry_the_transaction_and_its_check_immunity(
    serve: Callable[[Decide], tuple[FakeGateway, str]],
) -> None:
    got: list[gateway_pb2.Message] = []

    def decide(m: gateway_pb2.Message, n: int) -> tuple[int, str]:
        got.append(m)
        return 0, "broker-a"

    _, addr = serve(decide)
    sender = GatewaySender(_options(addr, transaction_timeout_s=7200), transaction_id="job-p0-a0-t1")
    try:
        sender.add([EncodedRow(b"{}", None, None)] * 3)
        sender.finish()
    finally:
        sender.close()
    assert [(m.transaction_id, dict(m.properties)) for m in got] == [
        ("job-p0-a0-t1", {"CHECK_IMMUNITY_TIME_IN_SECONDS": "7200"})
    ] * 3
    plain: list[gateway_pb2.Message] = []

    def keep(m: gateway_pb2.Message, n: int) -> tuple[int, str]:
        plain.append(m)
        return 0, "broker-a"

    _, addr2 = serve(keep)
    _send(_options(addr2), [EncodedRow(b"{}", None, None)])
    assert (plain[0].transaction_id, dict(plain[0].properties)) == ("", {}), "at least once: no immunity"


def test_only_failed_messages_are_retried(serve: Callable[[Decide], tuple[FakeGateway, str]]) -> None:
    # every third row fails on its first attempt with a retriable code
    fake, addr = serve(lambda m, n: (ResponseCode.SYSTEM_BUSY if n == 1 and int(m.body[10:-1]) % 3 == 0 else 0, "b"))
    sender = _send(_options(addr, max_retries=2), _rows(30))
    assert sender.counts.published == 30
    assert sender.counts.retried == 10
    retry_calls = [c for c in fake.calls if all(int(b[10:-1]) % 3 == 0 for b in c) and len(c) < 10]
    assert sum(len(c) for c in retry_calls) == 10
    assert all(count in (1, 2) for count in fake.seen.values())
    assert sum(fake.seen.values()) == 40


def test_still_failing_messages_fail_the_task_with_the_code(serve: Callable[[Decide], tuple[FakeGateway, str]]) -> None:
    fake, addr = serve(lambda m, n: (ResponseCode.TOPIC_NOT_EXIST if m.body == b'{"row_id":4}' else 0, "b"))
    with pytest.raises(PublishFailedError, match=r"1 message\(s\).*CODE 17 \(TOPIC_NOT_EXIST\) DESC fake refusal 17"):
        _send(_options(addr, max_retries=3), _rows(10))
    assert fake.seen[b'{"row_id":4}'] == 4  # 1 + max_retries attempts


def test_illegal_messages_are_not_retried(serve: Callable[[Decide], tuple[FakeGateway, str]]) -> None:
    fake, addr = serve(lambda m, n: (ResponseCode.MESSAGE_ILLEGAL if m.body == b'{"row_id":2}' else 0, "b"))
    with pytest.raises(PublishFailedError, match="MESSAGE_ILLEGAL"):
        _send(_options(addr, max_retries=3), _rows(5))
    assert fake.seen[b'{"row_id":2}'] == 1


def test_unreachable_gateway_fails_after_bounded_retries() -> None:
    options = _options(f"127.0.0.1:{free_port()}", max_retries=1, send_timeout_ms=200)
    with pytest.raises(PublishFailedError, match="UNAVAILABLE"):
        _send(options, _rows(3))


class RefusingGateway(FakeGateway):
    """Refuses every SendBatch as malformed, as the real gateway does for a request that does not parse."""

    def SendBatch(
        self, request: gateway_pb2.SendBatchRequest, context: grpc.ServicerContext
    ) -> gateway_pb2.SendBatchResponse:
        with self.lock:
            self.calls.append([m.body for m in request.messages])
        context.abort(grpc.StatusCode.INVALID_ARGUMENT, "malformed SendBatch")


def test_invalid_argument_is_final_as_in_every_client_adapter() -> None:
    # One status -> MQError mapping (mq_common.grpc_errors): INVALID_ARGUMENT is InvalidParameterError (29),
    # which no retry can mend; the Spark sender must not send the batch again.
    fake = RefusingGateway(lambda m, n: (0, ""))
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    gateway_pb2_grpc.add_ProducerGatewayServicer_to_server(fake, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        with pytest.raises(PublishFailedError, match="INVALID_PARAMETER"):
            _send(_options(f"127.0.0.1:{port}", max_retries=3), _rows(4))
    finally:
        server.stop(grace=None)
    assert len(fake.calls) == 1


SECRET = "sender-secret-7Qx"


def test_signed_calls_carry_a_valid_signature_and_no_secret(serve: Callable[[Decide], tuple[FakeGateway, str]]) -> None:
    fake, addr = serve(lambda m, n: (0, "b"))
    _send(_options(addr, credentials=Credentials("spark", SECRET)), _rows(25))
    assert len(fake.headers) == 3
    for headers in fake.headers:
        header = parse_authorization(headers[AUTHORIZATION])
        assert header is not None
        assert header.access_key == "spark"
        assert header.signature == hmac_sha1_hex(SECRET, headers[DATE_TIME])
        assert SECRET not in str(headers)


def test_unsigned_calls_carry_no_authorization(serve: Callable[[Decide], tuple[FakeGateway, str]]) -> None:
    fake, addr = serve(lambda m, n: (0, "b"))
    _send(_options(addr), _rows(5))
    assert AUTHORIZATION not in fake.headers[0]


def test_a_refusal_is_not_retried_and_names_topic_and_action(
    serve: Callable[[Decide], tuple[FakeGateway, str]],
) -> None:
    fake, addr = serve(lambda m, n: (ResponseCode.NO_PERMISSION, ""))
    options = _options(addr, max_retries=3, credentials=Credentials("spark", SECRET))
    with pytest.raises(PublishFailedError, match=r"refused action Pub on topic 'flights'.*not retried") as info:
        _send(options, _rows(10))
    assert "CODE 16 (NO_PERMISSION)" in str(info.value)
    assert "'spark'" in str(info.value)
    assert SECRET not in str(info.value)
    assert len(fake.calls) == 1


def test_tls_channel_verified_by_the_ca_file(serve: Callable[..., tuple[FakeGateway, str]], tmp_path: Path) -> None:
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    server_tls = grpc.ssl_server_credentials([(cert.private_key_pem.bytes(), cert.cert_chain_pems[0].bytes())])
    _fake, addr = serve(lambda m, n: (0, "b"), server_tls)
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    sender = _send(_options(addr, tls=True, tls_ca_file=str(ca_file)), _rows(12))
    assert sender.counts.published == 12
    with pytest.raises(PublishFailedError, match="UNAVAILABLE"):  # plaintext against a TLS port
        _send(_options(addr, max_retries=0), _rows(1))
