"""``mqadmin`` transaction verb ``queryTransactions`` (a topic's open transactions per broker: msg id, producer group,
transaction id, age, check count, keys) and the transaction rows ``queryMsgById`` adds for a half message, a committed
transaction message or one moved to TRANS_CHECK_MAX_TIME_TOPIC.

RocketMQ's tools have no command for open transactions (only the CID_RMQ_SYS_TRANS offsets hint at them):
``queryTransactions`` is this project's name, in the tools' style (``-t`` topic, ``-m`` maxNum, ``--output
table|json``, ``NAME (code): remark`` on stderr and exit 1 on failure). Registers on mq_client.admin.cli_common.app.
Main thread; each verb runs its own loop.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from mq_client.admin.cli_common import OutputFormat, OutputOption, TopicOption, app, emit, run_admin
from mq_client.admin.transaction_admin import (
    DEFAULT_MAX_NUM,
    BrokerOpenTransactions,
    MessageTransaction,
    OpenTransaction,
)

__all__ = ["transaction_json", "transaction_rows"]


def _age_s(t: OpenTransaction) -> str:
    return f"{t.age_ms / 1000:.1f}"


def transaction_rows(transaction: MessageTransaction | None) -> list[tuple[str, str]]:
    """The rows ``queryMsgById`` adds to a transaction message's detail: real topic, state (with the broker's error
    when the query failed) and, for an OPEN one, its age (s), check count and producer group; none for another
    message."""
    if transaction is None:
        return []
    state = transaction.state.value + (f" ({transaction.error})" if transaction.error else "")
    rows = [("Transaction Real Topic:", transaction.real_topic), ("Transaction State:", state)]
    open_one = transaction.transaction
    if open_one is not None:
        rows += [
            ("Transaction Age(s):", _age_s(open_one)),
            ("Transaction Check Times:", str(open_one.check_times)),
            ("Transaction Producer Group:", open_one.producer_group),
        ]
    return rows


def transaction_json(transaction: MessageTransaction | None) -> dict[str, object]:
    """``{"transaction": {...}}`` for ``queryMsgById --output json`` (real_topic, uniq_key, broker_addr, state,
    error, and for an OPEN one ``open``: the OpenTransaction's fields); ``{}`` for another message."""
    if transaction is None:
        return {}
    open_one = transaction.transaction
    return {
        "transaction": {
            "real_topic": transaction.real_topic,
            "uniq_key": transaction.uniq_key,
            "broker_addr": transaction.broker_addr,
            "state": transaction.state.value,
            "error": transaction.error,
            "open": None if open_one is None else asdict(open_one),
        }
    }


@app.command("queryTransactions")
def query_transactions(
    topic: TopicOption,
    max_num: Annotated[
        int,
        typer.Option(
            "-m", "--maxNum", help=f"list at most this many per broker, oldest first, default:{DEFAULT_MAX_NUM}"
        ),
    ] = DEFAULT_MAX_NUM,
    output: OutputOption = OutputFormat.TABLE,
) -> None:
    """List a topic's open transactions (half messages neither committed nor rolled back) per broker of its route:
    msg id, producer group, transaction id, age (s), check count (TRANSACTION_CHECK_TIMES) and keys, oldest first.
    RocketMQ has no such command; the name is this project's."""
    t = topic.strip()
    rows = run_admin(lambda admin: admin.open_transactions(t, max_num))

    def render(out: Console) -> None:
        table = Table(
            "#Broker Name", "#Msg ID", "#Producer Group", "#Transaction ID", "#Age(s)", "#Check Times", "#Keys",
            title=f"Open transactions: {t}",
        )  # fmt: skip
        for row in rows:
            if row.status is None:
                table.add_row(row.broker_name, row.error, "-", "-", "-", "-", "-")
                continue
            for tx in row.status.transactions:
                table.add_row(
                    row.broker_name,
                    tx.msg_id,
                    tx.producer_group,
                    tx.transaction_id,
                    _age_s(tx),
                    str(tx.check_times),
                    tx.keys,
                )
        out.print(table)
        total = sum(r.status.total_open for r in rows if r.status is not None)
        listed = sum(len(r.status.transactions) for r in rows if r.status is not None)
        more = f" ({total - listed} not listed: --maxNum {max_num})" if listed < total else ""
        out.print(f"{total} open transaction(s){more}")

    emit(output, {"topic": t, "brokers": [_broker_json(r) for r in rows]}, render)


def _broker_json(row: BrokerOpenTransactions) -> dict[str, object]:
    s = row.status
    return {
        "broker_name": row.broker_name,
        "broker_addr": row.broker_addr,
        "total_open": None if s is None else s.total_open,
        "transactions": []
        if s is None
        else [asdict(tx) | {"age_s": round(tx.age_ms / 1000, 1)} for tx in s.transactions],
        "error": row.error,
    }
