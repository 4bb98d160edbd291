"""``mqnamesrv``: run the name server until SIGTERM/SIGINT.

Mirrors org.apache.rocketmq.namesrv.NamesrvStartup. Settings come from ``MQ_NAMESRV_*`` environment
variables and the optional YAML named by ``MQ_NAMESRV_CONFIG_FILE``. Logs one JSON line
``{"event": "started", "port": <port>, ...}`` on stderr once serving; exit code 0 after a clean stop,
2 when the settings are invalid or the port cannot be bound.
"""

from __future__ import annotations

import asyncio
import sys

from mq_common.grpc_server import install_signal_handlers
from mq_common.logging import configure_logging, get_logger
from pydantic import ValidationError

from mq_namesrv.controller import NamesrvController
from mq_namesrv.settings import NamesrvSettings


async def serve(settings: NamesrvSettings) -> None:
    """Start the controller, log ``started``, wait for a signal, stop cleanly."""
    log = get_logger("mq_namesrv.main")
    controller = NamesrvController(settings)
    port = await controller.start()
    done = install_signal_handlers(controller.stop)
    log.info(
        "started",
        port=port,
        host=settings.listen_host,
        scan_not_active_broker_interval_ms=settings.scan_not_active_broker_interval_ms,
        broker_channel_expired_ms=settings.broker_channel_expired_ms,
    )
    await done.wait()
    log.info("stopped", port=port)


def main() -> None:
    """Console script entry point."""
    try:
        settings = NamesrvSettings()
    except (ValidationError, ValueError, OSError) as exc:
        print(f"mqnamesrv: invalid settings: {exc}", file=sys.stderr)
        sys.exit(2)
    configure_logging(settings.log_level, json=settings.log_json, service="mqnamesrv")
    try:
        asyncio.run(serve(settings))
    except RuntimeError as exc:
        get_logger("mq_namesrv.main").error("start_failed", error=str(exc))
        sys.exit(2)


if __name__ == "__main__":
    main()
