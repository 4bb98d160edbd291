"""mq_common.record_layout: every named offset and size reads its field back from records mq_common.codec encoded,
for each pairing of IPv4 and IPv6 born and store hosts."""

from __future__ import annotations

import pytest
from mq_common import record_layout as rl
from mq_common.codec import body_crc, encode_message, host_to_bytes
from mq_common.constants import MessageSysFlag

BORN_HOSTS = {"ipv4": host_to_bytes("127.0.0.3", 40001), "ipv6": host_to_bytes("2001:db8::7", 40002)}
STORE_HOSTS = {"ipv4": host_to_bytes("127.0.0.7", 10911), "ipv6": host_to_bytes("::1", 10912)}
TOPIC = b"LayoutTopic"
BODY = b"body bytes \x00\xff of the record"
PROPERTIES = b"TAGS\x01TagA\x02KEYS\x01k1 k2\x02"
FIELDS = {
    "queue_id": 7,
    "flag": -3,
    "queue_offset": 123_456_789_012,
    "physical_offset": 9_876_543_210,
    "born_timestamp_ms": 1_700_000_000_123,
    "store_timestamp_ms": 1_700_000_000_456,
    "reconsume_times": 5,
    "prepared_transaction_offset": 4_242,
}
SYS_FLAG_IN = MessageSysFlag.TRANSACTION_COMMIT_TYPE | MessageSysFlag.MULTI_TAGS_FLAG


def _read(record: bytes, offset: int, size: int, *, signed: bool = True) -> int:
    """A big-endian integer read with the test's own arithmetic (not the module's Structs)."""
    return int.from_bytes(record[offset : offset + size], "big", signed=signed)


def _record(born: str, store: str, *, body: bytes = BODY, topic: bytes = TOPIC, props: bytes = PROPERTIES) -> bytes:
    return encode_message(
        topic=topic,
        body=body,
        properties=props,
        sys_flag=SYS_FLAG_IN,
        born_host=BORN_HOSTS[born],
        store_host=STORE_HOSTS[store],
        **FIELDS,
    )


HOST_PAIRS = [("ipv4", "ipv4", 0), ("ipv6", "ipv4", 1), ("ipv4", "ipv6", 2), ("ipv6", "ipv6", 3)]


@pytest.mark.parametrize(("born", "store", "variant"), HOST_PAIRS)
def test_fixed_fields_read_back_at_their_offsets(born: str, store: str, variant: int) -> None:
    record = _record(born, store)
    assert _read(record, rl.TOTAL_SIZE_OFFSET, rl.TOTAL_SIZE_BYTES) == len(record)
    assert _read(record, rl.MAGIC_CODE_OFFSET, rl.MAGIC_CODE_BYTES, signed=False) == rl.MESSAGE_MAGIC_CODE
    assert _read(record, rl.BODY_CRC_OFFSET, rl.BODY_CRC_BYTES) == body_crc(BODY)
    assert _read(record, rl.QUEUE_ID_OFFSET, rl.QUEUE_ID_BYTES) == FIELDS["queue_id"]
    assert _read(record, rl.FLAG_OFFSET, rl.FLAG_BYTES) == FIELDS["flag"]
    assert _read(record, rl.QUEUE_OFFSET_OFFSET, rl.QUEUE_OFFSET_BYTES) == FIELDS["queue_offset"]
    assert _read(record, rl.PHYSICAL_OFFSET_OFFSET, rl.PHYSICAL_OFFSET_BYTES) == FIELDS["physical_offset"]
    sys_flag = _read(record, rl.SYS_FLAG_OFFSET, rl.SYS_FLAG_BYTES)
    assert sys_flag & ~rl.HOST_V6_FLAGS == SYS_FLAG_IN
    assert bool(sys_flag & rl.BORN_HOST_V6_FLAG) is (born == "ipv6")
    assert bool(sys_flag & rl.STORE_HOST_V6_FLAG) is (store == "ipv6")
    assert rl.host_variant(sys_flag) == variant
    assert _read(record, rl.BORN_TIMESTAMP_OFFSET, rl.BORN_TIMESTAMP_BYTES) == FIELDS["born_timestamp_ms"]
    # The module's head Struct agrees with the named offsets.
    assert rl.HEAD.unpack_from(record, 0) == (
        len(record),
        rl.MESSAGE_MAGIC_CODE,
        body_crc(BODY),
        FIELDS["queue_id"],
        FIELDS["flag"],
        FIELDS["queue_offset"],
        FIELDS["physical_offset"],
        sys_flag,
        FIELDS["born_timestamp_ms"],
    )


@pytest.mark.parametrize(("born", "store", "variant"), HOST_PAIRS)
def test_fields_after_the_hosts_read_back_at_their_variant_offsets(born: str, store: str, variant: int) -> None:
    record = _record(born, store)
    born_len, store_len = rl.BORN_HOST_LENGTHS[variant], rl.STORE_HOST_LENGTHS[variant]
    assert born_len == len(BORN_HOSTS[born])
    assert store_len == len(STORE_HOSTS[store])
    assert record[rl.BORN_HOST_OFFSET : rl.BORN_HOST_OFFSET + born_len] == BORN_HOSTS[born]
    at = rl.STORE_TIMESTAMP_OFFSETS[variant]
    assert at == rl.BORN_HOST_OFFSET + born_len
    assert _read(record, at, rl.STORE_TIMESTAMP_BYTES) == FIELDS["store_timestamp_ms"]
    at = rl.STORE_HOST_OFFSETS[variant]
    assert record[at : at + store_len] == STORE_HOSTS[store]
    assert _read(record, rl.RECONSUME_TIMES_OFFSETS[variant], rl.RECONSUME_TIMES_BYTES) == FIELDS["reconsume_times"]
    prepared_at = rl.PREPARED_TRANSACTION_OFFSET_OFFSETS[variant]
    assert _read(record, prepared_at, rl.PREPARED_TRANSACTION_OFFSET_BYTES) == FIELDS["prepared_transaction_offset"]
    assert _read(record, rl.BODY_LENGTH_OFFSETS[variant], rl.BODY_LENGTH_BYTES) == len(BODY)
    at = rl.BODY_OFFSETS[variant]
    assert record[at : at + len(BODY)] == BODY
    at += len(BODY)
    assert _read(record, at, rl.TOPIC_LENGTH_BYTES, signed=False) == len(TOPIC)
    at += rl.TOPIC_LENGTH_BYTES
    assert record[at : at + len(TOPIC)] == TOPIC
    at += len(TOPIC)
    assert _read(record, at, rl.PROPERTIES_LENGTH_BYTES, signed=False) == len(PROPERTIES)
    at += rl.PROPERTIES_LENGTH_BYTES
    assert record[at:] == PROPERTIES
    assert rl.STORE_TIMESTAMP.unpack_from(record, rl.STORE_TIMESTAMP_OFFSETS[variant]) == (
        FIELDS["store_timestamp_ms"],
    )
    assert rl.RECONSUME_AND_PREPARED.unpack_from(record, rl.RECONSUME_TIMES_OFFSETS[variant]) == (
        FIELDS["reconsume_times"],
        FIELDS["prepared_transaction_offset"],
    )


@pytest.mark.parametrize(("born", "store", "variant"), HOST_PAIRS)
def test_record_length_is_the_fixed_bytes_plus_the_variable_fields(born: str, store: str, variant: int) -> None:
    record = _record(born, store)
    variable = len(BODY) + len(TOPIC) + len(PROPERTIES)
    assert len(record) == rl.EMPTY_RECORD_BYTES[variant] + variable
    assert len(record) == rl.RECORD_FIXED_BYTES + len(BORN_HOSTS[born]) + len(STORE_HOSTS[store]) + variable
    sys_flag = rl.host_sysflag_bits(BORN_HOSTS[born], STORE_HOSTS[store])
    assert rl.host_variant(sys_flag) == variant
    assert rl.calc_msg_length(sys_flag, len(BODY), len(TOPIC), len(PROPERTIES)) == len(record)


def test_the_smallest_record_is_min_record_bytes() -> None:
    assert len(_record("ipv4", "ipv4", body=b"", topic=b"", props=b"")) == rl.MIN_RECORD_BYTES == 91


def test_fixed_fields_tile_the_head_without_gaps() -> None:
    fields = [
        (rl.TOTAL_SIZE_OFFSET, rl.TOTAL_SIZE_BYTES),
        (rl.MAGIC_CODE_OFFSET, rl.MAGIC_CODE_BYTES),
        (rl.BODY_CRC_OFFSET, rl.BODY_CRC_BYTES),
        (rl.QUEUE_ID_OFFSET, rl.QUEUE_ID_BYTES),
        (rl.FLAG_OFFSET, rl.FLAG_BYTES),
        (rl.QUEUE_OFFSET_OFFSET, rl.QUEUE_OFFSET_BYTES),
        (rl.PHYSICAL_OFFSET_OFFSET, rl.PHYSICAL_OFFSET_BYTES),
        (rl.SYS_FLAG_OFFSET, rl.SYS_FLAG_BYTES),
        (rl.BORN_TIMESTAMP_OFFSET, rl.BORN_TIMESTAMP_BYTES),
    ]
    end = 0
    for offset, size in fields:
        assert offset == end
        end = offset + size
    assert end == rl.BORN_HOST_OFFSET == rl.HEAD.size == 48


def test_end_of_file_filler_is_total_size_and_blank_magic() -> None:
    filler = rl.TOTAL_AND_MAGIC.pack(4096, rl.BLANK_MAGIC_CODE)
    assert len(filler) == rl.END_FILE_MIN_BLANK_LENGTH == 8
    assert _read(filler, rl.TOTAL_SIZE_OFFSET, rl.TOTAL_SIZE_BYTES) == 4096
    assert _read(filler, rl.MAGIC_CODE_OFFSET, rl.MAGIC_CODE_BYTES, signed=False) == 0xCBD43194


def test_topic_longer_than_topic_length_max_is_refused() -> None:
    with pytest.raises(ValueError, match="255"):
        _record("ipv4", "ipv4", topic=b"t" * (rl.TOPIC_LENGTH_MAX + 1))
