"""Revive: popped messages whose invisible time ended un-acked go back to the group, through ``%RETRY%<group>``
(or ``%DLQ%<group>`` past the group's retryMaxTimes), and the revive offsets move on.

Mirrors org.apache.rocketmq.broker.processor.PopReviveService (#run, #mergeAndRevive, #reviveMsgFromCk,
#reviveRetry, #rePutCK) with the in-memory table in place of RocketMQ's timer-delayed revive log scan. Every
``revive_interval_ms``: each due checkpoint (invisible time ended, no ack being written) has its un-acked
messages read and given to RetryDlqService.send_back (RECONSUMETIMES + 1); the messages given back are then acked
in the revive log with one ``bAck`` record (so a restart does not revive them again; a crash between the two
revives them twice: at-least-once) and the pollers of the message's topic are woken. A message the store no
longer has (cleaned by retention) is acked and logged, as RocketMQ skips it; a send-back the store refuses is
tried again after REVIVE_RETRY_INTERVAL_MS (RocketMQ's first ckRewriteInterval). A checkpoint of a deleted topic
or group is dropped (acked). Then each revive queue's offset under ``CID_RMQ_SYS_REVIVE_GROUP`` is committed to
the oldest live checkpoint's record (or the queue's end): where the next start's recovery scan begins.

A task on the broker's event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Final

from mq_common.codec import MessageDecodeError, MessageExt, decode_message
from mq_common.constants import MessageConst
from mq_common.errors import MQError
from mq_common.logging import get_logger
from mq_common.tasks import cancel_and_wait

from mq_broker.consumer.long_polling import LongPollingService
from mq_broker.consumer.pop.context import LOCAL_HOST, PopContext, now_ms
from mq_broker.consumer.pop.inflight import InflightCheckPoint
from mq_broker.consumer.pop.revive_log import REVIVE_GROUP
from mq_broker.consumer.retry_dlq import RetryDlqService
from mq_broker.store.message import GetMessageStatus

log = get_logger("mq_broker.consumer.pop.revive")

REVIVE_RETRY_INTERVAL_MS: Final = 10_000
"""PopReviveService.ckRewriteIntervalsInSeconds[0]: when a checkpoint whose revive failed is tried again."""
MAX_REVIVE_CHECKPOINTS_PER_ROUND: Final = 4_096
"""Checkpoints one round revives at most; the rest wait for the next round (keeps a round short)."""


class PopReviveService:
    """Revives due checkpoints of a :class:`PopContext`; :meth:`start` / :meth:`stop` run the periodic task."""

    def __init__(self, context: PopContext, retry_dlq: RetryDlqService, long_polling: LongPollingService) -> None:
        self.context = context
        self.retry_dlq = retry_dlq
        self.long_polling = long_polling
        self._task: asyncio.Task[None] | None = None
        self.revived_messages = 0

    def start(self) -> None:
        """Start the periodic task (event loop). Idempotent."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        """Cancel the task (a round in progress stops at its next await; what it did not finish is revived after
        the next start) and commit the revive offsets once."""
        task, self._task = self._task, None
        await cancel_and_wait(task)
        self.commit_revive_offsets()

    async def _run(self) -> None:
        interval_s = self.context.config.revive_interval_ms / 1000
        while True:
            await asyncio.sleep(interval_s)
            try:
                await self.revive_round(now_ms())
            except Exception:
                log.exception("pop_revive_round_failed")

    async def revive_round(self, now: int) -> int:
        """Revive every checkpoint due at ``now`` (ms since the epoch), then commit the revive offsets. Returns the
        messages given back."""
        ctx = self.context
        due = list(_unique(ctx.table.pop_due(now)))
        for row in due[MAX_REVIVE_CHECKPOINTS_PER_ROUND:]:
            ctx.table.reschedule(row, now)
        revived = 0
        for row in due[:MAX_REVIVE_CHECKPOINTS_PER_ROUND]:
            if row.pending:  # an ack is being written: look again next round
                ctx.table.reschedule(row, now + ctx.config.revive_interval_ms)
            elif row.alive:
                revived += await self._revive(row, now)
        self.commit_revive_offsets()
        self.revived_messages += revived
        return revived

    async def _revive(self, row: InflightCheckPoint, now: int) -> int:
        """PopReviveService#reviveMsgFromCk: give back the row's un-acked messages, ack them in the revive log."""
        ctx = self.context
        indexes = [i for i in range(row.num) if not row.is_acked(i)]
        for index in indexes:
            ctx.table.claim(row, index)
        done: list[int] = []
        given_back = 0
        try:
            for index in indexes:
                outcome = await self._give_back(row, row.start_offset + row.offset_diff[index])
                if outcome is None:
                    break
                done.append(index)
                given_back += outcome
        finally:
            await self._ack_revived(row, done, indexes)
        if len(done) < len(indexes):
            ctx.table.reschedule(row, now + REVIVE_RETRY_INTERVAL_MS)
        return given_back

    async def _give_back(self, row: InflightCheckPoint, queue_offset: int) -> int | None:
        """1 when the message went back to its group, 0 when there is nothing to give back (gone, or its topic or
        group deleted), None when the send-back failed (try again later)."""
        ctx = self.context
        if (
            ctx.topics.select_topic_config(row.topic) is None
            or ctx.groups.find_subscription_group_config(row.group) is None
        ):
            log.warning("pop_revive_dropped", topic=row.topic, group=row.group, queue_offset=queue_offset)
            return 0
        message = self._read(row, queue_offset)
        if message is None:
            log.warning("pop_revive_message_gone", topic=row.topic, queue_id=row.queue_id, queue_offset=queue_offset)
            return 0
        try:
            result = await self.retry_dlq.send_back(
                message, group=row.group, delay_level=0, max_reconsume_times=None, client_host=LOCAL_HOST
            )
        except MQError as exc:
            log.warning(
                "pop_revive_send_back_refused", topic=row.topic, group=row.group, code=exc.code, remark=exc.remark
            )
            return None
        if not result.is_ok:
            log.error("pop_revive_send_back_failed", topic=row.topic, group=row.group, status=result.status.value)
            return None
        origin = message.properties.get(MessageConst.RETRY_TOPIC, message.topic)
        self.long_polling.notify_message_arriving(origin, row.queue_id)
        return 1

    def _read(self, row: InflightCheckPoint, queue_offset: int) -> MessageExt | None:
        result = self.context.store.get_messages(row.topic, row.queue_id, queue_offset, 1)
        if result.status is not GetMessageStatus.FOUND or result.queue_offsets[0] != queue_offset:
            return None
        try:
            return decode_message(result.messages[0])
        except MessageDecodeError as exc:
            log.error("pop_revive_message_damaged", topic=row.topic, queue_offset=queue_offset, error=str(exc))
            return None

    async def _ack_revived(self, row: InflightCheckPoint, done: list[int], claimed: list[int]) -> None:
        """Ack what was given back (one bAck record) and release the claims of the rest."""
        ctx = self.context
        for index in claimed[len(done) :]:
            ctx.table.settle(row, index, stored=False)
        if not done:
            return
        offsets = tuple(row.start_offset + row.offset_diff[i] for i in done)
        try:
            put = (await ctx.writer.append([(row.ack_of(offsets, ctx.config.broker_name), row.revive_queue_id)]))[0]
            if not put.is_ok:
                log.error("pop_revive_ack_not_stored", topic=row.topic, status=put.status.value)
        finally:  # given back either way: a restart revives them once more (at-least-once)
            for index in done:
                ctx.table.settle(row, index, stored=True)

    def commit_revive_offsets(self) -> None:
        """Commit each quiet revive queue's offset when it moved: its oldest live checkpoint's record, else the
        queue's end (a broker that never popped commits nothing)."""
        ctx = self.context
        topic = ctx.config.revive_topic
        for queue_id in range(ctx.config.revive_queue_num):
            if not ctx.writer.is_quiet(queue_id):
                continue
            live = ctx.table.min_live_revive_offset(queue_id)
            offset = live if live is not None else ctx.store.get_max_offset_in_queue(topic, queue_id)
            committed = ctx.offsets.query_offset(REVIVE_GROUP, topic, queue_id)
            if committed < 0:  # none yet: a scan would start at the queue's first record
                committed = ctx.store.get_min_offset_in_queue(topic, queue_id)
            if offset != committed:
                ctx.offsets.commit_offset(LOCAL_HOST, REVIVE_GROUP, topic, queue_id, offset)


def _unique(rows: Iterable[InflightCheckPoint]) -> Iterable[InflightCheckPoint]:
    seen: set[int] = set()
    for row in rows:
        if id(row) not in seen:
            seen.add(id(row))
            yield row
