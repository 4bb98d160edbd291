"""Client tests: a ChannelPool closed after each test; for the mqadmin consumer-side suites, one real local cluster
(mqnamesrv + two mqbroker + mqgateway processes on 127.0.0.1, started on first use) and a runner of mqadmin's verbs
against it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from click.testing import Result
from mq_client.admin.cli import app
from mq_common.response_code import ResponseCode
from mq_local.cluster import LocalCluster
from mq_local.testing import spec_for_tests
from typer.testing import CliRunner

MQADMIN_ENV = {"COLUMNS": "250", "MQ_NAMESRV_ADDR": ""}


@pytest.fixture(scope="session")
def consumer_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """Two broker groups, ASYNC_FLUSH, auto-create of topics off (topics come from updateTopic / make_topic)."""
    spec = spec_for_tests(
        tmp_path_factory.mktemp("admin-consumer-cluster"),
        2,
        flush_disk_type="ASYNC_FLUSH",
        auto_create_topic_enable=False,
        start_wait_s=60.0,
    )
    with LocalCluster(spec) as cluster:
        yield cluster


@dataclass(frozen=True)
class Mqadmin:
    """Runs ``mqadmin -n <cluster's name server> <args>`` in process (typer's CliRunner, stdout and stderr apart)."""

    namesrv_addr: str

    def __call__(self, *args: str) -> Result:
        return CliRunner().invoke(app, ["-n", self.namesrv_addr, *args], env=MQADMIN_ENV)

    def ok(self, *args: str) -> str:
        """The stdout of a verb that must succeed."""
        result = self(*args)
        assert result.exit_code == 0, result.output
        return result.stdout

    def json(self, *args: str) -> Any:
        """The parsed ``--output json`` document of a verb that must succeed (nothing else on stdout)."""
        return json.loads(self.ok(*args, "--output", "json"))

    def fails(self, code: int, *args: str) -> str:
        """The stderr of a verb that must exit 1 with ``<CODE_NAME> (<code>): ...``, no traceback and no stdout."""
        result = self(*args)
        assert result.exit_code == 1, result.output
        assert result.stderr.startswith(f"{ResponseCode.name_of(code)} ({code}): "), result.stderr
        assert "Traceback" not in result.output
        assert result.stdout == ""
        return result.stderr


@pytest.fixture
def mqadmin(consumer_cluster: LocalCluster) -> Mqadmin:
    return Mqadmin(consumer_cluster.namesrv_addr)
