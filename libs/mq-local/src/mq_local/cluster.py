"""LocalCluster: one name server, N broker groups and one gateway as real processes on 127.0.0.1.

Each service runs as ``sys.executable -m <package>.main`` in its own process group, configured only by
environment variables (``MQ_NAMESRV_*``, ``MQ_BROKER_*``, ``MQ_GATEWAY_*``), with stdout+stderr in a log
file of the data folder (layout: :mod:`mq_local.state`). Start-up is bounded: each service must answer
grpc.health.v1 SERVING within ``start_wait_s`` and the name server must list every broker group, else
:class:`ClusterStartError` names the log file and shows its tail, and everything started is stopped.

Mirrors RocketMQ's local quick start (``bin/mqnamesrv`` then ``bin/mqbroker -n 127.0.0.1:9876`` per broker
group, as in the 2m-noslave sample configs) plus the 5.x proxy. Used from one thread (the test's or the
CLI's); not thread-safe.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Final, Literal

from mq_common.auth.settings import Credentials
from mq_common.extensions import NO_EXTENSIONS_ENV
from mq_common.grpc_front import GRPC_SERVER_ENV_SUFFIX
from mq_common.tls import TlsClientAuth, TlsClientConfig

from mq_local.auth_files import LocalAuthFiles
from mq_local.etcd import LocalEtcd
from mq_local.ports import LOCAL_HOST, PortLayout, broker_name_of, free_port, port_is_free
from mq_local.processes import STOP_GRACE_S, ManagedProcess, ProcessStartError
from mq_local.readiness import missing_brokers, registered_brokers, run_blocking, wait_registered, wait_serving
from mq_local.state import ClusterState, prepare_data_dir, remove_state, write_state
from mq_local.tls_files import BROKER_IDENTITY, LocalTlsFiles

NAMESRV_MODULE: Final = "mq_namesrv.main"
BROKER_MODULE: Final = "mq_broker.main"
GATEWAY_MODULE: Final = "mq_gateway.main"
CONTROLLER_MODULE: Final = "mq_controller.main"
DEFAULT_CONTROLLER_PORT: Final = 9878
DEFAULT_START_WAIT_S: Final = 60.0
FlushDiskType = Literal["SYNC_FLUSH", "ASYNC_FLUSH"]


class ClusterStartError(ProcessStartError):
    """A service did not become ready in time (or exited); the message names its log file."""


@dataclass(frozen=True, slots=True)
class ClusterSpec:
    """What to start. ``ports.broker_ports`` decides the number of broker groups (broker-a, broker-b, ...).

    ``broker_env`` / ``gateway_env`` / ``namesrv_env`` add or override service settings (e.g. a small
    ``MQ_BROKER_MAPPED_FILE_SIZE_COMMIT_LOG_BYTES`` for tests); ``common_env`` goes to every service.
    ``gateway_module`` is the module run as the gateway (tests may wrap ``mq_gateway.main``).
    ``metrics_ports`` serves Prometheus ``/metrics`` of a service on 127.0.0.1: keys ``"namesrv"``, a broker
    name (``"broker-a"``) or ``"gateway"``; a service not named keeps metrics off.
    ``tls`` makes a local CA and certificates (mq_local.tls_files) and starts every service with TLS: mutual
    TLS on the name server (only ``broker.pyrocketmq`` may register) and brokers, TLS without client
    certificates on the gateway; the cluster's own readiness checks present the ``admin`` certificate.
    ``auth`` turns authentication and authorisation on for brokers and the gateway, with a generated init super
    user and inner credentials in ``<data>/auth`` (mq_local.auth_files); ``admin_credentials`` signs admin calls.
    ``controller`` also starts an etcd of ``etcd_members`` (1 or 3; mq_local.etcd; with ``tls`` its client port takes
    only mutual TLS and the controller dials it with its own certificate) and one controller
    (``mqcontroller`` on ``controller_port``, settings ``controller_env``) before the brokers, and tells the brokers
    its address (MQ_BROKER_CONTROLLER_ADDR, MQ_BROKER_ENABLE_CONTROLLER_MODE).
    ``replicas_per_broker_group`` > 1 starts that many processes per broker name: the master (broker id 0, role
    ``broker_role``: ASYNC_MASTER or SYNC_MASTER) and slaves ``<name>-s1``.. (broker id 1.., role SLAVE, own store
    and ports) that learn the master's HA address from the name server. Every broker's HA port is a free one.
    With ``controller`` the replicas of a group are peers in controller mode instead: ``<name>`` has broker id 1 and
    ``<name>-s<k>`` id k + 1, all with role ``broker_role`` (the one taken when elected); ``<name>`` starts first
    and becomes the first master (start() waits until it is registered as the group's master), the others follow.
    The controller moves the master later: :meth:`LocalCluster.current_master` names the process serving it now.
    ``clean_file_forcibly_enable`` is off by default: local stores share the host's disk with everything else,
    so a host disk above 85 % must not delete what was just stored (above 90 % DISK_FULL still refuses puts).
    """

    data_dir: Path
    ports: PortLayout
    flush_disk_type: FlushDiskType = "SYNC_FLUSH"
    auto_create_topic_enable: bool = False
    clean_file_forcibly_enable: bool = False
    cluster_name: str = "DefaultCluster"
    log_level: str = "INFO"
    start_wait_s: float = DEFAULT_START_WAIT_S
    stop_grace_s: float = STOP_GRACE_S
    common_env: Mapping[str, str] = field(default_factory=dict)
    namesrv_env: Mapping[str, str] = field(default_factory=dict)
    broker_env: Mapping[str, str] = field(default_factory=dict)
    gateway_env: Mapping[str, str] = field(default_factory=dict)
    gateway_module: str = GATEWAY_MODULE
    metrics_ports: Mapping[str, int] = field(default_factory=dict)
    tls: bool = False
    auth: bool = False
    controller: bool = False
    etcd_members: int = 1
    controller_port: int = DEFAULT_CONTROLLER_PORT
    controller_env: Mapping[str, str] = field(default_factory=dict)

    @property
    def controller_addr(self) -> str:
        return f"{LOCAL_HOST}:{self.controller_port}"

    replicas_per_broker_group: int = 1
    broker_role: str = "ASYNC_MASTER"

    @property
    def auth_files(self) -> LocalAuthFiles | None:
        """The cluster's generated credentials when ``auth``, else None."""
        return LocalAuthFiles.of_data_dir(self.data_dir) if self.auth else None

    @property
    def admin_credentials(self) -> Credentials | None:
        """The init super user when ``auth`` (readable once the cluster started), else None."""
        files = self.auth_files
        return None if files is None else files.super_user()

    @property
    def tls_files(self) -> LocalTlsFiles | None:
        """The cluster's PEM files when ``tls``, else None."""
        return LocalTlsFiles.of_data_dir(self.data_dir) if self.tls else None

    @property
    def tls_client(self) -> TlsClientConfig | None:
        """What a client of this cluster needs (the ``admin`` certificate), or None in plaintext."""
        files = self.tls_files
        return None if files is None else files.client_config()

    @property
    def broker_names(self) -> tuple[str, ...]:
        return tuple(broker_name_of(i) for i in range(len(self.ports.broker_ports)))

    def broker_store_dir(self, name: str) -> Path:
        return self.data_dir / name / "store"

    @property
    def slave_names(self) -> tuple[str, ...]:
        """``broker-a-s1``, ... : the slaves of every broker group (none with one replica)."""
        k = range(1, self.replicas_per_broker_group)
        return tuple(f"{name}-s{i}" for name in self.broker_names for i in k)


def inherited_env() -> dict[str, str]:
    """What a started service inherits of this process's environment: everything but the MQ_* settings (a service
    gets only those its spec gives), except MQ_NO_EXTENSIONS, which reaches every service so that
    ``make test-pure`` runs the started processes on their Python paths too, and ``MQ_<SERVICE>_GRPC_SERVER``, so
    that ``make test-other-front`` runs them on the other gRPC front (a spec's own env still wins)."""
    return {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("MQ_") or k == NO_EXTENSIONS_ENV or k.endswith(GRPC_SERVER_ENV_SUFFIX)
    }


def _service_env(
    spec: ClusterSpec, prefix: str, own: Mapping[str, str], extra: Mapping[str, str], service: str
) -> dict[str, str]:
    env = inherited_env()
    env.update(spec.common_env)
    env["PYTHONUNBUFFERED"] = "1"
    env[f"{prefix}LISTEN_HOST"] = LOCAL_HOST
    env[f"{prefix}CLUSTER_NAME"] = spec.cluster_name
    env[f"{prefix}LOG_LEVEL"] = spec.log_level
    if service in spec.metrics_ports:
        env[f"{prefix}METRICS_PORT"] = str(spec.metrics_ports[service])
    files = spec.tls_files
    if files is not None:
        name = "broker" if prefix == "MQ_BROKER_" else service
        auth = TlsClientAuth.OPTIONAL if service == "gateway" else TlsClientAuth.REQUIRE
        env.update(files.service_env(prefix, name, auth))
        if service in ("namesrv", "controller"):
            env[f"{prefix}COMPONENT_IDENTITIES"] = BROKER_IDENTITY
    env.update(own)
    env.update(extra)
    return env


def namesrv_env(spec: ClusterSpec) -> dict[str, str]:
    own = {"MQ_NAMESRV_LISTEN_PORT": str(spec.ports.namesrv_port)}
    return _service_env(spec, "MQ_NAMESRV_", own, spec.namesrv_env, "namesrv")


def broker_env(spec: ClusterSpec, index: int) -> dict[str, str]:
    name = broker_name_of(index)
    own = {
        "MQ_BROKER_BROKER_NAME": name,
        "MQ_BROKER_LISTEN_PORT": str(spec.ports.broker_ports[index]),
        "MQ_BROKER_NAMESRV_ADDR": spec.ports.namesrv_addr,
        "MQ_BROKER_STORE_PATH_ROOT_DIR": str(spec.broker_store_dir(name)),
        "MQ_BROKER_FLUSH_DISK_TYPE": spec.flush_disk_type,
        "MQ_BROKER_AUTO_CREATE_TOPIC_ENABLE": "true" if spec.auto_create_topic_enable else "false",
        "MQ_BROKER_CLEAN_FILE_FORCIBLY_ENABLE": "true" if spec.clean_file_forcibly_enable else "false",
        "MQ_BROKER_HA_LISTEN_PORT": "0",
        "MQ_BROKER_BROKER_ROLE": spec.broker_role,
    }
    if spec.controller:
        own["MQ_BROKER_CONTROLLER_ADDR"] = spec.controller_addr
        own["MQ_BROKER_ENABLE_CONTROLLER_MODE"] = "true"
        own["MQ_BROKER_BROKER_ID"] = "1"  # controller-mode ids start at 1
    return _service_env(spec, "MQ_BROKER_", own, spec.broker_env, name)


def controller_env(spec: ClusterSpec, etcd_endpoints: tuple[str, ...]) -> dict[str, str]:
    own = {
        "MQ_CONTROLLER_LISTEN_PORT": str(spec.controller_port),
        "MQ_CONTROLLER_ETCD_ENDPOINTS": ",".join(etcd_endpoints),
    }
    return _service_env(spec, "MQ_CONTROLLER_", own, spec.controller_env, "controller")


def slave_env(spec: ClusterSpec, slave_name: str, port: int) -> dict[str, str]:
    """A slave ``<broker name>-s<id>``: the master's env with its own id, role, port and store."""
    name, _sep, sid = slave_name.rpartition("-s")
    env = broker_env(spec, spec.broker_names.index(name))
    env.update(
        {
            "MQ_BROKER_BROKER_ID": str(int(sid) + 1) if spec.controller else sid,
            "MQ_BROKER_BROKER_ROLE": spec.broker_role if spec.controller else "SLAVE",
            "MQ_BROKER_LISTEN_PORT": str(port),
            "MQ_BROKER_STORE_PATH_ROOT_DIR": str(spec.broker_store_dir(slave_name)),
        }
    )
    env.pop("MQ_BROKER_METRICS_PORT", None)  # the master's; a slave has its own or none
    if slave_name in spec.metrics_ports:
        env["MQ_BROKER_METRICS_PORT"] = str(spec.metrics_ports[slave_name])
    return env


def _slave_port(master_port: int, slave_id: int) -> int:
    """``master port + 2 * id`` (free next to the master's in RocketMQ's 10-apart layout), else any free port."""
    wanted = master_port + 2 * slave_id
    return wanted if wanted < 65536 and port_is_free(wanted) else free_port()


def gateway_env(spec: ClusterSpec) -> dict[str, str]:
    own = {
        "MQ_GATEWAY_LISTEN_PORT": str(spec.ports.gateway_port),
        "MQ_GATEWAY_NAMESRV_ADDR": spec.ports.namesrv_addr,
    }
    return _service_env(spec, "MQ_GATEWAY_", own, spec.gateway_env, "gateway")


class LocalCluster:
    """Start, inspect and stop a local cluster. Context manager: ``with LocalCluster(spec) as c: ...``.

    ``fresh=True`` deletes the previous run's data folder first (only an mq_local data folder whose
    processes are gone; see :func:`mq_local.state.prepare_data_dir`).
    """

    def __init__(self, spec: ClusterSpec, *, fresh: bool = True) -> None:
        self.spec = spec
        self.fresh = fresh
        log_dir = spec.data_dir
        self.namesrv = ManagedProcess(
            "namesrv", NAMESRV_MODULE, namesrv_env(spec), spec.ports.namesrv_port, log_dir / "namesrv.log"
        )
        self.brokers: dict[str, ManagedProcess] = {
            name: ManagedProcess(
                name, BROKER_MODULE, broker_env(spec, i), spec.ports.broker_ports[i], log_dir / f"{name}.log"
            )
            for i, name in enumerate(spec.broker_names)
        }
        self.slaves: dict[str, ManagedProcess] = {}
        for slave in spec.slave_names:
            master = self.brokers[slave.rpartition("-s")[0]]
            port = _slave_port(master.port, int(slave.rpartition("-s")[2]))
            self.slaves[slave] = ManagedProcess(
                slave, BROKER_MODULE, slave_env(spec, slave, port), port, log_dir / f"{slave}.log"
            )
        self.gateway = ManagedProcess(
            "gateway", spec.gateway_module, gateway_env(spec), spec.ports.gateway_port, log_dir / "gateway.log"
        )
        self.etcd = (
            LocalEtcd(spec.data_dir, spec.etcd_members, spec.start_wait_s, spec.tls_files) if spec.controller else None
        )
        self.controller = (
            ManagedProcess(
                "controller",
                CONTROLLER_MODULE,
                controller_env(spec, self.etcd.endpoints),
                spec.controller_port,
                log_dir / "controller.log",
            )
            if self.etcd is not None
            else None
        )
        self._started_at_ms = 0

    # -- addresses ---------------------------------------------------------------------------------------
    @property
    def namesrv_addr(self) -> str:
        return self.spec.ports.namesrv_addr

    @property
    def gateway_addr(self) -> str:
        return self.spec.ports.gateway_addr

    @property
    def broker_addrs(self) -> dict[str, str]:
        """Broker name -> ``127.0.0.1:port`` of its master."""
        return {name: f"{LOCAL_HOST}:{proc.port}" for name, proc in self.brokers.items()}

    @property
    def slave_addrs(self) -> dict[str, str]:
        """Slave name (``broker-a-s1``) -> ``127.0.0.1:port``."""
        return {name: f"{LOCAL_HOST}:{proc.port}" for name, proc in self.slaves.items()}

    def processes(self) -> list[ManagedProcess]:
        ha = [*(self.etcd.processes.values() if self.etcd is not None else ()), *filter(None, [self.controller])]
        return [self.namesrv, *ha, *self.brokers.values(), *self.slaves.values(), self.gateway]

    # -- lifecycle ---------------------------------------------------------------------------------------
    def start(self) -> LocalCluster:
        """Start name server, brokers (in parallel), gateway; wait for each. Raises ClusterStartError."""
        prepare_data_dir(self.spec.data_dir, fresh=self.fresh)
        if self.spec.tls_files is not None:
            self.spec.tls_files.write()
        self._add_auth_env()
        self._started_at_ms = int(time.time() * 1000)
        try:
            self._start_and_wait([self.namesrv])
            if self.etcd is not None and self.controller is not None:
                self.etcd.start()
                self._start_and_wait([self.controller])
            brokers_started_ms = int(time.time() * 1000)
            self._start_and_wait(list(self.brokers.values()))
            self._wait_brokers_registered(self.brokers, brokers_started_ms)
            self._start_and_wait(list(self.slaves.values()))
            self._start_and_wait([self.gateway])
            self.write_state()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop gateway, brokers, name server: SIGTERM by PID, SIGKILL after ``stop_grace_s``. Idempotent."""
        for proc in (
            self.gateway,
            *self.slaves.values(),
            *self.brokers.values(),
            *filter(None, [self.controller]),
            self.namesrv,
        ):
            proc.stop(self.spec.stop_grace_s)
        if self.etcd is not None:
            self.etcd.stop()
        remove_state(self.spec.data_dir)

    def detach(self) -> ClusterState:
        """Leave the processes running after this Python process exits (``mqlocal up``); returns the state."""
        state = self.state()
        for proc in self.processes():
            proc.detach()
        return state

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # -- faults for tests --------------------------------------------------------------------------------
    def kill_broker(self, name: str, sig: int = signal.SIGKILL, wait_s: float = 10.0) -> int | None:
        """Send ``sig`` to broker ``name`` by PID and wait up to ``wait_s`` for it to exit; returns its status."""
        proc = self._broker_process(name)
        proc.send_signal(sig)
        proc.wait_exit(wait_s)
        self.write_state()
        return proc.exit_code()

    def stop_broker(self, name: str) -> int | None:
        """Clean stop (SIGTERM, SIGKILL after the grace period) of broker ``name``; returns its exit status."""
        status = self._broker_process(name).stop(self.spec.stop_grace_s)
        self.write_state()
        return status

    def start_broker(self, name: str) -> None:
        """(Re)start broker ``name`` (a master or a slave ``<name>-s<id>``) on its port and store; wait until SERVING
        (and, for a master, registered again)."""
        proc = self._broker_process(name)
        assert not proc.running(), f"{name} is running"
        started_ms = int(time.time() * 1000)
        self._start_and_wait([proc])
        if name in self.brokers and not self.spec.controller:  # in controller mode it may come back as a slave
            self._wait_brokers_registered({name: proc}, started_ms)
        self.write_state()

    def group_processes(self, group: str) -> dict[str, str]:
        """Process name -> ``127.0.0.1:port`` of every replica of broker group ``group`` (``broker-a``)."""
        names = [group, *(s for s in self.slaves if s.rpartition("-s")[0] == group)]
        return {n: f"{LOCAL_HOST}:{self._broker_process(n).port}" for n in names}

    def current_master(self, group: str) -> str | None:
        """The process name of the replica the name server lists as ``group``'s master now (None: none listed, or
        an address no running replica has)."""
        listed = run_blocking(lambda: registered_brokers(self.namesrv_addr, tls=self.spec.tls_client), 10.0)
        got = listed.get(group)
        if got is None:
            return None
        for name, addr in self.group_processes(group).items():
            if addr == got[0] and self._broker_process(name).running():
                return name
        return None

    def _broker_process(self, name: str) -> ManagedProcess:
        return self.brokers[name] if name in self.brokers else self.slaves[name]

    # -- state -------------------------------------------------------------------------------------------
    def state(self) -> ClusterState:
        records = tuple(p.record() for p in self.processes() if p.running())
        return ClusterState(
            self.namesrv_addr,
            self.gateway_addr,
            self.broker_addrs,
            records,
            self._started_at_ms,
            self.spec.tls,
            self.spec.auth,
        )

    def write_state(self) -> None:
        write_state(self.spec.data_dir, self.state())

    # -- internals ---------------------------------------------------------------------------------------
    def _add_auth_env(self) -> None:
        """With ``auth``: make the credentials and give the name server, controller, brokers and gateway their auth
        settings (the spec's own env still wins). Their secrets exist only once the data folder is prepared, hence
        here, not in __init__."""
        files = self.spec.auth_files
        if files is None:
            return
        files.write()
        self.namesrv.env.update({**files.service_env("MQ_NAMESRV_", broker=True), **self.spec.namesrv_env})
        for proc in (*self.brokers.values(), *self.slaves.values()):
            proc.env.update({**files.service_env("MQ_BROKER_", broker=True), **self.spec.broker_env})
        self.gateway.env.update({**files.service_env("MQ_GATEWAY_", broker=False), **self.spec.gateway_env})
        if self.controller is not None:
            self.controller.env.update({**files.service_env("MQ_CONTROLLER_", broker=True), **self.spec.controller_env})

    def _start_and_wait(self, procs: list[ManagedProcess]) -> None:
        for proc in procs:
            proc.start()
        deadline = time.monotonic() + self.spec.start_wait_s
        for proc in procs:
            addr = f"{LOCAL_HOST}:{proc.port}"
            if not wait_serving(addr, deadline, proc.running, self.spec.tls_client):
                raise ClusterStartError(self._not_ready_message(proc, f"did not answer grpc.health SERVING on {addr}"))

    def _wait_brokers_registered(self, procs: Mapping[str, ManagedProcess], since_ms: int) -> None:
        expected = {name: f"{LOCAL_HOST}:{proc.port}" for name, proc in procs.items()}
        deadline = time.monotonic() + self.spec.start_wait_s

        def alive() -> bool:
            return self.namesrv.running() and all(p.running() for p in procs.values())

        if wait_registered(self.namesrv_addr, expected, deadline, alive, since_ms, self.spec.tls_client):
            return
        dead = [p for p in (self.namesrv, *procs.values()) if not p.running()]
        if dead:
            raise ClusterStartError(self._not_ready_message(dead[0], "exited while brokers registered"))
        missing = missing_brokers(self.namesrv_addr, list(expected), self.spec.tls_client)
        proc = procs[missing[0]] if missing else self.namesrv
        raise ClusterStartError(
            self._not_ready_message(
                proc, f"name server {self.namesrv_addr} does not list brokers {missing or expected}"
            )
        )

    def _not_ready_message(self, proc: ManagedProcess, what: str) -> str:
        code = proc.exit_code()
        status = "still running" if code is None else f"exited with status {code}"
        return (
            f"{proc.name} ({proc.module}, pid {proc.pid}, {status}) {what} within {self.spec.start_wait_s:.0f} s; "
            f"log: {proc.log_path}\n--- last lines of {proc.log_path} ---\n{proc.log_tail()}"
        )
