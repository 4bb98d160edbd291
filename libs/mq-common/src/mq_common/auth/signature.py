"""RocketMQ 5 request signing: the ``authorization`` header the official SDKs send, its verification, and signing.

Header (gRPC metadata, RMQ5-PROTOCOL.md section 2)::

    authorization: MQv2-HMAC-SHA1 Credential=<AK>, SignedHeaders=x-mq-date-time, Signature=<hex>
    x-mq-date-time: yyyyMMddTHHmmssZ

``<hex>`` is hex(HMAC-SHA1(key=secret key UTF-8, msg=x-mq-date-time value UTF-8)), 40 digits. SDK quirks read
here: Python and Go send lowercase hex, Java and Node uppercase (compared case-insensitively); Go sends
``Credential=<AK>//Rocketmq`` (the text before the first ``/`` is the access key); Python sends ``Credential=``
(empty) without keys: anonymous; the ``Z`` is literal and Java/Python/Go send LOCAL time (see clock.py).

Verification cost: :class:`SignatureVerifier` keeps verified (access key, date-time, signature) triples in a
bounded LRU, so a burst of calls in the same second costs one HMAC (RocketMQ's proxy caches authentication the
same way); failures are never cached. Pure and synchronous: call it on the serving loop (microseconds).
Mirrors org.apache.rocketmq.auth.authentication.builder.DefaultAuthenticationContextBuilder (parsing),
DefaultAuthenticationHandler (the HMAC check) and the SDKs' Signature classes (signing).
"""

from __future__ import annotations

import hashlib
import hmac
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import Enum
from typing import Final

from mq_common.auth.clock import ClientClocks, parse_date_time_ms
from mq_common.auth.lru import BoundedLru

AUTHORIZATION: Final = "authorization"
DATE_TIME: Final = "x-mq-date-time"
HMAC_SHA1_ALGORITHM: Final = "MQv2-HMAC-SHA1"
DATE_TIME_FORMAT: Final = "%Y%m%dT%H%M%SZ"
# Verified triples kept: one per (access key, second) of traffic; 64 Ki covers thousands of clients.
MAX_VERIFIED_SIGNATURES: Final = 65_536
_HEX_DIGITS: Final = frozenset("0123456789abcdef")
_SHA1_HEX_CHARS: Final = 40


class AuthFailure(Enum):
    """Why a call failed authentication (a metric label value; the v2 answer is UNAUTHORIZED 40100, the v1/4.x
    answer NO_PERMISSION 16)."""

    NO_CREDENTIALS = "no_credentials"
    MALFORMED = "malformed"
    UNKNOWN_USER = "unknown_user"
    DISABLED_USER = "disabled_user"
    BAD_SIGNATURE = "bad_signature"
    STALE_DATE_TIME = "stale_date_time"
    REPLAYED = "replayed"


@dataclass(frozen=True, slots=True)
class AuthorizationHeader:
    """The parsed ``authorization`` header: ``access_key`` ("" = anonymous), ``signed_headers`` (lowercased
    names) and the hex ``signature`` (lowercased: SDKs differ in case)."""

    algorithm: str
    access_key: str
    signed_headers: tuple[str, ...]
    signature: str

    @property
    def anonymous(self) -> bool:
        return not self.access_key


def parse_authorization(value: str) -> AuthorizationHeader | None:
    """``MQv2-HMAC-SHA1 Credential=AK[/...], SignedHeaders=a;b, Signature=hex`` -> AuthorizationHeader; None
    when the value is not of that form (no algorithm or no Signature field). Never raises."""
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
    access_key = fields.get("Credential", "").split("/", 1)[0].strip()
    signed = tuple(h.strip().lower() for h in fields.get("SignedHeaders", "").split(";") if h.strip())
    return AuthorizationHeader(algorithm, access_key, signed, fields["Signature"].lower())


def hmac_sha1_hex(secret_key: str, date_time: str) -> str:
    """Lowercase hex HMAC-SHA1 of ``date_time`` keyed by ``secret_key`` (both UTF-8): the SDKs' signature."""
    return hmac.new(secret_key.encode(), date_time.encode(), hashlib.sha1).hexdigest()


def format_date_time(now: datetime) -> str:
    """``now`` as ``yyyyMMddTHHmmssZ`` in UTC (a naive ``now`` is taken as UTC). Our own clients send true UTC."""
    if now.tzinfo is not None:
        now = now.astimezone(UTC)
    return now.strftime(DATE_TIME_FORMAT)


def sign(access_key: str, secret_key: str, now: datetime) -> tuple[tuple[str, str], ...]:
    """The metadata pairs ``(x-mq-date-time, ...)`` and ``(authorization, ...)`` of a call signed at ``now``,
    with lowercase hex like the Python SDK."""
    date_time = format_date_time(now)
    signature = hmac_sha1_hex(secret_key, date_time)
    header = f"{HMAC_SHA1_ALGORITHM} Credential={access_key}, SignedHeaders={DATE_TIME}, Signature={signature}"
    return ((DATE_TIME, date_time), (AUTHORIZATION, header))


@dataclass(frozen=True, slots=True)
class _Verified:
    secret_key: str
    client_time_ms: int
    first_seen_ms: int


def _malformed(header: AuthorizationHeader) -> bool:
    return (
        header.algorithm != HMAC_SHA1_ALGORITHM
        or DATE_TIME not in header.signed_headers
        or len(header.signature) != _SHA1_HEX_CHARS
        or not _HEX_DIGITS.issuperset(header.signature)
    )


class SignatureVerifier:
    """Checks a signed call: signature, then the date-time against the client's clock (clock.py), then the replay
    window (a verified triple is accepted for ``replay_window_ms`` after it was first seen).

    ``verify`` returns None when the call passes, else the AuthFailure. The signature is checked BEFORE the
    clock learns anything, so an unsigned caller cannot move a client's learned zone. Use from one loop."""

    def __init__(
        self,
        clock_skew_ms: int,
        replay_window_ms: int,
        max_verified: int = MAX_VERIFIED_SIGNATURES,
        clocks: ClientClocks | None = None,
    ) -> None:
        self._replay_window_ms = replay_window_ms
        self._verified: BoundedLru[tuple[str, str, str], _Verified] = BoundedLru(max_verified)
        self._clocks = clocks if clocks is not None else ClientClocks(clock_skew_ms)

    def verify(
        self,
        header: AuthorizationHeader,
        date_time: str,
        secret_key: str,
        client_id: str,
        now_ms: int | None = None,
    ) -> AuthFailure | None:
        """``now_ms``: server UTC epoch milliseconds (default: now). Never raises."""
        now_ms = time.time_ns() // 1_000_000 if now_ms is None else now_ms
        if _malformed(header):
            return AuthFailure.MALFORMED
        key = (header.access_key, date_time, header.signature)
        verified = self._verified.get(key)
        if verified is None or not hmac.compare_digest(verified.secret_key, secret_key):
            client_time_ms = parse_date_time_ms(date_time)
            if client_time_ms is None:
                return AuthFailure.MALFORMED
            if not hmac.compare_digest(hmac_sha1_hex(secret_key, date_time), header.signature):
                return AuthFailure.BAD_SIGNATURE
            verified = _Verified(secret_key, client_time_ms, now_ms)
            self._verified.put(key, verified)
        elif now_ms - verified.first_seen_ms > self._replay_window_ms:
            return AuthFailure.REPLAYED
        if not self._clocks.accept((header.access_key, client_id), verified.client_time_ms, now_ms):
            return AuthFailure.STALE_DATE_TIME
        return None
