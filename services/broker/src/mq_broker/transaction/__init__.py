"""Transactional messages: the half-message put transform, END_TRANSACTION and (next) the check-back service.

Mirrors org.apache.rocketmq.broker.transaction (TransactionalMessageServiceImpl, TransactionalMessageBridge,
TransactionalMessageUtil) and org.apache.rocketmq.broker.processor.EndTransactionProcessor.
"""
