"""Pull one queue's offset range into Arrow batches: the read side of one Spark partition.

Uses mq_client's PullConsumer (DefaultMQPullConsumer's path): the route from the name servers, the broker of the
group chosen per queue as the pull answers suggest (a slave when the master says so, or while the master is away;
mq_client.consumer.pull_node), the broker's tag-hash filter and the client's tag filter. Each call drives its own
asyncio loop on the calling thread (a Spark Python worker's task thread), so :func:`read_range` is a plain
generator Spark can iterate.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import pyarrow as pa
from mq_client.consumer import PullConsumer
from mq_common.auth.interceptor import signing_interceptors
from mq_common.channels import ChannelPool
from mq_common.errors import MQClientError
from mq_common.protocol import MessageQueue, PullStatus
from mq_common.response_code import ResponseCode
from mq_common.tls import TlsClientConfig

from mq_spark.source.options import SourceOptions
from mq_spark.source.schema import to_record_batch

RETRY_PAUSE_S: Final = 0.2


@dataclass(frozen=True, slots=True)
class QueueRange:
    """Offsets ``start`` (inclusive) to ``end`` (exclusive) of queue ``broker_name``:``queue_id`` of ``topic``."""

    topic: str
    broker_name: str
    queue_id: int
    start: int
    end: int

    @property
    def mq(self) -> MessageQueue:
        return MessageQueue(self.topic, self.broker_name, self.queue_id)


def tls_config(options: SourceOptions) -> TlsClientConfig | None:
    """The TLS client config of the ``tls``/``tlsCaFile``/``tlsCertFile``/``tlsKeyFile`` options (None: plaintext)."""
    if not options.tls:
        return None
    return TlsClientConfig(
        ca_file=_path(options.tls_ca_file), cert_file=_path(options.tls_cert_file), key_file=_path(options.tls_key_file)
    )


def _path(name: str | None) -> Path | None:
    return Path(name) if name else None


@asynccontextmanager
async def opened(options: SourceOptions) -> AsyncIterator[PullConsumer]:
    """A PullConsumer for ``options`` on the running loop: TLS when ``tls``, every call signed with the options'
    credentials (MQv2-HMAC-SHA1) when set; its channels are closed on exit."""
    pool = ChannelPool(tls_config(options), signing_interceptors(options.credentials))
    try:
        async with PullConsumer(
            list(options.namesrv_addrs), options.consumer_group, pool=pool, pull_timeout_ms=options.pull_timeout_ms
        ) as consumer:
            yield consumer
    finally:
        await pool.close()


def read_range(options: SourceOptions, rng: QueueRange) -> Iterator[pa.RecordBatch]:
    """Every message of ``rng`` that matches ``options.subscription``, as RecordBatches (one per pull, empty pulls
    skipped), in queue order. Offsets the broker no longer holds (OFFSET_ILLEGAL with a later next offset: the min
    offset moved past them) are skipped. Raises MQClientError (SYSTEM_ERROR) when the range stops moving for
    ``read_timeout_ms`` before its end (e.g. a slave that stays behind), and the pull's errors (MQClientError,
    RemotingError)."""
    if rng.end <= rng.start:
        return
    loop = asyncio.new_event_loop()
    stack = AsyncExitStack()
    try:
        consumer = loop.run_until_complete(stack.enter_async_context(opened(options)))
        mq, offset = rng.mq, rng.start
        deadline = time.monotonic() + options.read_timeout_ms / 1000
        while offset < rng.end:
            max_nums = min(options.pull_batch_size, rng.end - offset)
            result = loop.run_until_complete(consumer.pull(mq, offset, max_nums, options.subscription))
            if result.status is PullStatus.FOUND or result.status is PullStatus.NO_MATCHED_MSG:
                messages = [m for m in result.messages if m.queue_offset < rng.end]
                if messages:
                    yield to_record_batch(rng.broker_name, messages)
            progressed = result.next_begin_offset > offset and result.status is not PullStatus.NO_NEW_MSG
            if progressed:
                offset = result.next_begin_offset
                deadline = time.monotonic() + options.read_timeout_ms / 1000
                continue
            if time.monotonic() > deadline:
                raise MQClientError(
                    f"reading {rng.broker_name}:{rng.queue_id} of {rng.topic}: stuck at offset {offset} of "
                    f"[{rng.start}, {rng.end}) ({result.status.value}, broker max offset {result.max_offset})",
                    ResponseCode.SYSTEM_ERROR,
                )
            time.sleep(RETRY_PAUSE_S)
    finally:
        loop.run_until_complete(stack.aclose())
        loop.close()
