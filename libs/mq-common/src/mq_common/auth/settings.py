"""AuthSettings: the authentication/authorisation fields a service's settings mix in.

``class GatewaySettings(ServiceSettings, AuthSettings)`` gives ``MQ_GATEWAY_AUTHENTICATION_ENABLED`` etc. Secrets
(the init user's password, the inner client's secret key) are pydantic SecretStr: ``repr``, ``str`` and
``model_dump`` show ``**********``; read them only through :meth:`AuthSettings.init_user` and
:meth:`AuthSettings.inner_client_credentials`. Read once at start-up. Mirrors
org.apache.rocketmq.auth.config.AuthConfig (authenticationEnabled, authorizationEnabled, initAuthenticationUser,
innerClientAuthenticationCredentials, user/aclCacheRefreshSecond, user/aclCacheMaxNum).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import ClassVar, Final

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

from mq_common.auth.clock import MAX_CLOCK_SKEW_MS
from mq_common.auth.model import User, UserType

_INIT_USER_FIELDS: Final = ("username", "password")
_INNER_FIELDS: Final = ("accessKey", "secretKey")


@dataclass(frozen=True, slots=True)
class Credentials:
    """An access key and its secret key (RocketMQ's SessionCredentials); the secret never reaches ``repr``."""

    access_key: str
    secret_key: str = field(repr=False)


def _json_fields(kind: str, text: str, names: tuple[str, str]) -> tuple[str, str]:
    """The two string fields ``names`` of the JSON object ``text``. Raises ValueError naming ``kind`` and the
    missing field, never quoting ``text`` (it holds a secret)."""
    try:
        loaded = json.loads(text)
    except ValueError:
        raise ValueError(f"{kind} must be a JSON object") from None
    if not isinstance(loaded, dict):
        raise ValueError(f"{kind} must be a JSON object")
    values = tuple(loaded.get(n) for n in names)
    if not all(isinstance(v, str) and v for v in values):
        raise ValueError(f"{kind} needs non-empty string fields {names[0]!r} and {names[1]!r}")
    return str(values[0]), str(values[1])


class AuthSettings(BaseModel):
    """Authentication and authorisation settings (a mixin of a service's settings)."""

    # hide_input_in_errors: a malformed secret JSON must not be echoed in the start-up error.
    model_config: ClassVar[ConfigDict] = ConfigDict(frozen=True, hide_input_in_errors=True)

    authentication_enabled: bool = Field(
        default=False,
        description="Verify the SDKs' signed authorization header on every call (RocketMQ authenticationEnabled); "
        "refusals: v2 UNAUTHORIZED 40100, v1 NO_PERMISSION 16.",
    )
    authorization_enabled: bool = Field(
        default=False,
        description="Check each call's resource and action against the user's ACL (RocketMQ authorizationEnabled); "
        "refusals: v2 FORBIDDEN 40300, v1 NO_PERMISSION 16.",
    )
    auth_clock_skew_ms: int = Field(
        default=120_000,
        ge=0,
        le=MAX_CLOCK_SKEW_MS,
        description="How far a client's x-mq-date-time may sit from a whole time-zone offset of the server's UTC "
        "clock, and how far back a known client's clock may go (stale date-times are refused).",
    )
    auth_replay_window_ms: int = Field(
        default=60_000,
        ge=1_000,
        description="How long after its first sight one signed date-time (access key, x-mq-date-time, signature) "
        "is accepted.",
    )
    auth_cache_refresh_ms: int = Field(
        default=60_000,
        ge=100,
        description="How long a user or ACL fetched from a broker is trusted before it is fetched again (RocketMQ "
        "user/aclCacheRefreshSecond); also bounds how long a rotated secret or changed ACL takes to apply.",
    )
    auth_cache_max_entries: int = Field(
        default=1_000,
        ge=1,
        description="Users and ACLs cached each (RocketMQ user/aclCacheMaxNum); least recently used go first.",
    )
    init_authentication_user: SecretStr | None = Field(
        default=None,
        description='A super user created at first start, JSON {"username": ..., "password": ...} (RocketMQ '
        "initAuthenticationUser).",
    )
    inner_client_authentication_credentials: SecretStr | None = Field(
        default=None,
        description='JSON {"accessKey": ..., "secretKey": ...} that components sign their calls to brokers with '
        "when no component certificate is used (RocketMQ innerClientAuthenticationCredentials).",
    )

    @field_validator("init_authentication_user")
    @classmethod
    def _check_init_user(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None:
            _json_fields("init_authentication_user", value.get_secret_value(), _INIT_USER_FIELDS)
        return value

    @field_validator("inner_client_authentication_credentials")
    @classmethod
    def _check_inner_credentials(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None:
            _json_fields("inner_client_authentication_credentials", value.get_secret_value(), _INNER_FIELDS)
        return value

    def init_user(self) -> User | None:
        """The SUPER user of ``init_authentication_user``, or None when unset."""
        if self.init_authentication_user is None:
            return None
        text = self.init_authentication_user.get_secret_value()
        username, password = _json_fields("init_authentication_user", text, _INIT_USER_FIELDS)
        return User(username, password, UserType.SUPER)

    def inner_client_credentials(self) -> Credentials | None:
        """The Credentials of ``inner_client_authentication_credentials``, or None when unset."""
        if self.inner_client_authentication_credentials is None:
            return None
        text = self.inner_client_authentication_credentials.get_secret_value()
        return Credentials(*_json_fields("inner_client_authentication_credentials", text, _INNER_FIELDS))
