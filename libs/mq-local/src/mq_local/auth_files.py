"""Generated credentials of a local cluster with authentication and authorisation on (``mqlocal up --auth``).

Layout under ``<data>/auth/`` (the folder 0700, every file 0600, made at cluster start):

- ``credentials.json``: ``{"init_user": {"username", "password"}, "inner": {"accessKey", "secretKey"}}``: the init
  super user the brokers create at first start (RocketMQ initAuthenticationUser) and the credentials components
  sign their broker and name server calls with (innerClientAuthenticationCredentials); the name server knows both
  as its super users;
- ``admin.env``: ``export MQ_ACCESS_KEY=... MQ_SECRET_KEY=...`` for the init super user, so a shell can
  ``source`` it and sign ``mqadmin`` (its createUser/createAcl... verbs read those variables).

Secrets are random (``secrets.token_urlsafe``), new for each fresh data folder, and never printed. Blocking file
I/O on the caller's thread at cluster start.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from mq_common.auth.settings import Credentials

from mq_local.tls_files import write_private

AUTH_DIR_NAME: Final = "auth"
INIT_USERNAME: Final = "rocketmq"
INNER_ACCESS_KEY: Final = "pyrocketmq-inner"
SECRET_BYTES: Final = 24


@dataclass(frozen=True, slots=True)
class LocalAuthFiles:
    """The generated credentials of a local cluster under ``directory`` (see the module docstring)."""

    directory: Path

    @classmethod
    def of_data_dir(cls, data_dir: Path) -> LocalAuthFiles:
        return cls(data_dir / AUTH_DIR_NAME)

    @property
    def credentials_file(self) -> Path:
        return self.directory / "credentials.json"

    @property
    def admin_env_file(self) -> Path:
        return self.directory / "admin.env"

    def write(self) -> None:
        """Make new credentials unless the files exist (a restart on a kept store keeps its users). Blocking."""
        if self.credentials_file.is_file():
            return
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        init = Credentials(INIT_USERNAME, secrets.token_urlsafe(SECRET_BYTES))
        inner = Credentials(INNER_ACCESS_KEY, secrets.token_urlsafe(SECRET_BYTES))
        data = {
            "init_user": {"username": init.access_key, "password": init.secret_key},
            "inner": {"accessKey": inner.access_key, "secretKey": inner.secret_key},
        }
        write_private(self.credentials_file, json.dumps(data, indent=2).encode())
        exports = f"export MQ_ACCESS_KEY={init.access_key} MQ_SECRET_KEY={init.secret_key}\n"
        write_private(self.admin_env_file, exports.encode())

    def _read(self) -> dict[str, dict[str, str]]:
        data: dict[str, dict[str, str]] = json.loads(self.credentials_file.read_text(encoding="utf-8"))
        return data

    def super_user(self) -> Credentials:
        """The init super user (signs admin calls: topics, users, ACLs). Raises OSError before :meth:`write`."""
        user = self._read()["init_user"]
        return Credentials(user["username"], user["password"])

    def inner(self) -> Credentials:
        """The components' inner credentials. Raises OSError before :meth:`write`."""
        inner = self._read()["inner"]
        return Credentials(inner["accessKey"], inner["secretKey"])

    def service_env(self, prefix: str, *, broker: bool) -> dict[str, str]:
        """The ``<prefix>AUTH*`` settings of a service; ``broker`` adds the init super user (brokers create it; the
        name server accepts its signature for route changes). The gateway gets the inner credentials only."""
        data = self._read()
        env = {
            f"{prefix}AUTHENTICATION_ENABLED": "true",
            f"{prefix}AUTHORIZATION_ENABLED": "true",
            f"{prefix}INNER_CLIENT_AUTHENTICATION_CREDENTIALS": json.dumps(data["inner"]),
        }
        if broker:
            env[f"{prefix}INIT_AUTHENTICATION_USER"] = json.dumps(data["init_user"])
        return env
