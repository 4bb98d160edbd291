"""The admin client's consumer side: subscription groups, consumer offsets and progress, consumer connections,
offset reset by time, topic deletion.

Mirrors org.apache.rocketmq.tools.admin.DefaultMQAdminExt (createAndUpdateSubscriptionGroupConfig,
deleteSubscriptionGroup, getAllSubscriptionGroup, examineConsumeStats, examineConsumerConnectionInfo,
resetOffsetByTimestamp, updateConsumeOffset, deleteTopic). Cluster-wide operations fan out to the master of every
broker group concerned (``-c`` cluster, a topic's route, or every cluster) at once. Runs on the caller's asyncio
loop; errors are the typed mq_common.errors.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Final

from mq_common.constants import dlq_topic, retry_topic, validate_group, validate_topic
from mq_common.errors import MQClientError, MQError
from mq_common.protocol import (
    ConsumerConnection,
    ConsumerConnectionInfo,
    ConsumerQueueOffset,
    ConsumeStats,
    MessageQueue,
    SubscriptionData,
    SubscriptionGroupConfig,
)
from mq_common.response_code import ResponseCode

from mq_client.admin.admin_base import AdminBase, gather_answers

CONSUMER_NOT_ONLINE_REMARK: Final = "no instance of this consumer group is online"
NO_CONSUME_STATS_REMARK: Final = (
    "this consumer group has no consumer offsets on the brokers asked and no instance online"
)


class ConsumerAdmin(AdminBase):
    """Consumer-side admin operations (MQAdminClient extends this). Mirrors DefaultMQAdminExt's consumer part."""

    # ---------------------------------------------------------------------------------------- subscription groups

    async def update_subscription_group(
        self, config: SubscriptionGroupConfig, *, broker_addr: str | None = None, cluster_name: str | None = None
    ) -> list[str]:
        """Create or replace ``config`` on one broker (``broker_addr``) or every master of ``cluster_name``; the
        addresses updated, in order. Mirrors UpdateSubGroupSubCommand (``-b`` / ``-c``) and
        #createAndUpdateSubscriptionGroupConfig; stops at the first broker that refuses.

        Raises MQClientError INVALID_PARAMETER (29) for an illegal group name or not exactly one target,
        MQClientError BROKER_NOT_EXIST (211) for a cluster without master, the broker's error (error_for_code),
        RemotingError."""
        _check_group(config.group_name)
        addrs = await self.resolve_broker_addrs(broker_addr, cluster_name)
        for addr in addrs:
            await self._calls.update_subscription_group(addr, config, self.timeout_ms)
        return addrs

    async def delete_subscription_group(
        self,
        group: str,
        *,
        broker_addr: str | None = None,
        cluster_name: str | None = None,
        clean_offset: bool = False,
    ) -> list[str]:
        """Remove ``group`` (its offsets too with ``clean_offset``) from one broker or every master of
        ``cluster_name``; with a cluster, also delete its ``%RETRY%`` and ``%DLQ%`` topics there (best effort: a
        broker without them is no error). Returns the addresses the group was deleted from. Mirrors
        DeleteSubscriptionGroupCommand.

        Raises like :meth:`update_subscription_group`."""
        _check_group(group)
        addrs = await self.resolve_broker_addrs(broker_addr, cluster_name)
        for addr in addrs:
            await self._calls.delete_subscription_group(
                addr, group, clean_offset=clean_offset, timeout_ms=self.timeout_ms
            )
        if cluster_name is not None:
            for topic in (retry_topic(group), dlq_topic(group)):
                await self._delete_topic_on(addrs, topic, missing_ok=True)
        return addrs

    async def subscription_groups(self, broker_addr: str) -> list[SubscriptionGroupConfig]:
        """Every subscription group of one broker, sorted by name. Mirrors #getAllSubscriptionGroup.

        Raises the broker's error (error_for_code) or RemotingError."""
        configs = await self._calls.get_all_subscription_groups(broker_addr, self.timeout_ms)
        return sorted(configs, key=lambda c: c.group_name)

    # -------------------------------------------------------------------------------------------- offsets, stats

    async def examine_consume_stats(self, group: str, topic: str | None = None) -> ConsumeStats:
        """``group``'s progress per queue, merged over the brokers of ``topic``'s route (every master of every
        cluster without a topic), sorted by (topic, broker name, queue id); TPS summed. Mirrors
        #examineConsumeStats (RocketMQ finds the brokers through ``%RETRY%<group>``'s route; every master is
        the same set or more).

        Raises TopicNotExistError (17) without a route for ``topic``; MQClientError CONSUMER_NOT_ONLINE (206) when
        no broker has an offset of the group and no instance of it is online; the brokers' error / RemotingError."""
        _check_group(group)
        addrs = await self.route_addrs(topic) if topic else await self.all_master_addrs()
        per_broker = await asyncio.gather(
            *(self._calls.get_consume_stats(a, group, topic or "", self.timeout_ms) for a in addrs)
        )
        queues = sorted(
            (q for stats in per_broker for q in stats.queues), key=lambda q: (q.topic, q.broker_name, q.queue_id)
        )
        merged = ConsumeStats(tuple(queues), sum(s.consume_tps for s in per_broker))
        if not merged.queues:
            try:
                await self.examine_consumer_connection_info(group)
            except MQError:
                raise MQClientError(f"{NO_CONSUME_STATS_REMARK}: {group}", ResponseCode.CONSUMER_NOT_ONLINE) from None
        return merged

    async def update_consumer_offsets(self, group: str, offsets: Mapping[MessageQueue, int]) -> None:
        """Commit ``group``'s offset of each queue on the broker of its queue (one call per broker). Mirrors
        #updateConsumeOffset.

        Raises the first refusal (error_for_code: SUBSCRIPTION_GROUP_NOT_EXIST 26, TOPIC_NOT_EXIST 17,
        INVALID_PARAMETER 29 ...), MQClientError BROKER_NOT_EXIST (211) for a broker not in the topic's route,
        TopicNotExistError (17), RemotingError."""
        _check_group(group)
        by_addr: dict[str, list[ConsumerQueueOffset]] = {}
        routes = {t: await self.topic_route(t) for t in sorted({mq.topic for mq in offsets})}
        for mq, offset in offsets.items():
            addr = routes[mq.topic].find_broker_addr(mq.broker_name)
            if addr is None:
                raise MQClientError(f"The broker[{mq.broker_name}] not exist", ResponseCode.BROKER_NOT_EXIST)
            by_addr.setdefault(addr, []).append(ConsumerQueueOffset(group, mq.topic, mq.queue_id, offset))
        for addr, batch in sorted(by_addr.items()):
            for outcome in await self._calls.update_consumer_offsets(addr, batch, self.timeout_ms):
                if outcome is not None:
                    raise outcome

    async def reset_offset_by_timestamp(
        self, topic: str, group: str, timestamp_ms: int, force: bool = True
    ) -> dict[MessageQueue, int]:
        """Set ``group``'s offsets of ``topic`` on every broker of its route to the first message stored at or after
        ``timestamp_ms`` (ms since the epoch; without ``force`` an offset only moves back); the offsets set.
        Mirrors #resetOffsetByTimestamp / ResetOffsetByTimeCommand (whose ``-f`` defaults to true).

        Live consumers are not told (no broker -> client call here): a consumer holding offsets in memory may
        commit over the reset; reset with the group stopped. Raises TopicNotExistError (17), MQClientError
        INVALID_PARAMETER (29) for a bad group or a negative time, the brokers' error, RemotingError."""
        _check_group(group)
        if timestamp_ms < 0:
            raise MQClientError(f"timestamp must be >= 0: {timestamp_ms}", ResponseCode.INVALID_PARAMETER)
        route = await self.topic_route(topic)
        brokers = sorted((b.broker_name, a) for b in route.broker_datas if (a := b.select_broker_addr()) is not None)
        results = await asyncio.gather(
            *(
                self._calls.reset_offset_by_timestamp(
                    a, group, topic, timestamp_ms, force=force, timeout_ms=self.timeout_ms
                )
                for _, a in brokers
            )
        )
        return {
            MessageQueue(o.topic or topic, name, o.queue_id): o.offset
            for (name, _), offsets in zip(brokers, results, strict=True)
            for o in sorted(offsets, key=lambda o: o.queue_id)
        }

    # ---------------------------------------------------------------------------------------------- connections

    async def examine_consumer_connection_info(
        self, group: str, broker_addr: str | None = None
    ) -> ConsumerConnectionInfo:
        """``group``'s online instances and subscriptions, as one broker (``broker_addr``) or every master sees
        them (merged: one connection per client id, the latest heartbeat wins; subscriptions by topic). Mirrors
        #examineConsumerConnectionInfo (RocketMQ asks one broker of ``%RETRY%<group>``'s route).

        Raises MQClientError / MQBrokerError CONSUMER_NOT_ONLINE (206) when no instance is online, a broker's
        other error or RemotingError when no broker answered."""
        _check_group(group)
        addrs = [broker_addr] if broker_addr is not None else await self.all_master_addrs()
        infos = await gather_answers(
            [self._calls.get_consumer_connection_list(a, group, self.timeout_ms) for a in addrs],
            ignore_code=ResponseCode.CONSUMER_NOT_ONLINE,
        )
        online = [i for i in infos if i.connections]
        if not online:
            raise MQClientError(f"{CONSUMER_NOT_ONLINE_REMARK}: {group}", ResponseCode.CONSUMER_NOT_ONLINE)
        return _merge_connections(online)

    # ----------------------------------------------------------------------------------------------------- topics

    async def delete_topic(self, cluster_name: str, topic: str) -> list[str]:
        """Delete ``topic`` (config, consume queues, consumer offsets) on every master of ``cluster_name``, then
        its route (the QueueData of ``cluster_name``'s brokers) on every name server; the broker addresses, in
        order. Mirrors DeleteTopicSubCommand (#deleteTopicInBroker, then #deleteTopicInNameServer with the
        cluster).

        The name servers are asked only once every broker has deleted the topic (a broker refusing leaves the
        route as it was); a broker still registering the topic would bring its route back. Raises MQClientError
        INVALID_PARAMETER (29) for an illegal topic name, BROKER_NOT_EXIST (211) for a cluster without master,
        the broker's error (e.g. a system topic refused), the name server's error, RemotingError."""
        remark = validate_topic(topic)
        if remark is not None:
            raise MQClientError(remark, ResponseCode.INVALID_PARAMETER)
        addrs = await self.resolve_broker_addrs(cluster_name=cluster_name)
        await self._delete_topic_on(addrs, topic, missing_ok=False)
        await self._namesrv.delete_topic_in_namesrv(topic, cluster_name, self.timeout_ms)
        return addrs

    async def _delete_topic_on(self, addrs: Sequence[str], topic: str, *, missing_ok: bool) -> None:
        for addr in addrs:
            try:
                await self._calls.delete_topic(addr, topic, self.timeout_ms)
            except MQError as exc:
                if not (missing_ok and exc.code == ResponseCode.TOPIC_NOT_EXIST):
                    raise


def _check_group(group: str) -> None:
    remark = validate_group(group)
    if remark is not None:
        raise MQClientError(remark, ResponseCode.INVALID_PARAMETER)


def _merge_connections(infos: Sequence[ConsumerConnectionInfo]) -> ConsumerConnectionInfo:
    latest: dict[str, ConsumerConnection] = {}
    subscriptions: dict[str, SubscriptionData] = {}
    for info in infos:
        for c in info.connections:
            seen = latest.get(c.client_id)
            if seen is None or c.last_update_timestamp_ms > seen.last_update_timestamp_ms:
                latest[c.client_id] = c
        for s in info.subscriptions:
            subscriptions.setdefault(s.topic, s)
    first = infos[0]
    return ConsumerConnectionInfo(
        connections=tuple(latest[k] for k in sorted(latest)),
        subscriptions=tuple(subscriptions[t] for t in sorted(subscriptions)),
        consume_type=first.consume_type,
        message_model=first.message_model,
    )
