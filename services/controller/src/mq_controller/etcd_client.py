"""One ``aetcd`` client per etcd member, in plaintext or over mutual TLS.

``aetcd`` 1.0.0 (the version uv.lock pins) dials only plaintext: its ``Client.connect`` always opens
``grpc.aio.insecure_channel`` and takes no CA or certificate. :class:`TlsEtcdClient` replaces that one step: it opens
``grpc.aio.secure_channel`` with the controller's CA bundle (verifies etcd's server certificate) and its component
certificate (what etcd's ``--client-cert-auth`` asks for), then creates the same stubs the base class would; every
other method (get, put, transaction, lease, status) is aetcd's own. A member is dialled by its own name, so the
name verified in its certificate is the endpoint's host (or TlsClientConfig.server_name_override).

Mirrors the TLS options of etcd's own clients (``etcdctl --cacert/--cert/--key`` with ``https://`` endpoints).
Runs on the controller's loop; reading the PEM files runs in a worker thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, Final

import aetcd
import grpc
from aetcd import rpc
from mq_common.tls import TlsClientConfig, channel_credentials, channel_options

CHANNEL_OPTIONS: Final[Mapping[str, Any]] = {"grpc.enable_retries": 1}


class TlsEtcdClient(aetcd.Client):  # type: ignore[misc]  # aetcd ships no type information
    """An aetcd client whose channel is TLS with ``tls``'s CA and client certificate.

    ``await connect()`` reads the PEM files (in a thread; OSError when unreadable) and opens the channel; calls
    connect first on their own, as in aetcd. A handshake etcd refuses surfaces as aetcd's ConnectionFailedError
    (gRPC UNAVAILABLE) on the first call.
    """

    def __init__(self, host: str, port: int, tls: TlsClientConfig, timeout_s: float) -> None:
        options = {**CHANNEL_OPTIONS, **dict(channel_options(tls))}
        super().__init__(host=host, port=port, timeout=timeout_s, options=options)
        self._tls = tls
        self._connect_lock = asyncio.Lock()

    async def connect(self) -> None:
        if self._connected.is_set():
            return
        async with self._connect_lock:  # one channel even when several calls connect at once
            if not self._connected.is_set():
                await self._open_channel()

    async def _open_channel(self) -> None:
        credentials = await asyncio.to_thread(channel_credentials, self._tls)
        channel = grpc.aio.secure_channel(f"{self._host}:{self._port}", credentials, list(self._options.items()))
        self.channel = channel
        self.kvstub = rpc.KVStub(channel)
        self.clusterstub = rpc.ClusterStub(channel)
        self.leasestub = rpc.LeaseStub(channel)
        self.maintenancestub = rpc.MaintenanceStub(channel)
        self._connected.set()


def split_endpoint(endpoint: str) -> tuple[str, int]:
    """``"etcd-0.example:2379"`` -> ``("etcd-0.example", 2379)``. Raises ValueError for a missing or bad port."""
    host, sep, port = endpoint.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"etcd endpoint {endpoint!r} is not host:port")
    return host, int(port)


def etcd_client(endpoint: str, tls: TlsClientConfig | None, timeout_s: float) -> aetcd.Client:
    """A client of the one member at ``endpoint`` (``host:port``): TLS when ``tls`` is given, else plaintext."""
    host, port = split_endpoint(endpoint)
    if tls is not None:
        return TlsEtcdClient(host, port, tls, timeout_s)
    return aetcd.Client(host=host, port=port, timeout=timeout_s, options=dict(CHANNEL_OPTIONS))
