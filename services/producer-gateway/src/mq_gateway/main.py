"""``mqgateway``: run the producer gateway until SIGTERM/SIGINT.

Settings come from ``MQ_GATEWAY_*`` environment variables and the optional YAML named by
``MQ_GATEWAY_CONFIG_FILE``. Logs one JSON line ``{"event": "started", "port": <port>, ...}`` on stderr once
serving. On SIGTERM/SIGINT it stops taking calls, lets in-flight sends finish (shutdown_grace_ms), shuts the
producer down and exits 0; exit code 2 when the settings are invalid or the port cannot be bound.
"""

from __future__ import annotations

import asyncio

import uvloop
from mq_common.service_main import run_service

from mq_gateway.controller import GatewayController
from mq_gateway.settings import GatewaySettings


def _describe(settings: GatewaySettings, controller: GatewayController) -> dict[str, object]:
    return {
        "metrics_port": controller.metrics.port if controller.metrics is not None else 0,
        "namesrv_addr": settings.namesrv_addr,
        "producer_group": settings.producer_group,
        "send_msg_timeout_ms": settings.send_msg_timeout_ms,
        "retry_times_when_send_failed": settings.retry_times_when_send_failed,
        "send_latency_fault_enable": settings.send_latency_fault_enable,
        "latency_fault_tables": settings.latency_fault_tables,
        "coalesce_linger_ms": settings.coalesce_linger_ms,
        "max_in_flight_messages": settings.max_in_flight_messages,
        "event_loop": type(asyncio.get_running_loop()).__module__,
    }


def main() -> None:
    """Console script entry point."""
    run_service(
        "mqgateway",
        GatewaySettings,
        GatewayController,
        _describe,
        description=__doc__ or "",
        loop_factory=uvloop.new_event_loop,
    )


if __name__ == "__main__":
    main()
