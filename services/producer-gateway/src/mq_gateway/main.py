"""``mqgateway``: run the producer gateway until SIGTERM/SIGINT.

Settings come from ``MQ_GATEWAY_*`` environment variables and the optional YAML named by
``MQ_GATEWAY_CONFIG_FILE``. Logs one JSON line ``{"event": "started", "port": <port>, ...}`` on stderr once
serving. On SIGTERM/SIGINT it stops taking calls, lets in-flight sends finish (shutdown_grace_ms), shuts the
producer down and exits 0; exit code 2 when the settings are invalid or the port cannot be bound.
"""

from __future__ import annotations

import asyncio
import sys

from mq_common.errors import MQError
from mq_common.grpc_server import install_signal_handlers
from mq_common.logging import configure_logging, get_logger
from pydantic import ValidationError

from mq_gateway.controller import GatewayController
from mq_gateway.settings import GatewaySettings


async def serve(settings: GatewaySettings) -> None:
    """Start the controller, log ``started``, wait for a signal, stop cleanly."""
    log = get_logger("mq_gateway.main")
    controller = GatewayController(settings)
    port = await controller.start()
    done = install_signal_handlers(controller.stop)
    log.info(
        "started",
        port=port,
        host=settings.listen_host,
        namesrv_addr=settings.namesrv_addr,
        producer_group=settings.producer_group,
        send_msg_timeout_ms=settings.send_msg_timeout_ms,
        retry_times_when_send_failed=settings.retry_times_when_send_failed,
        send_latency_fault_enable=settings.send_latency_fault_enable,
    )
    await done.wait()
    log.info("stopped", port=port)


def main() -> None:
    """Console script entry point."""
    try:
        settings = GatewaySettings()
    except (ValidationError, ValueError, OSError) as exc:
        print(f"mqgateway: invalid settings: {exc}", file=sys.stderr)
        sys.exit(2)
    configure_logging(settings.log_level, json=settings.log_json, service="mqgateway")
    try:
        asyncio.run(serve(settings))
    except (RuntimeError, MQError) as exc:
        get_logger("mq_gateway.main").error("start_failed", error=str(exc))
        sys.exit(2)


if __name__ == "__main__":
    main()
