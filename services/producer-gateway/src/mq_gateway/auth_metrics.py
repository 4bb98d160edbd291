"""Counts the gateway's authentication failures and authorisation denials (families of GatewayMetrics).

Label bounds: ``user`` keeps the first ``max_users`` distinct known usernames (later ones share ``_other``); a
call naming an unknown access key counts as ``_unknown`` and one without credentials as ``_anonymous``, so a
client spraying random access keys cannot grow the series. ``resource_type`` and ``action`` are enums; the
resource name is deliberately no label (any client may name any topic). RocketMQ 5 defines no metric for these,
so the names are ours (``mq_gateway_auth_failures_total``, ``mq_gateway_auth_denials_total``). Runs on the
gateway's asyncio loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from mq_common.auth.signature import AuthFailure
from mq_common.metrics import TopicLabels

from mq_gateway.auth import Permission

if TYPE_CHECKING:
    from mq_gateway.metrics import GatewayMetrics

UNKNOWN_USER: Final = "_unknown"
ANONYMOUS: Final = "_anonymous"


class AuthMetrics:
    """An AuthObserver (mq_gateway.auth) over ``metrics``' auth families."""

    def __init__(self, metrics: GatewayMetrics, max_users: int) -> None:
        self._failures = metrics.auth_failures
        self._denials = metrics.auth_denials
        self._users = TopicLabels(max_users)

    def on_failure(self, failure: AuthFailure, access_key: str) -> None:
        if not access_key:
            user = ANONYMOUS
        elif failure in (AuthFailure.UNKNOWN_USER, AuthFailure.MALFORMED):
            user = UNKNOWN_USER
        else:
            user = self._users(access_key)
        self._failures.child(failure.value, user).inc()

    def on_denial(self, username: str, permission: Permission) -> None:
        resource, action = permission
        self._denials.child(self._users(username), resource.resource_type.value, action.value).inc()
