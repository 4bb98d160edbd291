"""The C append loop (mq_broker.store._native) writes exactly what the Python path writes.

Same batches through a CommitLog + IndexService with ``native_append_enable`` on and off: the CommitLog files,
the put results, the topic-queue table and the index files must be byte-identical, across file rolls, limits
(refused messages in the middle of a batch), IPv6 hosts, unicode topics/keys and transaction sys flags.
"""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mq_broker.store import native_append
from mq_broker.store.commit_log import CommitLog
from mq_broker.store.config import MessageStoreConfig
from mq_broker.store.index_service import IndexService
from mq_broker.store.message import MessageExtBrokerInner, PutMessageResult
from mq_common.codec import decode_message, host_to_bytes
from mq_common.constants import MessageConst, MessageSysFlag
from mq_common.extensions import extensions_disabled

pytestmark = pytest.mark.skipif(
    not native_append.AVAILABLE and (shutil.which("cc") is None or extensions_disabled()),
    reason="the extension is not built (no C compiler) or MQ_NO_EXTENSIONS=1",
)

NOW_MS = 1_700_000_123_456
STORE_HOSTS = (host_to_bytes("127.0.0.1", 10911), host_to_bytes("::1", 10911))
BORN_HOSTS = (host_to_bytes("127.0.0.2", 5000), host_to_bytes("::1", 6000))
MAX_BODY = 600

topics = st.sampled_from(["TopicTest", "Tópico-ü", "T" * 128, "订单"])
keys_text = st.lists(st.text(alphabet="ab c😀é", min_size=0, max_size=6), max_size=3).map(" ".join)


@st.composite
def messages(draw: st.DrawFn) -> MessageExtBrokerInner:
    properties: dict[str, str] = {}
    if draw(st.booleans()):
        properties[MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = draw(st.text(alphabet="0123456789ABCDEF", max_size=8))
    if draw(st.booleans()):
        properties[MessageConst.KEYS] = draw(keys_text)
    if draw(st.booleans()):
        properties[MessageConst.TAGS] = draw(st.sampled_from(["TagA", "标签", ""]))
    tran = draw(st.sampled_from([0, 0, 0, 0x1 << 2, 0x2 << 2, 0x3 << 2]))
    return MessageExtBrokerInner.build(
        topic=draw(topics),
        queue_id=draw(st.integers(0, 3)),
        body=draw(st.binary(min_size=0, max_size=MAX_BODY + 50)),
        properties=properties,
        flag=draw(st.integers(-(2**31), 2**31 - 1)),
        sys_flag=tran | draw(st.sampled_from([0, MessageSysFlag.COMPRESSED_FLAG])),
        born_timestamp_ms=draw(st.integers(0, 2**62)),
        born_host=draw(st.sampled_from(BORN_HOSTS)),
        reconsume_times=draw(st.integers(0, 16)),
    )


def make_log(root: Path, *, native: bool, store_host: bytes, file_size: int) -> CommitLog:
    config = MessageStoreConfig(
        store_path_root_dir=root,
        mapped_file_size_commit_log_bytes=file_size,
        max_message_size_bytes=MAX_BODY,
        native_append_enable=native,
    )
    log = CommitLog(config, store_host)
    log.load()
    log.mapped_file_queue.get_last_mapped_file()  # the first file exists: the C loop takes every batch
    return log


def put_all(
    log: CommitLog, index: IndexService, batches: list[list[MessageExtBrokerInner]], *, native: bool
) -> list[PutMessageResult]:
    results: list[PutMessageResult] = []
    for i, batch in enumerate(batches):
        put, _dispatches = log.put_messages(batch, NOW_MS + i * 1500)
        index.build_indexes_for_batch(batch, put, native=native)
        results.extend(put)
    return results


def files_bytes(folder: Path) -> list[bytes]:
    return [p.read_bytes() for p in sorted(folder.iterdir())] if folder.is_dir() else []


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    batches=st.lists(st.lists(messages(), min_size=1, max_size=12), min_size=1, max_size=4),
    store_host=st.sampled_from(STORE_HOSTS),
    file_size=st.sampled_from([4096, 64 * 1024]),
)
def test_native_and_python_paths_write_identical_bytes(
    tmp_path_factory: pytest.TempPathFactory,
    batches: list[list[MessageExtBrokerInner]],
    store_host: bytes,
    file_size: int,
) -> None:
    outcome: dict[bool, tuple[list[PutMessageResult], dict[str, int], list[bytes], list[bytes]]] = {}
    for native in (False, True):
        root = tmp_path_factory.mktemp("native" if native else "python")
        log = make_log(root, native=native, store_host=store_host, file_size=file_size)
        index = IndexService(root / "index", hash_slot_num=7, index_num=9)  # tiny: collisions and rolls
        try:
            results = put_all(log, index, batches, native=native)
            index_bytes = [f.read_bytes(0, f.file_size_bytes) for f in index.index_files]
        finally:
            index.close()
            log.mapped_file_queue.close()
        outcome[native] = (results, dict(log.topic_queue_table), files_bytes(root / "commitlog"), index_bytes)
    assert outcome[True][0] == outcome[False][0]
    assert outcome[True][1] == outcome[False][1]
    assert outcome[True][2] == outcome[False][2]
    assert outcome[True][3] == outcome[False][3]


def test_refused_messages_in_a_batch_match_the_python_path(tmp_path: Path) -> None:
    ok = MessageExtBrokerInner.build(topic="TopicTest", queue_id=1, body=b"b" * 100, properties={})
    big_props = dataclasses.replace(ok, properties_string="p\x01" + "x" * 33_000)
    big_body = dataclasses.replace(ok, body=b"x" * (MAX_BODY + 1))
    batch = [ok, big_props, ok, big_body, ok]
    outcome = []
    for native in (False, True):
        root = tmp_path / str(native)
        log = make_log(root, native=native, store_host=STORE_HOSTS[0], file_size=4096)
        try:
            results, _ = log.put_messages(batch, NOW_MS)
        finally:
            log.mapped_file_queue.close()
        outcome.append(([r.status.value for r in results], results, files_bytes(root / "commitlog")))
    statuses = ["PUT_OK", "PROPERTIES_SIZE_EXCEEDED", "PUT_OK", "MESSAGE_ILLEGAL", "PUT_OK"]
    assert outcome[0][0] == outcome[1][0] == statuses
    assert outcome[0][1:] == outcome[1][1:]


def test_records_decode_with_their_fields(tmp_path: Path) -> None:
    msg = MessageExtBrokerInner.build(
        topic="TopicTest",
        queue_id=2,
        body=b"hello",
        properties={MessageConst.KEYS: "k1 k2", MessageConst.TAGS: "TagA"},
        born_timestamp_ms=123,
        born_host=BORN_HOSTS[1],
    )
    log = make_log(tmp_path, native=True, store_host=STORE_HOSTS[1], file_size=4096)
    try:
        results, dispatches = log.put_messages([msg, dataclasses.replace(msg, queue_id=2)], NOW_MS)
        raw = log.get_message(results[1].wrote_offset, results[1].wrote_bytes)
        assert raw is not None
        decoded = decode_message(raw, check_crc=True)
        assert (decoded.topic, decoded.queue_id, decoded.queue_offset, decoded.body) == ("TopicTest", 2, 1, b"hello")
        assert decoded.store_host == ("::1", 10911)
        assert decoded.born_host == ("::1", 6000)
        assert decoded.properties[MessageConst.KEYS] == "k1 k2"
        assert [d.queue_offset for d in dispatches] == [0, 1]
        assert dispatches[0].sys_flag & MessageSysFlag.STOREHOSTADDRESS_V6_FLAG
    finally:
        log.mapped_file_queue.close()


@pytest.mark.skipif(extensions_disabled(), reason="MQ_NO_EXTENSIONS=1: the extension is not loaded")
def test_the_extension_is_built_where_a_compiler_exists() -> None:
    assert native_append.AVAILABLE, "cc exists but mq_broker.store._native did not build: see the uv sync output"


def test_malformed_field_raises_and_writes_nothing(tmp_path: Path) -> None:
    bad = MessageExtBrokerInner(topic="TopicTest", queue_id=0, body=b"x", born_host=b"short")
    log = make_log(tmp_path, native=True, store_host=STORE_HOSTS[0], file_size=4096)
    try:
        with pytest.raises(ValueError, match="born_host"):
            log.put_messages([bad], NOW_MS)
        assert log.max_offset == 0
        assert log.topic_queue_table == {}
    finally:
        log.mapped_file_queue.close()
