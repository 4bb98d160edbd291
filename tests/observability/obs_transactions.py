"""The transaction phase of the observability load (issue 33): transactions the brokers' transaction figures must
then show, sent with this project's TransactionMQProducer straight to the brokers.

One committed ("c": rocketmq_commit_messages_total, rocketmq_finish_message_latency), one rolled back ("r":
rocketmq_rollback_messages_total), one left open whose checks all answer UNKNOW ("u": mq_broker_transaction_checks_total
until transaction_check_max, then mq_broker_transaction_check_max_total) and one open with an hour's
CHECK_IMMUNITY_TIME_IN_SECONDS ("o": stays open, rocketmq_half_messages). The metrics cluster's brokers check every
500 ms, after 500 ms, at most twice (TRANSACTION_ENV).
"""

from __future__ import annotations

from typing import Any, Final

from mq_client.producer import Message, ProducerConfig
from mq_client.producer.transaction import LocalTransactionState, TransactionMQProducer
from mq_common.codec import MessageExt
from mq_common.constants import MessageConst
from mq_common.protocol import TopicConfig
from mq_local.cluster import LocalCluster
from mq_local.testing import unique_topic
from mq_local.topics import create_topic_on_cluster

TRANSACTION_ENV: Final = {
    "MQ_BROKER_TRANSACTION_TIMEOUT_MS": "500",
    "MQ_BROKER_TRANSACTION_CHECK_INTERVAL_MS": "500",
    "MQ_BROKER_TRANSACTION_CHECK_MAX": "2",
}
_STATES: Final = {
    "c": LocalTransactionState.COMMIT_MESSAGE,
    "r": LocalTransactionState.ROLLBACK_MESSAGE,
    "u": LocalTransactionState.UNKNOW,
    "o": LocalTransactionState.UNKNOW,
}


class _Listener:
    def execute_local_transaction(self, msg: Message, arg: Any) -> LocalTransactionState:
        return _STATES[arg]

    def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState:
        return LocalTransactionState.UNKNOW


async def send_transactions(cluster: LocalCluster) -> str:
    """Create a topic (1 queue per master) and send the phase's four transactions; returns the topic."""
    topic = unique_topic("obs_tx")
    await create_topic_on_cluster(cluster.namesrv_addr, TopicConfig(topic, 1, 1), cluster.spec.cluster_name)
    producer = TransactionMQProducer.connect(
        ProducerConfig(producer_group="obs_tx_producer"), [cluster.namesrv_addr], _Listener()
    )
    await producer.start()
    try:
        for kind in _STATES:
            props = {MessageConst.CHECK_IMMUNITY_TIME_IN_SECONDS: "3600"} if kind == "o" else {}
            await producer.send_message_in_transaction(Message(topic, kind.encode(), properties=props), kind)
    finally:
        await producer.shutdown()
    return topic
