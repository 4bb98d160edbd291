"""What every ``mqadmin`` verb shares: the typer app and its global ``-n``, the admin-client runner with its error
exit, ``--output table|json``, and RocketMQ's timestamp formats.

Mirrors org.apache.rocketmq.tools.command.MQAdminStartup (the app, ``-n/--namesrvAddr``), SubCommand error handling
(a failure prints ``<CODE_NAME> (<code>): <remark>`` on stderr and exits 1; usage errors exit 2, no traceback) and
UtilAll's date formats. Verbs live in mq_client.admin.cli (topics, sends, queries), cli_consumer (subscription
groups, consumer progress/offsets/connections, topic deletion) and cli_message (messages by offset or time). Runs on
the main thread; each verb runs its own asyncio loop (:func:`run_admin`).
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import enum
import json
import os
import time
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime
from typing import Annotated, Final, TypeVar

import typer
from mq_common.auth.settings import Credentials
from mq_common.codec import MessageExt
from mq_common.errors import MQError
from mq_common.response_code import ResponseCode
from mq_common.tls import TlsClientConfig
from rich.console import Console

from mq_client.admin.admin_client import DEFAULT_GATEWAY_ADDR, MQAdminClient
from mq_client.admin.cli_tls import TlsCaFileOption, TlsCertFileOption, TlsEnabledOption, TlsKeyFileOption, tls_config
from mq_client.cli_version import version_option

DEFAULT_NAMESRV_ADDR: Final = "127.0.0.1:9876"
# UtilAll.YYYY_MM_DD_HH_MM_SS_SSS ("yyyy-MM-dd#HH:mm:ss:SSS"), local time, as the tools' -s/-b/-e options take it.
TIMESTAMP_FORMAT: Final = "%Y-%m-%d#%H:%M:%S"
TIMESTAMP_HELP: Final = "now | currentTimeMillis | yyyy-MM-dd#HH:mm:ss:SSS (local time)"
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
    tls: TlsClientConfig | None = None
    credentials: Credentials | None = None


def global_credentials() -> Credentials | None:
    """The global ``--accessKey``/``--secretKey`` (MQ_ACCESS_KEY/MQ_SECRET_KEY) pair, None unless both are set."""
    return _State.credentials


def admin_tls() -> TlsClientConfig | None:
    """The TLS of this invocation (``--tls`` and friends; None: plaintext), for verbs that open their own pools."""
    return _State.tls


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
    tls: TlsEnabledOption = False,
    tls_ca_file: TlsCaFileOption = None,
    tls_cert_file: TlsCertFileOption = None,
    tls_key_file: TlsKeyFileOption = None,
    access_key: Annotated[
        str | None,
        typer.Option("--accessKey", envvar="MQ_ACCESS_KEY", help="access key (username) every call is signed with"),
    ] = None,
    secret_key: Annotated[
        str | None,
        typer.Option("--secretKey", envvar="MQ_SECRET_KEY", help="secret key to sign with (prefer MQ_SECRET_KEY)"),
    ] = None,
) -> None:
    """PyRocketMQ admin tool."""
    _State.tls = tls_config(tls, tls_ca_file, tls_cert_file, tls_key_file)
    _State.credentials = Credentials(access_key, secret_key) if access_key and secret_key else None
    value = namesrv_addr or os.environ.get("MQ_NAMESRV_ADDR") or DEFAULT_NAMESRV_ADDR
    _State.namesrv_addrs = split_addrs(value) or (DEFAULT_NAMESRV_ADDR,)


def out_console() -> Console:
    """The stdout console of table output; markup off (user data such as "[order-8]" is never markup)."""
    return Console(highlight=False, markup=False)


def fail(text: str, exit_code: int = 1) -> typer.Exit:
    """Print ``text`` on stderr; the typer.Exit to raise (1: an MQ error, 2: usage)."""
    Console(stderr=True, highlight=False, soft_wrap=True).print(text, markup=False)
    return typer.Exit(exit_code)


def require_one_target(verb: str, broker_addr: str | None, cluster_name: str | None) -> None:
    """Usage check of the ``-b`` / ``-c`` verbs: raises typer.Exit(2) unless exactly one is given."""
    if (broker_addr is None) == (cluster_name is None):
        raise fail(f"{verb}: set exactly one of -b/--brokerAddr and -c/--clusterName", 2)


def run_admin(action: Callable[[MQAdminClient], Awaitable[_T]], gateway_addr: str = DEFAULT_GATEWAY_ADDR) -> _T:
    """Run ``action`` with a fresh admin client on a new loop. An MQError prints ``NAME (code): remark`` on stderr
    and raises typer.Exit(1)."""

    async def main() -> _T:
        async with MQAdminClient(
            _State.namesrv_addrs, gateway_addr=gateway_addr, tls=_State.tls, credentials=_State.credentials
        ) as admin:
            return await action(admin)

    try:
        return asyncio.run(main())
    except MQError as exc:
        raise fail(f"{ResponseCode.name_of(exc.code)} ({exc.code}): {exc.remark}") from None


TopicOption = Annotated[str, typer.Option("-t", "--topic", help="topic name")]

# ------------------------------------------------------------------------------------------------------ output


class OutputFormat(enum.StrEnum):
    """``--output``: rich tables for people (default) or one JSON document on stdout for programs."""

    TABLE = "table"
    JSON = "json"


OutputOption = Annotated[
    OutputFormat,
    typer.Option(
        "--output",
        case_sensitive=False,
        help="table (default) or json: one JSON document of what the verb prints, on stdout",
    ),
]


def emit(output: OutputFormat, document: object, render: Callable[[Console], None]) -> None:
    """Print ``document`` (made JSON-able by :func:`jsonable`) as JSON, or call ``render`` with the stdout console."""
    if output is OutputFormat.JSON:
        typer.echo(json.dumps(jsonable(document), ensure_ascii=False, indent=2))
    else:
        render(out_console())


def emit_updated(output: OutputFormat, what: str, addrs: list[str], config: object, config_key: str) -> None:
    """The report of updateTopic / updateSubGroup: ``create <what> to <addr> success.`` per broker then the config
    (UpdateTopicSubCommand's lines); JSON ``{"updated": [addrs], <config_key>: config}``."""

    def render(out: Console) -> None:
        for addr in addrs:
            out.print(f"create {what} to {addr} success.")
        out.print(str(config))

    emit(output, {"updated": addrs, config_key: config}, render)


def jsonable(value: object) -> object:
    """``value`` as JSON types: dataclasses -> objects of their fields, enums -> names, MessageExt ->
    :func:`message_json`, bytes -> base64 text, mappings (str keys) and sequences -> objects and arrays."""
    if isinstance(value, MessageExt):
        return message_json(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [jsonable(v) for v in value]
    return value


def message_json(m: MessageExt, charset: str = "utf-8") -> dict[str, object]:
    """One message for ``--output json``: ids, placement, times (ms), hosts, properties, the body decoded with
    ``charset`` (undecodable bytes replaced) and, losslessly, ``body_base64``."""
    return {
        "msg_id": m.uniq_key or m.offset_msg_id,
        "offset_msg_id": m.offset_msg_id,
        "topic": m.topic,
        "tags": m.tags or "",
        "keys": m.keys,
        "queue_id": m.queue_id,
        "queue_offset": m.queue_offset,
        "commit_log_offset": m.commit_log_offset,
        "reconsume_times": m.reconsume_times,
        "born_timestamp_ms": m.born_timestamp_ms,
        "store_timestamp_ms": m.store_timestamp_ms,
        "born_host": f"{m.born_host[0]}:{m.born_host[1]}",
        "store_host": f"{m.store_host[0]}:{m.store_host[1]}",
        "sys_flag": m.sys_flag,
        "properties": dict(m.properties),
        "body": m.body.decode(charset, errors="replace"),
        "body_base64": base64.b64encode(m.body).decode("ascii"),
    }


# -------------------------------------------------------------------------------------------------------- time


def age(timestamp_ms: int) -> str:
    """Local ``yyyy-MM-dd HH:mm:ss (Ns ago)``, ``-`` for 0."""
    if timestamp_ms <= 0:
        return "-"
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(timestamp_ms / 1000))
    return f"{stamp} ({max(0, int(time.time() * 1000) - timestamp_ms) // 1000}s ago)"


def stamp_ms(timestamp_ms: int) -> str:
    """UtilAll#timeMillisToHumanString2: local ``yyyy-MM-dd HH:mm:ss,SSS``."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(timestamp_ms / 1000)) + f",{timestamp_ms % 1000:03d}"


def stamp_s(timestamp_ms: int) -> str:
    """UtilAll.YYYY_MM_DD_HH_MM_SS (local ``yyyy-MM-dd HH:mm:ss``); ``N/A`` for 0 (ConsumerProgressSubCommand)."""
    if timestamp_ms <= 0:
        return "N/A"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(timestamp_ms / 1000))


def parse_timestamp_ms(value: str) -> int:
    """``now`` (current time), a number of ms since the epoch, or local ``yyyy-MM-dd#HH:mm:ss:SSS`` -> ms since
    the epoch. Mirrors ResetOffsetByTimeCommand / PrintMessageSubCommand#timestampFormat.

    Raises typer.BadParameter (a usage error: exit 2) for anything else or a negative number."""
    text = value.strip()
    if text == "now":
        return int(time.time() * 1000)
    if text.lstrip("-").isdigit():
        number = int(text)
        if number < 0:
            raise typer.BadParameter(f"timestamp must be >= 0: {text}")
        return number
    stamp, _, millis = text.rpartition(":")
    try:
        if len(millis) != 3 or not millis.isdigit():
            raise ValueError(text)
        parsed = datetime.strptime(stamp, TIMESTAMP_FORMAT)
    except ValueError:
        raise typer.BadParameter(f"'{text}' is not {TIMESTAMP_HELP}") from None
    return int(parsed.timestamp()) * 1000 + int(millis)
