"""mq_local's launcher pieces: port layouts, the data folder and state file, stopping by PID, start errors."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mq_local.cluster import ClusterSpec, ClusterStartError, LocalCluster, broker_env
from mq_local.ports import PortLayout, broker_name_of
from mq_local.processes import ProcessRecord, process_start_ticks, stop_record
from mq_local.state import (
    MARKER_FILE,
    ClusterState,
    DataDirError,
    prepare_data_dir,
    read_state,
    write_state,
)


def test_default_layout_keeps_rocketmq_ports() -> None:
    layout = PortLayout.default(3)
    assert (layout.namesrv_port, layout.broker_ports, layout.gateway_port) == (9876, (10911, 10921, 10931), 8081)
    assert [broker_name_of(i) for i in range(3)] == ["broker-a", "broker-b", "broker-c"]


def test_layout_refuses_duplicate_ports() -> None:
    with pytest.raises(ValueError, match="distinct"):
        PortLayout(9876, (9876,), 8081)


def test_free_layout_has_distinct_bindable_ports() -> None:
    layout = PortLayout.free(2)
    assert len({layout.namesrv_port, *layout.broker_ports, layout.gateway_port}) == 4
    assert layout.busy_ports() == []


def test_broker_env_carries_the_service_settings(tmp_path: Path) -> None:
    spec = ClusterSpec(data_dir=tmp_path, ports=PortLayout(1001, (1002, 1003), 1004), flush_disk_type="ASYNC_FLUSH")
    env = broker_env(spec, 1)
    assert env["MQ_BROKER_BROKER_NAME"] == "broker-b"
    assert env["MQ_BROKER_LISTEN_PORT"] == "1003"
    assert env["MQ_BROKER_NAMESRV_ADDR"] == "127.0.0.1:1001"
    assert env["MQ_BROKER_STORE_PATH_ROOT_DIR"] == str(tmp_path / "broker-b" / "store")
    assert env["MQ_BROKER_FLUSH_DISK_TYPE"] == "ASYNC_FLUSH"
    assert env["MQ_BROKER_AUTO_CREATE_TOPIC_ENABLE"] == "false"
    assert env["MQ_BROKER_CLEAN_FILE_FORCIBLY_ENABLE"] == "false"
    assert env["MQ_BROKER_LISTEN_HOST"] == "127.0.0.1"


def test_fresh_start_deletes_only_mq_local_folders(tmp_path: Path) -> None:
    ours = tmp_path / "ours"
    prepare_data_dir(ours, fresh=True)
    (ours / "old.log").write_text("x")
    prepare_data_dir(ours, fresh=True)
    assert sorted(p.name for p in ours.iterdir()) == [MARKER_FILE]

    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "precious.txt").write_text("keep me")
    with pytest.raises(DataDirError, match="not an mq_local data folder"):
        prepare_data_dir(foreign, fresh=True)
    assert (foreign / "precious.txt").read_text() == "keep me"


def _sleeper() -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)


def test_a_running_cluster_folder_is_never_wiped_and_stop_by_pid_works(tmp_path: Path) -> None:
    proc = _sleeper()
    try:
        ticks = process_start_ticks(proc.pid)
        assert ticks is not None
        record = ProcessRecord("namesrv", proc.pid, ticks, 1, str(tmp_path / "namesrv.log"))
        prepare_data_dir(tmp_path, fresh=True)
        write_state(tmp_path, ClusterState("127.0.0.1:1", "127.0.0.1:2", {"broker-a": "127.0.0.1:3"}, (record,), 5))
        assert read_state(tmp_path) == ClusterState(
            "127.0.0.1:1", "127.0.0.1:2", {"broker-a": "127.0.0.1:3"}, (record,), 5
        )
        with pytest.raises(DataDirError, match=f"namesrv={proc.pid}"):
            prepare_data_dir(tmp_path, fresh=True)
        assert stop_record(record, grace_s=5.0)
        assert proc.wait(timeout=5) == -signal.SIGTERM
    finally:
        proc.kill()
        proc.wait()


def test_a_reused_pid_is_not_signalled(tmp_path: Path) -> None:
    proc = _sleeper()
    try:
        ticks = process_start_ticks(proc.pid)
        assert ticks is not None
        stale = ProcessRecord("broker-a", proc.pid, ticks + 1, 1, "x.log")  # same PID, other start time
        assert not stale.alive()
        assert stop_record(stale, grace_s=0.2)
        assert proc.poll() is None  # untouched
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.integration
def test_start_failure_names_the_log_file_and_stops_everything(tmp_path: Path) -> None:
    spec = ClusterSpec(data_dir=tmp_path / "data", ports=PortLayout.free(1), start_wait_s=30.0)
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", spec.ports.namesrv_port))
        blocker.listen()
        cluster = LocalCluster(spec)
        started = time.monotonic()
        with pytest.raises(ClusterStartError) as info:
            cluster.start()
    message = str(info.value)
    assert str(tmp_path / "data" / "namesrv.log") in message
    assert "namesrv (mq_namesrv.main" in message
    assert time.monotonic() - started < 30.0  # it noticed the exit instead of waiting out the bound
    assert all(not p.running() for p in cluster.processes())
    assert read_state(spec.data_dir) is None


def test_state_file_is_json_with_a_version(tmp_path: Path) -> None:
    prepare_data_dir(tmp_path, fresh=True)
    write_state(tmp_path, ClusterState("a:1", "b:2", {}, (), 0))
    assert json.loads((tmp_path / "cluster.json").read_text())["version"] == 1
