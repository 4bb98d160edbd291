"""The broker's Prometheus metrics: RocketMQ 5 names (BrokerMetricsConstant, DefaultStoreMetricsConstant,
RemotingMetricsConstant) plus the group-commit and put figures of this store.

Series (every one also has cluster, node_type="broker", node_id=<broker name>):

- ``rocketmq_messages_in_total`` / ``rocketmq_throughput_in_total`` (bytes of bodies) {topic, message_type}
- ``rocketmq_message_size`` histogram (bytes) {topic, message_type}
- ``rocketmq_rpc_latency`` histogram (ms) {protocol_type="grpc", method, response_code}
- ``rocketmq_storage_size`` (bytes of the store directory), ``rocketmq_storage_flush_behind_bytes``,
  ``rocketmq_storage_dispatch_behind_bytes``, ``rocketmq_storage_message_reserve_time`` (ms since the oldest
  stored message; also as ``rocketmq_message_reserve_time``), ``rocketmq_topic_number``,
  ``rocketmq_producer_connections`` (distinct producer peers seen in the last 60 s)
- ``mq_broker_put_latency_ms`` histogram (one observation per stored batch) {flush_disk_type}
- ``mq_broker_flush_latency_ms`` histogram (one msync round that wrote something), ``mq_broker_messages_per_flush``
  histogram, ``mq_broker_flush_disk_timeout_total`` (group-commit requests answered FLUSH_DISK_TIMEOUT)
- ``mq_broker_disk_util_ratio`` (used / size of the store's file system)
- replication (:meth:`BrokerMetrics.bind_ha`): ``mq_broker_ha_role`` (0 ASYNC_MASTER, 1 SYNC_MASTER, 2 SLAVE),
  on a master ``mq_broker_ha_in_sync_slaves`` and per connected slave {slave}: ``mq_broker_ha_slave_lag_bytes``
  (master max offset - the slave's acknowledged offset) and ``mq_broker_ha_slave_lag_seconds`` (0 while the slave
  holds everything, else the time since it last did)
- consumers {topic, consumer_group, is_retry, is_system}: ``rocketmq_messages_out_total``,
  ``rocketmq_throughput_out_total`` (bytes handed out), ``rocketmq_send_to_dlq_messages_total`` (no is_retry), and
  the scrape-time gauges of :mod:`mq_broker.consumer_metrics` (lag, lag latency, in flight, queueing latency, ready)
- timers and delay levels (DefaultStoreMetricsConstant's timer names; the rest ours):
  ``rocketmq_timer_enqueue_total`` / ``rocketmq_timer_dequeue_total`` {topic} (timer messages of real topic
  ``topic`` that entered the timer store / fired to ``topic``), ``rocketmq_timing_messages`` {topic} (timers
  pending, scrape time, :meth:`BrokerMetrics.bind_timer_backlog`), ``mq_broker_schedule_dequeue_total`` {topic}
  (delay-level messages re-put from SCHEDULE_TOPIC_XXXX to ``topic``), ``mq_broker_timer_lateness_ms`` histogram
  {topic, timer_type} (fire time - due time of each fired message, ms; timer_type ``timer`` or ``delay_level``;
  buckets :data:`TIMER_LATENESS_BUCKETS_MS`), ``mq_broker_schedule_offset_behind`` {delay_level} (messages of the
  level's SCHEDULE_TOPIC_XXXX queue not re-put yet, scrape time, :meth:`BrokerMetrics.bind_schedule_behind`)

- transactions (BrokerMetricsConstant's names; the checks ours): ``rocketmq_half_messages`` {topic} (open
  transactions by real topic, scrape time, :meth:`BrokerMetrics.bind_half_messages`),
  ``rocketmq_commit_messages_total`` / ``rocketmq_rollback_messages_total`` {topic},
  ``rocketmq_finish_message_latency`` histogram {topic} (seconds from the half message's birth to its end;
  buckets :data:`FINISH_LATENCY_BUCKETS_S`), ``mq_broker_transaction_checks_total`` {topic} (check-backs asked)
  and ``mq_broker_transaction_check_max_total`` {topic} (moved to TRANS_CHECK_MAX_TIME_TOPIC)
- FIFO (orderly POP; ours, RocketMQ 5 has none) {topic, consumer_group}: ``mq_broker_fifo_blocked_queues`` and
  ``mq_broker_fifo_block_age_ms`` (scrape time, :meth:`BrokerMetrics.bind_fifo`, see
  :mod:`mq_broker.consumer_metrics`), ``mq_broker_fifo_order_wait_ms`` histogram (how long each block of an orderly
  queue lasted, from the first hand-out of a pop's messages, redeliveries included, to the ack of the last of them:
  the time the queue's later messages waited; buckets :data:`FIFO_ORDER_WAIT_BUCKETS_MS`; one observation per
  block, on the ack that ends it)
Topic labels are bounded by ``metrics_max_topics`` (then ``topic="_other"``), consumer label pairs by
``metrics_max_consumer_pairs`` (then ``topic="_other", consumer_group="_other"``). Hot-path cost: one call per
stored batch (:meth:`BrokerMetrics.on_put`): a dict count per message and one counter update per
(topic, type); one call per pull/pop answer (:meth:`BrokerMetrics.on_messages_out`). Runs on the broker's event
loop, except the flush figures (flusher thread) and the scrape-time gauges (metrics HTTP thread).
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final

from mq_common.codec import NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR
from mq_common.constants import MessageConst, MessageSysFlag
from mq_common.metrics import (
    BATCH_SIZE_BUCKETS,
    LATENCY_BUCKETS_MS,
    MESSAGE_SIZE_BUCKETS_BYTES,
    GaugeSample,
    NodeIdentity,
    ServiceMetrics,
)

from mq_broker.consumer_metrics import (
    CONSUMER_LABELS,
    DEFAULT_MAX_CONSUMER_PAIRS,
    ConsumerLagCollector,
    ConsumerLagSources,
    ConsumerOffsetTable,
    ConsumerPairLabels,
    FifoOrderInfo,
    InflightByGroupTopic,
    InflightInQueue,
)
from mq_broker.store.message import MessageExtBatch, MessageExtBrokerInner, PutMessageResult, PutMessageStatus

if TYPE_CHECKING:
    from mq_broker.ha.ha_service import HAService
    from mq_broker.store.message_store import DefaultMessageStore
    from mq_broker.topic_config import TopicConfigManager

PRODUCER_CONNECTION_WINDOW_S: Final = 60.0
# Milliseconds a timer or delay-level message fired after its due time: fine below 10 s (the timer precision is
# 1 s; the alert's threshold, 5 s, is a bucket bound), coarse up to a minute.
TIMER_LATENESS_BUCKETS_MS: Final = (
    10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 750.0, 1000.0, 1500.0, 2000.0, 3000.0, 5000.0, 7500.0, 10000.0,
    20000.0, 30000.0, 60000.0,
)  # fmt: skip
# Seconds from a half message's birth to its commit or rollback (RocketMQ records whole seconds).
FINISH_LATENCY_BUCKETS_S: Final = (1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 600.0, 1800.0, 3600.0, 7200.0, 21600.0)
# Ms an orderly queue stayed blocked (consume time of a batch up to redeliveries until retryMaxTimes).
FIFO_ORDER_WAIT_BUCKETS_MS: Final = (
    5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 2500.0, 5000.0, 10000.0, 30000.0, 60000.0, 300000.0,
    600000.0, 1800000.0, 3600000.0,
)  # fmt: skip
FIFO_LABELS: Final = ("topic", "consumer_group")
TIMER_TYPE_TIMER: Final = "timer"
TIMER_TYPE_DELAY_LEVEL: Final = "delay_level"
_HA_ROLES: Final = ("ASYNC_MASTER", "SYNC_MASTER", "SLAVE")
_STORED: Final = frozenset(s for s in PutMessageStatus if s.is_stored)
_PUT_OK: Final = PutMessageStatus.PUT_OK
_FIFO_MARK: Final = PROPERTY_SEPARATOR + MessageConst.SHARDING_KEY + NAME_VALUE_SEPARATOR
_DELAY_MARK: Final = PROPERTY_SEPARATOR + MessageConst.DELAY_TIME_LEVEL + NAME_VALUE_SEPARATOR
_TIMER_MARK: Final = PROPERTY_SEPARATOR + "TIMER_"  # TIMER_DELIVER_MS, TIMER_DELAY_SEC/_MS, TIMER_OUT_MS
_TX: Final = int(MessageSysFlag.TRANSACTION_PREPARED_TYPE)  # a plain int: IntFlag & costs a Python call


def message_type(msg: MessageExtBrokerInner) -> str:
    """RocketMQ 5's TopicMessageType metrics value in mq_common.message_type's precedence: transaction, delay (a
    DELAY level or a TIMER_* time), fifo (sharding key), else normal; substring scans, no property decode."""
    if msg.sys_flag & _TX:
        return "transaction"
    props = PROPERTY_SEPARATOR + msg.properties_string
    if _DELAY_MARK in props or _TIMER_MARK in props:
        return "delay"
    if _FIFO_MARK in props:
        return "fifo"
    return "normal"


def _all_normal(batch: Sequence[MessageExtBrokerInner]) -> bool:
    """True when no message of ``batch`` is transactional, ordered or delayed (C-speed scans, no Python loop
    body per message beyond the flag test)."""
    if any(m.sys_flag & _TX for m in batch):
        return False
    joined = PROPERTY_SEPARATOR + PROPERTY_SEPARATOR.join([m.properties_string for m in batch])
    return _FIFO_MARK not in joined and _DELAY_MARK not in joined and _TIMER_MARK not in joined


class BrokerMetrics(ServiceMetrics):
    """The broker's families; :meth:`bind` attaches the store and topic table for the scrape-time gauges."""

    def __init__(
        self,
        node: NodeIdentity,
        *,
        max_topics: int,
        flush_disk_type: str,
        max_consumer_pairs: int = DEFAULT_MAX_CONSUMER_PAIRS,
    ) -> None:
        super().__init__(node, max_topics=max_topics)
        self.flush_disk_type = flush_disk_type
        tm = ("topic", "message_type")
        self.messages_in = self.counter("rocketmq_messages_in", "Messages stored, by topic and type.", tm)
        self.throughput_in = self.counter("rocketmq_throughput_in", "Body bytes stored, by topic and type.", tm)
        self.message_size = self.bulk_histogram(
            "rocketmq_message_size", "Stored message body sizes in bytes.", tm, buckets=MESSAGE_SIZE_BUCKETS_BYTES
        )
        self.rpc_latency = self.histogram(
            "rocketmq_rpc_latency",
            "gRPC call latency on the broker in ms.",
            ("protocol_type", "method", "response_code"),
            buckets=LATENCY_BUCKETS_MS,
        )
        self.put_latency = self.histogram(
            "mq_broker_put_latency_ms",
            "Store put of one batch (append, dispatch, group-commit wait) in ms.",
            ("flush_disk_type",),
            buckets=LATENCY_BUCKETS_MS,
        ).child(flush_disk_type)
        self.flush_latency = self.histogram(
            "mq_broker_flush_latency_ms", "CommitLog msync rounds that wrote data, in ms.", buckets=LATENCY_BUCKETS_MS
        ).child()
        self.messages_per_flush = self.histogram(
            "mq_broker_messages_per_flush", "Messages made durable by one msync round.", buckets=BATCH_SIZE_BUCKETS
        ).child()
        self.flush_disk_timeouts = self.counter(
            "mq_broker_flush_disk_timeout", "Group-commit requests answered FLUSH_DISK_TIMEOUT."
        ).child()
        self.flush_disk_timeouts.inc(0)
        self.auth_refusals = self.counter(
            "mq_broker_auth_refusals",
            "Requests refused NO_PERMISSION by authentication, the admin rule or authorisation, by stage, resource "
            "type and action (no user or resource-name label: any caller may name any).",
            ("stage", "resource_type", "action"),
        )
        for stage in ("authentication", "admin"):  # exported from the start, as 0 (no resource, no action)
            self.auth_refusals.child(stage, "none", "none").inc(0)
        self._put_messages = 0
        self._flushed_messages = 0
        self._peers: dict[str, float] = {}
        self._store: DefaultMessageStore | None = None
        self._init_consumer_metrics(max_consumer_pairs)
        self._init_timer_metrics()
        self._init_transaction_metrics()
        self.fifo_order_wait = self.bulk_histogram(
            "mq_broker_fifo_order_wait_ms",
            "How long an orderly queue stayed blocked, in ms: from the first hand-out of a pop's messages "
            "(redeliveries included) to the ack of the last of them, the time the queue's later messages waited.",
            FIFO_LABELS,
            buckets=FIFO_ORDER_WAIT_BUCKETS_MS,
        )

    def _init_consumer_metrics(self, max_consumer_pairs: int) -> None:
        self.consumer_pairs = ConsumerPairLabels(max_consumer_pairs)
        self.messages_out = self.counter(
            "rocketmq_messages_out", "Messages handed to consumers (pull, pop).", CONSUMER_LABELS
        )
        self.throughput_out = self.counter(
            "rocketmq_throughput_out", "Stored bytes handed to consumers (pull, pop).", CONSUMER_LABELS
        )
        self.send_to_dlq = self.counter(
            "rocketmq_send_to_dlq_messages",
            "Messages moved to a %DLQ% topic, by consumer group and original topic.",
            ("topic", "consumer_group", "is_system"),
        )
        self.consumer_lag = ConsumerLagCollector(self.node)
        self.registry.register(self.consumer_lag)

    def _init_timer_metrics(self) -> None:
        self.timer_enqueue = self.counter(
            "rocketmq_timer_enqueue", "Timer messages that entered the timer store, by real topic.", ("topic",)
        )
        self.timer_dequeue = self.counter(
            "rocketmq_timer_dequeue", "Timer messages fired to their real topic, by real topic.", ("topic",)
        )
        self.schedule_dequeue = self.counter(
            "mq_broker_schedule_dequeue",
            "Delay-level messages re-put from SCHEDULE_TOPIC_XXXX to their real topic, by real topic.",
            ("topic",),
        )
        self.timer_lateness = self.bulk_histogram(
            "mq_broker_timer_lateness_ms",
            "Fire time minus due time of each timer (timer_type=timer) or delay-level (timer_type=delay_level) "
            "message put to its real topic, in ms.",
            ("topic", "timer_type"),
            buckets=TIMER_LATENESS_BUCKETS_MS,
        )

    def _init_transaction_metrics(self) -> None:
        self.commit_messages = self.counter(
            "rocketmq_commit_messages", "Transactions committed, by real topic.", ("topic",)
        )
        self.rollback_messages = self.counter(
            "rocketmq_rollback_messages", "Transactions rolled back, by real topic.", ("topic",)
        )
        self.finish_latency = self.bulk_histogram(
            "rocketmq_finish_message_latency",
            "Seconds from a half message's birth to its commit or rollback, by real topic.",
            ("topic",),
            buckets=FINISH_LATENCY_BUCKETS_S,
        )
        self.transaction_checks = self.counter(
            "mq_broker_transaction_checks", "Open transactions checked back, by real topic.", ("topic",)
        )
        self.transaction_check_max = self.counter(
            "mq_broker_transaction_check_max",
            "Transactions moved to TRANS_CHECK_MAX_TIME_TOPIC after transactionCheckMax checks, by real topic.",
            ("topic",),
        )

    # --- event loop -----------------------------------------------------------------------------------------

    def on_transaction_end(self, topic: str, committed: bool, latency_s: float) -> None:
        """A transaction of real topic ``topic`` committed (else rolled back), ``latency_s`` after its half
        message was born. Mirrors EndTransactionProcessor's COMMIT/ROLLBACK counters and finish latency. Event
        loop."""
        label = self.topic(topic)
        (self.commit_messages if committed else self.rollback_messages).child(label).inc()
        self.finish_latency.observe_many((max(0.0, latency_s),), label)

    def on_transactions_end(self, topic: str, committed: bool, latencies_s: Sequence[float]) -> None:
        """:meth:`on_transaction_end` for many transactions of real topic ``topic`` ended the same way at once (a
        whole-transaction end), one latency in s each. Event loop."""
        if not latencies_s:
            return
        label = self.topic(topic)
        (self.commit_messages if committed else self.rollback_messages).child(label).inc(len(latencies_s))
        self.finish_latency.observe_many([max(0.0, v) for v in latencies_s], label)

    def on_transaction_check(self, topic: str, *, check_max: bool = False) -> None:
        """One check-back of a transaction of real topic ``topic`` (``check_max``: it was moved to
        TRANS_CHECK_MAX_TIME_TOPIC instead). Event loop."""
        (self.transaction_check_max if check_max else self.transaction_checks).child(self.topic(topic)).inc()

    def on_fifo_order_wait(self, topic: str, group: str, waited_ms: float) -> None:
        """A block of one of ``group``'s orderly queues of ``topic`` ended after ``waited_ms`` ms (the
        ConsumerOrderInfoManager.on_hold_end hook). Event loop."""
        label_topic, label_group, _retry, _system = self.consumer_pairs(topic, group, is_retry=False)
        self.fifo_order_wait.observe_many((max(0.0, waited_ms),), label_topic, label_group)

    def on_timer_enqueue(self, topic: str, count: int) -> None:
        """``count`` timer messages of real topic ``topic`` entered the timer store (a count <= 0 counts
        nothing). Mirrors DefaultStoreMetricsManager#incTimerEnqueueCount (COUNTER_TIMER_ENQUEUE_TOTAL). Event loop.
        """
        if count > 0:
            self.timer_enqueue.child(self.topic(topic)).inc(count)

    def on_timer_dequeue(self, topic: str, lateness_ms: Sequence[float]) -> None:
        """Timer messages fired to real topic ``topic``: one lateness per message (fire time - due time, ms; a
        negative value counts as 0). Counts ``rocketmq_timer_dequeue_total`` and observes
        ``mq_broker_timer_lateness_ms{timer_type="timer"}``. Mirrors DefaultStoreMetricsManager#incTimerDequeueCount
        (COUNTER_TIMER_DEQUEUE_TOTAL). Event loop."""
        if not lateness_ms:
            return
        label = self.topic(topic)
        self.timer_dequeue.child(label).inc(len(lateness_ms))
        self.timer_lateness.observe_many(_non_negative(lateness_ms), label, TIMER_TYPE_TIMER)

    def on_delay_level_dequeue(self, topic: str, lateness_ms: Sequence[float]) -> None:
        """Delay-level messages re-put from SCHEDULE_TOPIC_XXXX to real topic ``topic``: one lateness per message
        (re-put time - due time, ms; negative counts as 0). Counts ``mq_broker_schedule_dequeue_total`` and observes
        ``mq_broker_timer_lateness_ms{timer_type="delay_level"}``. Mirrors the re-put of
        ScheduleMessageService.DeliverDelayedMessageTimerTask (RocketMQ exports no metric there). Event loop."""
        if not lateness_ms:
            return
        label = self.topic(topic)
        self.schedule_dequeue.child(label).inc(len(lateness_ms))
        self.timer_lateness.observe_many(_non_negative(lateness_ms), label, TIMER_TYPE_DELAY_LEVEL)

    def on_auth_refusal(self, stage: str, resource_type: str, action: str) -> None:
        """mq_broker.auth.guard.RefusalObserver: one refused request."""
        self.auth_refusals.child(stage, resource_type, action).inc()

    def observe_rpc(self, method: str, response_code: str, elapsed_ms: float) -> None:
        """RequestContextInterceptor callback (one per RPC)."""
        self.rpc_latency.child("grpc", method, response_code).observe(elapsed_ms)

    def on_put(
        self,
        batch: Sequence[MessageExtBrokerInner],
        results: Sequence[PutMessageResult],
        elapsed_ms: float,
        peer_host: str,
    ) -> None:
        """One stored batch: counts and sizes of the stored messages per (topic, type), the put latency and the
        producer's peer address (for rocketmq_producer_connections)."""
        self.put_latency.observe(elapsed_ms)
        if peer_host:
            self._peers[peer_host] = time.monotonic()
        if all(r.status is _PUT_OK for r in results):
            stored = batch
        else:
            stored = [m for m, r in zip(batch, results, strict=True) if r.status in _STORED]
        topics = {m.topic for m in stored}
        if len(topics) == 1 and _all_normal(stored):  # the common case: one group, no per-message dict work
            sizes = {(topics.pop(), "normal"): [len(m.body) for m in stored]}
        else:
            sizes = _group_sizes(stored)
        topic_label = self.topic
        for (topic, mtype), lengths in sizes.items():
            label = topic_label(topic)
            self.messages_in.child(label, mtype).inc(len(lengths))
            self.throughput_in.child(label, mtype).inc(sum(lengths))
            self.message_size.observe_many(lengths, label, mtype)
            self._put_messages += len(lengths)

    def on_put_batch(self, batch: MessageExtBatch, result: PutMessageResult, elapsed_ms: float, peer_host: str) -> None:
        """One MessageBatch put: like :meth:`on_put` for its ``result.msg_num`` messages (type "normal"); the
        size histogram gets the batch body's mean item size once per message (the body is not split here)."""
        self.put_latency.observe(elapsed_ms)
        if peer_host:
            self._peers[peer_host] = time.monotonic()
        if result.status not in _STORED or result.msg_num <= 0:
            return
        count = result.msg_num
        label = self.topic(batch.topic)
        self.messages_in.child(label, "normal").inc(count)
        self.throughput_in.child(label, "normal").inc(len(batch.body))
        self.message_size.observe_many([len(batch.body) // count] * count, label, "normal")
        self._put_messages += count

    def on_messages_out(self, topic: str, group: str, count: int, size_bytes: int, *, is_retry: bool) -> None:
        """One pull or pop answer handed ``count`` messages of ``size_bytes`` stored bytes (the records' total size,
        RocketMQ's GetMessageResult#getBufferTotalSize) to ``group``. ``topic`` is the topic asked for (POP: the
        original topic, ``is_retry`` True for messages of the group's retry topic; a ``%RETRY%`` topic name counts
        as ``is_retry="true"``). Answers with no message count nothing.

        Mirrors DefaultPullMessageResultHandler / PopMessageProcessor (COUNTER_MESSAGES_OUT_TOTAL,
        COUNTER_THROUGHPUT_OUT_TOTAL). Event loop.
        """
        if count <= 0:
            return
        values = self.consumer_pairs(topic, group, is_retry=is_retry)
        self.messages_out.child(*values).inc(count)
        self.throughput_out.child(*values).inc(max(0, size_bytes))

    def on_send_to_dlq(self, group: str, topic: str) -> None:
        """One message of ``group`` (consumed from original ``topic``) moved to ``%DLQ%<group>``: the
        ``RetryDlqService.on_send_to_dlq`` hook. Mirrors SendMessageProcessor / AbstractSendMessageProcessor
        (COUNTER_CONSUMER_SEND_TO_DLQ_MESSAGES_TOTAL). Event loop."""
        label_topic, label_group, _retry, system = self.consumer_pairs(topic, group, is_retry=False)
        self.send_to_dlq.child(label_topic, label_group, system).inc()

    # --- flusher thread (mq_broker.store.flush.FlushObserver) -------------------------------------------------

    def on_flush(self, elapsed_ms: float) -> None:
        self.flush_latency.observe(elapsed_ms)
        put = self._put_messages
        self.messages_per_flush.observe(put - self._flushed_messages)
        self._flushed_messages = put

    def on_flush_timeout(self, requests: int) -> None:
        self.flush_disk_timeouts.inc(requests)

    # --- scrape-time gauges -----------------------------------------------------------------------------------

    def bind(self, store: DefaultMessageStore, topics: TopicConfigManager) -> None:
        """Register the gauges read from ``store`` and ``topics`` (call once, after both started)."""
        self._store = store
        commit_log = store.commit_log
        mfq = commit_log.mapped_file_queue
        root = store.config.store_path_root_dir
        self.scalar_gauge("rocketmq_storage_size", "Bytes of the store directory's files.", lambda: _dir_bytes(root))
        self.scalar_gauge(
            "rocketmq_storage_flush_behind_bytes",
            "CommitLog bytes written but not yet flushed.",
            lambda: max(0, commit_log.max_offset - mfq.flushed_where),
        )
        self.scalar_gauge(
            "rocketmq_storage_dispatch_behind_bytes",
            "CommitLog bytes not yet dispatched to the ConsumeQueues.",
            lambda: max(0, commit_log.max_offset - store.dispatched_offset),
        )
        for name in ("rocketmq_storage_message_reserve_time", "rocketmq_message_reserve_time"):
            self.gauge_callback(name, "Ms since the oldest stored message.", lambda: _reserve_time(store))
        self.scalar_gauge(
            "rocketmq_topic_number", "Topics in the broker's topic table.", lambda: len(topics.topic_config_table)
        )
        self.scalar_gauge(
            "rocketmq_producer_connections",
            f"Distinct producer peers that sent in the last {PRODUCER_CONNECTION_WINDOW_S:.0f} s.",
            self._producer_connections,
        )
        self.scalar_gauge(
            "mq_broker_disk_util_ratio",
            "Used / size of the file system holding the store (0..1).",
            lambda: _disk_util(root),
        )
        self.scalar_gauge(
            "mq_broker_commit_log_max_offset", "CommitLog max offset in bytes.", lambda: commit_log.max_offset
        )

    def bind_ha(self, ha: HAService) -> None:
        """Register the replication gauges read from ``ha`` (scrape time, metrics HTTP thread)."""
        self.scalar_gauge(
            "mq_broker_ha_role",
            "The broker's role: 0 ASYNC_MASTER, 1 SYNC_MASTER, 2 SLAVE.",
            lambda: float(_HA_ROLES.index(str(ha.store.broker_role))),
        )
        self.scalar_gauge(
            "mq_broker_ha_in_sync_slaves",
            "Connected slaves within ha_max_gap_not_in_sync_bytes of the master.",
            lambda: float(ha.in_sync_slaves()),
        )
        self.gauge_callback(
            "mq_broker_ha_slave_lag_bytes",
            "CommitLog bytes the master holds and the slave has not acknowledged.",
            lambda: [((slave,), float(lag)) for slave, lag, _s in ha.slave_lags()],
            labels=("slave",),
        )
        self.gauge_callback(
            "mq_broker_ha_slave_lag_seconds",
            "Seconds since the slave last held everything the master had (0: caught up).",
            lambda: [((slave,), seconds) for slave, _b, seconds in ha.slave_lags()],
            labels=("slave",),
        )

    def bind_half_messages(self, open_by_topic: Callable[[], Mapping[str, int]]) -> None:
        """Export ``rocketmq_half_messages`` {topic}: ``open_by_topic()`` -> {real topic: open transactions}, read
        at scrape time (metrics HTTP thread). Mirrors BrokerMetricsManager's GAUGE_HALF_MESSAGES
        (TransactionMetrics). Call once, on start-up."""
        self.gauge_callback(
            "rocketmq_half_messages",
            "Open transactions (half messages not committed, rolled back or discarded yet), by real topic.",
            lambda: self._by_topic_label(open_by_topic()),
            labels=("topic",),
        )

    def bind_timer_backlog(self, pending: Callable[[], Mapping[str, int]]) -> None:
        """Export ``rocketmq_timing_messages`` {topic}: ``pending()`` -> {real topic: timers held, not fired nor
        recalled yet}, read at scrape time (metrics HTTP thread; it must not block). Topics beyond
        ``metrics_max_topics`` add up under ``topic="_other"``. Mirrors DefaultStoreMetricsManager's
        GAUGE_TIMING_MESSAGES (TimerMetrics#getTimingCount). Call once, on start-up."""
        self.gauge_callback(
            "rocketmq_timing_messages",
            "Timer messages pending in the timer store, by real topic.",
            lambda: self._by_topic_label(pending()),
            labels=("topic",),
        )

    def bind_schedule_behind(self, behind: Callable[[], Mapping[int, int]]) -> None:
        """Export ``mq_broker_schedule_offset_behind`` {delay_level}: ``behind()`` -> {delay level (1-based):
        messages of that level's SCHEDULE_TOPIC_XXXX queue not re-put yet (max offset - delivered offset)}, read at
        scrape time (metrics HTTP thread; must not block). The figure ScheduleMessageService#buildRunningStats
        shows as scheduleMessageOffset_<level>. Call once, on start-up."""
        self.gauge_callback(
            "mq_broker_schedule_offset_behind",
            "Messages on SCHEDULE_TOPIC_XXXX not re-put to their real topic yet, by delay level.",
            lambda: [((str(level),), float(max(0, count))) for level, count in sorted(behind().items())],
            labels=("delay_level",),
        )

    def bind_fifo(self, order_info: FifoOrderInfo) -> None:
        """Export ``mq_broker_fifo_blocked_queues`` and ``mq_broker_fifo_block_age_ms`` {topic, consumer_group}
        from ``order_info.hold_summary()`` (scrape time, metrics HTTP thread; pairs past ``metrics_max_consumer_pairs``
        fold into ``_other``: queues summed, ages maxed) and feed ``mq_broker_fifo_order_wait_ms`` from its
        ``on_hold_end`` hook. Call once, on start-up."""
        order_info.on_hold_end = self.on_fifo_order_wait

        def rows() -> dict[tuple[str, str], tuple[int, int]]:
            out: dict[tuple[str, str], tuple[int, int]] = {}
            for (topic, group), holds in order_info.hold_summary().items():
                label_topic, label_group, _retry, _system = self.consumer_pairs(topic, group, is_retry=False)
                held, oldest = out.get((label_topic, label_group), (0, 0))
                if holds.oldest_hold_ms and (not oldest or holds.oldest_hold_ms < oldest):
                    oldest = holds.oldest_hold_ms
                out[(label_topic, label_group)] = (held + holds.held, oldest)
            return out

        self.gauge_callback(
            "mq_broker_fifo_blocked_queues",
            "Orderly queues blocked now (messages of their last pop handed out and not acked: nothing later is "
            "handed out), by topic and consumer group.",
            lambda: [(labels, float(held)) for labels, (held, _o) in rows().items()],
            labels=FIFO_LABELS,
        )
        self.gauge_callback(
            "mq_broker_fifo_block_age_ms",
            "Ms since the oldest current block of an orderly queue began (0: none blocked), by topic and consumer "
            "group.",
            lambda: [(labels, _age_ms(oldest)) for labels, (_h, oldest) in rows().items()],
            labels=FIFO_LABELS,
        )

    def _by_topic_label(self, counts: Mapping[str, int]) -> list[GaugeSample]:
        """``counts`` per topic label (bounded topics; several topics folded into ``_other`` add up). Runs on the
        metrics HTTP thread: a topic first labelled here while the loop labels another may pass the bound by one."""
        summed: dict[str, float] = {}
        label = self.topic
        for topic, count in list(counts.items()):
            key = label(topic)
            summed[key] = summed.get(key, 0.0) + max(0, count)
        return [((key,), value) for key, value in summed.items()]

    def bind_consumers(
        self,
        offsets: ConsumerOffsetTable,
        inflight: InflightByGroupTopic | None,
        *,
        inflight_in_queue: InflightInQueue | None = None,
    ) -> None:
        """Feed the consumer gauges (lag, lag latency, in flight, queueing latency, ready) from ``offsets``
        (ConsumerOffsetManager: ``offset_table``), the store given to :meth:`bind` (call that first) and POP's
        in-flight figures: ``inflight()`` -> {(group, topic): messages} (``inflight_by_group_topic``) and
        ``inflight_in_queue(group, topic, queue_id)`` (``inflight_count``; without it lag latency counts from the
        first ready message). Computed when Prometheus scrapes (metrics HTTP thread), see
        :mod:`mq_broker.consumer_metrics`. Call once, on start-up."""
        assert self._store is not None, "bind(store, topics) comes first"
        self.consumer_lag.sources = ConsumerLagSources(
            offsets=offsets,
            store=self._store,
            inflight=inflight,
            inflight_in_queue=inflight_in_queue,
            labels=self.consumer_pairs,
        )

    def _producer_connections(self) -> float:
        horizon = time.monotonic() - PRODUCER_CONNECTION_WINDOW_S
        live = 0
        for peer, seen in list(self._peers.items()):
            if seen >= horizon:
                live += 1
            else:
                self._peers.pop(peer, None)
        return float(live)


def _age_ms(since_ms: int) -> float:
    """Ms from ``since_ms`` (ms since the epoch; 0: none) to now, 0 for none."""
    return max(0.0, time.time() * 1000 - since_ms) if since_ms > 0 else 0.0


def _non_negative(values: Sequence[float]) -> Sequence[float]:
    return values if min(values) >= 0 else [max(0.0, v) for v in values]


def _group_sizes(stored: Sequence[MessageExtBrokerInner]) -> dict[tuple[str, str], list[int]]:
    sizes: dict[tuple[str, str], list[int]] = {}
    for msg in stored:
        key = (msg.topic, message_type(msg))
        found = sizes.get(key)
        if found is None:
            sizes[key] = [len(msg.body)]
        else:
            found.append(len(msg.body))
    return sizes


def _dir_bytes(root: Path) -> float:
    total = 0
    for folder, _dirs, files in os.walk(root):
        for name in files:
            try:
                total += os.stat(os.path.join(folder, name)).st_size
            except OSError:
                continue  # deleted meanwhile
    return float(total)


def _disk_util(root: Path) -> float:
    usage = shutil.disk_usage(root)
    return usage.used / usage.total if usage.total else 0.0


def _reserve_time(store: DefaultMessageStore) -> Iterable[GaugeSample]:
    commit_log = store.commit_log
    start = commit_log.min_offset
    if commit_log.max_offset <= start:
        return []
    header = commit_log.get_message(start, 4)
    if header is None:
        return []
    stored_ms = commit_log.store_timestamp_at(start, int.from_bytes(header, "big", signed=True))
    if stored_ms <= 0:
        return []
    return [((), max(0.0, time.time() * 1000 - stored_ms))]
