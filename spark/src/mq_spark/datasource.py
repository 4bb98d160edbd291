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
"tasks", "committed", "guarantee"}`` (+ the transaction counts of mq_spark.transactions.EndTotals when exactly once).

``deliveryGuarantee=exactly_once`` (the default): each task attempt sends half messages of its own transaction and
``commit`` commits the winners' transactions and rolls back the rest of the job (mq_spark.transactions); ``abort``
rolls back the whole job, so nothing of a failed job is delivered. ``at_least_once``: plain sends, retried in the
task; rows already sent when a job aborts stay sent.

Streaming (``df.writeStream.format("rocketmq")``, :class:`RocketMQStreamWriter`): each micro-batch is one job of
its own producer group (derived from the checkpoint location and the batch id). Before it commits a micro-batch,
``commit`` records the winners' transaction ids in ``<checkpointLocation>/rocketmq-sink/<batchId>.json``; a query
restarted from its checkpoint that runs that micro-batch again finds the record, commits the recorded transactions
again (idempotent) and rolls back everything the re-run sent: nothing is published twice. After the commit the record
also holds the micro-batch's figures (published, failed, transactions ended, ...): the query's progress cannot carry
a Python sink's own metrics, mq_spark.sink_progress says why and reads them.
"""

from __future__ import annotations

import json
import os
import sys
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark.sql import SparkSession
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from mq_spark.counts import PublishCounts
from mq_spark.options import WriterOptions
from mq_spark.sink_progress import PROGRESS_KEY, RERUN_PROGRESS_KEY, sink_record_path
from mq_spark.sink_progress import STREAM_COMMITS_DIR as STREAM_COMMITS_DIR  # where it was defined before
from mq_spark.transactions import attempt_transaction_id, job_key, job_producer_group

if TYPE_CHECKING:
    import pyarrow as pa

FORMAT_NAME = "rocketmq"


@dataclass(frozen=True)
class PublishCommitMessage(WriterCommitMessage):
    """What one task reports to ``commit``: its counters as a plain dict (see PublishCounts.to_dict) and, exactly
    once, the transaction id of its attempt."""

    counts: dict[str, Any] = field(default_factory=dict)
    transaction_id: str = ""


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
        options.check_columns(schema)
        return RocketMQArrowWriter(options, job_key(uuid.uuid4().hex))

    def streamWriter(self, schema: StructType, overwrite: bool) -> RocketMQStreamWriter:
        """The micro-batch sink (see the module). Raises InvalidParameterError (29) for a bad option."""
        options = WriterOptions.parse(self.options)
        options.check_columns(schema)
        return RocketMQStreamWriter(options, str(self.options.get("checkpointLocation") or ""))


def _publish(
    options: WriterOptions, iterator: Iterator[pa.RecordBatch], key: str, group_key: str | None = None
) -> PublishCommitMessage:
    """Send every row of the task's partition (exactly once: as half messages of the attempt's transaction of job
    ``key``, producer group of ``group_key``, default ``key``). Raises PublishFailedError when messages fail."""
    # Imported here, in the executor's worker: the workers that plan (writer) and commit the job need
    # neither gRPC nor pyarrow.compute, and a cold worker's imports sit on the write's critical path.
    from mq_spark.encoding import encode_batch
    from mq_spark.gateway_sender import GatewaySender

    txid = attempt_transaction_id(key) if options.exactly_once else ""
    group = job_producer_group(options.producer_group, group_key or key) if txid else None
    sender = GatewaySender(options, transaction_id=txid, producer_group=group)
    try:
        for batch in iterator:
            sender.add(
                encode_batch(batch, options.key_column, options.tag_column, topic_option_set=bool(options.topic))
            )
        counts = sender.finish()
    finally:
        sender.close()
    return PublishCommitMessage(counts.to_dict(), txid)


def _transactions(messages: Sequence[WriterCommitMessage | None]) -> list[str]:
    return [m.transaction_id for m in messages if isinstance(m, PublishCommitMessage) and m.transaction_id]


def _brokers(messages: Sequence[WriterCommitMessage | None]) -> dict[str, list[str]]:
    """Transaction id -> the brokers that stored its half messages (each must end it)."""
    return {
        m.transaction_id: [name for name, n in dict(m.counts.get("per_broker", {})).items() if n]
        for m in messages
        if isinstance(m, PublishCommitMessage) and m.transaction_id
    }


def _published(messages: Sequence[WriterCommitMessage | None]) -> dict[str, int]:
    """Transaction id -> the half messages its attempt sent (what its commit must find)."""
    return {
        m.transaction_id: int(m.counts.get("published", 0))
        for m in messages
        if isinstance(m, PublishCommitMessage) and m.transaction_id
    }


class RocketMQArrowWriter(DataSourceArrowWriter):
    """Arrow batches of one partition -> messages through the gateway. ``key``: the job's key (its producer group
    and transaction ids, mq_spark.transactions)."""

    def __init__(self, options: WriterOptions, key: str = "") -> None:
        self.options = options
        self.key = key or job_key(uuid.uuid4().hex)

    @property
    def producer_group(self) -> str:
        return job_producer_group(self.options.producer_group, self.key)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> PublishCommitMessage:
        """Send every row of the partition. Raises PublishFailedError when messages still fail after retries."""
        return _publish(self.options, iterator, self.key)

    def commit(self, messages: Sequence[WriterCommitMessage | None]) -> None:
        """Exactly once: commit the winners' transactions and roll back the rest of the job (raises
        TransactionEndError when that fails). Then sum the tasks' counters; log them and write the summary file."""
        extra: dict[str, Any] = {}
        if self.options.exactly_once:
            from mq_spark.transactions import TransactionEnder

            ender = TransactionEnder(self.options, self.producer_group)
            try:
                extra = ender.commit_all(_transactions(messages), _published(messages), _brokers(messages)).to_dict()
            finally:
                ender.close()
        _report(self.options, messages, committed=True, extra=extra)

    def abort(self, messages: Sequence[WriterCommitMessage | None]) -> None:
        """Exactly once: roll back everything the job sent. At least once: report what was published (nothing can
        be unsent)."""
        extra: dict[str, Any] = {}
        if self.options.exactly_once:
            extra = _rollback(self.options, self.producer_group)
        _report(self.options, messages, committed=False, extra=extra)


def _rollback(options: WriterOptions, group: str) -> dict[str, Any]:
    """Roll back a job's producer group; a failure is reported (the check-back discards what is left)."""
    from mq_spark.transactions import TransactionEnder

    ender = TransactionEnder(options, group)
    try:
        return ender.rollback_group().to_dict()
    except Exception as exc:
        print(json.dumps({"event": "rocketmq_rollback_failed", "group": group, "error": str(exc)}), file=sys.stderr)
        return {"rollback_error": str(exc)}
    finally:
        ender.close()


def _report(
    options: WriterOptions,
    messages: Sequence[WriterCommitMessage | None],
    *,
    committed: bool,
    extra: dict[str, Any],
    batch_id: int | None = None,
) -> dict[str, Any]:
    """Sum the tasks' counters (+ ``extra``), log them as one JSON line on stderr, write the summary file when
    ``summaryPath`` is set; returns the summary."""
    parts = [PublishCounts.from_dict(m.counts) for m in messages if isinstance(m, PublishCommitMessage)]
    summary = {
        **PublishCounts.total(parts).to_dict(),
        "tasks": len(parts),
        "committed": committed,
        "guarantee": options.delivery_guarantee,
        **extra,
    }
    if batch_id is not None:
        summary["batch_id"] = batch_id
    print(json.dumps({"event": "rocketmq_write_" + ("commit" if committed else "abort"), **summary}), file=sys.stderr)
    if options.summary_path:
        write_summary(Path(options.summary_path), summary)
    return summary


class RocketMQStreamWriter(DataSourceStreamArrowWriter):
    """Micro-batches -> messages, exactly once per micro-batch across query restarts (see the module).
    ``checkpoint``: the query's checkpointLocation (local path or file: URI; empty: no restart protection)."""

    def __init__(self, options: WriterOptions, checkpoint: str) -> None:
        self.options = options
        self.checkpoint = checkpoint
        self.query_key = job_key(checkpoint or uuid.uuid4().hex)
        self.run = uuid.uuid4().hex[:8]

    def _batch_key(self, batch_id: int) -> str:
        """The producer-group key of one micro-batch: the same in every run of the query."""
        return f"{self.query_key}b{batch_id}"

    def write(self, iterator: Iterator[pa.RecordBatch]) -> PublishCommitMessage:
        """Send the partition's rows of the running micro-batch (its id from the task's local property
        ``streaming.sql.batchId``)."""
        from pyspark import TaskContext

        ctx = TaskContext.get()
        raw = ctx.getLocalProperty("streaming.sql.batchId") if ctx is not None else None
        batch_id = int(raw) if raw is not None and raw.isdigit() else -1
        batch_key = self._batch_key(batch_id)
        return _publish(self.options, iterator, f"{batch_key}r{self.run}", batch_key)

    def _record_path(self, batch_id: int) -> Path | None:
        return sink_record_path(self.checkpoint, batch_id)

    def commit(self, messages: Sequence[WriterCommitMessage | None], batchId: int) -> None:
        """Commit micro-batch ``batchId``: record its winners (unless a record exists: a re-run), commit the
        recorded transactions, roll back the rest of the micro-batch's group. Raises TransactionEndError. Then add
        the micro-batch's figures to its record (``progress``, or ``rerun_progress`` for a re-run; any guarantee:
        mq_spark.sink_progress reads them)."""
        extra: dict[str, Any] = {}
        record = self._record_path(batchId)
        earlier = json.loads(record.read_text(encoding="utf-8")) if record is not None and record.exists() else None
        txids = _transactions(messages)
        if self.options.exactly_once:
            published, brokers = _published(messages), _brokers(messages)
            if earlier is not None:
                txids = list(earlier["transactions"])
                published, brokers = {}, {}  # ended in an earlier run: what they sent is not known here
                extra["rerun"] = True
            elif record is not None:
                write_summary(record, {"batch_id": batchId, "transactions": txids})
            from mq_spark.transactions import TransactionEnder

            group = job_producer_group(self.options.producer_group, self._batch_key(batchId))
            ender = TransactionEnder(self.options, group)
            try:
                extra.update(ender.commit_all(txids, published, brokers).to_dict())
            finally:
                ender.close()
        summary = _report(self.options, messages, committed=True, extra=extra, batch_id=batchId)
        if record is not None:
            figures = {k: v for k, v in summary.items() if k not in ("batch_id", "rerun")}
            if earlier is None:
                write_summary(record, {"batch_id": batchId, "transactions": txids, PROGRESS_KEY: figures})
            else:
                write_summary(record, {**earlier, RERUN_PROGRESS_KEY: figures})

    def abort(self, messages: Sequence[WriterCommitMessage | None], batchId: int) -> None:
        """Roll back everything micro-batch ``batchId`` sent in this run (exactly once)."""
        extra: dict[str, Any] = {}
        if self.options.exactly_once and (record := self._record_path(batchId)) is not None and not record.exists():
            extra = _rollback(self.options, job_producer_group(self.options.producer_group, self._batch_key(batchId)))
        _report(self.options, messages, committed=False, extra=extra, batch_id=batchId)


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
