"""Readiness checks: grpc.health.v1 SERVING, and every broker group registered on the name server.

Blocking helpers for the launcher's thread. The name server check uses mq_client's asyncio client on a
private event loop in a helper thread, so it also works when the caller already runs an event loop
(pytest-asyncio tests).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
from collections.abc import Callable, Collection, Coroutine
from typing import Any, Final, TypeVar

import grpc
from grpc_health.v1 import health_pb2
from mq_common.channels import ChannelPool
from mq_common.errors import MQError
from mq_common.namesrv_client import NameServerClient
from mq_common.tls import TlsClientConfig, channel_credentials, channel_options

HEALTH_CALL_MS: Final = 1_000
HEALTH_CHECK_METHOD: Final = "/grpc.health.v1.Health/Check"
POLL_INTERVAL_S: Final = 0.1

T = TypeVar("T")


def run_blocking(coro_fn: Callable[[], Coroutine[Any, Any, T]], wait_s: float) -> T:
    """Run ``coro_fn()`` on a fresh event loop in a helper thread; wait at most ``wait_s`` seconds.

    Raises TimeoutError when it takes longer (the helper thread is left to finish on its own).
    """
    with concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="mq-local") as pool:
        future = pool.submit(asyncio.run, coro_fn())
        return future.result(timeout=wait_s)


def _channel(addr: str, tls: TlsClientConfig | None) -> grpc.Channel:
    if tls is None:
        return grpc.insecure_channel(addr)
    return grpc.secure_channel(addr, channel_credentials(tls), options=channel_options(tls))


def health_status(
    addr: str, service: str = "", call_ms: int = HEALTH_CALL_MS, tls: TlsClientConfig | None = None
) -> str:
    """The grpc.health.v1 status name of ``service`` at ``addr`` (``SERVING``, ``NOT_SERVING``, ...), over TLS
    with ``tls``. Returns ``UNREACHABLE`` when the call fails at the transport level (a refused handshake too).
    """
    with _channel(addr, tls) as channel:
        check = channel.unary_unary(
            HEALTH_CHECK_METHOD,
            request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
            response_deserializer=health_pb2.HealthCheckResponse.FromString,
        )
        try:
            response = check(health_pb2.HealthCheckRequest(service=service), timeout=call_ms / 1000)
        except grpc.RpcError:
            return "UNREACHABLE"
    return str(health_pb2.HealthCheckResponse.ServingStatus.Name(response.status))


def wait_serving(addr: str, deadline: float, alive: Callable[[], bool], tls: TlsClientConfig | None = None) -> bool:
    """Poll ``addr`` (over TLS with ``tls``) until SERVING; False when ``deadline`` (time.monotonic) passes or
    ``alive()`` turns false."""
    while time.monotonic() < deadline:
        if not alive():
            return False
        if health_status(addr, tls=tls) == "SERVING":
            return True
        time.sleep(POLL_INTERVAL_S)
    return False


async def registered_brokers(
    namesrv_addr: str, call_ms: int = 2_000, tls: TlsClientConfig | None = None
) -> dict[str, tuple[str, int]]:
    """Broker name -> (master address, last registration ms) as the name server lists them now.

    Empty when the name server cannot answer. The timestamp is 0 when the live table lacks the address.
    """
    pool = ChannelPool(tls)
    try:
        info = await NameServerClient([namesrv_addr], pool).get_broker_cluster_info(timeout_ms=call_ms)
    except MQError:
        return {}
    finally:
        await pool.close()
    out: dict[str, tuple[str, int]] = {}
    for name, data in info.broker_addr_table.items():
        master = data.master_addr()
        if master is not None:
            out[name] = (master, info.last_update_timestamp_ms(master))
    return out


def wait_registered(
    namesrv_addr: str,
    expected: dict[str, str],
    deadline: float,
    alive: Callable[[], bool],
    since_ms: int = 0,
    tls: TlsClientConfig | None = None,
) -> bool:
    """Poll the name server until every ``expected`` broker name lists the expected master address with a
    registration at or after ``since_ms`` (ms since the epoch; so a restarted broker's stale entry does not
    count). False when ``deadline`` (time.monotonic) passes or ``alive()`` turns false."""

    def done(listed: dict[str, tuple[str, int]]) -> bool:
        for name, addr in expected.items():
            got = listed.get(name)
            if got is None or got[0] != addr or got[1] < since_ms:
                return False
        return True

    async def _poll() -> bool:
        while time.monotonic() < deadline:
            if not alive():
                return False
            if done(await registered_brokers(namesrv_addr, tls=tls)):
                return True
            await asyncio.sleep(POLL_INTERVAL_S)
        return False

    return run_blocking(_poll, max(0.0, deadline - time.monotonic()) + 5.0)


def missing_brokers(namesrv_addr: str, expected: Collection[str], tls: TlsClientConfig | None = None) -> list[str]:
    """The names in ``expected`` that the name server does not list (for error messages and status)."""
    listed = run_blocking(lambda: registered_brokers(namesrv_addr, tls=tls), 10.0)
    return [name for name in expected if name not in listed]
