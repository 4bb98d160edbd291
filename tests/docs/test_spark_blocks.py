"""docs/spark.md's code blocks, run as a reader would against a real local cluster (addresses replaced as in
test_readme_blocks): the mapped write, then the batch read, then the AvailableNow stream."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import pytest
from doc_blocks import find
from mq_local.cluster import LocalCluster
from mq_local.testing import spec_for_tests

pytestmark = [pytest.mark.integration, pytest.mark.spark]

SPARK_DOC: Final = "docs/spark.md"
MAKE_UP_NAMESRV: Final = "127.0.0.1:9876"
MAKE_UP_GATEWAY: Final = "127.0.0.1:8081"
RUN_BOUND_S: Final = 300


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    spec = spec_for_tests(tmp_path_factory.mktemp("spark-doc"), auto_create_topic_enable=True)
    with LocalCluster(spec) as started:
        yield started


def _run_block(contains: str, cluster: LocalCluster, tmp_path: Path) -> list[str]:
    """Run the block of docs/spark.md containing ``contains`` (the make-up addresses replaced by the cluster's,
    /tmp/ by ``tmp_path``); its stdout lines."""
    text = find(SPARK_DOC, contains).text
    text = text.replace(MAKE_UP_NAMESRV, cluster.namesrv_addr).replace(MAKE_UP_GATEWAY, cluster.gateway_addr)
    text = text.replace("/tmp/", f"{tmp_path}/")
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    done = subprocess.run(
        [sys.executable, "-c", text], env=env, capture_output=True, text=True, timeout=RUN_BOUND_S, check=False
    )
    assert done.returncode == 0, f"block {contains!r} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done.stdout.splitlines()


def test_spark_doc_write_read_and_stream(cluster: LocalCluster, tmp_path: Path) -> None:
    assert _run_block('"body binary, keys string', cluster, tmp_path) == []

    out = _run_block('orders(subscription="TagA")', cluster, tmp_path)
    broker, _queue, offset, keys, tag, rest = out[0].split(" ", 5)
    assert broker in cluster.broker_addrs, out
    assert (offset, keys, tag) == ("0", "order-1", "TagA"), out
    assert rest == repr(b'{"id": 1}') + " {'shop': 'north'}", out
    resume = json.loads(out[1])
    assert sum(resume["orders"].values()) == 2, out  # one past each queue's last message: 2 messages in all
    assert out[2:] == ["0 new messages"], out

    assert _run_block("readStream", cluster, tmp_path) == ["2 orders"]
