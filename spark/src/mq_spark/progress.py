"""A rich progress bar for a publish job, fed by the brokers' stored message counts.

A daemon thread owns its own asyncio loop and mq_client channels; every ``poll_interval_s`` it sums the
max offsets of every queue of the topic on every broker of the route (GetTopicStats) and shows the growth
since the bar started. Bounded: it stops when the ``with`` block ends or after ``max_seconds``; ``stop``
waits at most ``JOIN_WAIT_S`` for the thread. Start it after the SparkSession exists (gRPC channels).
On a secured cluster its ChannelPool takes ``tls`` (CA, and a client certificate where the name server and brokers
require mutual TLS) and ``credentials`` (calls signed by SigningInterceptor); when it may not read the stats the bar
just stays at its last count.
"""

from __future__ import annotations

import asyncio
import threading
import time
from types import TracebackType
from typing import Final

from mq_client.broker_client import BrokerClient
from mq_common.auth.interceptor import signing_interceptors
from mq_common.auth.settings import Credentials
from mq_common.channels import ChannelPool
from mq_common.errors import MQError
from mq_common.namesrv_client import NameServerClient
from mq_common.tls import TlsClientConfig
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

JOIN_WAIT_S: Final = 5.0
BASELINE_WAIT_S: Final = 15.0


async def stored_messages(namesrv: NameServerClient, brokers: BrokerClient, topic: str) -> int | None:
    """Sum of max offsets of every queue of ``topic`` over the route's brokers; None when unknown now."""
    try:
        route = await namesrv.get_route_info_by_topic(topic, timeout_ms=2_000)
        total = 0
        for data in route.broker_datas:
            addr = data.select_broker_addr()
            if addr is not None:
                offsets = await brokers.get_topic_stats(addr, topic, timeout_ms=2_000)
                total += sum(o.max_offset for o in offsets)
    except MQError:
        return None
    return total


class PublishProgress:
    """``with PublishProgress(namesrv_addr, "flights", total_rows): run_the_job()``."""

    def __init__(
        self,
        namesrv_addr: str,
        topic: str,
        total: int,
        *,
        poll_interval_s: float = 0.5,
        max_seconds: float = 3600.0,
        console: Console | None = None,
        tls: TlsClientConfig | None = None,
        credentials: Credentials | None = None,
    ) -> None:
        self.tls = tls
        self.credentials = credentials
        self.namesrv_addr = namesrv_addr
        self.topic = topic
        self.total = total
        self.poll_interval_s = poll_interval_s
        self.max_seconds = max_seconds
        self._stop = threading.Event()
        self._baseline_ready = threading.Event()
        self._thread = threading.Thread(target=self._thread_main, name="publish-progress", daemon=True)
        self._progress = Progress(
            TextColumn("[bold]publishing to {task.fields[topic]}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[rate]} msg/s"),
            TimeElapsedColumn(),
            console=console or Console(stderr=True),
            transient=False,
        )
        self._task = self._progress.add_task("publish", total=total, topic=topic, rate="-")
        self.stored = 0

    def __enter__(self) -> PublishProgress:
        self._progress.start()
        self._thread.start()
        self._baseline_ready.wait(BASELINE_WAIT_S)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def stop(self) -> None:
        """Stop polling (one last poll first) and the bar. Idempotent."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(JOIN_WAIT_S)
        self._progress.stop()

    def _thread_main(self) -> None:
        try:
            asyncio.run(self._poll_loop())
        finally:
            self._baseline_ready.set()

    async def _poll_loop(self) -> None:
        pool = ChannelPool(self.tls, signing_interceptors(self.credentials))
        try:
            namesrv, brokers = NameServerClient([self.namesrv_addr], pool), BrokerClient(pool)
            baseline = await stored_messages(namesrv, brokers, self.topic) or 0
            self._baseline_ready.set()
            started = time.monotonic()
            deadline = started + self.max_seconds
            while True:
                stopping = self._stop.is_set() or time.monotonic() > deadline
                now_total = await stored_messages(namesrv, brokers, self.topic)
                if now_total is not None:
                    self.stored = max(0, now_total - baseline)
                    rate = self.stored / max(time.monotonic() - started, 1e-3)
                    self._progress.update(self._task, completed=min(self.stored, self.total), rate=f"{rate:,.0f}")
                if stopping:
                    return
                await asyncio.to_thread(self._stop.wait, self.poll_interval_s)
        finally:
            await pool.close()
