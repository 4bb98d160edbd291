"""The README's code blocks, executed as a reader would run them against a real local cluster.

The README's examples address a `make up` cluster (127.0.0.1:9876 and :8081); the tests start their own on free
ports and replace those two addresses (and only them) in the block's text before running it.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import pytest
from doc_blocks import ROOT, find
from mq_local.cluster import LocalCluster
from mq_local.testing import read_all, spec_for_tests

pytestmark = pytest.mark.integration

README: Final = "README.md"
MAKE_UP_NAMESRV: Final = "127.0.0.1:9876"
MAKE_UP_GATEWAY: Final = "127.0.0.1:8081"
BIN: Final = Path(sys.executable).parent
RUN_BOUND_S: Final = 240
SDK_PYTHON: Final = ROOT / ".tools/rmq5-python/bin/python"  # make sdks
SDK_NODE_MODULES: Final = ROOT / ".tools/rmq5-node/node_modules"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    spec = spec_for_tests(tmp_path_factory.mktemp("readme"), auto_create_topic_enable=True)
    with LocalCluster(spec) as started:
        yield started


def for_cluster(text: str, cluster: LocalCluster) -> str:
    return text.replace(MAKE_UP_NAMESRV, cluster.namesrv_addr).replace(MAKE_UP_GATEWAY, cluster.gateway_addr)


def run(args: list[str], *, cwd: Path = ROOT, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=RUN_BOUND_S, check=False)
    assert done.returncode == 0, f"{shlex.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done


def test_readme_commands_are_make_targets_ci_runs() -> None:
    block = find(README, "make run")
    ci = (ROOT / ".ci/run").read_text(encoding="utf-8")
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    for line in block.lines():
        target = line.split("#")[0].split()
        assert target[0] == "make", line
        assert len(target) == 2, line
        assert re.search(rf"^{target[1]}:", makefile, re.MULTILINE), f"no Makefile target {target[1]}"
        assert re.search(rf"^newcomer make {target[1]}$", ci, re.MULTILINE), f".ci/run does not run {line}"


def test_readme_python_send_and_receive(cluster: LocalCluster) -> None:
    block = find(README, "consumer import PullConsumer")
    out = run([sys.executable, "-c", for_cluster(block.text, cluster)]).stdout.splitlines()
    sent = out[0].split()
    # ResponseCode 0 (SUCCESS), then the broker, queue and offset that stored the message.
    assert sent[0] == "0", out
    assert sent[1] in cluster.broker_addrs, out
    body = repr(b'{"id": 1}')
    received = [line for line in out[1:] if line.startswith(f"{sent[1]} {sent[2]} ")]
    assert received == [f"{sent[1]} {sent[2]} {sent[3]} {body}"], out


def test_readme_consume_as_group(cluster: LocalCluster) -> None:
    """Both groups get all five payments: billing by pull with offsets, audit by POP with acks."""
    block = find(README, "receive_as_audit")
    out = run([sys.executable, "-c", for_cluster(block.text, cluster)]).stdout.splitlines()
    payments = str(sorted(f"payment {i}" for i in range(5)))
    assert out == [f"billing {payments}", f"audit {payments}"], out


def test_readme_node_send_batch(cluster: LocalCluster, tmp_path: Path) -> None:
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.skip("node and npm are needed for the README's Node.js example")
    block = find(README, "@grpc/proto-loader")
    packages = tmp_path / "npm"
    run(
        [
            npm,
            "install",
            "--silent",
            "--no-audit",
            "--no-fund",
            "--prefix",
            str(packages),
            "@grpc/grpc-js",
            "@grpc/proto-loader",
        ]
    )
    env = {**os.environ, "NODE_PATH": str(packages / "node_modules")}
    out = run([node, "-e", for_cluster(block.text, cluster)], env=env).stdout.splitlines()
    assert len(out) == 3, out
    for line in out:
        code, status, broker, queue_id, offset = line.split()
        assert (code, status) == ("0", "SEND_STATUS_SEND_OK"), line
        assert broker in cluster.broker_addrs, line
        assert int(queue_id) >= 0, line
        assert int(offset) >= 0, line


def test_readme_mqadmin_verbs(cluster: LocalCluster) -> None:
    block = find(README, "uv run mqadmin clusterList")
    env = {**os.environ, "MQ_NAMESRV_ADDR": cluster.namesrv_addr, "MQ_GATEWAY_ADDR": cluster.gateway_addr}
    printed: dict[str, str] = {}
    for line in block.lines():
        for placeholder, value in printed.items():
            line = line.replace(placeholder, value)
        args = shlex.split(line)
        assert args[:3] == ["uv", "run", "mqadmin"], line
        args = [str(BIN / "mqadmin"), *args[3:]]
        out = run(args, env=env).stdout
        if args[1] == "sendMessage":
            ids = dict(re.findall(r"(msgId|offsetMsgId)=([0-9A-F]+)", out))
            printed = {
                "<msgId printed by sendMessage>": ids["msgId"],
                "<offsetMsgId printed by sendMessage>": ids["offsetMsgId"],
            }
        if args[1] in ("queryMsgByKey", "queryMsgByUniqueKey", "queryMsgById"):
            assert "order-1" in out, f"{line}:\n{out}"
        if args[1:3] == ["topicList", "-c"]:  # the topic made with -a +message.type=DELAY
            assert re.search(r"reminders\s.*DELAY", out), f"{line}:\n{out}"
        if args[1] == "consumeMessage":
            assert re.search(r"^[0-9]+ message\(s\)$", out, re.MULTILINE), f"{line}:\n{out}"
        if args[1] == "consumerProgress":  # offsets reset to the start: the message sent above is the lag
            assert json.loads(out)["diff_total"] >= 1, f"{line}:\n{out}"
    assert printed, "the block sends no message"


def test_readme_rocketmq5_sdks(cluster: LocalCluster, tmp_path: Path) -> None:
    """The topic made with mqadmin, then the Python SDK example (in the SDK's own venv: its stubs clash with the
    workspace's) and the Node.js one: each prints the id it sent and receives that message back with its property."""
    topic_block = find(README, "-t sdk-orders -w 4")
    env = {**os.environ, "MQ_NAMESRV_ADDR": cluster.namesrv_addr, "HOME": str(tmp_path)}
    for line in topic_block.lines():
        args = shlex.split(line)
        assert args[:3] == ["uv", "run", "mqadmin"], line
        run([str(BIN / "mqadmin"), *args[3:]], env=env)
    assert SDK_PYTHON.exists(), f"no {SDK_PYTHON}: run `make sdks` (make test does)"
    assert SDK_NODE_MODULES.is_dir(), f"no {SDK_NODE_MODULES}: run `make sdks` (make test does)"
    python_env = {k: v for k, v in env.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    python_block = for_cluster(find(README, "from rocketmq import").text, cluster)
    python_out = run([str(SDK_PYTHON), "-c", python_block], env=python_env).stdout.splitlines()
    node_block = for_cluster(find(README, 'require("rocketmq-client-nodejs")').text, cluster)
    node_out = run(["node", "-e", node_block], env={**env, "NODE_PATH": str(SDK_NODE_MODULES)}).stdout.splitlines()
    for out, body, region in ((python_out, '{"id": 1}', "eu"), (node_out, '{"id":2}', "us")):
        sent = [line.split()[1] for line in out if line.startswith("sent ")]
        assert len(sent) == 1, out
        mine = [line for line in out if line.startswith(f"received {sent[0]} {body} ")]
        assert len(mine) == 1, out
        assert region in mine[0], out


@pytest.mark.spark
def test_readme_spark_snippet(cluster: LocalCluster) -> None:
    import asyncio

    block = find(README, 'format("rocketmq")')
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    run([sys.executable, "-c", for_cluster(block.text, cluster)], env=env)
    stored = asyncio.run(read_all(cluster.namesrv_addr, "flights"))
    keys = sorted(message.properties.get("KEYS", "") for _, message in stored)
    assert keys == ["N14228", "N24211"], keys
