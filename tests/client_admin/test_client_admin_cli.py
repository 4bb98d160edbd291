"""``mqadmin`` through typer's CliRunner against a real name server running on its own loop in a thread."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Iterator
from typing import Any

import grpc
import pytest
from mq.common.v1 import common_pb2
from mq.namesrv.v1 import namesrv_pb2, namesrv_pb2_grpc
from mq_client.admin.cli import app, split_addrs
from mq_namesrv.controller import NamesrvController
from mq_namesrv.settings import NamesrvSettings
from typer.testing import CliRunner

ENV = {"COLUMNS": "200", "MQ_NAMESRV_ADDR": ""}


class ThreadedNamesrv:
    """A NamesrvController on a private event loop in a daemon thread (CliRunner runs asyncio.run itself)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="namesrv-loop", daemon=True)
        self.thread.start()
        self.controller = self._call(self._start())

    async def _start(self) -> NamesrvController:
        ctl = NamesrvController(NamesrvSettings(listen_host="127.0.0.1", listen_port=0))
        await ctl.start()
        return ctl

    def _call(self, coro: Coroutine[Any, Any, NamesrvController]) -> NamesrvController:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=30)

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.controller.stop(0), self.loop).result(timeout=30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=30)
        self.loop.close()


@pytest.fixture(scope="module")
def namesrv() -> Iterator[str]:
    server = ThreadedNamesrv()
    try:
        with grpc.insecure_channel(server.controller.addr) as channel:
            stub = namesrv_pb2_grpc.NameServerStub(channel)
            for name, addr in (("broker-a", "127.0.0.1:10911"), ("broker-b", "127.0.0.1:10921")):
                resp = stub.RegisterBroker(
                    namesrv_pb2.RegisterBrokerRequest(
                        cluster_name="DefaultCluster",
                        broker_name=name,
                        broker_id=0,
                        broker_addr=addr,
                        topic_config_table={
                            "TopicA": common_pb2.TopicConfig(
                                topic_name="TopicA", read_queue_nums=4, write_queue_nums=4, perm=6
                            ),
                            f"Only-{name}": common_pb2.TopicConfig(
                                topic_name=f"Only-{name}", read_queue_nums=1, write_queue_nums=1, perm=4
                            ),
                        },
                    ),
                    timeout=10,
                )
                assert resp.code == 0
        yield server.controller.addr
    finally:
        server.close()


runner = CliRunner()


def test_split_addrs() -> None:
    assert split_addrs("a:1; b:2,c:3") == ("a:1", "b:2", "c:3")


def test_cluster_list(namesrv: str) -> None:
    result = runner.invoke(app, ["-n", namesrv, "clusterList"], env=ENV)
    assert result.exit_code == 0, result.output
    assert "DefaultCluster" in result.stdout
    assert "broker-a" in result.stdout
    assert "127.0.0.1:10921" in result.stdout
    assert "s ago" in result.stdout


def test_topic_list(namesrv: str) -> None:
    result = runner.invoke(app, ["--namesrvAddr", namesrv, "topicList"], env=ENV)
    assert result.exit_code == 0, result.output
    for topic in ("TopicA", "Only-broker-a", "Only-broker-b"):
        assert topic in result.stdout


def test_topic_route(namesrv: str) -> None:
    result = runner.invoke(app, ["-n", namesrv, "topicRoute", "-t", "Only-broker-b"], env=ENV)
    assert result.exit_code == 0, result.output
    assert "R-- (4)" in result.stdout
    assert "127.0.0.1:10921" in result.stdout
    assert "127.0.0.1:10911" not in result.stdout


def test_namesrv_addr_from_environment(namesrv: str) -> None:
    result = runner.invoke(app, ["topicList"], env={**ENV, "MQ_NAMESRV_ADDR": f"127.0.0.1:1;{namesrv}"})
    assert result.exit_code == 0, result.output
    assert "TopicA" in result.stdout


def test_unknown_topic_prints_code_and_remark_without_traceback(namesrv: str) -> None:
    result = runner.invoke(app, ["-n", namesrv, "topicRoute", "-t", "Missing"], env=ENV)
    assert result.exit_code == 1
    assert "TOPIC_NOT_EXIST (17): No topic route info in name server for the topic: Missing" in result.stderr
    assert "Traceback" not in result.output


def test_unreachable_name_server_fails_cleanly() -> None:
    result = runner.invoke(app, ["-n", "127.0.0.1:1", "clusterList"], env=ENV)
    assert result.exit_code == 1
    assert result.stderr.startswith("RPC_SEND_TO_CHANNEL_FAILED (-1004)")


def test_update_topic_needs_exactly_one_target(namesrv: str) -> None:
    result = runner.invoke(app, ["-n", namesrv, "updateTopic", "-t", "T"], env=ENV)
    assert result.exit_code == 2
    assert "exactly one of -b" in result.stderr


def test_update_topic_on_unknown_cluster(namesrv: str) -> None:
    result = runner.invoke(app, ["-n", namesrv, "updateTopic", "-t", "T", "-c", "Nope"], env=ENV)
    assert result.exit_code == 1
    assert result.stderr.startswith("BROKER_NOT_EXIST (211)")
