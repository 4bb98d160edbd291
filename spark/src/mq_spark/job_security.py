"""What a publishing job (mq_spark.jobs) needs to reach a secured cluster, read from its environment.

| env                    | meaning                                                                      |
|------------------------|------------------------------------------------------------------------------|
| MQ_SPARK_ACCESS_KEY    | access key the calls are signed with (the data source reads it by itself)    |
| MQ_SPARK_SECRET_KEY    | its secret key (idem: never passed as a Spark option by the jobs)            |
| MQ_SPARK_TLS_CA_FILE   | PEM CA bundle that verifies the gateway, name servers and brokers            |
| MQ_SPARK_TLS_CERT_FILE | client certificate for the progress bar's calls where mutual TLS is required |
| MQ_SPARK_TLS_KEY_FILE  | its key                                                                      |

Read once on the driver's main thread. The secret stays out of reprs and of the Spark options.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from mq_common.auth.settings import Credentials
from mq_common.tls import TlsClientConfig

from mq_spark.options import TLS_CA_FILE_ENV, credentials_of

TLS_CERT_FILE_ENV: Final = "MQ_SPARK_TLS_CERT_FILE"
TLS_KEY_FILE_ENV: Final = "MQ_SPARK_TLS_KEY_FILE"


def _path(env: Mapping[str, str], name: str) -> Path | None:
    value = env.get(name)
    return Path(value) if value else None


@dataclass(frozen=True, slots=True)
class JobSecurity:
    """TLS and credentials of a job: ``tls`` on, the CA and client files, the signing credentials."""

    tls: bool = False
    tls_client: TlsClientConfig | None = None
    credentials: Credentials | None = field(default=None, repr=False)

    @classmethod
    def from_env(cls, tls: bool, env: Mapping[str, str] | None = None) -> JobSecurity:
        """From ``env`` (default os.environ). Raises InvalidParameterError (29) for half credentials."""
        env = os.environ if env is None else env
        client = None
        if tls:
            client = TlsClientConfig(
                _path(env, TLS_CA_FILE_ENV), _path(env, TLS_CERT_FILE_ENV), _path(env, TLS_KEY_FILE_ENV)
            )
        return cls(tls, client, credentials_of({}, env))

    def writer_options(self) -> dict[str, str]:
        """The data source's TLS options (its keys it reads from the executors' environment itself)."""
        if not self.tls:
            return {}
        options = {"tls": "true"}
        if self.tls_client is not None and self.tls_client.ca_file is not None:
            options["tlsCaFile"] = str(self.tls_client.ca_file)
        return options
