"""What the broker's processors need of a message store: the interface they type against.

Mirrors org.apache.rocketmq.store.MessageStore (the subset served here). DefaultMessageStore implements it;
a test may pass any object with these members. Every method runs on the event loop.
"""

from __future__ import annotations

from collections.abc import Sequence, Set
from typing import Protocol

from mq_common.codec import MessageExt

from mq_broker.store.config import BrokerRole, MessageStoreConfig
from mq_broker.store.index_service import QueryMessageResult
from mq_broker.store.message import GetMessageResult, MessageExtBatch, MessageExtBrokerInner, PutMessageResult
from mq_broker.store.message_filter import MessageFilter


class MessageStore(Protocol):
    """The store as the send, pull, query and admin processors see it (see DefaultMessageStore for the statuses
    each method returns)."""

    # The broker's current role (a SLAVE refuses client writes; mq_broker.ha switches it at runtime).
    broker_role: BrokerRole

    @property
    def config(self) -> MessageStoreConfig: ...

    @property
    def store_host(self) -> bytes:
        """STOREHOST of the records this store writes: 8 or 20 bytes (mq_common.codec.host_to_bytes)."""
        ...

    async def put_messages(self, batch: Sequence[MessageExtBrokerInner]) -> list[PutMessageResult]: ...

    async def put_message_batch(self, batch: MessageExtBatch) -> PutMessageResult: ...

    def get_messages(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        max_nums: int,
        message_filter: MessageFilter | None = None,
    ) -> GetMessageResult: ...

    def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int: ...

    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int: ...

    def get_message_store_timestamp(self, topic: str, queue_id: int, queue_offset: int) -> int: ...

    def get_offset_in_queue_by_time(self, topic: str, queue_id: int, timestamp_ms: int) -> int: ...

    def check_in_mem_by_consume_offset(self, topic: str, queue_id: int, consume_offset: int) -> bool: ...

    async def delete_topics(self, topics: Set[str]) -> int: ...

    def query_message(self, topic: str, key: str, max_num: int, begin_ms: int, end_ms: int) -> QueryMessageResult: ...

    def query_message_by_unique_key(self, topic: str, uniq_key: str) -> QueryMessageResult: ...

    def select_one_message_by_offset(self, commit_log_offset: int) -> bytes | None: ...

    def lookup_message_by_offset(self, commit_log_offset: int) -> MessageExt | None: ...
