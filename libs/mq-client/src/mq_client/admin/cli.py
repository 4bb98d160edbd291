"""``mqadmin``: RocketMQ's admin verbs and flags over MQAdminClient, printing rich tables or, with ``--output json``,
one JSON document of the same content on stdout.

Mirrors org.apache.rocketmq.tools.command.MQAdminStartup and its cluster, topic and send sub commands
(ClusterListSubCommand, TopicListSubCommand, TopicRouteSubCommand, TopicStatusSubCommand, UpdateTopicSubCommand,
SendMessageCommand, ConsumeMessageCommand). The other verbs register on the same :data:`app` from
mq_client.admin.cli_message (queries by key/id/offset, printMsg) and mq_client.admin.cli_consumer (subscription
groups, consumer progress, connections, offsets, deleteTopic), mq_client.admin.cli_auth (ACL 2.0 users and
ACLs), mq_client.admin.cli_controller (getSyncStateSet, electMaster, getControllerMetaData),
mq_client.admin.cli_timer (recallMessage, timerStatus) and mq_client.admin.cli_transaction (queryTransactions),
imported below. Global ``-n/--namesrvAddr`` ("host:port;host:port"), default from MQ_NAMESRV_ADDR or
127.0.0.1:9876; ``--version`` prints ``mqadmin <version>``. A failure prints ``<CODE_NAME> (<code>): <remark>`` on
stderr and exits 1 (2 for usage errors), without a traceback. Each command runs its own asyncio loop.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated

import typer
from mq_common.constants import PermName
from mq_common.protocol import TopicConfig
from mq_common.topic_attributes import parse_attributes
from rich.console import Console
from rich.table import Table

from mq_client.admin import cli_auth, cli_consumer, cli_controller, cli_message, cli_timer, cli_transaction
from mq_client.admin.admin_client import DEFAULT_GATEWAY_ADDR
from mq_client.admin.cli_common import (
    OutputFormat,
    OutputOption,
    TopicOption,
    age,
    app,
    emit,
    emit_updated,
    require_one_target,
    run_admin,
    split_addrs,
)
from mq_client.admin.cluster_view import BrokerRow, cluster_rows, fetch_cluster_rows, role_text

__all__ = [
    "BrokerRow",
    "app",
    "cli_auth",
    "cli_consumer",
    "cli_controller",
    "cli_message",
    "cli_timer",
    "cli_transaction",
    "cluster_rows",
    "main",
    "split_addrs",
]


def _dash(value: object) -> str:
    return "-" if value is None else str(value)


@app.command("clusterList")
def cluster_list(output: OutputOption = OutputFormat.TABLE) -> None:
    """List clusters, broker groups and brokers: id, address, version, role, CommitLog max offset, a slave's lag
    behind its master (bytes) and the last heartbeat. Each broker is asked for its runtime info."""

    rows = run_admin(fetch_cluster_rows)

    def render(out: Console) -> None:
        table = Table(
            "#Cluster Name", "#Broker Name", "#BID", "#Addr", "#Version", "#Role", "#MaxOffset", "#Lag",
            "#Epoch", "#Last Heartbeat", title="Clusters",
        )  # fmt: skip
        for r in rows:
            table.add_row(
                r.cluster, r.broker_name, str(r.broker_id), r.addr, _dash(r.version), role_text(r),
                _dash(r.max_offset), _dash(r.lag_bytes), _dash(r.master_epoch), age(r.last_update_timestamp_ms),
            )  # fmt: skip
        out.print(table)

    emit(output, {"brokers": rows}, render)


@app.command("topicList")
def topic_list(
    cluster_model: Annotated[
        bool, typer.Option("-c", "--clusterModel", help="with each topic's cluster and message type")
    ] = False,
    output: OutputOption = OutputFormat.TABLE,
) -> None:
    """List every topic the name server has a route for; with -c, each (but %RETRY%/%DLQ%) with its cluster and
    message type (message.type; NORMAL when undeclared)."""
    if cluster_model:
        rows = run_admin(lambda admin: admin.topic_cluster_list())

        def render_rows(out: Console) -> None:
            table = Table("#Cluster Name", "#Topic", "#Message Type", title="Topics")
            for r in rows:
                table.add_row(r.cluster, r.topic, r.message_type)
            out.print(table)

        emit(output, {"topics": rows}, render_rows)
        return
    topics = run_admin(lambda admin: admin.topic_list())

    def render(out: Console) -> None:
        table = Table("#Topic", title="Topics")
        for topic in topics:
            table.add_row(topic)
        out.print(table)

    emit(output, {"topics": topics}, render)


@app.command("topicRoute")
def topic_route(topic: TopicOption, output: OutputOption = OutputFormat.TABLE) -> None:
    """Show a topic's queue datas (with the topic's message type on each broker group: message.type, NORMAL when
    undeclared) and broker datas."""
    route = run_admin(lambda admin: admin.topic_route(topic))

    def render(out: Console) -> None:
        queues = Table(
            "#Broker Name", "#Read Queues", "#Write Queues", "#Perm", "#SysFlag", "#Message Type",
            title=f"Queue datas: {topic}",
        )  # fmt: skip
        for q in route.queue_datas:
            perm = f"{PermName.to_string(q.perm)} ({q.perm})"
            queues.add_row(
                q.broker_name, str(q.read_queue_nums), str(q.write_queue_nums), perm, str(q.topic_sys_flag),
                q.topic_message_type.value,
            )  # fmt: skip
        brokers = Table("#Cluster", "#Broker Name", "#BID", "#Addr", title="Broker datas")
        for b in route.broker_datas:
            for bid, addr in sorted(b.broker_addrs.items()):
                brokers.add_row(b.cluster, b.broker_name, str(bid), addr)
        out.print(queues)
        out.print(brokers)

    emit(output, route, render)


@app.command("topicStatus")
def topic_status(topic: TopicOption, output: OutputOption = OutputFormat.TABLE) -> None:
    """Show min/max offset of every queue of a topic."""
    offsets = run_admin(lambda admin: admin.topic_status(topic))

    def render(out: Console) -> None:
        table = Table(
            "#Broker Name", "#QID", "#Min Offset", "#Max Offset", "#Last Updated", title=f"Topic status: {topic}"
        )
        for o in offsets:
            table.add_row(
                o.broker_name, str(o.queue_id), str(o.min_offset), str(o.max_offset), age(o.last_update_timestamp_ms)
            )
        out.print(table)

    emit(output, {"topic": topic, "offsets": offsets}, render)


@app.command("updateTopic")
def update_topic(
    topic: TopicOption,
    broker_addr: Annotated[str | None, typer.Option("-b", "--brokerAddr", help="create topic to which broker")] = None,
    cluster_name: Annotated[
        str | None, typer.Option("-c", "--clusterName", help="create topic to which cluster")
    ] = None,
    read_queue_nums: Annotated[int, typer.Option("-r", "--readQueueNums", help="set read queue nums")] = 8,
    write_queue_nums: Annotated[int, typer.Option("-w", "--writeQueueNums", help="set write queue nums")] = 8,
    perm: Annotated[int, typer.Option("-p", "--perm", help="set topic's permission(2|4|6), intro[2:W 4:R; 6:RW]")] = 6,
    order: Annotated[str, typer.Option("-o", "--order", help="set topic's order(true|false)")] = "false",
    attributes: Annotated[
        str, typer.Option("-a", "--attributes", help="attribute(+a=b,+c=d,-e), e.g. +message.type=DELAY")
    ] = "",
    output: OutputOption = OutputFormat.TABLE,
) -> None:
    """Create or update a topic on one broker (-b) or every master of a cluster (-c). -a changes its attributes:
    +key=value adds or changes, -key deletes, several joined by ','; message.type is NORMAL (the default), FIFO,
    DELAY, TRANSACTION or MIXED. Attributes not named are kept."""
    require_one_target("updateTopic", broker_addr, cluster_name)
    try:
        modification = parse_attributes(attributes.strip())
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="'-a' / '--attributes'") from None
    config = TopicConfig(
        topic.strip(), read_queue_nums, write_queue_nums, perm, order=order.strip().lower() == "true",
        attributes=modification,
    )  # fmt: skip
    addrs = run_admin(lambda admin: admin.update_topic(config, broker_addr=broker_addr, cluster_name=cluster_name))
    emit_updated(output, "topic", addrs, config, "topic_config")


@app.command("sendMessage")
def send_message(
    topic: TopicOption,
    body: Annotated[str, typer.Option("-p", "--body", help="UTF-8 message body")],
    keys: Annotated[str, typer.Option("-k", "--key", help="message keys (space separated)")] = "",
    tags: Annotated[str, typer.Option("-c", "--tags", help="message tag")] = "",
    gateway_addr: Annotated[
        str, typer.Option("-g", "--gatewayAddr", envvar="MQ_GATEWAY_ADDR", help="producer gateway")
    ] = DEFAULT_GATEWAY_ADDR,
    output: OutputOption = OutputFormat.TABLE,
) -> None:
    """Send one message through the producer gateway."""
    data = body.encode("utf-8")
    result = run_admin(lambda admin: admin.send_message(topic, data, tags=tags, keys=keys.split()), gateway_addr)

    def render(_: Console) -> None:
        # RocketMQ's SendResult#toString, on one unwrapped line so the ids can be copied whole.
        line = (
            f"SendResult [sendStatus={result.send_status}, msgId={result.msg_id}, "
            f"offsetMsgId={result.offset_msg_id}, messageQueue=MessageQueue [topic={topic}, "
            f"brokerName={result.broker_name}, queueId={result.queue_id}], queueOffset={result.queue_offset}]"
        )
        Console(highlight=False, soft_wrap=True).print(line, markup=False)

    emit(output, {"topic": topic, **asdict(result)}, render)


@app.command("consumeMessage")
def consume_message(
    topic: TopicOption,
    broker_name: Annotated[str | None, typer.Option("-b", "--brokerName", help="broker name")] = None,
    queue_id: Annotated[int | None, typer.Option("-i", "--queueId", help="queue id")] = None,
    offset: Annotated[int, typer.Option("-o", "--offset", help="queue offset")] = 0,
    count: Annotated[int, typer.Option("-c", "--MessageNumber", help="number of messages to consume")] = 128,
    output: OutputOption = OutputFormat.TABLE,
) -> None:
    """Pull messages of a topic (one queue with -b and -i) from an offset and print them."""
    messages = run_admin(lambda admin: admin.consume_message(topic, broker_name, queue_id, offset, count))

    def render(out: Console) -> None:
        table = Table("#QID", "#Queue Offset", "#MsgId", "#Tags", "#Keys", "#Body", title=f"Messages: {topic}")
        for m in messages:
            table.add_row(
                str(m.queue_id),
                str(m.queue_offset),
                m.uniq_key or m.offset_msg_id,
                m.tags or "",
                " ".join(m.keys),
                m.body.decode("utf-8", errors="replace"),
            )
        out.print(table)
        out.print(f"{len(messages)} message(s)")

    emit(output, {"topic": topic, "messages": messages}, render)


def main() -> None:
    """Console script entry point."""
    app()


if __name__ == "__main__":
    main()
