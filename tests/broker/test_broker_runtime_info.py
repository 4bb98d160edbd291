"""GetBrokerRuntimeInfo through a real in-process gRPC broker: the KV table mqadmin clusterList prints (role,
CommitLog offsets, epoch, HA state of a master without slaves), read by the admin client's BrokerClient."""

from __future__ import annotations

import json
from pathlib import Path

from broker_grpc_testkit import RunningBrokers, send_request, stream_send_batch
from mq.broker.v1 import broker_pb2
from mq_client.broker_client import BrokerClient
from mq_common.channels import ChannelPool
from mq_common.response_code import ResponseCode


async def test_runtime_info_of_a_master(brokers: RunningBrokers, tmp_path: Path) -> None:
    controller, stub = await brokers.start(tmp_path / "store", broker_role="SYNC_MASTER", auto_create_topic_enable=True)
    answers = await stream_send_batch(stub, *(send_request("RuntimeTopic", b"x" * 100) for _ in range(3)))
    assert [a.code for a in answers] == [ResponseCode.SLAVE_NOT_AVAILABLE] * 3  # stored, but no slave holds them
    pool = ChannelPool()
    try:
        table = await BrokerClient(pool).get_broker_runtime_info(f"127.0.0.1:{controller.port}")
    finally:
        await pool.close()
    store = controller.store
    assert store is not None
    assert table["brokerRole"] == "SYNC_MASTER"
    assert table["brokerActive"] == "true"
    assert table["brokerVersionDesc"].startswith("mqbroker ")
    assert int(table["commitLogMaxOffset"]) == store.commit_log.max_offset > 0
    assert table["commitLogMinOffset"] == "0"
    assert table["masterEpoch"] == "-1"  # no controller: no epoch file entries
    assert table["haInSyncSlaveNums"] == "0"
    assert json.loads(table["haConnectionInfo"]) == []
    assert "haMasterAddr" not in table


async def test_runtime_info_of_a_slave(brokers: RunningBrokers, tmp_path: Path) -> None:
    """A SLAVE reports its role, the HA address it follows and that it is not connected (nothing listens there)."""
    _controller, stub = await brokers.start(
        tmp_path / "store", broker_role="SLAVE", broker_id=1, ha_master_address="127.0.0.1:1"
    )
    resp = await stub.GetBrokerRuntimeInfo(broker_pb2.GetBrokerRuntimeInfoRequest())
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    assert resp.table["brokerRole"] == "SLAVE"
    assert resp.table["brokerActive"] == "false"
    assert resp.table["commitLogMaxOffset"] == "0"
    assert resp.table["haMasterAddr"] == "127.0.0.1:1"
    assert resp.table["haClientConnected"] == "false"
    assert "haConnectionInfo" not in resp.table
