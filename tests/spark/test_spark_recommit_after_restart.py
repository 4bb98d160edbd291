"""A job's commit repeated after its brokers restarted (a driver retrying ``commit()``, a restarted streaming query
re-committing a recorded micro-batch): the brokers forgot the ended transactions in memory and their check progress
moved past them, yet they still know how each ended (the summary op records of whole ends, through the IndexFile),
so the repeated commit succeeds at once as already committed, instead of looping to its deadline; every row once.
Runs the writer's driver and task sides in this process against a real cluster whose check-back runs every 300 ms."""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest
from mq_local.cluster import LocalCluster
from mq_local.testing import make_topic, read_all, spec_for_tests
from mq_spark import datasource
from mq_spark.datasource import PublishCommitMessage, RocketMQArrowWriter, read_summary
from mq_spark.options import WriterOptions

ROWS_PER_PARTITION = 200


def _row_ids(cluster: LocalCluster, topic: str) -> Counter[int]:
    stored = asyncio.run(read_all(cluster.namesrv_addr, topic))
    return Counter(json.loads(m.body)["row_id"] for _, m in stored)


def test_a_commit_repeated_after_the_brokers_restarted_is_already_committed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = spec_for_tests(tmp_path / "data", broker_env={"MQ_BROKER_TRANSACTION_CHECK_INTERVAL_MS": "300"})
    with LocalCluster(spec) as cluster:
        topic = asyncio.run(make_topic(cluster, "eo_recommit_restart"))
        summary = tmp_path / "summary.json"
        options = WriterOptions.parse(
            {"gateway": cluster.gateway_addr, "topic": topic, "batchSize": "50", "summaryPath": str(summary)}
        )
        writer = RocketMQArrowWriter(options, "restart0123456789")
        winners: list[PublishCommitMessage] = []
        for partition in range(2):
            rows = list(range(partition * ROWS_PER_PARTITION, (partition + 1) * ROWS_PER_PARTITION))
            txid = f"restart0123456789-p{partition}-a0-t{partition}"
            monkeypatch.setattr(datasource, "attempt_transaction_id", lambda _key, txid=txid: txid)
            winners.append(writer.write(iter([pa.RecordBatch.from_pydict({"row_id": rows})])))
        writer.commit(winners)
        assert read_summary(summary)["committed_half_messages"] == 2 * ROWS_PER_PARTITION
        time.sleep(2.0)  # several check passes: the check progress moves past the committed half messages
        for name in cluster.spec.broker_names:
            cluster.stop_broker(name)
            cluster.start_broker(name)
        began = time.monotonic()
        writer.commit(winners)  # before the brokers kept a summary: 120 s of retries, then TransactionEndError
        took_s = time.monotonic() - began
        result = read_summary(summary)
        assert (result["committed_half_messages"], result["already_committed"]) == (0, 2 * ROWS_PER_PARTITION)
        assert took_s < 30, f"the repeated commit took {took_s:.1f} s"
        counts = _row_ids(cluster, topic)
        deadline = time.monotonic() + 30
        while sum(counts.values()) < 2 * ROWS_PER_PARTITION and time.monotonic() < deadline:
            time.sleep(0.5)  # a restarted broker may still be building its ConsumeQueues
            counts = _row_ids(cluster, topic)
        assert counts == Counter(range(2 * ROWS_PER_PARTITION)), "every row once"
