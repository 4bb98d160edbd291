"""POP consumption on the broker: pop with receipt handles, ack, change of invisible time, revive of what was not
acked (``%RETRY%<group>``, ``%DLQ%<group>``), checkpoints persisted in the revive log ``rmq_sys_REVIVE_LOG_<cluster>``.

Mirrors org.apache.rocketmq.broker.processor.{PopMessageProcessor, AckMessageProcessor, ChangeInvisibleTimeProcessor,
PopReviveService, PopBufferMergeService} and org.apache.rocketmq.store.pop. Modules: revive_log (records),
inflight (the in-memory table), context (settings, shared checks, handle resolution), pop_processor,
ack_processor, revive_service, recovery, service (PopService, what the controller wires). No gRPC here.
"""
