"""``mqadmin`` message verbs: queries by key / unique key / offset msg id / queue offset, and printMsg (a topic's
messages in a time range).

Mirrors org.apache.rocketmq.tools.command.message (QueryMsgByKeySubCommand, QueryMsgByUniqueKeySubCommand,
QueryMsgByIdSubCommand, QueryMsgByOffsetSubCommand, PrintMessageSubCommand). Registers on
mq_client.admin.cli_common.app; every verb takes ``--output table|json``. Main thread; each verb runs its own loop.
"""

from __future__ import annotations

import codecs
from collections.abc import Sequence
from typing import Annotated

import typer
from mq_common.codec import MessageExt
from rich.console import Console
from rich.table import Table

from mq_client.admin.admin_client import DEFAULT_PRINT_MAX_NUM, DEFAULT_QUERY_MAX_NUM, MQAdminClient
from mq_client.admin.cli_common import (
    TIMESTAMP_HELP,
    OutputFormat,
    OutputOption,
    TopicOption,
    app,
    emit,
    message_json,
    parse_timestamp_ms,
    run_admin,
    stamp_ms,
)
from mq_client.admin.cli_timer import timer_json, timer_rows
from mq_client.admin.cli_transaction import transaction_json, transaction_rows
from mq_client.admin.timer_admin import MessageTimer
from mq_client.admin.transaction_admin import MessageTransaction

__all__ = ["message_detail"]


def message_detail(m: MessageExt, charset: str = "utf-8", extra_rows: Sequence[tuple[str, str]] = ()) -> Table:
    """One message as QueryMsgByIdSubCommand#printMsg prints it (a two-column table); the body decoded with
    ``charset`` (undecodable bytes replaced); ``extra_rows`` (name, value) after the properties (a timer's rows)."""
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
        ("Born Timestamp:", stamp_ms(m.born_timestamp_ms)),
        ("Store Timestamp:", stamp_ms(m.store_timestamp_ms)),
        ("Born Host:", f"{m.born_host[0]}:{m.born_host[1]}"),
        ("Store Host:", f"{m.store_host[0]}:{m.store_host[1]}"),
        ("System Flag:", str(m.sys_flag)),
        ("Properties:", ", ".join(f"{k}={v}" for k, v in sorted(m.properties.items()))),
        *extra_rows,
        ("Body:", m.body.decode(charset, errors="replace")),
    ]
    for name, value in rows:
        table.add_row(name, value)
    return table


def _emit_details(output: OutputFormat, messages: list[MessageExt], charset: str = "utf-8") -> None:
    def render(out: Console) -> None:
        for m in messages:
            out.print(message_detail(m, charset))

    emit(output, {"messages": [message_json(m, charset) for m in messages]}, render)


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
    output: OutputOption = OutputFormat.TABLE,
) -> None:
    """Query messages of a topic by key (KEYS or UNIQ_KEY) on every broker of its route."""
    t, k = topic.strip(), key.strip()
    messages = run_admin(lambda admin: admin.query_msg_by_key(t, k, max_num, begin_timestamp, end_timestamp))

    def render(out: Console) -> None:
        table = Table(
            "#Message ID",
            "#QID",
            "#Offset",
            "#Store Time",
            "#Tags",
            "#Keys",
            "#Offset Msg ID",
            title=f"Messages: {t} {k}",
        )
        for m in messages:
            table.add_row(
                m.uniq_key or m.offset_msg_id,
                str(m.queue_id),
                str(m.queue_offset),
                stamp_ms(m.store_timestamp_ms),
                m.tags or "",
                " ".join(m.keys),
                m.offset_msg_id,
            )
        out.print(table)
        out.print(f"{len(messages)} message(s)")

    emit(output, {"topic": t, "key": k, "messages": messages}, render)


@app.command("queryMsgByUniqueKey")
def query_msg_by_unique_key(
    uniq_key: Annotated[str, typer.Option("-i", "--msgId", help="Message Id (the producer's UNIQ_KEY)")],
    topic: Annotated[str, typer.Option("-t", "--topic", help="The topic of msg")],
    output: OutputOption = OutputFormat.TABLE,
) -> None:
    """Query a message by its unique key (the msgId the producer returned)."""
    t, i = topic.strip(), uniq_key.strip()
    _emit_details(output, run_admin(lambda admin: admin.query_msg_by_unique_key(t, i)))


@app.command("queryMsgById")
def query_msg_by_id(
    offset_msg_id: Annotated[str, typer.Option("-i", "--msgId", help="Message Id (offset msg id)")],
    output: OutputOption = OutputFormat.TABLE,
) -> None:
    """Query a message by its offset msg id (store host + commit log offset), from the broker that stored it. A
    timer or delay-level message also shows its real topic, due time (UTC) and timer state (PENDING, DELIVERED,
    RECALLED or UNKNOWN); a transaction message (a half message, a committed one, one moved to
    TRANS_CHECK_MAX_TIME_TOPIC) its real topic and transaction state (OPEN with age and check count, COMMITTED,
    ROLLED_BACK, CHECK_MAX or UNKNOWN); both asked of the same broker."""
    i = offset_msg_id.strip()

    async def query(admin: MQAdminClient) -> tuple[MessageExt, MessageTimer | None, MessageTransaction | None]:
        message = await admin.query_msg_by_id(i)
        return message, await admin.message_timer(message), await admin.message_transaction(message)

    message, timer, transaction = run_admin(query)
    rows = timer_rows(timer) + transaction_rows(transaction)
    emit(
        output,
        {"messages": [message_json(message) | timer_json(timer) | transaction_json(transaction)]},
        lambda out: out.print(message_detail(message, extra_rows=rows)),
    )


@app.command("queryMsgByOffset")
def query_msg_by_offset(
    topic: TopicOption,
    broker_name: Annotated[str, typer.Option("-b", "--brokerName", help="Broker Name")],
    queue_id: Annotated[int, typer.Option("-i", "--queueId", help="Queue Id")],
    offset: Annotated[int, typer.Option("-o", "--offset", help="Queue Offset")],
    body_format: Annotated[
        str, typer.Option("-f", "--bodyFormat", help="print message body by the specified charset")
    ] = "utf-8",
    output: OutputOption = OutputFormat.TABLE,
) -> None:
    """Query the message at one queue offset (exit 1 with NO_MESSAGE when there is none)."""
    charset = _charset(body_format)
    t, b = topic.strip(), broker_name.strip()
    message = run_admin(lambda admin: admin.query_message_by_offset(t, b, queue_id, offset))
    _emit_details(output, [message], charset)


@app.command("printMsg")
def print_msg(
    topic: TopicOption,
    charset_name: Annotated[str, typer.Option("-c", "--charsetName", help="CharsetName(eg: UTF-8,GBK)")] = "UTF-8",
    sub_expression: Annotated[
        str, typer.Option("-s", "--subExpression", help="Subscribe Expression(eg: TagA || TagB)")
    ] = "*",
    begin_timestamp: Annotated[
        int | None,
        typer.Option("-b", "--beginTimestamp", parser=parse_timestamp_ms, help=f"Begin timestamp[{TIMESTAMP_HELP}]"),
    ] = None,
    end_timestamp: Annotated[
        int | None,
        typer.Option("-e", "--endTimestamp", parser=parse_timestamp_ms, help=f"End timestamp[{TIMESTAMP_HELP}]"),
    ] = None,
    print_body: Annotated[str, typer.Option("-d", "--printBody", help="print body(true|false)")] = "true",
    max_num: Annotated[
        int, typer.Option("-m", "--maxNum", help=f"print at most this many messages, default:{DEFAULT_PRINT_MAX_NUM}")
    ] = DEFAULT_PRINT_MAX_NUM,
    output: OutputOption = OutputFormat.TABLE,
) -> None:
    """Print the messages of every queue of a topic stored between two timestamps (bounded by -m)."""
    charset = _charset(charset_name)
    with_body = print_body.strip().lower() != "false"
    t, s = topic.strip(), sub_expression.strip() or "*"
    queues = run_admin(lambda admin: admin.print_messages(t, begin_timestamp, end_timestamp, s, max_num))
    total = sum(len(q.messages) for q in queues)

    def render(out: Console) -> None:
        for q in queues:
            out.print(f"minOffset={q.min_offset}, maxOffset={q.max_offset}, {q.queue}")
            for m in q.messages:
                body = m.body.decode(charset, errors="replace") if with_body else "NOT PRINT BODY"
                out.print(
                    f"MSGID: {m.uniq_key or m.offset_msg_id} QID: {m.queue_id} OFFSET: {m.queue_offset} "
                    f"TAGS: {m.tags or ''} KEYS: {' '.join(m.keys)} STORE: {stamp_ms(m.store_timestamp_ms)} "
                    f"BODY: {body}"
                )
            out.print("-" * 56)
        out.print(f"{total} message(s){' (--maxNum reached)' if total >= max_num else ''}")

    document = [
        {
            "queue": q.queue,
            "min_offset": q.min_offset,
            "max_offset": q.max_offset,
            "messages": [message_json(m, charset) for m in q.messages],
        }
        for q in queues
    ]
    emit(output, {"topic": t, "queues": document, "total": total, "max_num_reached": total >= max_num}, render)


def _charset(name: str) -> str:
    """A Python codec name for a Java charset name (UTF-8, GBK, ...); raises typer.BadParameter (exit 2)."""
    try:
        return codecs.lookup(name.strip()).name
    except LookupError:
        raise typer.BadParameter(f"unknown charset: {name}") from None
