"""Failure injection for the exactly-once Spark tests: the ``rocketmq_failing`` data source is ``rocketmq`` whose task
attempts, after sending every row of their partition (as half messages), fail as the ``injectFailure`` option says:
``<partition>:<attempt>:<action>`` items joined by commas, action ``raise`` (an exception: the task fails after
sending), ``kill`` (the Python worker SIGKILLs itself: a worker killed mid-task), ``sleep<ms>`` (a slow attempt) or
``presleep<ms>`` (a pause before the first send) or ``killpid<pid>@<n>`` (SIGKILL process ``pid``, e.g. the
gateway, when the task asks for its Arrow batch ``n``: its earlier batches' calls may still be in flight).
The module is pickled by value (pyspark's cloudpickle), so Spark's Python workers need not import it."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from mq_spark.datasource import PublishCommitMessage, RocketMQArrowWriter, RocketMQDataSource
from pyspark import cloudpickle
from pyspark.sql import SparkSession
from pyspark.sql.types import StructType

if TYPE_CHECKING:
    import pyarrow as pa
    from mq_common.protocol.transaction import OpenTransaction

FAILING_FORMAT = "rocketmq_failing"


def parse_plan(text: str) -> dict[tuple[int, int], str]:
    plan: dict[tuple[int, int], str] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        partition, attempt, action = item.split(":")
        plan[(int(partition), int(attempt))] = action
    return plan


class FailingWriter(RocketMQArrowWriter):
    def __init__(self, writer: RocketMQArrowWriter, plan: dict[tuple[int, int], str]) -> None:
        super().__init__(writer.options, writer.key)
        self.plan = plan

    def write(self, iterator: Iterator[pa.RecordBatch]) -> PublishCommitMessage:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        assert ctx is not None
        action = self.plan.get((ctx.partitionId(), ctx.attemptNumber()), "")
        if action.startswith("presleep"):
            time.sleep(int(action.removeprefix("presleep")) / 1000)
        if action.startswith("killpid"):  # killpid<pid>@<n>: SIGKILL that process when batch n is asked for
            pid, _, after = action.removeprefix("killpid").partition("@")
            iterator = _kill_after(iterator, int(pid), int(after))
        message = super().write(iterator)
        if action == "raise":
            raise RuntimeError(f"injected failure after sending partition {ctx.partitionId()}")
        if action == "kill":
            sys.stderr.flush()
            os.kill(os.getpid(), signal.SIGKILL)
        if action.startswith("sleep"):
            time.sleep(int(action.removeprefix("sleep")) / 1000)
        return message


def _kill_after(iterator: Iterator[pa.RecordBatch], pid: int, after: int) -> Iterator[pa.RecordBatch]:
    for index, batch in enumerate(iterator):
        if index == after:
            os.kill(pid, signal.SIGKILL)
        yield batch


class FailingDataSource(RocketMQDataSource):
    @classmethod
    def name(cls) -> str:
        return FAILING_FORMAT

    def writer(self, schema: StructType, overwrite: bool) -> RocketMQArrowWriter:
        return FailingWriter(super().writer(schema, overwrite), parse_plan(self.options.get("injectFailure", "")))


def register_failing(spark: SparkSession) -> None:
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    spark.dataSource.register(FailingDataSource)


# --- reading a job's outcome back (driver-side helpers of the tests; never pickled to workers) ----------------------


def stored_row_ids(namesrv_addr: str, topic: str) -> Counter[int]:
    """How often each ``row_id`` (of the JSON bodies) is stored on ``topic``."""
    from mq_local.testing import read_all

    stored = asyncio.run(read_all(namesrv_addr, topic))
    return Counter(json.loads(m.body)["row_id"] for _, m in stored)


def assert_each_row_once(namesrv_addr: str, topic: str, rows: int, wait_s: float = 30.0) -> None:
    """Every row id in ``range(rows)`` stored exactly once; the read is repeated for up to ``wait_s`` while rows are
    missing (a broker just restarted or promoted may still be building its ConsumeQueues, a route may be stale)."""
    deadline = time.monotonic() + wait_s
    counts = _row_ids_or_empty(namesrv_addr, topic)
    while sum(counts.values()) < rows and time.monotonic() < deadline:
        time.sleep(0.5)
        counts = _row_ids_or_empty(namesrv_addr, topic)
    missing = [i for i in range(rows) if counts[i] == 0]
    twice = {i: n for i, n in counts.items() if n > 1}
    assert (missing[:10], twice) == ([], {}), f"{len(missing)} missing, {len(twice)} duplicated"
    assert sum(counts.values()) == rows


def _row_ids_or_empty(namesrv_addr: str, topic: str) -> Counter[int]:
    from mq_common.errors import MQError

    try:
        return stored_row_ids(namesrv_addr, topic)
    except MQError:  # no route yet, a broker of the route not answering: read again
        return Counter()


def open_transactions(broker_addrs: Iterable[str], topic: str) -> list[OpenTransaction]:
    """The open transactions (half messages neither committed nor rolled back) of ``topic`` on each broker, at most
    1000 per broker (QueryOpenTransactions, the call behind mqadmin queryTransactions)."""
    from mq_client.transaction_admin_calls import TransactionAdminCalls
    from mq_common.channels import ChannelPool

    async def query() -> list[OpenTransaction]:
        pool = ChannelPool()
        try:
            calls = TransactionAdminCalls(pool)
            found: list[OpenTransaction] = []
            for addr in broker_addrs:
                found.extend((await calls.query_open_transactions(addr, topic)).transactions)
            return found
        finally:
            await pool.close()

    return asyncio.run(query())
