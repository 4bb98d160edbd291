"""Command-line front of every console script: ``--help`` lists a service's settings, ``--version`` its version.

The settings table is built from the pydantic-settings model (field name, environment variable, default,
description), so it never drifts from the model. ``--help`` and ``--version`` print to stdout and exit 0 before
any settings are read, any port is bound or any folder is created; an unknown argument is a usage error (exit 2,
argparse's). Main thread, before the service's asyncio loop starts.

Mirrors the ``-h`` / ``-c`` options of org.apache.rocketmq.broker.BrokerStartup and NamesrvStartup (RocketMQ
prints its own properties with ``-p``; here the environment and the YAML file carry them).
"""

from __future__ import annotations

import argparse
import enum
import json
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, entry_points
from typing import Final

from pydantic.fields import FieldInfo

from mq_common.settings import ServiceSettings

CONFIG_FILE_SUFFIX: Final = "CONFIG_FILE"
CONSOLE_SCRIPTS_GROUP: Final = "console_scripts"


def script_version(script: str) -> str:
    """``"<script> <version>"`` (``"mqbroker 0.1.0"``), the version of the installed distribution that declares the
    console script ``script``.

    Raises PackageNotFoundError when no installed distribution declares it (run from a source tree that was not
    installed).
    """
    for point in entry_points(group=CONSOLE_SCRIPTS_GROUP, name=script):
        if point.dist is not None:
            return f"{script} {point.dist.version}"
    raise PackageNotFoundError(f"no installed distribution declares the console script {script!r}")


def env_prefix(settings_cls: type[ServiceSettings]) -> str:
    """The model's environment prefix, e.g. ``"MQ_BROKER_"``."""
    return str(settings_cls.model_config.get("env_prefix", ""))


def _format_default(field: FieldInfo) -> str:
    value = field.get_default(call_default_factory=True)
    if isinstance(value, enum.Enum):
        value = value.value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value) or "(empty)"
    if isinstance(value, dict):
        return json.dumps(value)
    text = str(value)
    return text if text else "(empty)"


def settings_help(settings_cls: type[ServiceSettings]) -> str:
    """The settings part of ``--help``: one entry per model field (environment variable, default, description),
    in declaration order, then the YAML file option."""
    prefix = env_prefix(settings_cls)
    lines = [f"settings (environment variables; names are case-insensitive, prefix {prefix}):"]
    for name, field in settings_cls.model_fields.items():
        lines.append(f"  {prefix}{name.upper()}  (default: {_format_default(field)})")
        lines.append(f"      {field.description or name}")
    lines += [
        "",
        "config file:",
        f"  {prefix}{CONFIG_FILE_SUFFIX}  (default: unset)",
        "      A YAML mapping of field names (the variable names above without the prefix, in lower case, e.g.",
        f"      {next(iter(settings_cls.model_fields), 'listen_host')}) to values. The environment wins over the file.",
    ]
    return "\n".join(lines)


class _VersionAction(argparse.Action):
    """``--version``: looks the version up only when asked (argparse's own action needs it when the parser is
    built, and a service started from an uninstalled tree must still start)."""

    def __init__(self, option_strings: Sequence[str], dest: str, help: str | None = None) -> None:
        super().__init__(option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, nargs=0, help=help)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[object] | None,
        option_string: str | None = None,
    ) -> None:
        print(script_version(parser.prog))
        parser.exit()


def service_arg_parser(script: str, settings_cls: type[ServiceSettings], description: str) -> argparse.ArgumentParser:
    """The parser of a service's console script: no positional arguments, only ``--help`` and ``--version``.

    ``description`` (the main module's docstring) heads the help, reST double backquotes removed."""
    parser = argparse.ArgumentParser(
        prog=script,
        description=description.replace("``", ""),
        epilog=settings_help(settings_cls),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action=_VersionAction, help="print the version and exit")
    return parser


def parse_service_args(
    script: str, settings_cls: type[ServiceSettings], description: str, argv: Sequence[str] | None = None
) -> None:
    """Parse ``argv`` (default ``sys.argv[1:]``). Returns when the service should start.

    Raises SystemExit: 0 after printing ``--help`` or ``--version``; 2 with a usage message on stderr for any
    other argument.
    """
    service_arg_parser(script, settings_cls, description).parse_args(argv)
