"""build_spark_session standalone (loopback, the given master) and under spark-submit (the submission's master)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.spark,
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning"),
]

SCRIPT = """
import json
from mq_spark.session import build_spark_session, launched_by_spark_submit
spark = build_spark_session("session-test", master="local[2]")
conf = spark.sparkContext.getConf()
print("RESULT " + json.dumps({"submitted": launched_by_spark_submit(), "master": spark.sparkContext.master,
                              "tz": conf.get("spark.sql.session.timeZone")}))
spark.stop()
"""


def run_driver(tmp_path: Path, command: list[str]) -> dict[str, object]:
    script = tmp_path / "driver.py"
    script.write_text(SCRIPT, encoding="utf-8")
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    env.pop("PYSPARK_GATEWAY_PORT", None)
    done = subprocess.run([*command, str(script)], capture_output=True, text=True, env=env, timeout=180, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0, done.stderr[-3000:]
    assert lines, done.stdout[-3000:]
    result: dict[str, object] = json.loads(lines[-1].removeprefix("RESULT "))
    return result


def test_standalone_session_uses_the_given_master(tmp_path: Path) -> None:
    result = run_driver(tmp_path, [sys.executable])
    assert result == {"submitted": False, "master": "local[2]", "tz": "UTC"}


def test_spark_submit_keeps_the_submitted_master(tmp_path: Path) -> None:
    spark_submit = Path(sys.executable).parent / "spark-submit"
    conf = ["spark.driver.host=127.0.0.1", "spark.driver.bindAddress=127.0.0.1", "spark.ui.enabled=false"]
    options = [part for setting in conf for part in ("--conf", setting)]
    result = run_driver(tmp_path, [str(spark_submit), "--master", "local[1]", *options])
    assert result == {"submitted": True, "master": "local[1]", "tz": "UTC"}
