"""Round trips of mq_common.codec (message format v1, properties, hosts) over generated values."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mq_common.codec import (
    CrcMismatchError,
    MessageDecodeError,
    bytes_to_host,
    decode_message,
    decode_properties,
    encode_message,
    encode_properties,
    host_to_bytes,
    iter_messages,
)
from mq_common.constants import MessageSysFlag
from mq_common.record_layout import calc_msg_length

ports = st.integers(min_value=0, max_value=65535)
ipv4 = st.ip_addresses(v=4).map(str)
ipv6 = st.ip_addresses(v=6).map(str)
hosts = st.one_of(ipv4, ipv6)
# Property keys/values: any text without the two separators (RocketMQ forbids them too).
prop_text = st.text(st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)), max_size=20)
prop_keys = prop_text.filter(bool)
properties = st.dictionaries(prop_keys, prop_text, max_size=6)
topics = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=30).filter(
    lambda t: len(t.encode("utf-8")) <= 127
)
i32 = st.integers(min_value=-(2**31), max_value=2**31 - 1)
i64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
non_negative_i64 = st.integers(min_value=0, max_value=2**63 - 1)


@given(host=hosts, port=ports)
def test_host_bytes_round_trip(host: str, port: int) -> None:
    raw = host_to_bytes(host, port)
    assert len(raw) == (8 if ipaddress.ip_address(host).version == 4 else 20)
    assert bytes_to_host(raw) == (str(ipaddress.ip_address(host)), port)


@given(props=properties)
def test_properties_round_trip(props: dict[str, str]) -> None:
    assert decode_properties(encode_properties(props)) == props


def test_empty_properties_encode_to_nothing() -> None:
    assert encode_properties({}) == ""
    assert decode_properties("") == {}


@settings(max_examples=150, deadline=None)
@given(
    topic=topics,
    body=st.binary(max_size=2048),
    props=properties,
    queue_id=i32,
    flag=i32,
    queue_offset=non_negative_i64,
    physical_offset=non_negative_i64,
    born_ts=i64,
    store_ts=i64,
    born=st.tuples(hosts, ports),
    store=st.tuples(hosts, ports),
    reconsume=i32,
    prepared=i64,
    tran_bits=st.sampled_from([0, MessageSysFlag.TRANSACTION_PREPARED_TYPE, MessageSysFlag.TRANSACTION_COMMIT_TYPE]),
)
def test_message_round_trip(
    topic: str,
    body: bytes,
    props: dict[str, str],
    queue_id: int,
    flag: int,
    queue_offset: int,
    physical_offset: int,
    born_ts: int,
    store_ts: int,
    born: tuple[str, int],
    store: tuple[str, int],
    reconsume: int,
    prepared: int,
    tran_bits: int,
) -> None:
    topic_b = topic.encode("utf-8")
    props_b = encode_properties(props).encode("utf-8")
    born_b, store_b = host_to_bytes(*born), host_to_bytes(*store)
    record = encode_message(
        topic=topic_b,
        body=body,
        properties=props_b,
        queue_id=queue_id,
        flag=flag,
        queue_offset=queue_offset,
        physical_offset=physical_offset,
        sys_flag=tran_bits,
        born_timestamp_ms=born_ts,
        born_host=born_b,
        store_timestamp_ms=store_ts,
        store_host=store_b,
        reconsume_times=reconsume,
        prepared_transaction_offset=prepared,
    )
    msg = decode_message(record)
    assert len(record) == msg.store_size == calc_msg_length(msg.sys_flag, len(body), len(topic_b), len(props_b))
    assert (msg.topic, msg.body, msg.properties) == (topic, body, props)
    assert (msg.queue_id, msg.flag, msg.queue_offset, msg.commit_log_offset) == (
        queue_id,
        flag,
        queue_offset,
        physical_offset,
    )
    assert (msg.born_timestamp_ms, msg.store_timestamp_ms) == (born_ts, store_ts)
    assert msg.born_host == (str(ipaddress.ip_address(born[0])), born[1])
    assert msg.store_host == (str(ipaddress.ip_address(store[0])), store[1])
    assert (msg.reconsume_times, msg.prepared_transaction_offset) == (reconsume, prepared)
    assert bool(msg.sys_flag & MessageSysFlag.BORNHOST_V6_FLAG) == (len(born_b) == 20)
    assert bool(msg.sys_flag & MessageSysFlag.STOREHOSTADDRESS_V6_FLAG) == (len(store_b) == 20)
    assert msg.sys_flag & MessageSysFlag.TRANSACTION_ROLLBACK_TYPE == tran_bits
    # Two records back to back decode as two messages.
    assert [m.body for m in iter_messages(record + record)] == [body, body]


@given(body=st.binary(min_size=1, max_size=256), flip=st.integers(min_value=0, max_value=255))
def test_body_damage_fails_the_crc(body: bytes, flip: int) -> None:
    record = bytearray(
        encode_message(
            topic=b"T",
            body=body,
            properties=b"",
            queue_id=0,
            flag=0,
            queue_offset=0,
            physical_offset=0,
            sys_flag=0,
            born_timestamp_ms=0,
            born_host=host_to_bytes("127.0.0.1", 1),
            store_timestamp_ms=0,
            store_host=host_to_bytes("127.0.0.1", 2),
        )
    )
    body_pos = len(record) - (1 + 1 + 2) - len(body)  # body, then TOPICLEN + "T" + PROPERTIESLEN
    record[body_pos + flip % len(body)] ^= 0x01
    with pytest.raises(CrcMismatchError):
        decode_message(bytes(record))
    assert decode_message(bytes(record), check_crc=False).store_size == len(record)


def test_truncated_record_is_refused() -> None:
    record = encode_message(
        topic=b"T",
        body=b"abc",
        properties=b"",
        queue_id=0,
        flag=0,
        queue_offset=0,
        physical_offset=0,
        sys_flag=0,
        born_timestamp_ms=0,
        born_host=host_to_bytes("::1", 1),
        store_timestamp_ms=0,
        store_host=host_to_bytes("::1", 2),
    )
    with pytest.raises(MessageDecodeError):
        decode_message(record[:-1])
