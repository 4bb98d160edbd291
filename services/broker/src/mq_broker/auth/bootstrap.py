"""The users a broker creates on start from its settings: RocketMQ's ``initAuthenticationUser`` and
``innerClientAuthenticationCredentials`` (both JSON, both kept as SUPER users).

Mirrors AuthenticationMetadataManagerImpl#initUser's parsing. Raises ValueError (the broker refuses to start) for
malformed JSON or a user the model refuses; the text never holds the secret. Pure; start-up thread.
"""

from __future__ import annotations

import json

from mq_common.auth.model import User, UserType
from pydantic import SecretStr


def _object(name: str, secret: SecretStr) -> dict[str, object]:
    try:
        data = json.loads(secret.get_secret_value())
    except json.JSONDecodeError:
        raise ValueError(f"{name} is not a JSON object") from None
    if not isinstance(data, dict):
        raise ValueError(f"{name} is not a JSON object")
    return data


def init_authentication_user(secret: SecretStr | None) -> User | None:
    """``{"username": ..., "password": ...}`` -> a SUPER user; None when unset."""
    if secret is None:
        return None
    data = _object("init_authentication_user", secret)
    return User(str(data.get("username", "")), str(data.get("password", "")), UserType.SUPER)


def inner_client_user(secret: SecretStr | None) -> User | None:
    """``{"accessKey": ..., "secretKey": ...}`` -> the components' SUPER user; None when unset."""
    if secret is None:
        return None
    data = _object("inner_client_authentication_credentials", secret)
    return User(str(data.get("accessKey", "")), str(data.get("secretKey", "")), UserType.SUPER)
