"""Failure injection for the exactly-once Spark tests: the ``rocketmq_failing`` data source is ``rocketmq`` whose task
attempts, after sending every row of their partition (as half messages), fail as the ``injectFailure`` option says:
``<partition>:<attempt>:<action>`` items joined by commas, action ``raise`` (an exception: the task fails after
sending), ``kill`` (the Python worker SIGKILLs itself: a worker killed mid-task), ``sleep<ms>`` (a slow attempt) or
``presleep<ms>`` (a pause before the first send) or ``killpid<pid>@<n>`` (SIGKILL process ``pid``, e.g. the
gateway, when the task asks for its Arrow batch ``n``: its earlier batches' calls may still be in flight).
The module is pickled by value (pyspark's cloudpickle), so Spark's Python workers need not import it."""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from mq_spark.datasource import PublishCommitMessage, RocketMQArrowWriter, RocketMQDataSource
from pyspark import cloudpickle
from pyspark.sql import SparkSession
from pyspark.sql.types import StructType

if TYPE_CHECKING:
    import pyarrow as pa

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
