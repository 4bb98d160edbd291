"""``mqbroker``: run one broker until SIGTERM/SIGINT.

Mirrors org.apache.rocketmq.broker.BrokerStartup. Settings come from ``MQ_BROKER_*`` environment variables and
the optional YAML named by ``MQ_BROKER_CONFIG_FILE``. Logs one JSON line ``{"event": "started", "port": <port>,
...}`` on stderr once serving; exit code 0 after a clean stop (store flushed, ``abort`` removed), 2 when the
settings are invalid, the port cannot be bound or the store cannot start.
"""

from __future__ import annotations

import asyncio
import sys

from mq_common.grpc_server import install_signal_handlers
from mq_common.logging import configure_logging, get_logger
from pydantic import ValidationError

from mq_broker.controller import BrokerController
from mq_broker.settings import BrokerSettings


async def serve(settings: BrokerSettings) -> None:
    """Start the controller, log ``started``, wait for a signal, stop cleanly."""
    log = get_logger("mq_broker.main")
    controller = BrokerController(settings)
    port = await controller.start()
    done = install_signal_handlers(controller.stop)
    store = controller.store
    log.info(
        "started",
        port=port,
        host=settings.listen_host,
        broker_name=settings.broker_name,
        broker_addr=controller.broker_addr,
        cluster_name=settings.cluster_name,
        namesrv_addr=settings.namesrv_addr,
        store_path_root_dir=str(settings.store_path_root_dir),
        flush_disk_type=str(settings.flush_disk_type),
        last_exit_ok=store.last_exit_ok if store is not None else None,
    )
    await done.wait()
    log.info("stopped", port=port)


def main() -> None:
    """Console script entry point."""
    try:
        settings = BrokerSettings()
    except (ValidationError, ValueError, OSError) as exc:
        print(f"mqbroker: invalid settings: {exc}", file=sys.stderr)
        sys.exit(2)
    configure_logging(settings.log_level, json=settings.log_json, service="mqbroker")
    try:
        asyncio.run(serve(settings))
    except RuntimeError as exc:
        get_logger("mq_broker.main").error("start_failed", error=str(exc))
        sys.exit(2)


if __name__ == "__main__":
    main()
