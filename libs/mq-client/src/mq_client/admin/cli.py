"""``mqadmin``: RocketMQ's admin verbs and flags over MQAdminClient, printing rich tables.

Mirrors org.apache.rocketmq.tools.command.MQAdminStartup and its sub commands (ClusterListSubCommand,
TopicListSubCommand, TopicRouteSubCommand, TopicStatusSubCommand, UpdateTopicSubCommand,
SendMessageCommand, ConsumeMessageCommand, QueryMsgByKeySubCommand, QueryMsgByUniqueKeySubCommand,
QueryMsgByIdSubCommand). Global ``-n/--namesrvAddr`` ("host:port;host:port"), default
from MQ_NAMESRV_ADDR or 127.0.0.1:9876; ``--version`` prints ``mqadmin <version>``. A failure prints
``<CODE_NAME> (<code>): <remark>`` on stderr and exits 1 (2 for usage errors), without a traceback. Each
command runs its own asyncio loop.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable
from typing import Annotated, Final, TypeVar

import typer
from mq_common.codec import MessageExt
from mq_common.constants import PermName
from mq_common.errors import MQError
from mq_common.protocol import TopicConfig
from mq_common.response_code import ResponseCode
from rich.console import Console
from rich.table import Table

from mq_client.admin.admin_client import DEFAULT_GATEWAY_ADDR, DEFAULT_QUERY_MAX_NUM, MQAdminClient
from mq_client.cli_version import version_option

DEFAULT_NAMESRV_ADDR: Final = "127.0.0.1:9876"
_T = TypeVar("_T")

app = typer.Typer(
    name="mqadmin",
    help="PyRocketMQ admin tool (RocketMQ's mqadmin verbs).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


class _State:
    namesrv_addrs: tuple[str, ...] = (DEFAULT_NAMESRV_ADDR,)


def split_addrs(value: str) -> tuple[str, ...]:
    """``"a:1;b:2"`` (RocketMQ's separator) or ``"a:1,b:2"`` -> ("a:1", "b:2")."""
    return tuple(a.strip() for a in value.replace(",", ";").split(";") if a.strip())


@app.callback()
def _global_options(
    namesrv_addr: Annotated[
        str | None,
        typer.Option("-n", "--namesrvAddr", help="Name server address list, e.g. '127.0.0.1:9876;127.0.0.2:9876'"),
    ] = None,
    version: Annotated[bool, version_option("mqadmin")] = False,
) -> None:
    """PyRocketMQ admin tool."""
    value = namesrv_addr or os.environ.get("MQ_NAMESRV_ADDR") or DEFAULT_NAMESRV_ADDR
    _State.namesrv_addrs = split_addrs(value) or (DEFAULT_NAMESRV_ADDR,)


def _out() -> Console:
    return Console(highlight=False, markup=False)  # user data such as "[order-8]" is never markup


def _fail(text: str, exit_code: int = 1) -> typer.Exit:
    Console(stderr=True, highlight=False, soft_wrap=True).print(text, markup=False)
    return typer.Exit(exit_code)


def _run(action: Callable[[MQAdminClient], Awaitable[_T]], gateway_addr: str = DEFAULT_GATEWAY_ADDR) -> _T:
    """Run ``action`` with a fresh admin client on a new loop; MQError -> message on stderr + exit 1."""

    async def main() -> _T:
        async with MQAdminClient(_State.namesrv_addrs, gateway_addr=gateway_addr) as admin:
            return await action(admin)

    try:
        return asyncio.run(main())
    except MQError as exc:
        raise _fail(f"{ResponseCode.name_of(exc.code)} ({exc.code}): {exc.remark}") from None


def _age(timestamp_ms: int) -> str:
    if timestamp_ms <= 0:
        return "-"
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(timestamp_ms / 1000))
    return f"{stamp} ({max(0, int(time.time() * 1000) - timestamp_ms) // 1000}s ago)"


@app.command("clusterList")
def cluster_list() -> None:
    """List clusters, broker groups, broker ids, addresses and last heartbeat."""
    info = _run(lambda admin: admin.cluster_list())
    table = Table("#Cluster Name", "#Broker Name", "#BID", "#Addr", "#Last Heartbeat", title="Clusters")
    for cluster, names in sorted(info.cluster_addr_table.items()):
        for name in names:
            data = info.broker_addr_table.get(name)
            if data is None:
                continue
            for bid, addr in sorted(data.broker_addrs.items()):
                table.add_row(cluster, name, str(bid), addr, _age(info.last_update_timestamp_ms(addr)))
    _out().print(table)


@app.command("topicList")
def topic_list() -> None:
    """List every topic the name server has a route for."""
    topics = _run(lambda admin: admin.topic_list())
    table = Table("#Topic", title="Topics")
    for topic in topics:
        table.add_row(topic)
    _out().print(table)


@app.command("topicRoute")
def topic_route(topic: Annotated[str, typer.Option("-t", "--topic", help="topic name")]) -> None:
    """Show a topic's queue datas and broker datas."""
    route = _run(lambda admin: admin.topic_route(topic))
    queues = Table("#Broker Name", "#Read Queues", "#Write Queues", "#Perm", "#SysFlag", title=f"Queue datas: {topic}")
    for q in route.queue_datas:
        perm = f"{PermName.to_string(q.perm)} ({q.perm})"
        queues.add_row(q.broker_name, str(q.read_queue_nums), str(q.write_queue_nums), perm, str(q.topic_sys_flag))
    brokers = Table("#Cluster", "#Broker Name", "#BID", "#Addr", title="Broker datas")
    for b in route.broker_datas:
        for bid, addr in sorted(b.broker_addrs.items()):
            brokers.add_row(b.cluster, b.broker_name, str(bid), addr)
    out = _out()
    out.print(queues)
    out.print(brokers)


@app.command("topicStatus")
def topic_status(topic: Annotated[str, typer.Option("-t", "--topic", help="topic name")]) -> None:
    """Show min/max offset of every queue of a topic."""
    offsets = _run(lambda admin: admin.topic_status(topic))
    table = Table("#Broker Name", "#QID", "#Min Offset", "#Max Offset", "#Last Updated", title=f"Topic status: {topic}")
    for o in offsets:
        table.add_row(
            o.broker_name, str(o.queue_id), str(o.min_offset), str(o.max_offset), _age(o.last_update_timestamp_ms)
        )
    _out().print(table)


@app.command("updateTopic")
def update_topic(
    topic: Annotated[str, typer.Option("-t", "--topic", help="topic name")],
    broker_addr: Annotated[str | None, typer.Option("-b", "--brokerAddr", help="create topic to which broker")] = None,
    cluster_name: Annotated[
        str | None, typer.Option("-c", "--clusterName", help="create topic to which cluster")
    ] = None,
    read_queue_nums: Annotated[int, typer.Option("-r", "--readQueueNums", help="set read queue nums")] = 8,
    write_queue_nums: Annotated[int, typer.Option("-w", "--writeQueueNums", help="set write queue nums")] = 8,
    perm: Annotated[int, typer.Option("-p", "--perm", help="set topic's permission(2|4|6), intro[2:W 4:R; 6:RW]")] = 6,
    order: Annotated[str, typer.Option("-o", "--order", help="set topic's order(true|false)")] = "false",
) -> None:
    """Create or update a topic on one broker (-b) or every master of a cluster (-c)."""
    if (broker_addr is None) == (cluster_name is None):
        raise _fail("updateTopic: set exactly one of -b/--brokerAddr and -c/--clusterName", 2)
    config = TopicConfig(topic.strip(), read_queue_nums, write_queue_nums, perm, order=order.strip().lower() == "true")
    addrs = _run(lambda admin: admin.update_topic(config, broker_addr=broker_addr, cluster_name=cluster_name))
    out = _out()
    for addr in addrs:
        out.print(f"create topic to {addr} success.", markup=False)
    out.print(str(config), markup=False)


@app.command("sendMessage")
def send_message(
    topic: Annotated[str, typer.Option("-t", "--topic", help="topic name")],
    body: Annotated[str, typer.Option("-p", "--body", help="UTF-8 message body")],
    keys: Annotated[str, typer.Option("-k", "--key", help="message keys (space separated)")] = "",
    tags: Annotated[str, typer.Option("-c", "--tags", help="message tag")] = "",
    gateway_addr: Annotated[
        str, typer.Option("-g", "--gatewayAddr", envvar="MQ_GATEWAY_ADDR", help="producer gateway")
    ] = DEFAULT_GATEWAY_ADDR,
) -> None:
    """Send one message through the producer gateway."""
    data = body.encode("utf-8")
    result = _run(lambda admin: admin.send_message(topic, data, tags=tags, keys=keys.split()), gateway_addr)
    # RocketMQ's SendResult#toString, on one unwrapped line so the ids can be copied whole.
    line = (
        f"SendResult [sendStatus={result.send_status}, msgId={result.msg_id}, offsetMsgId={result.offset_msg_id}, "
        f"messageQueue=MessageQueue [topic={topic}, brokerName={result.broker_name}, queueId={result.queue_id}], "
        f"queueOffset={result.queue_offset}]"
    )
    Console(highlight=False, soft_wrap=True).print(line, markup=False)


@app.command("consumeMessage")
def consume_message(
    topic: Annotated[str, typer.Option("-t", "--topic", help="topic name")],
    broker_name: Annotated[str | None, typer.Option("-b", "--brokerName", help="broker name")] = None,
    queue_id: Annotated[int | None, typer.Option("-i", "--queueId", help="queue id")] = None,
    offset: Annotated[int, typer.Option("-o", "--offset", help="queue offset")] = 0,
    count: Annotated[int, typer.Option("-c", "--MessageNumber", help="number of messages to consume")] = 128,
) -> None:
    """Pull messages of a topic (one queue with -b and -i) from an offset and print them."""
    messages = _run(lambda admin: admin.consume_message(topic, broker_name, queue_id, offset, count))
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
    out = _out()
    out.print(table)
    out.print(f"{len(messages)} message(s)", markup=False)


def _stamp_ms(timestamp_ms: int) -> str:
    """UtilAll#timeMillisToHumanString2: local ``yyyy-MM-dd HH:mm:ss,SSS``."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(timestamp_ms / 1000)) + f",{timestamp_ms % 1000:03d}"


def _message_detail(m: MessageExt) -> Table:
    """One message as QueryMsgByIdSubCommand#printMsg prints it (a two-column table)."""
    table = Table("#Field", "#Value", title=f"Message {m.uniq_key or m.offset_msg_id}", show_lines=False)
    rows = [
        ("OffsetID:", m.offset_msg_id),
        ("Topic:", m.topic),
        ("Tags:", f"[{m.tags or ''}]"),
        ("Keys:", f"[{' '.join(m.keys)}]"),
        ("Queue ID:", str(m.queue_id)),
        ("Queue Offset:", str(m.queue_offset)),
        ("CommitLog Offset:", str(m.commit_log_offset)),
        ("Reconsume Times:", str(m.reconsume_times)),
        ("Born Timestamp:", _stamp_ms(m.born_timestamp_ms)),
        ("Store Timestamp:", _stamp_ms(m.store_timestamp_ms)),
        ("Born Host:", f"{m.born_host[0]}:{m.born_host[1]}"),
        ("Store Host:", f"{m.store_host[0]}:{m.store_host[1]}"),
        ("System Flag:", str(m.sys_flag)),
        ("Properties:", ", ".join(f"{k}={v}" for k, v in sorted(m.properties.items()))),
        ("Body:", m.body.decode("utf-8", errors="replace")),
    ]
    for name, value in rows:
        table.add_row(name, value)
    return table


@app.command("queryMsgByKey")
def query_msg_by_key(
    topic: Annotated[str, typer.Option("-t", "--topic", help="Topic name")],
    key: Annotated[str, typer.Option("-k", "--msgKey", help="Message Key")],
    begin_timestamp: Annotated[
        int, typer.Option("-b", "--beginTimestamp", help="Begin timestamp(ms). default:0, eg:1676730526212")
    ] = 0,
    end_timestamp: Annotated[
        int, typer.Option("-e", "--endTimestamp", help="End timestamp(ms). default:no limit, eg:1676730526212")
    ] = 0,
    max_num: Annotated[
        int, typer.Option("-m", "--maxNum", help="The maximum number of messages returned by the query, default:64")
    ] = DEFAULT_QUERY_MAX_NUM,
) -> None:
    """Query messages of a topic by key (KEYS or UNIQ_KEY) on every broker of its route."""
    t, k = topic.strip(), key.strip()
    messages = _run(lambda admin: admin.query_msg_by_key(t, k, max_num, begin_timestamp, end_timestamp))
    table = Table(
        "#Message ID", "#QID", "#Offset", "#Store Time", "#Tags", "#Keys", "#Offset Msg ID", title=f"Messages: {t} {k}"
    )
    for m in messages:
        table.add_row(
            m.uniq_key or m.offset_msg_id,
            str(m.queue_id),
            str(m.queue_offset),
            _stamp_ms(m.store_timestamp_ms),
            m.tags or "",
            " ".join(m.keys),
            m.offset_msg_id,
        )
    out = _out()
    out.print(table)
    out.print(f"{len(messages)} message(s)", markup=False)


@app.command("queryMsgByUniqueKey")
def query_msg_by_unique_key(
    uniq_key: Annotated[str, typer.Option("-i", "--msgId", help="Message Id (the producer's UNIQ_KEY)")],
    topic: Annotated[str, typer.Option("-t", "--topic", help="The topic of msg")],
) -> None:
    """Query a message by its unique key (the msgId the producer returned)."""
    t, i = topic.strip(), uniq_key.strip()
    messages = _run(lambda admin: admin.query_msg_by_unique_key(t, i))
    out = _out()
    for m in messages:
        out.print(_message_detail(m))


@app.command("queryMsgById")
def query_msg_by_id(
    offset_msg_id: Annotated[str, typer.Option("-i", "--msgId", help="Message Id (offset msg id)")],
) -> None:
    """Query a message by its offset msg id (store host + commit log offset), from the broker that stored it."""
    i = offset_msg_id.strip()
    message = _run(lambda admin: admin.query_msg_by_id(i))
    _out().print(_message_detail(message))


def main() -> None:
    """Console script entry point."""
    app()


if __name__ == "__main__":
    main()
