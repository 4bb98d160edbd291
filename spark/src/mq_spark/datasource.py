"""The ``rocketmq`` Python data source: ``df.write.format("rocketmq").mode("append").option(...).save()``.

Every row becomes one message whose body is the JSON object of all its columns (:mod:`mq_spark.encoding`),
sent through the producer gateway's SendBatch with retries (:mod:`mq_spark.gateway_sender`); options in
:mod:`mq_spark.options`. Register once per session with :func:`register` (``spark.dataSource.register``).

Where things run (Spark 4.3 Python data source API): :meth:`RocketMQDataSource.writer` and
:meth:`RocketMQArrowWriter.commit` / ``abort`` run in Python workers started by the driver; ``write`` runs
once per partition in an executor's Python worker and returns a :class:`PublishCommitMessage`. Because
``commit`` does not run in the driver's own Python process, it reports the job's totals as one JSON log
line on stderr and, when the ``summaryPath`` option is set, as a JSON file (:func:`read_summary`):
``{"rows", "published", "failed", "retried", "not_durable", "per_broker": {name: n}, "first_error",
"tasks", "committed"}``. Rows already sent when a job aborts stay sent (``abort`` cannot undo them).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark.sql import SparkSession
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamReader,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from mq_spark.counts import PublishCounts
from mq_spark.options import WriterOptions

if TYPE_CHECKING:
    import pyarrow as pa

FORMAT_NAME = "rocketmq"


@dataclass(frozen=True)
class PublishCommitMessage(WriterCommitMessage):
    """What one task reports to ``commit``: its counters as a plain dict (see PublishCounts.to_dict)."""

    counts: dict[str, Any] = field(default_factory=dict)


class RocketMQDataSource(DataSource):
    """Data source ``rocketmq``: writes (options: :mod:`mq_spark.options`) and reads (:mod:`mq_spark.source`)."""

    @classmethod
    def name(cls) -> str:
        return FORMAT_NAME

    def schema(self) -> StructType:
        """The source's columns (mq_spark.source.schema.SOURCE_SCHEMA); a write uses its DataFrame's own."""
        from mq_spark.source.schema import SOURCE_SCHEMA

        return SOURCE_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        """``spark.read.format("rocketmq")`` (mq_spark.source.reader). Raises InvalidParameterError (29) for a
        bad option (mq_spark.source.options)."""
        from mq_spark.source.options import SourceOptions
        from mq_spark.source.reader import RocketMQReader

        return RocketMQReader(SourceOptions.parse(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        """``spark.readStream.format("rocketmq")`` (mq_spark.source.reader). Raises InvalidParameterError (29)
        for a bad option."""
        from mq_spark.source.options import SourceOptions
        from mq_spark.source.reader import RocketMQStreamReader

        return RocketMQStreamReader(SourceOptions.parse(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> RocketMQArrowWriter:
        """Validate the options against ``schema``. Raises InvalidParameterError (29) for a bad option."""
        options = WriterOptions.parse(self.options)
        options.check_columns(schema.fieldNames())
        return RocketMQArrowWriter(options)


class RocketMQArrowWriter(DataSourceArrowWriter):
    """Arrow batches of one partition -> messages through the gateway."""

    def __init__(self, options: WriterOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> PublishCommitMessage:
        """Send every row of the partition. Raises PublishFailedError when messages still fail after retries."""
        # Imported here, in the executor's worker: the workers that plan (writer) and commit the job need
        # neither gRPC nor pyarrow.compute, and a cold worker's imports sit on the write's critical path.
        from mq_spark.encoding import encode_batch
        from mq_spark.gateway_sender import GatewaySender

        sender = GatewaySender(self.options)
        try:
            for batch in iterator:
                sender.add(encode_batch(batch, self.options.key_column, self.options.tag_column))
            counts = sender.finish()
        finally:
            sender.close()
        return PublishCommitMessage(counts.to_dict())

    def commit(self, messages: Sequence[WriterCommitMessage | None]) -> None:
        """Sum the tasks' counters; log them and write the summary file (if ``summaryPath`` is set)."""
        self._report(messages, committed=True)

    def abort(self, messages: Sequence[WriterCommitMessage | None]) -> None:
        """Report what the finished tasks published before the job failed (nothing can be unsent)."""
        self._report(messages, committed=False)

    def _report(self, messages: Sequence[WriterCommitMessage | None], *, committed: bool) -> None:
        parts = [PublishCounts.from_dict(m.counts) for m in messages if isinstance(m, PublishCommitMessage)]
        summary = {**PublishCounts.total(parts).to_dict(), "tasks": len(parts), "committed": committed}
        print(
            json.dumps({"event": "rocketmq_write_" + ("commit" if committed else "abort"), **summary}), file=sys.stderr
        )
        if self.options.summary_path:
            write_summary(Path(self.options.summary_path), summary)


def write_summary(path: Path, summary: dict[str, Any]) -> None:
    """Write ``summary`` as JSON atomically (temp file + rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(summary), encoding="utf-8")
    os.replace(tmp, path)


def read_summary(path: Path) -> dict[str, Any]:
    """The summary written by the last commit/abort. Raises FileNotFoundError when there is none."""
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def register(spark: SparkSession) -> None:
    """Make ``format("rocketmq")`` available in ``spark``."""
    spark.dataSource.register(RocketMQDataSource)
