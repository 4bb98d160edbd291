"""The v2 request headers (gRPC metadata) every SDK sends, parsed once per call.

Header facts (RMQ5-PROTOCOL.md section 2): ``x-mq-client-id`` is the only one the proxy requires (blank ->
CLIENT_ID_REQUIRED 40017); ``x-mq-language`` is JAVA / PYTHON / GO / HTTP (Node.js) / ...; ``x-mq-namespace`` may
be absent or empty; ``authorization`` is ``MQv2-HMAC-SHA1 Credential=<AK>[/...], SignedHeaders=x-mq-date-time,
Signature=<hex>`` (the Python SDK sends it always, with an empty Credential when it has no keys: anonymous), parsed
by mq_common.auth.signature.parse_authorization and verified by mq_gateway.auth. Pure functions; any thread.
Mirrors org.apache.rocketmq.proxy.grpc.pipeline.ContextInitPipeline and
org.apache.rocketmq.auth.authentication.builder.DefaultAuthenticationContextBuilder (parsing only).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from mq_common.auth.signature import AUTHORIZATION, DATE_TIME, AuthorizationHeader, parse_authorization

from mq_gateway.v2.codes import Code, V2Error

# The parsed authorization header (mq_common.auth.signature, which verifies it too).
Authorization = AuthorizationHeader

CLIENT_ID: Final = "x-mq-client-id"
LANGUAGE: Final = "x-mq-language"
PROTOCOL: Final = "x-mq-protocol"
CLIENT_VERSION: Final = "x-mq-client-version"
REQUEST_ID: Final = "x-mq-request-id"
NAMESPACE: Final = "x-mq-namespace"
# Bound of what one header value may hold before it is cut (a log line and a metric label carry some of them).
MAX_HEADER_VALUE_CHARS: Final = 256
UNKNOWN_LANGUAGE: Final = "UNKNOWN"


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
    authorization_header: str = ""

    @property
    def authorization(self) -> Authorization | None:
        """The parsed ``authorization`` header, None when absent or not of the v2 form. Parsed when asked (the
        authentication check, once per call): with authentication off nobody asks, and the parse cost 2 µs."""
        return parse_authorization(self.authorization_header) if self.authorization_header else None


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
    return ClientContext(
        client_id=client_id,
        language=(headers.get(LANGUAGE, "").strip().upper() or UNKNOWN_LANGUAGE),
        protocol=headers.get(PROTOCOL, ""),
        client_version=headers.get(CLIENT_VERSION, ""),
        date_time=headers.get(DATE_TIME, ""),
        request_id=headers.get(REQUEST_ID, ""),
        namespace=headers.get(NAMESPACE, ""),
        authorization_header=headers.get(AUTHORIZATION, ""),
    )
