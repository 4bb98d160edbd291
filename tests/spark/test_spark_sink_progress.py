"""mq_spark.sink_progress without Spark: where a micro-batch's record lies and how its figures are read and joined
to a progress entry."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mq_spark.sink_progress import batch_progress, read_sink_record, sink_record_path, with_sink_progress


@pytest.mark.parametrize(
    ("checkpoint", "expected"),
    [
        ("/data/cp", "/data/cp/rocketmq-sink/7.json"),
        ("file:/data/cp", "/data/cp/rocketmq-sink/7.json"),
        ("file:///data/cp", "/data/cp/rocketmq-sink/7.json"),
        ("relative/cp", "relative/cp/rocketmq-sink/7.json"),
    ],
)
def test_records_lie_under_a_local_checkpoint(checkpoint: str, expected: str) -> None:
    assert sink_record_path(checkpoint, 7) == Path(expected)


@pytest.mark.parametrize("checkpoint", ["", "hdfs://nn/cp", "s3a://bucket/cp"])
def test_no_record_without_a_local_checkpoint(checkpoint: str) -> None:
    assert sink_record_path(checkpoint, 7) is None
    assert batch_progress(checkpoint, 7) is None


def test_figures_are_joined_to_their_progress_entry(tmp_path: Path) -> None:
    folder = tmp_path / "rocketmq-sink"
    folder.mkdir()
    figures = {"published": 30, "failed": 0, "committed_half_messages": 30}
    (folder / "2.json").write_text(json.dumps({"batch_id": 2, "transactions": ["t"], "progress": figures}))
    (folder / "3.json").write_text(json.dumps({"batch_id": 3, "transactions": []}))  # recorded, commit not ended
    progress = {"batchId": 2, "numInputRows": 30, "sink": {"numOutputRows": 30, "metrics": {}}}
    assert with_sink_progress(progress, tmp_path) == {**progress, "rocketmq": figures}
    assert with_sink_progress({**progress, "batchId": 3}, str(tmp_path))["rocketmq"] is None
    assert with_sink_progress({**progress, "batchId": 4}, f"file://{tmp_path}")["rocketmq"] is None
    assert (read_sink_record(tmp_path, 3) or {})["transactions"] == []
