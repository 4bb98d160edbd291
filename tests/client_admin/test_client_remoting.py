"""mq_common.namesrv_client and mq_client.broker_client against real in-process name servers: failover,
route/cluster translation, errors.

Plus the pure proto -> PullResult / QueryResult / MessageExt translations BrokerClient's pull and query calls make
(mq_common.protocol.convert's *_response_from_proto, then mq_common.protocol's pull_result_of, query_result_of,
viewed_message_of; no broker needed for that).
"""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterator, Callable

import pytest
from mq.broker.v1 import broker_pb2
from mq_common.channels import ChannelPool
from mq_common.codec import encode_message, encode_properties, host_to_bytes
from mq_common.constants import MessageSysFlag, PermName
from mq_common.errors import (
    InvalidParameterError,
    MQBrokerError,
    MQClientError,
    RemotingError,
    TopicNotExistError,
)
from mq_common.namesrv_client import NameServerClient
from mq_common.protocol import (
    BrokerData,
    BrokerRegistration,
    DataVersion,
    MessageQueue,
    PullResult,
    PullStatus,
    QueryMessageByUniqueKeyResponseHeader,
    QueryMessageResponseHeader,
    QueueData,
    TopicConfig,
    ViewMessageResponseHeader,
    pull_result_of,
    query_result_of,
    viewed_message_of,
)
from mq_common.protocol.convert import (
    pull_response_from_proto,
    query_response_from_proto,
    uniq_key_response_from_proto,
    view_response_from_proto,
)
from mq_common.response_code import ResponseCode
from mq_namesrv.controller import NamesrvController
from mq_namesrv.settings import NamesrvSettings


async def start_namesrv() -> NamesrvController:
    ctl = NamesrvController(NamesrvSettings(listen_host="127.0.0.1", listen_port=0))
    await ctl.start()
    return ctl


@pytest.fixture
async def two_namesrvs() -> AsyncIterator[list[NamesrvController]]:
    ctls = [await start_namesrv(), await start_namesrv()]
    try:
        yield ctls
    finally:
        for ctl in ctls:
            await ctl.stop(0)


def registration(
    broker_name: str, addr: str, broker_id: int = 0, cluster: str = "DefaultCluster"
) -> BrokerRegistration:
    return BrokerRegistration(
        cluster_name=cluster,
        broker_name=broker_name,
        broker_id=broker_id,
        broker_addr=addr,
        topic_configs={
            "TopicA": TopicConfig("TopicA", read_queue_nums=3, write_queue_nums=2),
            "ReadOnly": TopicConfig("ReadOnly", 2, 2, PermName.PERM_READ),
            "WriteOnly": TopicConfig("WriteOnly", 2, 2, PermName.PERM_WRITE),
        },
        data_version=DataVersion(0, 1, 1),
        ha_server_addr=f"{addr.rsplit(':', 1)[0]}:10912",
    )


async def test_failover_to_the_second_name_server(two_namesrvs: list[NamesrvController], pool: ChannelPool) -> None:
    first, second = two_namesrvs
    client = NameServerClient([first.addr, second.addr], pool)
    for ctl in two_namesrvs:
        await client.register_broker(ctl.addr, registration("broker-a", "127.0.0.1:10911"))
    assert await client.get_all_topic_list() == ["ReadOnly", "TopicA", "WriteOnly"]
    assert client.current_addr == first.addr

    await first.stop(0)

    route = await client.get_route_info_by_topic("TopicA", timeout_ms=2000)
    assert [b.broker_name for b in route.broker_datas] == ["broker-a"]
    assert client.current_addr == second.addr
    # The next call starts at the one that answered last.
    assert (await client.get_broker_cluster_info()).cluster_addr_table == {"DefaultCluster": ("broker-a",)}
    assert client.current_addr == second.addr


async def test_no_name_server_answers_raises_remoting_error(pool: ChannelPool) -> None:
    ctl = await start_namesrv()
    addr = ctl.addr
    await ctl.stop(0)
    client = NameServerClient([addr], pool)
    with pytest.raises(RemotingError) as info:
        await client.get_all_topic_list(timeout_ms=2000)
    assert info.value.retriable
    assert addr in info.value.remark


def test_empty_namesrv_list_is_refused() -> None:
    with pytest.raises(MQClientError) as info:
        NameServerClient([" ", ""], ChannelPool())
    assert info.value.code == ResponseCode.RPC_ADDR_IS_NULL


async def test_route_and_cluster_translation(two_namesrvs: list[NamesrvController], pool: ChannelPool) -> None:
    ctl = two_namesrvs[0]
    client = NameServerClient([ctl.addr], pool)
    await client.register_broker(ctl.addr, registration("broker-b", "127.0.0.1:10921"))
    await client.register_broker(ctl.addr, registration("broker-a", "127.0.0.1:10911"))
    slave = await client.register_broker(ctl.addr, registration("broker-a", "127.0.0.1:10915", broker_id=1))
    assert (slave.master_addr, slave.ha_server_addr) == ("127.0.0.1:10911", "127.0.0.1:10912")

    route = await client.get_route_info_by_topic("TopicA")

    assert route.queue_datas == (QueueData("broker-a", 3, 2, 6, 0), QueueData("broker-b", 3, 2, 6, 0))
    assert route.broker_datas[0] == BrokerData(
        "DefaultCluster", "broker-a", {0: "127.0.0.1:10911", 1: "127.0.0.1:10915"}
    )
    assert route.broker_datas[0].master_addr() == "127.0.0.1:10911"
    assert route.find_broker_addr("broker-b") == "127.0.0.1:10921"
    assert route.read_queues("TopicA") == [
        *(MessageQueue("TopicA", "broker-a", i) for i in range(3)),
        *(MessageQueue("TopicA", "broker-b", i) for i in range(3)),
    ]
    assert (await client.get_route_info_by_topic("WriteOnly")).read_queues("WriteOnly") == []

    info = await client.get_broker_cluster_info()
    assert info.cluster_addr_table == {"DefaultCluster": ("broker-a", "broker-b")}
    assert info.master_addrs_of_cluster("DefaultCluster") == ["127.0.0.1:10911", "127.0.0.1:10921"]
    assert set(info.broker_live_table) == {"127.0.0.1:10911", "127.0.0.1:10915", "127.0.0.1:10921"}
    assert all(live.last_update_timestamp_ms > 0 for live in info.broker_live_table.values())

    await client.unregister_broker(ctl.addr, registration("broker-b", "127.0.0.1:10921"))
    assert [b.broker_name for b in (await client.get_route_info_by_topic("TopicA")).broker_datas] == ["broker-a"]


async def test_business_errors_are_typed(two_namesrvs: list[NamesrvController], pool: ChannelPool) -> None:
    ctl = two_namesrvs[0]
    client = NameServerClient([ctl.addr], pool)
    with pytest.raises(TopicNotExistError) as missing:
        await client.get_route_info_by_topic("Nope")
    assert missing.value.code == ResponseCode.TOPIC_NOT_EXIST
    assert missing.value.remark == "No topic route info in name server for the topic: Nope"
    with pytest.raises(MQBrokerError) as bad:  # error_for_code: a name server's refusal is a broker-side error
        await client.register_broker(ctl.addr, registration("broker-a", "not-an-address"))
    assert bad.value.code == ResponseCode.INVALID_PARAMETER
    assert "host:port" in bad.value.remark


async def test_channel_pool_reuses_one_channel_per_address(pool: ChannelPool) -> None:
    assert pool.get("127.0.0.1:1") is pool.get("127.0.0.1:1")
    assert pool.get("127.0.0.1:1") is not pool.get("127.0.0.1:2")
    with pytest.raises(InvalidParameterError):
        pool.get("")


def stored(queue_offset: int, body: bytes, tags: str, *, compressed: bool = False) -> bytes:
    stored_body = zlib.compress(body) if compressed else body
    return encode_message(
        topic=b"TopicA",
        body=stored_body,
        properties=encode_properties({"TAGS": tags, "UNIQ_KEY": f"ID{queue_offset}"}).encode(),
        queue_id=1,
        flag=0,
        queue_offset=queue_offset,
        physical_offset=1000 + queue_offset,
        sys_flag=MessageSysFlag.COMPRESSED_FLAG if compressed else 0,
        born_timestamp_ms=1,
        born_host=host_to_bytes("127.0.0.1", 5000),
        store_timestamp_ms=2,
        store_host=host_to_bytes("127.0.0.1", 10911),
    )


def pull_result_from_proto(resp: broker_pb2.PullMessageResponse, broker_name: str = "") -> PullResult:
    return pull_result_of(pull_response_from_proto(resp), broker_name)


def test_pull_result_decodes_messages_and_inflates_compressed_bodies() -> None:
    big = b"x" * 10_000
    resp = broker_pb2.PullMessageResponse(
        code=0,
        status=broker_pb2.PULL_STATUS_FOUND,
        next_begin_offset=7,
        min_offset=0,
        max_offset=9,
        message_bytes=stored(5, b"hello", "TagA") + stored(6, big, "TagB", compressed=True),
        message_count=2,
    )
    result = pull_result_from_proto(resp)
    assert (result.status, result.next_begin_offset, result.min_offset, result.max_offset) == (
        PullStatus.FOUND,
        7,
        0,
        9,
    )
    assert [m.body for m in result.messages] == [b"hello", big]
    assert [m.queue_offset for m in result.messages] == [5, 6]
    assert [m.tags for m in result.messages] == ["TagA", "TagB"]
    assert result.messages[0].uniq_key == "ID5"


@pytest.mark.parametrize(
    ("code", "status", "expected"),
    [
        (0, broker_pb2.PULL_STATUS_NO_NEW_MSG, PullStatus.NO_NEW_MSG),
        (0, broker_pb2.PULL_STATUS_NO_MATCHED_MSG, PullStatus.NO_MATCHED_MSG),
        (0, broker_pb2.PULL_STATUS_OFFSET_ILLEGAL, PullStatus.OFFSET_ILLEGAL),
        (ResponseCode.PULL_NOT_FOUND, broker_pb2.PULL_STATUS_UNSPECIFIED, PullStatus.NO_NEW_MSG),
        (ResponseCode.PULL_RETRY_IMMEDIATELY, broker_pb2.PULL_STATUS_UNSPECIFIED, PullStatus.NO_MATCHED_MSG),
        (ResponseCode.PULL_OFFSET_MOVED, broker_pb2.PULL_STATUS_UNSPECIFIED, PullStatus.OFFSET_ILLEGAL),
    ],
)
def test_pull_status_mapping(code: int, status: broker_pb2.PullStatus.ValueType, expected: PullStatus) -> None:
    result = pull_result_from_proto(broker_pb2.PullMessageResponse(code=code, status=status, next_begin_offset=3))
    assert result.status is expected
    assert result.messages == ()
    assert result.next_begin_offset == 3


def test_pull_error_codes_raise_and_garbage_bytes_are_refused() -> None:
    with pytest.raises(MQBrokerError) as info:
        pull_result_from_proto(broker_pb2.PullMessageResponse(code=ResponseCode.NO_PERMISSION, remark="no read"), "b1")
    assert (info.value.code, info.value.remark, info.value.broker_name) == (ResponseCode.NO_PERMISSION, "no read", "b1")
    garbage = broker_pb2.PullMessageResponse(code=0, status=broker_pb2.PULL_STATUS_FOUND, message_bytes=b"\x00" * 64)
    with pytest.raises(MQClientError) as bad:
        pull_result_from_proto(garbage)
    assert bad.value.code == ResponseCode.SYSTEM_ERROR


def test_query_result_decodes_messages_and_keeps_the_index_end() -> None:
    resp = broker_pb2.QueryMessageResponse(
        code=0,
        message_bytes=stored(8, b"newer", "TagA") + stored(3, b"older", "TagB", compressed=True),
        message_count=2,
        index_last_update_timestamp_ms=1234,
        index_last_update_phy_offset=1008,
    )
    result = query_result_of(query_response_from_proto(resp))
    assert [m.body for m in result.messages] == [b"newer", b"older"]
    assert (result.index_last_update_timestamp_ms, result.index_last_update_phy_offset) == (1234, 1008)
    by_uniq = broker_pb2.QueryMessageByUniqueKeyResponse(code=0, message_bytes=stored(8, b"m", "T"), message_count=1)
    uniq_result = query_result_of(uniq_key_response_from_proto(by_uniq))
    assert [m.uniq_key for m in uniq_result.messages] == ["ID8"]
    assert (uniq_result.index_last_update_timestamp_ms, uniq_result.index_last_update_phy_offset) == (0, 0)


def test_viewed_message_is_the_one_record() -> None:
    viewed = viewed_message_of(
        view_response_from_proto(broker_pb2.ViewMessageByIdResponse(message_bytes=stored(4, b"v", "T")))
    )
    assert (viewed.body, viewed.queue_offset) == (b"v", 4)
    for blob in (b"", stored(4, b"v", "T") * 2):
        with pytest.raises(MQClientError) as count:
            viewed_message_of(ViewMessageResponseHeader(0, message_bytes=blob))
        assert count.value.code == ResponseCode.SYSTEM_ERROR


def test_query_error_codes_raise_with_the_broker_name() -> None:
    code, remark = ResponseCode.QUERY_NOT_FOUND, "none"
    answers: list[Callable[[], object]] = [
        lambda: query_result_of(QueryMessageResponseHeader(code, remark), "b1"),
        lambda: query_result_of(QueryMessageByUniqueKeyResponseHeader(code, remark), "b1"),
        lambda: viewed_message_of(ViewMessageResponseHeader(code, remark), "b1"),
    ]
    for answer in answers:
        with pytest.raises(MQBrokerError) as info:
            answer()
        assert (info.value.code, info.value.remark, info.value.broker_name) == (code, remark, "b1")


def test_undecodable_query_bytes_are_a_system_error() -> None:
    with pytest.raises(MQClientError) as bad:
        query_result_of(QueryMessageResponseHeader(0, message_bytes=b"\x00" * 64))
    assert bad.value.code == ResponseCode.SYSTEM_ERROR
