"""``mqadmin``'s TLS options: ``--tls``, ``--tls-ca-file``, ``--tls-cert-file``, ``--tls-key-file`` (or the
environment ``MQ_ADMIN_TLS_ENABLED``, ``MQ_ADMIN_TLS_CA_FILE``, ``MQ_ADMIN_TLS_CERT_FILE``,
``MQ_ADMIN_TLS_KEY_FILE``).

Mirrors the tls.enable / tls.client.trustCertPath / tls.client.certPath / tls.client.keyPath properties RocketMQ's
tools read (TlsSystemConfig). A client certificate is needed where the name server and brokers require mutual
TLS. Parsed on the main thread.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from mq_common.tls import TlsClientConfig

_PEM = {"exists": True, "dir_okay": False, "readable": True}

TlsEnabledOption = Annotated[
    bool, typer.Option("--tls", envvar="MQ_ADMIN_TLS_ENABLED", help="Call the cluster over TLS.")
]
TlsCaFileOption = Annotated[
    Path | None,
    typer.Option(
        "--tls-ca-file",
        envvar="MQ_ADMIN_TLS_CA_FILE",
        help="PEM CA bundle verifying the servers (default: system).",
        **_PEM,
    ),
]
TlsCertFileOption = Annotated[
    Path | None,
    typer.Option(
        "--tls-cert-file", envvar="MQ_ADMIN_TLS_CERT_FILE", help="PEM client certificate (mutual TLS).", **_PEM
    ),
]
TlsKeyFileOption = Annotated[
    Path | None,
    typer.Option("--tls-key-file", envvar="MQ_ADMIN_TLS_KEY_FILE", help="PEM key of --tls-cert-file.", **_PEM),
]


def tls_config(
    enabled: bool, ca_file: Path | None, cert_file: Path | None, key_file: Path | None
) -> TlsClientConfig | None:
    """The admin client's TLS (None: plaintext). Raises typer.BadParameter when only one of the pair is given
    (usage error, exit 2)."""
    if (cert_file is None) != (key_file is None):
        raise typer.BadParameter("--tls-cert-file and --tls-key-file go together")
    if not enabled:
        return None
    return TlsClientConfig(ca_file=ca_file, cert_file=cert_file, key_file=key_file)
