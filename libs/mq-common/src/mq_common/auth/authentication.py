"""Authentication of one call: who signed it (the user of the access key), and is the signature good and fresh?

:class:`Authenticator` joins an AuthMetadataProvider (users) and a SignatureVerifier. Its answer names the
failure (a metric label) and a remark for the refusal (v2 UNAUTHORIZED 40100, v1/4.x NO_PERMISSION 16) that names
the access key at most, never a secret or a signature. Runs on the serving loop; costs one cached user lookup and
one cached-triple lookup per call. Mirrors org.apache.rocketmq.auth.authentication.chain.DefaultAuthenticationHandler.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from mq_common.auth.metadata import AuthMetadataProvider
from mq_common.auth.model import User, UserStatus
from mq_common.auth.signature import (
    AUTHORIZATION,
    DATE_TIME,
    AuthFailure,
    AuthorizationHeader,
    SignatureVerifier,
    parse_authorization,
)

# Header values longer than this are not auth headers (the SDKs' are under 150 characters).
MAX_AUTH_HEADER_CHARS: Final = 1_024

_REMARKS: Final = {
    AuthFailure.NO_CREDENTIALS: "authentication required: sign the call with an access key (authorization header)",
    AuthFailure.MALFORMED: "malformed authorization or x-mq-date-time header (expected MQv2-HMAC-SHA1, "
    "SignedHeaders=x-mq-date-time, yyyyMMddTHHmmssZ)",
    AuthFailure.UNKNOWN_USER: "unknown access key {ak}",
    AuthFailure.DISABLED_USER: "user {ak} is disabled",
    AuthFailure.BAD_SIGNATURE: "signature mismatch for access key {ak}",
    AuthFailure.STALE_DATE_TIME: "stale or skewed x-mq-date-time for access key {ak}",
    AuthFailure.REPLAYED: "replayed signature for access key {ak}",
}


@dataclass(frozen=True, slots=True)
class AuthenticationResult:
    """``user`` when authenticated; else ``failure`` and ``remark``. ``access_key`` is what the call claimed."""

    user: User | None
    failure: AuthFailure | None = None
    remark: str = ""
    access_key: str = ""


def signed_headers(metadata: Iterable[tuple[str, str | bytes]] | None) -> tuple[AuthorizationHeader | None, str]:
    """The parsed ``authorization`` header (None when absent or not of the MQv2 form) and ``x-mq-date-time`` of
    a call's invocation metadata (keys case-insensitive; overlong values ignored). Never raises."""
    auth_value = date_time = ""
    for key, raw in metadata or ():
        if isinstance(raw, bytes) or len(raw) > MAX_AUTH_HEADER_CHARS:
            continue
        lowered = key.lower()
        if lowered == AUTHORIZATION:
            auth_value = raw
        elif lowered == DATE_TIME:
            date_time = raw
    return (parse_authorization(auth_value) if auth_value else None), date_time


def _refused(failure: AuthFailure, access_key: str) -> AuthenticationResult:
    return AuthenticationResult(None, failure, _REMARKS[failure].format(ak=access_key), access_key)


class Authenticator:
    """``authenticate`` -> AuthenticationResult. Raises AuthMetadataUnavailableError when the user cannot be
    fetched and none is cached (answer INTERNAL_SERVER_ERROR / SYSTEM_ERROR: not the client's fault)."""

    def __init__(self, provider: AuthMetadataProvider, verifier: SignatureVerifier) -> None:
        self._provider = provider
        self._verifier = verifier

    async def authenticate(
        self, header: AuthorizationHeader | None, date_time: str, client_id: str
    ) -> AuthenticationResult:
        """``client_id`` keys the learned client clock (``x-mq-client-id``; the peer address when absent)."""
        if header is None or header.anonymous:
            return _refused(AuthFailure.NO_CREDENTIALS, "")
        access_key = header.access_key
        user = await self._provider.get_user(access_key)
        if user is None:
            return _refused(AuthFailure.UNKNOWN_USER, access_key)
        if user.user_status is UserStatus.DISABLE:
            return _refused(AuthFailure.DISABLED_USER, access_key)
        failure = self._verifier.verify(header, date_time, user.password, client_id)
        if failure is not None:
            return _refused(failure, access_key)
        return AuthenticationResult(user, access_key=access_key)
