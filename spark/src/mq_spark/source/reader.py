"""The readers of the ``rocketmq`` source: batch (DataSourceReader) and streaming (DataSourceStreamReader).

Where things run (Spark 4.3 Python data source API): ``partitions``, ``initialOffset``, ``latestOffset`` and
``commit`` run in a Python worker of the driver (they resolve offsets against the brokers, :mod:`.plan`);
``read`` runs once per partition in an executor's Python worker (:func:`mq_spark.source.pull.read_range`). A
partition is one queue's offset range, at most ``maxRowsPerPartition`` offsets long. The streaming offsets are
the per-queue JSON of :mod:`mq_spark.source.offsets`; Spark keeps them in the query's checkpoint, so a restarted
query goes on where its last committed micro-batch ended. No consumer group offset is committed to the brokers.
Mirrors what DefaultLitePullConsumer does with assigned queues and caller-held offsets (assign + seek + poll).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow

from mq_spark.source.offsets import QueueOffsets, from_json_dict, to_json_dict
from mq_spark.source.options import SourceOptions
from mq_spark.source.plan import limit_offsets, queue_bounds, resolve, run, split_ranges
from mq_spark.source.pull import QueueRange, read_range

if TYPE_CHECKING:
    import pyarrow as pa
    from mq_client.consumer import PullConsumer


class QueueRangePartition(InputPartition):
    """One Spark partition: a QueueRange (picklable)."""

    def __init__(self, rng: QueueRange) -> None:
        super().__init__(rng)
        self.rng = rng


def _partitions(options: SourceOptions, start: QueueOffsets, end: QueueOffsets) -> list[QueueRangePartition]:
    return [QueueRangePartition(r) for r in split_ranges(start, end, options.max_rows_per_partition)]


class RocketMQReader(DataSourceReader):
    """``spark.read.format("rocketmq")``: from ``startingOffsets``/``startingTimestamp`` to ``endingOffsets``,
    both resolved once when Spark plans the read."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        """The queues' ranges. Raises TopicNotExistError (17) for an unknown topic, transport errors."""

        async def plan(consumer: PullConsumer) -> tuple[QueueOffsets, QueueOffsets]:
            bounds = await queue_bounds(consumer, self.options.topic)
            start = await resolve(consumer, self.options.starting, bounds, default_latest=False)
            end = await resolve(consumer, self.options.ending, bounds, default_latest=True)
            return start, end

        start, end = run(self.options, plan)
        found = _partitions(self.options, start, end)
        # An empty read still needs one task: an empty range yields no row.
        return found or [QueueRangePartition(QueueRange(self.options.topic, "", 0, 0, 0))]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """The partition's messages as Arrow batches (pulls, tag filter: :func:`read_range`)."""
        assert isinstance(partition, QueueRangePartition)
        yield from read_range(self.options, partition.rng)


class RocketMQStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("rocketmq")``: micro-batches of per-queue offset ranges; at most
    ``maxOffsetsPerTrigger`` offsets per micro-batch when set (Spark's ReadMaxRows); ``Trigger.AvailableNow`` stops
    at the max offsets seen when the query started."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._available_now: QueueOffsets | None = None

    def initialOffset(self) -> dict[str, dict[str, int]]:
        """Where a new query starts (``startingOffsets``, default latest, or ``startingTimestamp``)."""

        async def plan(consumer: PullConsumer) -> QueueOffsets:
            bounds = await queue_bounds(consumer, self.options.topic)
            return await resolve(consumer, self.options.starting, bounds, default_latest=False)

        return to_json_dict(self.options.topic, run(self.options, plan))

    def getDefaultReadLimit(self) -> ReadLimit:
        """ReadMaxRows(maxOffsetsPerTrigger) when that option is set, else ReadAllAvailable."""
        if self.options.max_offsets_per_trigger is None:
            return ReadAllAvailable()
        return ReadMaxRows(self.options.max_offsets_per_trigger)

    def prepareForTriggerAvailableNow(self) -> None:
        """Remember every queue's max offset now: an AvailableNow query reads up to there and stops."""
        bounds = run(self.options, lambda consumer: queue_bounds(consumer, self.options.topic))
        self._available_now = {mq: b.max_offset for mq, b in bounds.items()}

    def latestOffset(self, start: dict[str, dict[str, int]], limit: ReadLimit) -> dict[str, dict[str, int]]:
        """The next micro-batch's end: every queue's max offset (a queue new since ``start`` from its min offset),
        capped by ``limit`` when it is ReadMaxRows; never before ``start``."""
        begin = from_json_dict(self.options.topic, start)
        bounds = run(self.options, lambda consumer: queue_bounds(consumer, self.options.topic))
        effective = {mq: begin.get(mq, b.min_offset) for mq, b in bounds.items()}
        latest = {mq: max(effective[mq], b.max_offset) for mq, b in bounds.items()}
        if self._available_now is not None:
            latest = {
                mq: max(effective[mq], min(o, self._available_now.get(mq, effective[mq]))) for mq, o in latest.items()
            }
        if isinstance(limit, ReadMaxRows):
            latest = limit_offsets(effective, latest, limit.max_rows)
        end = {**begin, **latest}
        return to_json_dict(self.options.topic, end)

    def partitions(self, start: dict[str, dict[str, int]], end: dict[str, dict[str, int]]) -> Sequence[InputPartition]:
        """The queues' ranges between two checkpointed offsets (empty when nothing moved)."""
        topic = self.options.topic
        return _partitions(self.options, from_json_dict(topic, start), from_json_dict(topic, end))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """The partition's messages as Arrow batches."""
        assert isinstance(partition, QueueRangePartition)
        yield from read_range(self.options, partition.rng)

    def commit(self, end: dict[str, dict[str, int]]) -> None:
        """Nothing to do: the offsets live in Spark's checkpoint, not in a consumer group on the brokers."""
