"""The ``--version`` option of the typer console scripts (``mqadmin``, ``mqlocal``).

Eager: it prints ``"<script> <version>"`` (mq_common.service_cli.script_version, the installed distribution's
metadata) and exits 0 before any sub command is required or run. Main thread, while parsing.
"""

from __future__ import annotations

from collections.abc import Callable

import typer
from mq_common.service_cli import script_version
from typer.models import OptionInfo


def _print_version(script: str) -> Callable[[bool], None]:
    def callback(value: bool) -> None:
        if value:
            typer.echo(script_version(script))
            raise typer.Exit

    return callback


def version_option(script: str) -> OptionInfo:
    """``--version`` for ``script``; use as ``version: Annotated[bool, version_option("mqadmin")] = False``.

    Raises typer.Exit (exit 0) once printed; PackageNotFoundError when ``script`` is not installed.
    """
    option: OptionInfo = typer.Option(
        "--version", callback=_print_version(script), is_eager=True, help="Print the version and exit."
    )
    return option
