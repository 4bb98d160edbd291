"""A MessageBatch of half messages of one transaction, stored in one put: this project's extension of RocketMQ.

RocketMQ's SendMessageProcessor#sendBatchMessage refuses a batch with the TRANSACTION_PREPARED_TYPE sysflag. Here
such a SEND_BATCH_MESSAGE (mq_client.producer.batch_transaction: the gateway's SendBatch of messages with one
Message.transaction_id, the Spark connector's task attempts) is stored as one MessageExtBatch on
RMQ_SYS_TRANS_HALF_TOPIC queue 0: the batch's properties become what
mq_broker.transaction.half_message.half_placement gives a single half send (the request's TRAN_MSG, PGROUP and
__transactionId__, plus REAL_TOPIC / REAL_QID = the batch's topic and queue, PGROUP = the request's producer group
when absent) and are appended to every message's own (TAGS, KEYS, UNIQ_KEY, user properties such as
CHECK_IMMUNITY_TIME_IN_SECONDS); the transaction type is reset as for a single half send. So every message is stored
as the half message its single send would have stored (the property order aside), with consecutive half-queue
offsets, and every reader of half messages (TransactionState, TransactionIndex, the check service,
queryTransactions, the whole-transaction end) sees no difference. Pure; event loop.
"""

from __future__ import annotations

from collections.abc import Callable

from mq_common.codec import encode_properties
from mq_common.constants import MessageConst
from mq_common.protocol import SendMessageBatchRequestHeader

from mq_broker.store.message import MessageExtBatch
from mq_broker.transaction.half_message import half_placement


def half_message_batch(
    request: SendMessageBatchRequestHeader,
    queue_id: int,
    properties: dict[str, str],
    sys_flag: int,
    born_host: bytes,
    with_cluster: Callable[[str, dict[str, str]], str],
) -> MessageExtBatch:
    """The MessageExtBatch that stores ``request`` (its sysflag asks for half messages) as half messages of real
    queue ``queue_id`` (the one msgCheck chose): RMQ_SYS_TRANS_HALF_TOPIC queue 0, the batch's ``properties`` (its
    decoded property text; not changed) with the half placement's added, then ``with_cluster`` (the send processor's
    CLUSTER rule: text, decoded map -> text); ``sys_flag`` (host flags cleared) with the transaction type NOT_TYPE;
    it waits for the store unless the batch's WAIT is "false"."""
    half = half_placement(request.topic, queue_id, properties, sys_flag, request.producer_group)
    return MessageExtBatch(
        topic=half.topic,
        queue_id=half.queue_id,
        body=request.body,
        properties_string=with_cluster(encode_properties(half.properties), half.properties),
        sys_flag=half.sys_flag,
        born_timestamp_ms=request.born_timestamp_ms,
        born_host=born_host,
        wait_store_msg_ok=properties.get(MessageConst.WAIT_STORE_MSG_OK, "true") != "false",
    )
