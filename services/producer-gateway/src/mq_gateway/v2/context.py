"""The v2 request headers (gRPC metadata) every SDK sends, parsed once per call.

Header facts (RMQ5-PROTOCOL.md section 2): ``x-mq-client-id`` is the only one the proxy requires (blank ->
CLIENT_ID_REQUIRED 40017); ``x-mq-language`` is JAVA / PYTHON / GO / HTTP (Node.js) / ...; ``x-mq-namespace`` may
be absent or empty; ``authorization`` is ``MQv2-HMAC-SHA1 Credential=<AK>[/...], SignedHeaders=x-mq-date-time,
Signature=<hex>`` (the Python SDK sends it always, with an empty Credential when it has no keys: anonymous). The
signature is only parsed here; the security issue verifies it. Pure functions; any thread.
Mirrors org.apache.rocketmq.proxy.grpc.pipeline.ContextInitPipeline and
org.apache.rocketmq.auth.authentication.builder.DefaultAuthenticationContextBuilder (parsing only).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from mq_gateway.v2.codes import Code, V2Error

CLIENT_ID: Final = "x-mq-client-id"
LANGUAGE: Final = "x-mq-language"
PROTOCOL: Final = "x-mq-protocol"
CLIENT_VERSION: Final = "x-mq-client-version"
DATE_TIME: Final = "x-mq-date-time"
REQUEST_ID: Final = "x-mq-request-id"
NAMESPACE: Final = "x-mq-namespace"
AUTHORIZATION: Final = "authorization"
HMAC_SHA1_ALGORITHM: Final = "MQv2-HMAC-SHA1"
# Bound of what one header value may hold before it is cut (a log line and a metric label carry some of them).
MAX_HEADER_VALUE_CHARS: Final = 256
UNKNOWN_LANGUAGE: Final = "UNKNOWN"


@dataclass(frozen=True, slots=True)
class Authorization:
    """The parsed ``authorization`` header: ``access_key`` ("" = anonymous), the ``signed_headers`` names and the
    hex ``signature`` (lowercased: SDKs differ in case)."""

    algorithm: str
    access_key: str
    signed_headers: tuple[str, ...]
    signature: str


@dataclass(frozen=True, slots=True)
class ClientContext:
    """What one v2 call says about its client. ``language`` is upper case, UNKNOWN when absent."""

    client_id: str
    language: str = UNKNOWN_LANGUAGE
    protocol: str = ""
    client_version: str = ""
    date_time: str = ""
    request_id: str = ""
    namespace: str = ""
    authorization: Authorization | None = None


def parse_authorization(value: str) -> Authorization | None:
    """``MQv2-HMAC-SHA1 Credential=AK[/...], SignedHeaders=a;b, Signature=hex`` -> Authorization; None when the
    value is not of that form (the security issue decides what an unsigned call may do)."""
    algorithm, _, rest = value.strip().partition(" ")
    if not algorithm or not rest:
        return None
    fields: dict[str, str] = {}
    for part in rest.split(","):
        name, sep, item = part.strip().partition("=")
        if sep:
            fields[name.strip()] = item.strip()
    if "Signature" not in fields:
        return None
    access_key = fields.get("Credential", "").split("/", 1)[0]
    signed = tuple(h.strip().lower() for h in fields.get("SignedHeaders", "").split(";") if h.strip())
    return Authorization(algorithm, access_key, signed, fields["Signature"].lower())


def client_context(metadata: Iterable[tuple[str, str | bytes]] | None) -> ClientContext:
    """The ClientContext of a call's invocation metadata. Raises V2Error(CLIENT_ID_REQUIRED 40017) when
    ``x-mq-client-id`` is missing or blank. Values longer than MAX_HEADER_VALUE_CHARS are cut."""
    headers: dict[str, str] = {}
    for key, raw in metadata or ():
        if isinstance(raw, bytes):
            continue
        headers[key.lower()] = raw[:MAX_HEADER_VALUE_CHARS]
    client_id = headers.get(CLIENT_ID, "").strip()
    if not client_id:
        raise V2Error(Code.CLIENT_ID_REQUIRED, f"header {CLIENT_ID} is required")
    auth_header = headers.get(AUTHORIZATION, "")
    return ClientContext(
        client_id=client_id,
        language=(headers.get(LANGUAGE, "").strip().upper() or UNKNOWN_LANGUAGE),
        protocol=headers.get(PROTOCOL, ""),
        client_version=headers.get(CLIENT_VERSION, ""),
        date_time=headers.get(DATE_TIME, ""),
        request_id=headers.get(REQUEST_ID, ""),
        namespace=headers.get(NAMESPACE, ""),
        authorization=parse_authorization(auth_header) if auth_header else None,
    )
