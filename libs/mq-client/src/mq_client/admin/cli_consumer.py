"""``mqadmin`` consumer-side verbs: subscription groups, consumer progress and connections, offset reset by time,
and topic deletion.

Mirrors org.apache.rocketmq.tools.command (consumer.UpdateSubGroupSubCommand, consumer.DeleteSubscriptionGroupCommand,
consumer.ConsumerProgressSubCommand, connection.ConsumerConnectionSubCommand, offset.ResetOffsetByTimeCommand,
topic.DeleteTopicSubCommand) plus ``subGroupList`` (no RocketMQ verb: the groups of a broker or cluster). Options keep
RocketMQ's letters; booleans are ``true``/``false`` values as there (anything else is a usage error, exit 2).
Registers on mq_client.admin.cli_common.app; every verb takes ``--output table|json``. Main thread; each verb runs
its own loop.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated, Any

import typer
from mq_common.protocol import ConsumeStats, SubscriptionGroupConfig
from rich.console import Console
from rich.table import Table
from typer.models import OptionInfo

from mq_client.admin.admin_client import MQAdminClient
from mq_client.admin.cli_common import (
    TIMESTAMP_HELP,
    OutputFormat,
    OutputOption,
    TopicOption,
    app,
    emit,
    emit_updated,
    parse_timestamp_ms,
    require_one_target,
    run_admin,
    stamp_s,
)

__all__ = ["parse_attributes", "parse_bool"]

BrokerAddrOption = Annotated[str | None, typer.Option("-b", "--brokerAddr", help="broker address")]
ClusterOption = Annotated[str | None, typer.Option("-c", "--clusterName", help="cluster name")]
GroupOption = Annotated[str, typer.Option("-g", "--groupName", help="consumer group name")]


def bool_option(*names: str, help: str) -> OptionInfo:
    """A ``true|false`` valued option (RocketMQ's style), read with :func:`parse_bool`."""
    option: OptionInfo = typer.Option(*names, help=help, metavar="true|false")
    return option


def parse_bool(name: str, value: str | None) -> bool | None:
    """``true``/``false`` (any case) -> bool, None -> None; raises typer.BadParameter (exit 2) otherwise."""
    if value is None:
        return None
    text = value.strip().lower()
    if text not in ("true", "false"):
        raise typer.BadParameter(f"{name} must be true or false, not '{value}'")
    return text == "true"


def parse_attributes(value: str | None) -> dict[str, str]:
    """RocketMQ's ``+a=b,+c=d`` (AttributeParser#parseToMap, additions only) -> {"a": "b", "c": "d"}; raises
    typer.BadParameter (exit 2) for an entry without ``+`` and ``=``."""
    attributes: dict[str, str] = {}
    for entry in (e.strip() for e in (value or "").split(",")):
        key, sep, val = entry[1:].partition("=")
        if not entry.startswith("+") or not sep or not key:
            raise typer.BadParameter(f"attribute '{entry}' is not +key=value (removing attributes is not supported)")
        attributes[key] = val
    return attributes


@app.command("updateSubGroup")
def update_sub_group(
    group: GroupOption,
    broker_addr: BrokerAddrOption = None,
    cluster_name: ClusterOption = None,
    consume_enable: Annotated[str | None, bool_option("-s", "--consumeEnable", help="consume enable")] = None,
    consume_from_min: Annotated[str | None, bool_option("-m", "--consumeFromMinEnable", help="from min offset")] = None,
    broadcast: Annotated[str | None, bool_option("-d", "--consumeBroadcastEnable", help="broadcast")] = None,
    orderly: Annotated[str | None, bool_option("-o", "--consumeMessageOrderly", help="consume orderly")] = None,
    retry_queue_nums: Annotated[int | None, typer.Option("-q", "--retryQueueNums", help="retry queue nums")] = None,
    retry_max_times: Annotated[int | None, typer.Option("-r", "--retryMaxTimes", help="retry max times")] = None,
    broker_id: Annotated[int | None, typer.Option("-i", "--brokerId", help="consumer from which broker id")] = None,
    slow_broker_id: Annotated[
        int | None, typer.Option("-w", "--whichBrokerWhenConsumeSlowly", help="which broker id when consume slowly")
    ] = None,
    notify_ids_changed: Annotated[
        str | None, bool_option("-a", "--notifyConsumerIdsChanged", help="notify consumerId changed")
    ] = None,
    attributes: Annotated[str | None, typer.Option("--attributes", help="attribute(+a=b,+c=d)")] = None,
    output: OutputOption = OutputFormat.TABLE,
) -> None:
    """Update or create a subscription group on one broker (-b) or every master of a cluster (-c)."""
    require_one_target("updateSubGroup", broker_addr, cluster_name)
    # UpdateSubGroupSubCommand starts from the defaults with broadcast and consume-from-min off.
    fields: dict[str, Any] = {"consume_broadcast_enable": False, "consume_from_min_enable": False}
    for name, value in (
        ("consume_enable", parse_bool("consumeEnable", consume_enable)),
        ("consume_from_min_enable", parse_bool("consumeFromMinEnable", consume_from_min)),
        ("consume_broadcast_enable", parse_bool("consumeBroadcastEnable", broadcast)),
        ("consume_message_orderly", parse_bool("consumeMessageOrderly", orderly)),
        ("retry_queue_nums", retry_queue_nums),
        ("retry_max_times", retry_max_times),
        ("broker_id", broker_id),
        ("which_broker_when_consume_slowly", slow_broker_id),
        ("notify_consumer_ids_changed_enable", parse_bool("notifyConsumerIdsChanged", notify_ids_changed)),
        ("attributes", None if attributes is None else parse_attributes(attributes)),
    ):
        if value is not None:
            fields[name] = value
    config = SubscriptionGroupConfig(group.strip(), **fields)
    addrs = run_admin(
        lambda admin: admin.update_subscription_group(config, broker_addr=broker_addr, cluster_name=cluster_name)
    )
    emit_updated(output, "subscription group", addrs, config, "subscription_group_config")


@app.command("deleteSubGroup")
def delete_sub_group(
    group: GroupOption,
    broker_addr: BrokerAddrOption = None,
    cluster_name: ClusterOption = None,
    remove_offset: Annotated[str | None, bool_option("-r", "--removeOffset", help="remove offset")] = None,
    output: OutputOption = OutputFormat.TABLE,
) -> None:
    """Delete a subscription group from one broker (-b) or every master of a cluster (-c, with its retry and DLQ
    topics)."""
    require_one_target("deleteSubGroup", broker_addr, cluster_name)
    clean_offset = bool(parse_bool("removeOffset", remove_offset))
    g = group.strip()
    addrs = run_admin(
        lambda admin: admin.delete_subscription_group(
            g, broker_addr=broker_addr, cluster_name=cluster_name, clean_offset=clean_offset
        )
    )

    def render(out: Console) -> None:
        where = "" if cluster_name is None else f" in cluster [{cluster_name}]"
        for addr in addrs:
            out.print(f"delete subscription group [{g}] from broker [{addr}]{where} success.")

    emit(output, {"group": g, "deleted_from": addrs, "clean_offset": clean_offset}, render)


@app.command("subGroupList")
def sub_group_list(
    broker_addr: BrokerAddrOption = None,
    cluster_name: ClusterOption = None,
    output: OutputOption = OutputFormat.TABLE,
) -> None:
    """List the subscription groups of one broker (-b) or of every master of a cluster (-c)."""
    require_one_target("subGroupList", broker_addr, cluster_name)

    async def action(admin: MQAdminClient) -> dict[str, list[SubscriptionGroupConfig]]:
        addrs = await admin.resolve_broker_addrs(broker_addr, cluster_name)
        return {addr: await admin.subscription_groups(addr) for addr in addrs}

    groups = run_admin(action)

    def render(out: Console) -> None:
        table = Table(
            "#Broker Addr", "#Group", "#Consume", "#Broadcast", "#Orderly", "#FromMin", "#RetryQueues",
            "#RetryMaxTimes", "#BrokerId", "#SlowBrokerId", title="Subscription groups",
        )  # fmt: skip
        for addr, configs in groups.items():
            for c in configs:
                table.add_row(
                    addr, c.group_name, str(c.consume_enable).lower(), str(c.consume_broadcast_enable).lower(),
                    str(c.consume_message_orderly).lower(), str(c.consume_from_min_enable).lower(),
                    str(c.retry_queue_nums), str(c.retry_max_times), str(c.broker_id),
                    str(c.which_broker_when_consume_slowly),
                )  # fmt: skip
        out.print(table)

    emit(output, {"brokers": [{"broker_addr": a, "groups": c} for a, c in groups.items()]}, render)


@app.command("consumerProgress")
def consumer_progress(
    group: GroupOption,
    topic: Annotated[str | None, typer.Option("-t", "--topicName", help="topic name")] = None,
    output: OutputOption = OutputFormat.TABLE,
) -> None:
    """Show a consumer group's progress per queue: broker offset, consumer offset, lag (Diff), in-flight POP
    messages, the client holding the queue's orderly lock, last consume time."""
    g, t = group.strip(), (topic.strip() if topic else None)
    stats = run_admin(lambda admin: admin.examine_consume_stats(g, t))
    inflight_total = sum(q.inflight_count for q in stats.queues)
    locked_total = sum(1 for q in stats.queues if q.locked_by)

    def render(out: Console) -> None:
        out.print(_progress_table(stats, g))
        out.print(f"Consume TPS: {stats.consume_tps:.2f}")
        out.print(f"Consume Diff Total: {stats.total_diff}")
        out.print(f"Consume Inflight Total: {inflight_total}")
        out.print(f"Locked Queues: {locked_total}")

    document = {
        "group": g,
        "topic": t,
        "queues": [{**asdict(q), "diff": q.diff} for q in stats.queues],
        "consume_tps": stats.consume_tps,
        "diff_total": stats.total_diff,
        "inflight_total": inflight_total,
        "locked_total": locked_total,
    }
    emit(output, document, render)


def _progress_table(stats: ConsumeStats, group: str) -> Table:
    table = Table(
        "#Topic", "#Broker Name", "#QID", "#Broker Offset", "#Consumer Offset", "#Diff", "#Inflight", "#LockedBy",
        "#LastTime", title=f"Consumer progress: {group}",
    )  # fmt: skip
    for q in stats.queues:
        table.add_row(
            q.topic, q.broker_name, str(q.queue_id), str(q.broker_offset), str(q.consumer_offset), str(q.diff),
            str(q.inflight_count), q.locked_by, stamp_s(q.last_timestamp_ms),
        )  # fmt: skip
    return table


@app.command("consumerConnection")
def consumer_connection(
    group: Annotated[str, typer.Option("-g", "--consumerGroup", help="consumer group name")],
    broker_addr: BrokerAddrOption = None,
    output: OutputOption = OutputFormat.TABLE,
) -> None:
    """Show a consumer group's online instances (client id, address, language, version) and subscriptions."""
    g = group.strip()
    info = run_admin(lambda admin: admin.examine_consumer_connection_info(g, broker_addr))

    def render(out: Console) -> None:
        table = Table("#ClientId", "#ClientAddr", "#Language", "#Version", "#LastHeartbeat", title=f"Connections: {g}")
        for c in info.connections:
            table.add_row(c.client_id, c.client_addr, c.language, c.version, stamp_s(c.last_update_timestamp_ms))
        subscriptions = Table("#Topic", "#SubExpression", title="Below is subscription:")
        for s in info.subscriptions:
            subscriptions.add_row(s.topic, s.sub_string)
        out.print(table)
        out.print(subscriptions)
        out.print(f"ConsumeType: {info.consume_type.name}")
        out.print(f"MessageModel: {info.message_model.name}")

    emit(output, {"group": g, **asdict(info)}, render)


@app.command("resetOffsetByTime")
def reset_offset_by_time(
    group: Annotated[str, typer.Option("-g", "--group", help="set the consumer group")],
    topic: Annotated[str, typer.Option("-t", "--topic", help="set the topic")],
    timestamp_ms: Annotated[
        int, typer.Option("-s", "--timestamp", parser=parse_timestamp_ms, help=f"set the timestamp[{TIMESTAMP_HELP}]")
    ],
    force: Annotated[str | None, bool_option("-f", "--force", help="also move offsets forward (default true)")] = None,
    output: OutputOption = OutputFormat.TABLE,
) -> None:
    """Reset a consumer group's offsets of a topic to those of a store time (stop the group's consumers first)."""
    g, t = group.strip(), topic.strip()
    forced = parse_bool("force", force) is not False
    offsets = run_admin(lambda admin: admin.reset_offset_by_timestamp(t, g, timestamp_ms, forced))

    def render(out: Console) -> None:
        out.print(
            f"reset consumer offset by specified group[{g}], topic[{t}], force[{str(forced).lower()}], "
            f"timestamp(long)[{timestamp_ms}]"
        )
        table = Table("#brokerName", "#queueId", "#offset", title="Offsets set")
        for mq, offset in offsets.items():
            table.add_row(mq.broker_name, str(mq.queue_id), str(offset))
        out.print(table)

    rows = [{"broker_name": mq.broker_name, "queue_id": mq.queue_id, "offset": o} for mq, o in offsets.items()]
    emit(output, {"group": g, "topic": t, "timestamp_ms": timestamp_ms, "force": forced, "offsets": rows}, render)


@app.command("deleteTopic")
def delete_topic(
    topic: TopicOption,
    cluster_name: Annotated[str, typer.Option("-c", "--clusterName", help="delete topic from which cluster")],
    output: OutputOption = OutputFormat.TABLE,
) -> None:
    """Delete a topic from every master broker of a cluster, then its route from every name server."""
    t, c = topic.strip(), cluster_name.strip()
    addrs = run_admin(lambda admin: admin.delete_topic(c, t))

    def render(out: Console) -> None:
        out.print(f"delete topic [{t}] from cluster [{c}] success.")
        out.print(f"brokers: {', '.join(addrs)}")
        out.print(f"delete topic [{t}] from NameServer success.")

    emit(output, {"topic": t, "cluster": c, "deleted_from": addrs}, render)
