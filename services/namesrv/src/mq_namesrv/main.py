"""``mqnamesrv``: run the name server until SIGTERM/SIGINT.

Mirrors org.apache.rocketmq.namesrv.NamesrvStartup. Settings come from ``MQ_NAMESRV_*`` environment
variables and the optional YAML named by ``MQ_NAMESRV_CONFIG_FILE``. Logs one JSON line
``{"event": "started", "port": <port>, ...}`` on stderr once serving; exit code 0 after a clean stop,
2 when the settings are invalid or the port cannot be bound.
"""

from __future__ import annotations

from mq_common.service_main import run_service

from mq_namesrv.controller import NamesrvController
from mq_namesrv.settings import NamesrvSettings


def _describe(settings: NamesrvSettings, controller: NamesrvController) -> dict[str, object]:
    return {
        "metrics_port": controller.metrics.port if controller.metrics is not None else 0,
        "scan_not_active_broker_interval_ms": settings.scan_not_active_broker_interval_ms,
        "broker_channel_expired_ms": settings.broker_channel_expired_ms,
    }


def main() -> None:
    """Console script entry point."""
    run_service("mqnamesrv", NamesrvSettings, NamesrvController, _describe, description=__doc__ or "")


if __name__ == "__main__":
    main()
