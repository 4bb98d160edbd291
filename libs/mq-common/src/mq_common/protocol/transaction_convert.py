"""Proto <-> domain converters of END_TRANSACTION (mq.broker.v1 EndTransactionRequest) and of QueryOpenTransactions'
OpenTransaction (mq.broker.v1, transaction.proto): the edge, used by the broker's servicers, the clients that end
transactions and mqadmin. Pure functions; any thread."""

from __future__ import annotations

from mq.broker.v1 import broker_pb2, transaction_pb2

from mq_common.protocol.transaction import EndTransactionRequestHeader, OpenTransaction


def end_transaction_request_from_proto(request: broker_pb2.EndTransactionRequest) -> EndTransactionRequestHeader:
    return EndTransactionRequestHeader(
        producer_group=request.producer_group,
        tran_state_table_offset=request.tran_state_table_offset,
        commit_log_offset=request.commit_log_offset,
        commit_or_rollback=request.commit_or_rollback,
        from_transaction_check=request.from_transaction_check,
        msg_id=request.msg_id,
        transaction_id=request.transaction_id,
        topic=request.topic,
        scope=int(request.scope),
    )


def end_transaction_request_to_proto(header: EndTransactionRequestHeader) -> broker_pb2.EndTransactionRequest:
    return broker_pb2.EndTransactionRequest(
        producer_group=header.producer_group,
        tran_state_table_offset=header.tran_state_table_offset,
        commit_log_offset=header.commit_log_offset,
        commit_or_rollback=header.commit_or_rollback,
        from_transaction_check=header.from_transaction_check,
        msg_id=header.msg_id,
        transaction_id=header.transaction_id,
        topic=header.topic,
        scope=header.scope,  # type: ignore[arg-type]
    )


def open_transaction_to_proto(t: OpenTransaction) -> transaction_pb2.OpenTransaction:
    return transaction_pb2.OpenTransaction(
        msg_id=t.msg_id,
        producer_group=t.producer_group,
        transaction_id=t.transaction_id,
        born_timestamp_ms=t.born_timestamp_ms,
        age_ms=t.age_ms,
        check_times=t.check_times,
        keys=t.keys,
        tags=t.tags,
        prepared_queue_offset=t.prepared_queue_offset,
        queue_offset=t.queue_offset,
        commit_log_offset=t.commit_log_offset,
    )


def open_transaction_from_proto(t: transaction_pb2.OpenTransaction) -> OpenTransaction:
    return OpenTransaction(
        msg_id=t.msg_id,
        producer_group=t.producer_group,
        transaction_id=t.transaction_id,
        born_timestamp_ms=t.born_timestamp_ms,
        age_ms=t.age_ms,
        check_times=t.check_times,
        keys=t.keys,
        tags=t.tags,
        prepared_queue_offset=t.prepared_queue_offset,
        queue_offset=t.queue_offset,
        commit_log_offset=t.commit_log_offset,
    )
