"""Runs the official RocketMQ 5 SDK scenarios (python_sdk_scenarios.py, node_sdk_scenarios.js) as subprocesses
against a real local cluster's gateway, and the checks the Python and Node.js test modules share.

The SDKs come from ``make sdks`` (.tools/rmq5-python, .tools/rmq5-node); when they are missing the tests FAIL
and say so (``make test`` installs them first). The Python SDK never loads into the pytest process: its stubs
clash with the project's ``apache.rocketmq.v2`` ones.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from mq_common.codec import MessageExt
from mq_local.cluster import GATEWAY_MODULE, LocalCluster, gateway_env
from mq_local.ports import LOCAL_HOST, free_port
from mq_local.processes import ManagedProcess
from mq_local.readiness import wait_serving
from mq_local.testing import make_topic, read_all, spec_for_tests, unique_topic

ROOT: Final = Path(__file__).resolve().parents[3]
HERE: Final = Path(__file__).resolve().parent
SDK_PYTHON: Final = ROOT / ".tools/rmq5-python/bin/python"
SDK_NODE_MODULES: Final = ROOT / ".tools/rmq5-node/node_modules"
SCENARIO_BOUND_S: Final = 240.0
REPLICA_START_S: Final = 60.0
STORE_POLL_S: Final = 0.5
STORE_WAIT_S: Final = 120.0
MISSING: Final = "the RocketMQ 5 SDKs are not installed: run `make sdks` (make test does)"


@contextmanager
def sdk_cluster(data_dir: Path) -> Iterator[LocalCluster]:
    """A started LocalCluster (name server, two broker groups, one gateway) for the SDK tests; stopped after."""
    spec = spec_for_tests(
        data_dir,
        flush_disk_type="ASYNC_FLUSH",
        broker_env={"MQ_BROKER_REGISTER_BROKER_INTERVAL_MS": "1000"},
        start_wait_s=90.0,
    )
    with LocalCluster(spec) as started:
        yield started


def topic_and_group(cluster: LocalCluster, hint: str) -> tuple[str, str]:
    """A new topic (4 queues on every broker) and a new consumer group name, both unique."""
    return asyncio.run(make_topic(cluster, hint)), unique_topic(f"{hint}_group")


@dataclass(frozen=True, slots=True)
class SdkRunner:
    """One SDK's scenario script: ``run(scenario, cfg)`` -> the JSON object its last stdout line printed."""

    name: str
    command: tuple[str, ...]
    env: dict[str, str]

    def run(self, scenario: str, cfg: dict[str, Any]) -> dict[str, Any]:
        args = [*self.command, scenario, json.dumps(cfg)]
        done = subprocess.run(
            args, env=self.env, capture_output=True, text=True, timeout=SCENARIO_BOUND_S, check=False, cwd=ROOT
        )
        shown = (
            f"{shlex.join(args)} exited {done.returncode} (SDK log under {self.env['HOME']}/logs)\n"
            f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
        )
        assert done.returncode == 0, shown
        lines = done.stdout.strip().splitlines()
        assert lines, shown
        result: dict[str, Any] = json.loads(lines[-1])
        return result


def sdk_env(home: Path) -> dict[str, str]:
    """The test's environment with HOME in ``home`` (both SDKs write their logs under $HOME/logs)."""
    home.mkdir(parents=True, exist_ok=True)
    return {**os.environ, "HOME": str(home)}


def python_runner(home: Path) -> SdkRunner:
    assert SDK_PYTHON.exists(), f"{MISSING}: no {SDK_PYTHON}"
    env = {k: v for k, v in sdk_env(home).items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    return SdkRunner("python", (str(SDK_PYTHON), str(HERE / "python_sdk_scenarios.py")), env)


def node_runner(home: Path) -> SdkRunner:
    assert (SDK_NODE_MODULES / "rocketmq-client-nodejs").is_dir(), f"{MISSING}: no {SDK_NODE_MODULES}"
    node = shutil.which("node")
    assert node is not None, f"{MISSING}: no node on PATH (make node installs it)"
    env = {**sdk_env(home), "NODE_PATH": str(SDK_NODE_MODULES)}
    return SdkRunner("node", (node, str(HERE / "node_sdk_scenarios.js")), env)


def sample_messages(prefix: str, count: int) -> list[dict[str, Any]]:
    """``count`` messages with a tag, two keys and two user properties each; bodies ``<prefix>-<i>``."""
    return [
        {
            "body": f"{prefix}-{i}",
            "tag": "TagA",
            "keys": [f"key-{i}", f"order-{prefix}-{i}"],
            "properties": {"index": str(i), "origin": prefix},
        }
        for i in range(count)
    ]


def assert_views_match(views: list[dict[str, Any]], sent: list[dict[str, Any]], ids: list[str]) -> None:
    """Each received view carries what was sent under that message id (body, tag, keys, user properties)."""
    by_id = dict(zip(ids, sent, strict=True))
    assert sorted(v["message_id"] for v in views) == sorted(ids), views
    for v in views:
        spec = by_id[v["message_id"]]
        assert (v["body"], v["tag"], v["keys"]) == (spec["body"], spec["tag"], sorted(spec["keys"])), v
        assert {k: v["properties"].get(k) for k in spec["properties"]} == spec["properties"], v


def stored(cluster: LocalCluster, topic: str) -> list[MessageExt]:
    return [message for _, message in asyncio.run(read_all(cluster.namesrv_addr, topic))]


def assert_stored(cluster: LocalCluster, topic: str, sent: list[dict[str, Any]], ids: list[str]) -> None:
    """The brokers hold each sent message once, as RocketMQ 4.x properties (UNIQ_KEY, TAGS, KEYS, user)."""
    by_id = {m.properties.get("UNIQ_KEY"): m for m in stored(cluster, topic)}
    assert sorted(k or "" for k in by_id) == sorted(ids), by_id.keys()
    for message_id, spec in zip(ids, sent, strict=True):
        message = by_id[message_id]
        assert message.body == spec["body"].encode(), message
        assert message.properties.get("TAGS") == spec["tag"], message.properties
        assert sorted(message.properties.get("KEYS", "").split()) == sorted(spec["keys"]), message.properties
        for name, value in spec["properties"].items():
            assert message.properties.get(name) == value, message.properties


def wait_stored(cluster: LocalCluster, topic: str, done: Callable[[list[MessageExt]], bool]) -> list[MessageExt]:
    """Poll ``topic`` on the brokers until ``done(messages)`` (a topic not routed yet reads as empty)."""
    deadline = time.monotonic() + STORE_WAIT_S
    messages: list[MessageExt] = []
    while time.monotonic() < deadline:
        try:
            messages = stored(cluster, topic)
        except Exception:
            messages = []
        if done(messages):
            return messages
        time.sleep(STORE_POLL_S)
    raise AssertionError(f"{topic}: condition not met in {STORE_WAIT_S} s; stored {messages}")


def set_retry_max_times(cluster: LocalCluster, group: str, retry_max_times: int) -> None:
    """``mqadmin updateSubGroup -r`` on every broker of the cluster (the project's own admin CLI)."""
    mqadmin = Path(sys.executable).parent / "mqadmin"
    args = [str(mqadmin), "updateSubGroup", "-c", cluster.spec.cluster_name, "-g", group, "-r", str(retry_max_times)]
    env = {**os.environ, "MQ_NAMESRV_ADDR": cluster.namesrv_addr}
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=SCENARIO_BOUND_S, check=False)
    assert done.returncode == 0, f"{shlex.join(args)}: {done.stdout}\n{done.stderr}"


@contextmanager
def gateway_replica(cluster: LocalCluster) -> Iterator[str]:
    """A second ``mq_gateway`` process on a free port against the cluster's name server: its address."""
    port = free_port()
    env = {**gateway_env(cluster.spec), "MQ_GATEWAY_LISTEN_PORT": str(port)}
    replica = ManagedProcess("gateway-2", GATEWAY_MODULE, env, port, cluster.spec.data_dir / "gateway-2.log")
    replica.start()
    try:
        addr = f"{LOCAL_HOST}:{port}"
        started = wait_serving(addr, time.monotonic() + REPLICA_START_S, replica.running)
        assert started, f"second gateway not serving; log {replica.log_path}:\n{replica.log_path.read_text()[-4000:]}"
        yield addr
    finally:
        replica.stop()
