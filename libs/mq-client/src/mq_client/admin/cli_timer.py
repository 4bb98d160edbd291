"""``mqadmin`` timer verbs: ``recallMessage`` (cancel a timer message by its recall handle) and ``timerStatus`` (a
topic's pending timers and delay-level messages per broker); the timer rows ``queryMsgById`` adds for a timer or
delay-level message.

RocketMQ 5 recalls through DefaultMQProducer#recallMessage (no tools command); the verbs follow the tools' style
(``-t`` topic, ``--output table|json``, ``NAME (code): remark`` on stderr and exit 1 on failure). Due times print as
UTC with milliseconds. Registers on mq_client.admin.cli_common.app. Main thread; each verb runs its own loop.
"""

from __future__ import annotations

import time
from dataclasses import asdict
from typing import Annotated

import typer
from mq_common.constants import MixAll
from rich.console import Console
from rich.table import Table

from mq_client.admin.cli_common import OutputFormat, OutputOption, TopicOption, app, emit, run_admin
from mq_client.admin.timer_admin import BrokerTimerStatus, MessageTimer

__all__ = ["timer_json", "timer_rows", "utc_ms"]


def utc_ms(timestamp_ms: int, now_ms: int | None = None) -> str:
    """``yyyy-MM-dd HH:mm:ss,SSS UTC (in 12.3 s)`` (or ``(4.0 s ago)``) of ms since the epoch; ``-`` for 0 or
    less. ``now_ms`` defaults to the wall clock."""
    if timestamp_ms <= 0:
        return "-"
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(timestamp_ms // 1000)) + f",{timestamp_ms % 1000:03d} UTC"
    delta_s = (timestamp_ms - (int(time.time() * 1000) if now_ms is None else now_ms)) / 1000
    return f"{stamp} (in {delta_s:.1f} s)" if delta_s >= 0 else f"{stamp} ({-delta_s:.1f} s ago)"


def timer_rows(timer: MessageTimer | None) -> list[tuple[str, str]]:
    """The rows ``queryMsgById`` adds to a timer or delay-level message's detail: real topic, due time, state (with
    the broker's error when QueryTimers failed); none for another message."""
    if timer is None:
        return []
    state = timer.state.value + (f" ({timer.error})" if timer.error else "")
    return [
        ("Timer Real Topic:", timer.real_topic),
        ("Timer Due Time:", f"{utc_ms(timer.deliver_ms)} [{timer.deliver_ms}]" if timer.deliver_ms > 0 else "-"),
        ("Timer State:", state),
    ]


def timer_json(timer: MessageTimer | None) -> dict[str, object]:
    """``{"timer": {...}}`` for ``queryMsgById --output json`` (real_topic, uniq_key, broker_addr, deliver_ms,
    state, error); ``{}`` for a message that is no timer."""
    if timer is None:
        return {}
    return {
        "timer": {
            "real_topic": timer.real_topic,
            "uniq_key": timer.uniq_key,
            "broker_addr": timer.broker_addr,
            "deliver_ms": timer.deliver_ms,
            "state": timer.state.value,
            "error": timer.error,
        }
    }


@app.command("recallMessage")
def recall_message(
    topic: TopicOption,
    recall_handle: Annotated[
        str, typer.Option("-r", "--recallHandle", help="the recall handle of the timer message's send result")
    ],
    producer_group: Annotated[
        str, typer.Option("-g", "--producerGroup", help="producer group the recall is made for")
    ] = MixAll.DEFAULT_PRODUCER_GROUP,
    output: OutputOption = OutputFormat.TABLE,
) -> None:
    """Recall (cancel) a timer message that is not delivered yet, by its recall handle. Exit 1 with the broker's
    code and remark when it cannot be recalled (ILLEGAL_OPERATION 604: invalid handle, too late, unknown or
    already recalled)."""
    result = run_admin(lambda admin: admin.recall_message(topic, recall_handle, producer_group.strip()))

    def render(_: Console) -> None:
        line = (
            f"RecallResult [recallStatus=RECALL_OK, msgId={result.msg_id}, topic={result.topic}, "
            f"brokerName={result.broker_name}, brokerAddr={result.broker_addr}, "
            f"deliverTime={utc_ms(result.deliver_ms)} [{result.deliver_ms}]]"
        )
        Console(highlight=False, soft_wrap=True).print(line, markup=False)

    emit(output, {"recall_status": "RECALL_OK", **asdict(result)}, render)


@app.command("timerStatus")
def timer_status(topic: TopicOption, output: OutputOption = OutputFormat.TABLE) -> None:
    """List a topic's pending timer messages (count, earliest and latest due time, UTC) and delay-level messages
    not delivered yet, per broker of its route."""
    t = topic.strip()
    rows = run_admin(lambda admin: admin.timer_status(t))
    now_ms = int(time.time() * 1000)

    def render(out: Console) -> None:
        table = Table(
            "#Broker Name", "#Addr", "#Pending Timers", "#Earliest Due", "#Latest Due", "#Pending Delay-Level",
            title=f"Timers: {t}",
        )  # fmt: skip
        for row in rows:
            table.add_row(*_status_cells(row, now_ms))
        out.print(table)
        timers = sum(r.status.pending_timers for r in rows if r.status is not None)
        delayed = sum(r.status.pending_delay_level_messages for r in rows if r.status is not None)
        out.print(f"{timers} pending timer(s), {delayed} pending delay-level message(s)")

    emit(output, {"topic": t, "brokers": [_status_json(r) for r in rows]}, render)


def _status_cells(row: BrokerTimerStatus, now_ms: int) -> tuple[str, str, str, str, str, str]:
    s = row.status
    if s is None:
        return (row.broker_name, row.broker_addr, row.error, "-", "-", "-")
    return (
        row.broker_name,
        row.broker_addr,
        str(s.pending_timers),
        utc_ms(s.earliest_deliver_ms, now_ms),
        utc_ms(s.latest_deliver_ms, now_ms),
        str(s.pending_delay_level_messages),
    )


def _status_json(row: BrokerTimerStatus) -> dict[str, object]:
    s = row.status
    return {
        "broker_name": row.broker_name,
        "broker_addr": row.broker_addr,
        "pending_timers": None if s is None else s.pending_timers,
        "earliest_deliver_ms": None if s is None else s.earliest_deliver_ms,
        "latest_deliver_ms": None if s is None else s.latest_deliver_ms,
        "pending_delay_level_messages": None if s is None else s.pending_delay_level_messages,
        "error": row.error,
    }
