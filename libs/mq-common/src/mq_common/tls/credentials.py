"""gRPC credentials from TLS settings: server credentials that follow certificate rotation on disk, and
channel credentials for calls to TLS servers.

cert-manager and Kubernetes rotate a mounted Secret by swapping a symlink to a new directory, so the paths stay
and the files behind them change. The server asks :class:`ReloadingCertificates` before each new handshake
(gRPC's dynamic certificate fetcher, on a gRPC core thread, not the asyncio loop); it stats the three files
and reads them again only when one changed, so the next connection after a swap presents the new certificate
while open connections keep theirs. Mirrors what RocketMQ's FileWatchService + TlsCertificateManager do for the
Netty SslContext.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import cast

import grpc

from mq_common.logging import get_logger
from mq_common.tls.settings import TlsClientAuth, TlsClientConfig, TlsServerConfig

log = get_logger("mq_common.tls")

_Stamp = tuple[tuple[int, int, int, int], ...]


def _stamp(paths: list[Path]) -> _Stamp:
    """(device, inode, mtime ns, size) of each file, following symlinks. Raises OSError for a missing file."""
    stamps = []
    for path in paths:
        st = os.stat(path)
        stamps.append((st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size))
    return tuple(stamps)


class ReloadingCertificates:
    """The server's certificate configuration, read again when its files change.

    Called by gRPC (any core thread) before each handshake: returns None while the files are unchanged (gRPC
    keeps the current configuration) and a new grpc.ServerCertificateConfiguration after a change. A change
    whose files cannot be read (missing, half written) is logged and ignored; the next handshake retries.
    Raises OSError from the constructor when the files cannot be read at start-up.
    """

    def __init__(self, config: TlsServerConfig) -> None:
        self._config = config
        self._paths = [config.cert_file, config.key_file, *([config.ca_file] if config.ca_file else [])]
        self._lock = threading.Lock()
        self._stamp = _stamp(self._paths)
        self.initial = self._load()
        self.reloads = 0

    def _load(self) -> grpc.ServerCertificateConfiguration:
        config = self._config
        pair = (config.key_file.read_bytes(), config.cert_file.read_bytes())
        ca = config.ca_file.read_bytes() if config.ca_file is not None else None
        return grpc.ssl_server_certificate_configuration([pair], root_certificates=ca)

    def __call__(self) -> grpc.ServerCertificateConfiguration | None:
        with self._lock:
            try:
                stamp = _stamp(self._paths)
                if stamp == self._stamp:
                    return None
                loaded = self._load()
            except OSError as exc:
                log.warning("tls_certificate_reload_failed", cert_file=str(self._config.cert_file), error=str(exc))
                return None
            self._stamp = stamp
            self.reloads += 1
            log.info("tls_certificate_reloaded", cert_file=str(self._config.cert_file), reloads=self.reloads)
            return loaded


def server_credentials(config: TlsServerConfig) -> grpc.ServerCredentials:
    """Dynamic SSL server credentials over :class:`ReloadingCertificates`. Client certificates are required
    (and verified against ``ca_file``) only for TlsClientAuth.REQUIRE. Reads the files (blocking, at start-up);
    raises OSError when they cannot be read."""
    fetcher = ReloadingCertificates(config)
    # gRPC accepts None from the fetcher ("unchanged"); its type stubs do not say so.
    typed_fetcher = cast("Callable[[], grpc.ServerCertificateConfiguration]", fetcher)
    return grpc.dynamic_ssl_server_credentials(
        fetcher.initial, typed_fetcher, require_client_authentication=config.client_auth == TlsClientAuth.REQUIRE
    )


def channel_credentials(config: TlsClientConfig) -> grpc.ChannelCredentials:
    """SSL channel credentials: ``ca_file`` verifies the server (None: system roots), the client pair is sent
    when both files are set. Reads the files (blocking, once per ChannelPool); raises OSError when unreadable."""
    ca = config.ca_file.read_bytes() if config.ca_file is not None else None
    if config.cert_file is not None and config.key_file is not None:
        return grpc.ssl_channel_credentials(ca, config.key_file.read_bytes(), config.cert_file.read_bytes())
    return grpc.ssl_channel_credentials(ca)


def channel_options(config: TlsClientConfig | None) -> list[tuple[str, str]]:
    """Extra channel options of ``config``: the target name override when set."""
    if config is None or not config.server_name_override:
        return []
    return [("grpc.ssl_target_name_override", config.server_name_override)]
