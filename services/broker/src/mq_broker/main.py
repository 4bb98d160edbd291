"""``mqbroker``: run one broker until SIGTERM/SIGINT.

Mirrors org.apache.rocketmq.broker.BrokerStartup. Settings come from ``MQ_BROKER_*`` environment variables and
the optional YAML named by ``MQ_BROKER_CONFIG_FILE``. Logs one JSON line ``{"event": "started", "port": <port>,
...}`` on stderr once serving; exit code 0 after a clean stop (store flushed, ``abort`` removed), 2 when the
settings are invalid, the port cannot be bound or the store cannot start.
"""

from __future__ import annotations

from mq_common.service_main import run_service

from mq_broker.controller import BrokerController
from mq_broker.settings import BrokerSettings


def _describe(settings: BrokerSettings, controller: BrokerController) -> dict[str, object]:
    store = controller.store
    return {
        "broker_name": settings.broker_name,
        "broker_addr": controller.broker_addr,
        "cluster_name": settings.cluster_name,
        "namesrv_addr": settings.namesrv_addr,
        "store_path_root_dir": str(settings.store_path_root_dir),
        "flush_disk_type": str(settings.flush_disk_type),
        "metrics_port": controller.metrics.port if controller.metrics is not None else 0,
        "last_exit_ok": store.last_exit_ok if store is not None else None,
    }


def main() -> None:
    """Console script entry point."""
    run_service("mqbroker", BrokerSettings, BrokerController, _describe, description=__doc__ or "")


if __name__ == "__main__":
    main()
