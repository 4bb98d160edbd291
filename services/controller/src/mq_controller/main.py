"""``mqcontroller``: run the controller until SIGTERM/SIGINT.

Mirrors org.apache.rocketmq.controller.ControllerStartup. Settings come from ``MQ_CONTROLLER_*`` environment
variables and the optional YAML named by ``MQ_CONTROLLER_CONFIG_FILE``; the state lives in the etcd of
``MQ_CONTROLLER_ETCD_ENDPOINTS``. Logs one JSON line ``{"event": "started", "port": <port>, ...}`` on stderr once
serving; exit code 0 after a clean stop, 2 when the settings are invalid, the port cannot be bound or etcd cannot be
reached.
"""

from __future__ import annotations

from mq_common.service_main import run_service

from mq_controller.service import ControllerService
from mq_controller.settings import ControllerSettings


def _describe(settings: ControllerSettings, service: ControllerService) -> dict[str, object]:
    return {
        "metrics_port": service.metrics.port if service.metrics is not None else 0,
        "etcd_endpoints": list(settings.etcd_endpoint_list),
        "etcd_tls": settings.etcd_tls,
        "broker_heartbeat_timeout_ms": settings.broker_heartbeat_timeout_ms,
        "lease_ttl_s": settings.lease_ttl_s,
    }


def main() -> None:
    """Console script entry point."""
    run_service("mqcontroller", ControllerSettings, ControllerService, _describe, description=__doc__ or "")


if __name__ == "__main__":
    main()
