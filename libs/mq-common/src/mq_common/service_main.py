"""The console-script skeleton every service shares: settings, logging, serve until a signal, exit codes.

The command line is read first (mq_common.service_cli): ``--help`` and ``--version`` print and exit 0 before
anything starts. glibc's malloc is tuned next (mq_common.malloc_tuning), and the open-files limit raised to the
hard limit (mq_common.resource_limits). Exit codes: 0 after a clean stop; 2 for
an unknown argument, invalid settings, or a controller that cannot start (port in use, store locked, ...). Logs
``{"event": "started", "port": <port>, "malloc_tuned": <bool>, ...}`` once serving and ``stopped`` after the
controller's stop finished.
Runs the service's one asyncio loop on the main thread.
"""

from __future__ import annotations

import asyncio
import gc
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Final, Protocol, TypeVar

from pydantic import ValidationError

from mq_common.errors import MQError
from mq_common.grpc_server import install_signal_handlers
from mq_common.logging import configure_logging, get_logger
from mq_common.malloc_tuning import tune_malloc
from mq_common.resource_limits import raise_open_files_limit
from mq_common.service_cli import parse_service_args
from mq_common.settings import ServiceSettings


class Controller(Protocol):
    """What a service's controller offers: start (returns the bound port) and a clean stop."""

    async def start(self) -> int: ...

    async def stop(self) -> None: ...


# Young-generation threshold while serving (CPython's default is 700): a request path allocates many short-lived
# objects, and fewer, slightly larger young collections cost less in total and in tail latency.
GC_GEN0_THRESHOLD: Final = 10_000


def freeze_startup_heap() -> None:
    """After start-up: collect once, move every surviving object to the permanent generation (gc.freeze), so
    later full collections do not walk the loaded modules, settings and stores again; raise the young threshold.
    Full collections were the longest event-loop stalls under a steady send load. Event loop, once."""
    gc.collect()
    gc.freeze()
    _gen0, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(GC_GEN0_THRESHOLD, gen1, gen2)


S = TypeVar("S", bound=ServiceSettings)
C = TypeVar("C", bound=Controller)


async def _serve(
    script: str,
    settings: S,
    make_controller: Callable[[S], C],
    describe: Callable[[S, C], Mapping[str, object]],
    malloc_tuned: bool,
) -> None:
    log = get_logger(f"{script}.main")
    controller = make_controller(settings)
    port = await controller.start()
    freeze_startup_heap()
    done = install_signal_handlers(controller.stop)
    log.info(
        "started", port=port, host=settings.listen_host, malloc_tuned=malloc_tuned, **describe(settings, controller)
    )
    await done.wait()
    log.info("stopped", port=port)


def run_service(
    script: str,
    settings_cls: type[S],
    make_controller: Callable[[S], C],
    describe: Callable[[S, C], Mapping[str, object]],
    *,
    description: str,
    argv: Sequence[str] | None = None,
    loop_factory: Callable[[], asyncio.AbstractEventLoop] | None = None,
) -> None:
    """Run ``script`` (``mqbroker``, ...) until SIGTERM/SIGINT; exits the process with 2 on a start failure.

    ``argv`` (default ``sys.argv[1:]``) is parsed first (mq_common.service_cli): ``--help`` (``description``
    and every field of ``settings_cls``) and ``--version`` print and raise SystemExit(0) before anything starts;
    another argument raises SystemExit(2). ``describe`` gives the extra fields of the ``started`` log line.
    ``loop_factory`` makes the event loop (default: asyncio's; the gateway uses uvloop's).
    """
    parse_service_args(script, settings_cls, description, argv)
    try:
        settings = settings_cls()
    except (ValidationError, ValueError, OSError) as exc:
        print(f"{script}: invalid settings: {exc}", file=sys.stderr)
        sys.exit(2)
    configure_logging(settings.log_level, json=settings.log_json, service=script)
    malloc_tuned = tune_malloc()
    raise_open_files_limit()
    try:
        with asyncio.Runner(loop_factory=loop_factory) as runner:
            runner.run(_serve(script, settings, make_controller, describe, malloc_tuned))
    except (RuntimeError, MQError, OSError) as exc:
        get_logger(f"{script}.main").error("start_failed", error=str(exc))
        sys.exit(2)
