"""The C MessageBatch path (scan_batch, append_batch, index_records) stores what the Python path stores.

The same MessageExtBatch puts through a DefaultMessageStore with ``native_append_enable`` on and off (one fixed
store time): results, CommitLog files, ConsumeQueue files and index files must be byte-identical, with IPv6
hosts, unicode topics/keys/tags, batch properties and tiny index files (collisions and rolls). Then what only
the C path does: a batch that meets the file end goes whole to the next file, and refusals are whole.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from broker_testkit import store_config
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mq_broker.store import native_append
from mq_broker.store import put_service as put_service_module
from mq_broker.store.config import FlushDiskType
from mq_broker.store.message import MessageExtBatch, PutMessageResult, PutMessageStatus
from mq_broker.store.message_store import DefaultMessageStore
from mq_common.batch_codec import encode_batch
from mq_common.codec import encode_properties, host_to_bytes, iter_messages
from mq_common.constants import MessageConst
from mq_common.extensions import extensions_disabled

pytestmark = pytest.mark.skipif(
    not native_append.AVAILABLE and (shutil.which("cc") is None or extensions_disabled()),
    reason="the extension is not built (no C compiler) or MQ_NO_EXTENSIONS=1",
)

NOW_S = 1_700_000_123.456
STORE_HOSTS = (host_to_bytes("127.0.0.1", 10911), host_to_bytes("::1", 10911))
BORN_HOSTS = (host_to_bytes("127.0.0.2", 5000), host_to_bytes("::1", 6000))
keys_text = st.lists(st.text(alphabet="ab c😀é", min_size=0, max_size=6), max_size=3).map(" ".join)


@st.composite
def items(draw: st.DrawFn) -> tuple[bytes, str, int]:
    properties: dict[str, str] = {}
    if draw(st.booleans()):
        properties[MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = draw(st.text(alphabet="0123456789ABCDEF", max_size=8))
    if draw(st.booleans()):
        properties[MessageConst.KEYS] = draw(keys_text)
    if draw(st.booleans()):
        properties[MessageConst.TAGS] = draw(st.sampled_from(["TagA", "标签", ""]))
    if draw(st.booleans()):
        properties[draw(st.sampled_from(["k", "ü"]))] = draw(st.text(max_size=10))
    body = draw(st.binary(min_size=1, max_size=300))
    return body, encode_properties(properties), draw(st.integers(-(2**31), 2**31 - 1))


@st.composite
def batches(draw: st.DrawFn) -> MessageExtBatch:
    extra = draw(st.sampled_from([{}, {"WAIT": "true"}, {"CLUSTER": "DefaultCluster"}, {"TAGS": "BatchTag"}]))
    return MessageExtBatch(
        topic=draw(st.sampled_from(["TopicTest", "Tópico-ü", "订单"])),
        queue_id=draw(st.integers(0, 2)),
        body=encode_batch(draw(st.lists(items(), min_size=1, max_size=15))),
        properties_string=encode_properties(extra),
        sys_flag=draw(st.sampled_from([0, 0x2 << 2])),  # normal or a committed transaction
        born_timestamp_ms=draw(st.integers(0, 2**62)),
        born_host=draw(st.sampled_from(BORN_HOSTS)),
    )


def open_store(root: Path, *, native: bool, store_host: bytes = STORE_HOSTS[0], **kw: Any) -> DefaultMessageStore:
    kw.setdefault("file_size", 1024 * 1024)
    cfg = store_config(
        root,
        FlushDiskType.ASYNC_FLUSH,
        kw.pop("file_size"),
        cq_units=kw.pop("cq_units", 64),
        native_append_enable=native,
        max_hash_slot_num=kw.pop("max_hash_slot_num", 7),
        max_index_num=kw.pop("max_index_num", 40),
        **kw,
    )
    store = DefaultMessageStore(cfg, store_host)
    store.start()
    return store


def files_bytes(folder: Path) -> list[bytes]:
    return [p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()]


@pytest.fixture
def fixed_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(put_service_module, "time", SimpleNamespace(time=lambda: NOW_S))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batch_list=st.lists(batches(), min_size=1, max_size=5), store_host=st.sampled_from(STORE_HOSTS))
async def test_native_batch_path_writes_what_the_python_path_writes(
    tmp_path_factory: pytest.TempPathFactory,
    fixed_clock: None,
    batch_list: list[MessageExtBatch],
    store_host: bytes,
) -> None:
    outcome: dict[bool, tuple[list[PutMessageResult], list[bytes], list[bytes], list[bytes]]] = {}
    for native in (False, True):
        root = tmp_path_factory.mktemp("native" if native else "python")
        store = open_store(root, native=native, store_host=store_host)
        try:
            results = [await store.put_message_batch(b) for b in batch_list]
        finally:
            store.shutdown()
        logs = files_bytes(root / "commitlog")
        outcome[native] = (results, logs, files_bytes(root / "consumequeue"), files_bytes(root / "index"))
    assert all(r.status is PutMessageStatus.PUT_OK for r in outcome[True][0])
    assert outcome[True] == outcome[False]


async def test_a_batch_meeting_the_file_end_goes_whole_to_the_next_file(tmp_path: Path) -> None:
    store = open_store(tmp_path, native=True, file_size=4096)
    body = encode_batch((b"x" * 200, encode_properties({"UNIQ_KEY": f"U{i}"}), 0) for i in range(6))
    try:
        first = await store.put_message_batch(MessageExtBatch("T", 0, body))
        second = await store.put_message_batch(MessageExtBatch("T", 0, body))  # 2 x ~1.6 KiB, then a roll
        third = await store.put_message_batch(MessageExtBatch("T", 0, body))
        assert [r.status for r in (first, second, third)] == [PutMessageStatus.PUT_OK] * 3
        assert (first.queue_offset, second.queue_offset, third.queue_offset) == (0, 6, 12)
        assert third.wrote_offset == 4096  # not split: the whole batch starts the second file
        ids = third.msg_id.split(",")
        assert len(ids) == third.msg_num == 6
        got = store.get_messages("T", 0, 0, 32)
        assert [m.queue_offset for m in iter_messages(b"".join(got.messages))] == list(range(18))
        assert store.query_message_by_unique_key("T", "U3").messages  # indexed from the written records
        whole_file = MessageExtBatch("T", 0, encode_batch((b"y" * 1000, "", 0) for _ in range(5)))
        refused = await store.put_message_batch(whole_file)
        assert refused.status is PutMessageStatus.MESSAGE_ILLEGAL
        assert "more than one CommitLog file holds" in refused.remark
        assert store.get_max_offset_in_queue("T", 0) == 18
    finally:
        store.shutdown()


async def test_refusals_are_whole_and_write_nothing(tmp_path: Path) -> None:
    store = open_store(tmp_path, native=True, max_message_size_bytes=500)
    ok = (b"a" * 10, "", 0)
    cases = {
        "body over the limit": (encode_batch([ok, (b"b" * 501, "", 0)]), "", PutMessageStatus.MESSAGE_ILLEGAL),
        "properties over 32 KiB": (
            encode_batch([ok, (b"c", encode_properties({"p": "v" * 20_000}), 0)]),
            encode_properties({"q": "w" * 13_000}),
            PutMessageStatus.PROPERTIES_SIZE_EXCEEDED,
        ),
        "malformed": (encode_batch([ok])[:-1], "", PutMessageStatus.MESSAGE_ILLEGAL),
        "empty": (b"", "", PutMessageStatus.MESSAGE_ILLEGAL),
    }
    try:
        for name, (body, extra, status) in cases.items():
            result = await store.put_message_batch(MessageExtBatch("T", 1, body, properties_string=extra))
            assert result.status is status, name
            assert result.remark, name
        assert store.commit_log.max_offset == 0
        assert store.get_max_offset_in_queue("T", 1) == 0
        store.failure = "flush failed, the store is read-only: test"
        down = await store.put_message_batch(MessageExtBatch("T", 1, encode_batch([ok])))
        assert down.status is PutMessageStatus.SERVICE_NOT_AVAILABLE
        assert "read-only" in down.remark
    finally:
        store.shutdown()
