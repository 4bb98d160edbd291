"""RocketMQ constants: property names, sysflag bits, permission bits, topic rules, limits.

Mirrors org.apache.rocketmq.common.message.{MessageConst, MessageSysFlag}, org.apache.rocketmq.common.
{PermName, MixAll}, and org.apache.rocketmq.common.topic.TopicValidator.
"""

from __future__ import annotations

import re
from typing import Final


class MessageConst:
    """Reserved property names (MessageConst.PROPERTY_*)."""

    KEYS: Final = "KEYS"
    TAGS: Final = "TAGS"
    WAIT_STORE_MSG_OK: Final = "WAIT"
    DELAY_TIME_LEVEL: Final = "DELAY"
    UNIQ_CLIENT_MESSAGE_ID_KEYIDX: Final = "UNIQ_KEY"
    SHARDING_KEY: Final = "__SHARDINGKEY"
    PRODUCER_GROUP: Final = "PGROUP"
    MAX_OFFSET: Final = "MAX_OFFSET"
    MIN_OFFSET: Final = "MIN_OFFSET"
    TRANSACTION_PREPARED: Final = "TRAN_MSG"
    CLUSTER: Final = "CLUSTER"
    MSG_REGION: Final = "MSG_REGION"
    TRACE_SWITCH: Final = "TRACE_ON"
    RETRY_TOPIC: Final = "RETRY_TOPIC"
    ORIGIN_MESSAGE_ID: Final = "ORIGIN_MESSAGE_ID"
    RECONSUME_TIME: Final = "RECONSUME_TIME"
    REAL_TOPIC: Final = "REAL_TOPIC"
    REAL_QUEUE_ID: Final = "REAL_QID"
    # Transactions: the half message's first check time (s), its check count, the producer's transaction id.
    CHECK_IMMUNITY_TIME_IN_SECONDS: Final = "CHECK_IMMUNITY_TIME_IN_SECONDS"
    TRANSACTION_CHECK_TIMES: Final = "TRANSACTION_CHECK_TIMES"
    TRANSACTION_ID: Final = "__transactionId__"
    # Timer messages (RocketMQ 5): a delivery time as an absolute time or a delay; TIMER_OUT_MS is the due time the
    # broker computed (ms since the epoch) on the rmq_sys_wheel_timer record; TIMER_DEL_UNIQKEY marks a recall.
    TIMER_DELAY_SEC: Final = "TIMER_DELAY_SEC"
    TIMER_DELIVER_MS: Final = "TIMER_DELIVER_MS"
    TIMER_DELAY_MS: Final = "TIMER_DELAY_MS"
    TIMER_OUT_MS: Final = "TIMER_OUT_MS"
    TIMER_ENQUEUE_MS: Final = "TIMER_ENQUEUE_MS"
    TIMER_DEQUEUE_MS: Final = "TIMER_DEQUEUE_MS"
    TIMER_DEL_UNIQKEY: Final = "TIMER_DEL_UNIQKEY"
    DELIVERED_FROM_OFFSET: Final = "DELIVERED_FROM_OFFSET"
    """Beyond RocketMQ: on a message the broker re-put from SCHEDULE_TOPIC_XXXX or rmq_sys_wheel_timer, the CommitLog
    offset of the record it came from (how a restarted or promoted broker knows what already fired)."""
    KEY_SEPARATOR: Final = " "

    RESERVED: Final = frozenset(
        {
            "KEYS",
            "TAGS",
            "WAIT",
            "DELAY",
            "RETRY_TOPIC",
            "REAL_TOPIC",
            "REAL_QID",
            "TRAN_MSG",
            "PGROUP",
            "MIN_OFFSET",
            "MAX_OFFSET",
            "BUYER_ID",
            "ORIGIN_MESSAGE_ID",
            "TRANSFER_FLAG",
            "CORRECTION_FLAG",
            "MQ2_FLAG",
            "RECONSUME_TIME",
            "MSG_REGION",
            "TRACE_ON",
            "UNIQ_KEY",
            "MAX_RECONSUME_TIMES",
            "CONSUME_START_TIME",
            "__SHARDINGKEY",
            "CLUSTER",
            "TIMER_DELAY_SEC",
            "TIMER_DELIVER_MS",
            "TIMER_DELAY_MS",
            "TIMER_OUT_MS",
            "TIMER_ENQUEUE_MS",
            "TIMER_DEQUEUE_MS",
            "TIMER_DEL_UNIQKEY",
            "DELIVERED_FROM_OFFSET",
        }
    )


class MessageSysFlag:
    """Bits of the SYSFLAG field."""

    COMPRESSED_FLAG: Final = 0x1
    MULTI_TAGS_FLAG: Final = 0x1 << 1
    TRANSACTION_NOT_TYPE: Final = 0
    TRANSACTION_PREPARED_TYPE: Final = 0x1 << 2
    TRANSACTION_COMMIT_TYPE: Final = 0x2 << 2
    TRANSACTION_ROLLBACK_TYPE: Final = 0x3 << 2
    BORNHOST_V6_FLAG: Final = 0x1 << 4
    STOREHOSTADDRESS_V6_FLAG: Final = 0x1 << 5


class PermName:
    """Topic/broker permission bits."""

    PERM_PRIORITY: Final = 0x1 << 3
    PERM_READ: Final = 0x1 << 2
    PERM_WRITE: Final = 0x1 << 1
    PERM_INHERIT: Final = 0x1

    @staticmethod
    def is_readable(perm: int) -> bool:
        return (perm & PermName.PERM_READ) == PermName.PERM_READ

    @staticmethod
    def is_writeable(perm: int) -> bool:
        return (perm & PermName.PERM_WRITE) == PermName.PERM_WRITE

    @staticmethod
    def is_inherited(perm: int) -> bool:
        return (perm & PermName.PERM_INHERIT) == PermName.PERM_INHERIT

    @staticmethod
    def to_string(perm: int) -> str:
        """RocketMQ's "RWX" rendering: R readable, W writeable, X inherited, '-' otherwise."""
        return (
            ("R" if PermName.is_readable(perm) else "-")
            + ("W" if PermName.is_writeable(perm) else "-")
            + ("X" if PermName.is_inherited(perm) else "-")
        )


class MixAll:
    """Shared defaults (MixAll)."""

    DEFAULT_TOPIC: Final = "TBW102"
    MASTER_ID: Final = 0
    DEFAULT_PRODUCER_GROUP: Final = "DEFAULT_PRODUCER"
    DEFAULT_CLUSTER: Final = "DefaultCluster"
    RETRY_GROUP_TOPIC_PREFIX: Final = "%RETRY%"
    DLQ_GROUP_TOPIC_PREFIX: Final = "%DLQ%"
    DEFAULT_CONSUMER_GROUP: Final = "DEFAULT_CONSUMER"
    TOOLS_CONSUMER_GROUP: Final = "TOOLS_CONSUMER"
    FILTERSRV_CONSUMER_GROUP: Final = "FILTERSRV_CONSUMER"
    SELF_TEST_CONSUMER_GROUP: Final = "SELF_TEST_C_GROUP"
    ONS_HTTP_PROXY_GROUP: Final = "CID_ONS-HTTP-PROXY"
    CID_ONSAPI_PULL_GROUP: Final = "CID_ONSAPI_PULL"
    CID_ONSAPI_PERMISSION_GROUP: Final = "CID_ONSAPI_PERMISSION"
    CID_ONSAPI_OWNER_GROUP: Final = "CID_ONSAPI_OWNER"
    CID_RMQ_SYS_PREFIX: Final = "CID_RMQ_SYS_"
    CID_SYS_RMQ_TRANS: Final = "CID_RMQ_SYS_TRANS"


def retry_topic(group: str) -> str:
    """MixAll#getRetryTopic: ``%RETRY%<group>``, where a group's messages given back wait to be consumed again."""
    return MixAll.RETRY_GROUP_TOPIC_PREFIX + group


def dlq_topic(group: str) -> str:
    """MixAll#getDLQTopic: ``%DLQ%<group>``, where a group's messages go after retryMaxTimes failed deliveries."""
    return MixAll.DLQ_GROUP_TOPIC_PREFIX + group


# Limits (docs/architecture.md "Broker store"; MessageStoreConfig.maxMessageSize, TopicValidator.TOPIC_MAX_LENGTH).
MAX_MESSAGE_SIZE_BYTES: Final = 4 * 1024 * 1024
TOPIC_MAX_LENGTH: Final = 127
RETRY_OR_DLQ_TOPIC_MAX_LENGTH: Final = 255
GROUP_MAX_LENGTH: Final = 120
"""TopicValidator.GROUP_MAX_LENGTH (so ``%RETRY%<group>`` and ``%DLQ%<group>`` stay within 255)."""
MAX_PROPERTIES_SIZE_BYTES: Final = 32_767
DEFAULT_TOPIC_QUEUE_NUMS: Final = 4
DEFAULT_BROKER_HEARTBEAT_TIMEOUT_MS: Final = 120_000

SCHEDULE_TOPIC: Final = "SCHEDULE_TOPIC_XXXX"
"""TopicValidator.RMQ_SYS_SCHEDULE_TOPIC: delay-level messages wait here, queue = level - 1."""
TIMER_TOPIC: Final = "rmq_sys_wheel_timer"
TRANS_HALF_TOPIC: Final = "RMQ_SYS_TRANS_HALF_TOPIC"
"""TopicValidator.RMQ_SYS_TRANS_HALF_TOPIC: transaction half messages wait here (queue 0) until ended."""
TRANS_OP_HALF_TOPIC: Final = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
"""TopicValidator.RMQ_SYS_TRANS_OP_HALF_TOPIC: one op record (tag "d", body = half queue offset) per ended one."""
TRANS_CHECK_MAX_TIME_TOPIC: Final = "TRANS_CHECK_MAX_TIME_TOPIC"
"""TopicValidator.RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC: half messages checked transactionCheckMax times end here."""
"""TimerMessageStore.TIMER_TOPIC: timer messages wait here (queue 0) until TIMER_OUT_MS."""

_VALID_TOPIC: Final = re.compile(r"^[%|a-zA-Z0-9_-]+$")

SYSTEM_TOPICS: Final = frozenset(
    {
        MixAll.DEFAULT_TOPIC,
        "SCHEDULE_TOPIC_XXXX",
        "BenchmarkTest",
        "RMQ_SYS_TRANS_HALF_TOPIC",
        "RMQ_SYS_TRACE_TOPIC",
        "RMQ_SYS_TRANS_OP_HALF_TOPIC",
        "TRANS_CHECK_MAX_TIME_TOPIC",
        "SELF_TEST_TOPIC",
        "OFFSET_MOVED_EVENT",
        "CHECKPOINT_TOPIC",
    }
)
SYSTEM_TOPIC_PREFIX: Final = "rmq_sys_"
NOT_ALLOWED_SEND_TOPICS: Final = frozenset(
    {
        "SCHEDULE_TOPIC_XXXX",
        "RMQ_SYS_TRANS_HALF_TOPIC",
        "RMQ_SYS_TRANS_OP_HALF_TOPIC",
        "TRANS_CHECK_MAX_TIME_TOPIC",
        "SELF_TEST_TOPIC",
        "OFFSET_MOVED_EVENT",
    }
)


def validate_topic(topic: str) -> str | None:
    """Check a topic name; return RocketMQ's remark when it is illegal, else None.

    Mirrors TopicValidator#validateTopic: not blank, only ``^[%|a-zA-Z0-9_-]+$``, at most 127 characters
    (255 for retry/DLQ topics).
    """
    if not topic or topic.isspace():
        return "The specified topic is blank."
    if _VALID_TOPIC.fullmatch(topic) is None:
        return f"The specified topic: {topic}, contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
    if topic.startswith((MixAll.RETRY_GROUP_TOPIC_PREFIX, MixAll.DLQ_GROUP_TOPIC_PREFIX)):
        if len(topic) > RETRY_OR_DLQ_TOPIC_MAX_LENGTH:
            return (
                f"The specified topic is DLQ or Retry topic: {topic}, and it's longer than topic max length: "
                f"{RETRY_OR_DLQ_TOPIC_MAX_LENGTH}"
            )
    elif len(topic) > TOPIC_MAX_LENGTH:
        return f"The specified topic: {topic}, is longer than topic max length: {TOPIC_MAX_LENGTH}"
    return None


def validate_group(group: str) -> str | None:
    """Check a consumer/producer group name; RocketMQ's remark when it is illegal, else None.

    Mirrors TopicValidator#validateGroup: not blank, only ``^[%|a-zA-Z0-9_-]+$``, at most GROUP_MAX_LENGTH (120).
    """
    if not group or group.isspace():
        return "The specified group is blank."
    if _VALID_TOPIC.fullmatch(group) is None:
        return f"The specified group: {group}, contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
    if len(group) > GROUP_MAX_LENGTH:
        return f"The specified group: {group}, is longer than group max length: {GROUP_MAX_LENGTH}"
    return None


def is_system_topic(topic: str) -> bool:
    """TopicValidator#isSystemTopic."""
    return topic in SYSTEM_TOPICS or topic.startswith(SYSTEM_TOPIC_PREFIX)


def is_not_allowed_send_topic(topic: str) -> bool:
    """TopicValidator#isNotAllowedSendTopic."""
    return topic in NOT_ALLOWED_SEND_TOPICS


def is_client_forbidden_send_topic(topic: str) -> bool:
    """Topics a client's send may not write: TopicValidator#isNotAllowedSendTopic's, the auto-create template
    TBW102, and every ``%RETRY%`` / ``%DLQ%`` topic (only the broker's own send-back and POP revive paths write
    those, straight to its store). Stricter than RocketMQ 4.x's broker, which lets a client write retry topics."""
    return (
        topic in NOT_ALLOWED_SEND_TOPICS
        or topic == MixAll.DEFAULT_TOPIC
        or topic.startswith((MixAll.RETRY_GROUP_TOPIC_PREFIX, MixAll.DLQ_GROUP_TOPIC_PREFIX))
    )
