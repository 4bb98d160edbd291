"""The v2 header parser: what each official SDK sends (RMQ5-PROTOCOL.md section 2) becomes one ClientContext."""

from __future__ import annotations

import pytest
from apache.rocketmq.v2 import definition_pb2
from mq_gateway.v2.codes import V2Error
from mq_gateway.v2.context import client_context, parse_authorization


def test_python_sdk_headers_anonymous_authorization() -> None:
    ctx = client_context(
        [
            ("x-mq-client-id", "host@4242@0@1a2b3c"),
            ("x-mq-language", "PYTHON"),
            ("x-mq-protocol", "GRPC_V2"),
            ("x-mq-client-version", "5.1.2"),
            ("x-mq-date-time", "20261125T021500Z"),
            ("x-mq-request-id", "5f0c4a3e-0000-4000-8000-000000000001"),
            ("x-mq-namespace", ""),
            ("authorization", "MQv2-HMAC-SHA1 Credential=, SignedHeaders=x-mq-date-time, Signature=ab12"),
        ]
    )
    assert ctx.client_id == "host@4242@0@1a2b3c"
    assert (ctx.language, ctx.protocol, ctx.client_version) == ("PYTHON", "GRPC_V2", "5.1.2")
    assert ctx.request_id.endswith("0001")
    assert ctx.namespace == ""
    assert ctx.authorization is not None
    assert ctx.authorization.access_key == ""
    assert ctx.authorization.signed_headers == ("x-mq-date-time",)


def test_go_credential_scope_and_upper_case_signature() -> None:
    auth = parse_authorization(
        "MQv2-HMAC-SHA1 Credential=AK123//Rocketmq, SignedHeaders=x-mq-date-time, Signature=ABCDEF0123"
    )
    assert auth is not None
    assert (auth.algorithm, auth.access_key, auth.signature) == ("MQv2-HMAC-SHA1", "AK123", "abcdef0123")


@pytest.mark.parametrize("value", ["", "MQv2-HMAC-SHA1", "Bearer token", "MQv2-HMAC-SHA1 Credential=a"])
def test_authorization_not_of_the_v2_form_is_none(value: str) -> None:
    assert parse_authorization(value) is None


@pytest.mark.parametrize("client_id", [None, "", "   "])
def test_client_id_is_required(client_id: str | None) -> None:
    metadata = [("x-mq-language", "JAVA")] + ([("x-mq-client-id", client_id)] if client_id is not None else [])
    with pytest.raises(V2Error) as raised:
        client_context(metadata)
    assert raised.value.code == definition_pb2.Code.CLIENT_ID_REQUIRED


def test_node_language_missing_namespace_and_long_values() -> None:
    ctx = client_context([("x-mq-client-id", "n" * 1000), ("x-mq-language", "http"), ("bin-bin", b"\x00")])
    assert ctx.language == "HTTP"
    assert len(ctx.client_id) == 256
    assert ctx.namespace == ""
    assert ctx.authorization is None
    assert client_context([("x-mq-client-id", "c")]).language == "UNKNOWN"
