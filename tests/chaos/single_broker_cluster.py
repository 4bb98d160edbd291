"""A name server and one ``mqbroker`` (``broker-a``, on a fixed port and store) for the transaction and FIFO kill
rounds (test_transaction_kill.py, test_fifo_kill.py): what the project's clients need (routes from the name server),
with the broker SIGKILLed and restarted in place, and no gateway (the rounds use no v2 client).

Built from mq_local's pieces (the spec of spec_for_tests, ManagedProcess, the readiness checks), so the processes
are started exactly as ``mqlocal`` starts them. Blocking calls: run them with asyncio.to_thread from a test's loop.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Final, Self

from mq_local.cluster import BROKER_MODULE, NAMESRV_MODULE, ClusterSpec, broker_env, namesrv_env
from mq_local.processes import ManagedProcess
from mq_local.readiness import wait_registered, wait_serving
from mq_local.state import prepare_data_dir
from mq_local.testing import spec_for_tests

BROKER_NAME: Final = "broker-a"
START_WAIT_S: Final = 60.0
KILL_WAIT_S: Final = 10.0


class SingleBrokerCluster:
    """Name server + ``broker-a`` under ``data_dir``; ``broker_settings`` are MQ_BROKER_* overrides. Use as a
    context manager (starts both; stops both, SIGTERM then SIGKILL, by PID)."""

    def __init__(self, data_dir: Path, broker_settings: Mapping[str, str]) -> None:
        self.spec: ClusterSpec = spec_for_tests(data_dir, broker_groups=1, broker_env=broker_settings)
        self.namesrv = ManagedProcess(
            "namesrv", NAMESRV_MODULE, namesrv_env(self.spec), self.spec.ports.namesrv_port, data_dir / "namesrv.log"
        )
        self.broker = ManagedProcess(
            BROKER_NAME, BROKER_MODULE, broker_env(self.spec, 0), self.spec.ports.broker_ports[0],
            data_dir / f"{BROKER_NAME}.log",
        )  # fmt: skip

    @property
    def namesrv_addr(self) -> str:
        return self.spec.ports.namesrv_addr

    @property
    def broker_addr(self) -> str:
        return f"127.0.0.1:{self.broker.port}"

    def __enter__(self) -> Self:
        prepare_data_dir(self.spec.data_dir, fresh=True)
        try:
            self._start(self.namesrv)
            self.start_broker()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def stop(self) -> None:
        self.broker.stop()
        self.namesrv.stop()

    def kill_broker(self) -> None:
        """SIGKILL the broker by PID and wait for its exit."""
        self.broker.send_signal(signal.SIGKILL)
        assert self.broker.wait_exit(KILL_WAIT_S), "broker-a did not exit after SIGKILL"

    def start_broker(self) -> None:
        """(Re)start the broker on its port and store; return once SERVING and registered again. Raises
        AssertionError (with the log tail) when it is not within START_WAIT_S."""
        since_ms = int(time.time() * 1000)
        self._start(self.broker)
        deadline = time.monotonic() + START_WAIT_S
        registered = wait_registered(
            self.namesrv_addr, {BROKER_NAME: self.broker_addr}, deadline, self.broker.running, since_ms
        )
        assert registered, f"broker-a not registered: {self.broker.log_tail()}"

    def _start(self, proc: ManagedProcess) -> None:
        proc.start()
        addr = f"127.0.0.1:{proc.port}"
        assert wait_serving(addr, time.monotonic() + START_WAIT_S, proc.running), (
            f"{proc.name} not SERVING on {addr}: {proc.log_tail()}"
        )
