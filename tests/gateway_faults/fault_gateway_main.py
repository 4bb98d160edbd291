"""``python -m fault_gateway_main``: the stock gateway (mq_gateway.main) with RocketMQ 5.x's latency tables.

The gateway's settings select only 4.x's MQFaultStrategy tables (a failure isolates a broker for 600 s), too
long to watch traffic come back in a test. This wrapper, started by the SIGSTOP test as the gateway module
(ClusterSpec.gateway_module, PYTHONPATH = this folder), installs 5.x's values before the gateway starts:
latencyMax {50, 100, 550, 1800, 3000, 5000, 15000}, notAvailableDuration {0, 0, 2000, 5000, 6000, 10000,
30000} and a failure counted as 10,000 ms (MQFaultStrategy#updateFaultItem in 5.x), i.e. 10 s out.
Replace it with the gateway's own setting once the 5.x tables are selectable there.
"""

from __future__ import annotations

from typing import Any, Final

from mq_client.producer import fault_strategy

LATENCY_MAX_5X_MS: Final = (50, 100, 550, 1800, 3000, 5000, 15000)
NOT_AVAILABLE_DURATION_5X_MS: Final = (0, 0, 2000, 5000, 6000, 10000, 30000)
ISOLATION_LATENCY_5X_MS: Final = 10_000
FAILURE_ISOLATION_5X_MS: Final = 10_000  # computeNotAvailableDuration(10000) with the 5.x tables

_stock_init = fault_strategy.MQFaultStrategy.__init__


def _init_with_5x_tables(self: fault_strategy.MQFaultStrategy, *args: Any, **kwargs: Any) -> None:
    _stock_init(self, *args, **kwargs)
    assert hasattr(self, "latency_max_ms")
    assert hasattr(self, "not_available_duration_ms")
    self.latency_max_ms = LATENCY_MAX_5X_MS
    self.not_available_duration_ms = NOT_AVAILABLE_DURATION_5X_MS


def install_5x_tables() -> None:
    assert hasattr(fault_strategy, "ISOLATION_LATENCY_MS")
    fault_strategy.MQFaultStrategy.__init__ = _init_with_5x_tables  # type: ignore[method-assign]
    fault_strategy.ISOLATION_LATENCY_MS = ISOLATION_LATENCY_5X_MS  # type: ignore[misc]


if __name__ == "__main__":
    install_5x_tables()
    from mq_gateway.main import main

    main()
