"""The streaming sink's figures per micro-batch, next to Spark's own progress.

What pyspark 4.3 lets a Python sink show in a query's progress (``query.lastProgress`` / ``recentProgress``, and
a StreamingQueryListener's ``onQueryProgress``):

- ``progress["sink"]["numOutputRows"]``: Spark counts it itself, the rows the winning task attempts of the
  micro-batch handed to the sink's ``write`` (a re-run micro-batch's rows too, which the sink rolls back);
- ``progress["sink"]["metrics"]`` stays ``{}``: Spark fills it only from a sink table implementing
  ``ReportsSinkMetrics``, and the Python data source's table (``PythonTable``) does not;
- custom metrics: ``PythonWrite.supportedCustomMetrics`` returns Spark's fixed Python-worker metrics
  (``pythonDataSent``, ``pythonProcessingTime``, ...; SQL UI only). ``pyspark.sql.datasource`` has no way for a
  writer to add its own, and ``commit`` runs in a Python worker, not in the driver's process.

So the sink's own figures (what the gateway acknowledged and how the transactions ended) go into the micro-batch's
checkpoint record ``<checkpointLocation>/rocketmq-sink/<batchId>.json``, written by the sink's ``commit`` before
Spark reports the micro-batch's progress::

    {"batch_id": 3, "transactions": [...], "progress": {"rows", "published", "failed", "retried",
     "not_durable", "per_broker": {name: n}, "first_error", "tasks", "committed", "guarantee",
     "committed_transactions", "committed_half_messages", "already_committed", "rolled_back_half_messages",
     "end_transaction_calls"}, "rerun_progress": {...}}

(the transaction counts with ``deliveryGuarantee`` exactly_once only; ``rerun_progress``: the last re-run of the
micro-batch after a restart, whose rows were all rolled back). :func:`batch_progress` reads one record,
:func:`with_sink_progress` joins it to a progress entry. Plain file reads on the caller's thread; records exist
only for a checkpoint location on a local file system (a path or ``file:`` URI).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

STREAM_COMMITS_DIR: Final = "rocketmq-sink"
PROGRESS_KEY: Final = "progress"
RERUN_PROGRESS_KEY: Final = "rerun_progress"
SINK_PROGRESS_KEY: Final = "rocketmq"
"""The key :func:`with_sink_progress` adds to a progress entry."""


def sink_record_path(checkpoint: str, batch_id: int) -> Path | None:
    """``<checkpoint>/rocketmq-sink/<batch_id>.json``; None when ``checkpoint`` is empty or not on a local file
    system (``hdfs://``, ``s3a://``, ...). ``file:/x``, ``file:///x`` and plain paths are accepted."""
    location = checkpoint
    if location.startswith("file:"):
        location = location.removeprefix("file:")
        location = "/" + location.lstrip("/") if location.startswith("//") else location
    if not location or "://" in location:
        return None
    return Path(location) / STREAM_COMMITS_DIR / f"{batch_id}.json"


def read_sink_record(checkpoint: str | Path, batch_id: int) -> dict[str, Any] | None:
    """The whole record of micro-batch ``batch_id`` (see the module), None when there is none. Raises ValueError
    (json.JSONDecodeError) for a record that is not JSON."""
    path = sink_record_path(str(checkpoint), batch_id)
    if path is None or not path.is_file():
        return None
    record: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return record


def batch_progress(checkpoint: str | Path, batch_id: int) -> dict[str, Any] | None:
    """The sink's figures of micro-batch ``batch_id`` (the record's ``progress``), None when the micro-batch has
    no record or its record has no figures (written by a version before them, or the driver died between the
    record and the commit's end)."""
    record = read_sink_record(checkpoint, batch_id)
    if record is None or PROGRESS_KEY not in record:
        return None
    figures: dict[str, Any] = record[PROGRESS_KEY]
    return figures


def with_sink_progress(progress: Mapping[str, Any], checkpoint: str | Path) -> dict[str, Any]:
    """One entry of ``query.recentProgress`` (or ``lastProgress``, or ``event.progress`` in a
    StreamingQueryListener) as a plain dict, with ``"rocketmq"``: :func:`batch_progress` of its ``batchId``
    (None when there is none). ``checkpoint``: the query's checkpointLocation."""
    joined = {key: progress[key] for key in progress}  # via __getitem__: id and runId as strings
    joined[SINK_PROGRESS_KEY] = batch_progress(checkpoint, int(progress["batchId"]))
    return joined
