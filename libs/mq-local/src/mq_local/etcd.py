"""A local etcd of 1 or 3 members on 127.0.0.1, the controller's state store in tests, ``make up`` and ``make run``.

Each member is Debian's ``etcd`` binary (package etcd-server; ``make etcd`` installs it) on free ports from
:mod:`mq_local.ports`, its data under ``<data dir>/etcd/<member>``, its log in ``<data dir>/etcd-<member>.log``,
started in its own process group and stopped by PID (mq_local.processes). Ready when every member answers
``GET /health`` with ``{"health": "true"}`` (etcd's own health check: it needs a leader and a committed read).
Used from one thread; every wait is bounded.

With ``tls`` (a cluster's :class:`mq_local.tls_files.LocalTlsFiles`) each member serves its client port over
mutual TLS: ``https://`` client URLs, the ``etcd`` certificate (``--cert-file``/``--key-file``), and only a client
certificate of the local CA that names the controller's identity (``controller.pyrocketmq``) gets past the
handshake (``--client-cert-auth``, ``--trusted-ca-file``, ``--client-cert-allowed-hostname``): a broker's or an
admin's certificate of the same CA is refused, so only controllers read or write the replication state. The health
check presents the controller certificate. etcd's HTTP/JSON gateway is off (``--enable-grpc-gateway=false``): the
controllers speak gRPC, and the gateway would dial the client port with the etcd certificate, be refused, and log
its reconnects for ever; ``/health`` is served without it. Peer (Raft) traffic is
mutual TLS as well (``https://`` peer URLs, ``--peer-client-cert-auth``), open only to the etcd certificate
(``--peer-cert-allowed-cn etcd.pyrocketmq``), as the chart runs it. etcd 3.4 (Debian bookworm) has these flags.
"""

from __future__ import annotations

import json
import shutil
import ssl
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from mq_local.ports import LOCAL_HOST, free_port
from mq_local.processes import ManagedProcess, ProcessStartError
from mq_local.tls_files import ETCD_IDENTITY, LocalTlsFiles, identity_name

ETCD_BINARY: Final = "etcd"
HEALTH_CALL_TIMEOUT_S: Final = 2.0
_POLL_S: Final = 0.2
CLUSTER_TOKEN: Final = "pyrocketmq-local"
CLIENT_IDENTITY: Final = "controller"
"""With TLS, the only identity etcd's client port admits (its certificate's ``controller.pyrocketmq`` SAN)."""
MEMBER_NAME_PREFIX: Final = "etcd"


def is_member_name(process_name: str) -> bool:
    """True for the process names LocalEtcd gives its members (``etcd0``, ``etcd1``, ...)."""
    suffix = process_name.removeprefix(MEMBER_NAME_PREFIX)
    return suffix != process_name and suffix.isdigit()


MEMBER_COUNTS: Final = (1, 3)


@dataclass(frozen=True, slots=True)
class EtcdMember:
    """One member's name and ports (client: the v3 gRPC API the controller uses, https with ``tls``; peer: Raft
    traffic)."""

    name: str
    client_port: int
    peer_port: int
    tls: bool = False

    @property
    def client_url(self) -> str:
        return f"{'https' if self.tls else 'http'}://{LOCAL_HOST}:{self.client_port}"

    @property
    def peer_url(self) -> str:
        return f"{'https' if self.tls else 'http'}://{LOCAL_HOST}:{self.peer_port}"

    @property
    def endpoint(self) -> str:
        return f"{LOCAL_HOST}:{self.client_port}"


def etcd_binary() -> str:
    """The path of ``etcd``. Raises ProcessStartError naming ``make etcd`` when it is not installed."""
    found = shutil.which(ETCD_BINARY) or shutil.which(ETCD_BINARY, path="/usr/bin:/usr/sbin")
    if found is None:
        raise ProcessStartError("etcd is not installed: run `make etcd` (Debian package etcd-server)")
    return found


def health_context(tls: LocalTlsFiles | None) -> ssl.SSLContext | None:
    """The TLS context of the health check: trusts the local CA, presents the controller certificate (the one client
    identity the client port admits; None: plaintext). Reads the PEM files (blocking)."""
    if tls is None:
        return None
    context = ssl.create_default_context(cafile=str(tls.ca_file))
    context.load_cert_chain(tls.cert_file(CLIENT_IDENTITY), tls.key_file(CLIENT_IDENTITY))
    return context


def member_healthy(member: EtcdMember, context: ssl.SSLContext | None = None) -> bool:
    """True when the member answers ``/health`` with health "true" within HEALTH_CALL_TIMEOUT_S (over TLS with
    ``context`` for a TLS member)."""
    url = f"{member.client_url}/health"
    try:
        with urllib.request.urlopen(url, timeout=HEALTH_CALL_TIMEOUT_S, context=context) as resp:
            return bool(json.loads(resp.read()).get("health") == "true")
    except (OSError, urllib.error.URLError, ValueError):
        return False


class LocalEtcd:
    """``members`` (1 or 3) etcd processes forming one new cluster. ``start()`` then ``stop()``; raises
    ProcessStartError when not healthy within ``start_wait_s``. ``tls``: serve the client port over mutual TLS with
    these files (they must exist by ``start()``)."""

    def __init__(
        self, data_dir: Path, members: int = 1, start_wait_s: float = 60.0, tls: LocalTlsFiles | None = None
    ) -> None:
        if members not in MEMBER_COUNTS:
            raise ValueError(f"etcd members must be one of {MEMBER_COUNTS}, got {members}")
        ports: list[int] = []
        while len(ports) < 2 * members:
            port = free_port()
            if port not in ports:
                ports.append(port)
        self.tls = tls
        self.members = tuple(
            EtcdMember(f"{MEMBER_NAME_PREFIX}{i}", ports[2 * i], ports[2 * i + 1], tls is not None)
            for i in range(members)
        )
        self.data_dir = data_dir
        self.start_wait_s = start_wait_s
        initial = ",".join(f"{m.name}={m.peer_url}" for m in self.members)
        self.processes = {m.name: self._process(m, initial) for m in self.members}

    def _process(self, member: EtcdMember, initial_cluster: str) -> ManagedProcess:
        argv = [
            "--name", member.name,
            "--data-dir", str(self.data_dir / "etcd" / member.name),
            "--listen-client-urls", member.client_url,
            "--advertise-client-urls", member.client_url,
            "--listen-peer-urls", member.peer_url,
            "--initial-advertise-peer-urls", member.peer_url,
            "--initial-cluster", initial_cluster,
            "--initial-cluster-state", "new",
            "--initial-cluster-token", CLUSTER_TOKEN,
            "--enable-grpc-gateway=false",
        ]  # fmt: skip
        tls = self.tls
        if tls is not None:
            cert, key, ca = str(tls.cert_file(ETCD_IDENTITY)), str(tls.key_file(ETCD_IDENTITY)), str(tls.ca_file)
            argv += [
                "--cert-file", cert, "--key-file", key, "--trusted-ca-file", ca, "--client-cert-auth",
                "--client-cert-allowed-hostname", identity_name(CLIENT_IDENTITY),
                "--peer-cert-file", cert, "--peer-key-file", key, "--peer-trusted-ca-file", ca,
                "--peer-client-cert-auth", "--peer-cert-allowed-cn", identity_name(ETCD_IDENTITY),
            ]  # fmt: skip
        log_path = self.data_dir / f"etcd-{member.name}.log"
        return ManagedProcess(member.name, ETCD_BINARY, {}, member.client_port, log_path, ["etcd", *argv])

    @property
    def endpoints(self) -> tuple[str, ...]:
        """Every member's client API as MQ_CONTROLLER_ETCD_ENDPOINTS takes it (comma-joined): ``host:port``, or
        ``https://host:port`` with TLS."""
        return tuple(m.client_url if m.tls else m.endpoint for m in self.members)

    def start(self) -> LocalEtcd:
        binary = etcd_binary()
        for proc in self.processes.values():
            proc.argv[0] = binary
            proc.env = {"PATH": "/usr/bin:/bin", "ETCD_LOG_LEVEL": "warn"}
            proc.start()
        self.wait_healthy(self.members)
        return self

    def wait_healthy(self, members: tuple[EtcdMember, ...]) -> None:
        """Wait until each of ``members`` is healthy. Raises ProcessStartError (naming a log) past start_wait_s."""
        deadline = time.monotonic() + self.start_wait_s
        context = health_context(self.tls)
        for member in members:
            proc = self.processes[member.name]
            while not member_healthy(member, context):
                if not proc.running() or time.monotonic() > deadline:
                    self.stop()
                    raise ProcessStartError(
                        f"etcd member {member.name} not healthy on {member.endpoint}; log: {proc.log_path}\n"
                        f"{proc.log_tail()}"
                    )
                time.sleep(_POLL_S)

    def kill_member(self, name: str, sig: int) -> None:
        """Signal member ``name`` by PID and wait (bounded) for its exit: a fault for tests."""
        proc = self.processes[name]
        proc.send_signal(sig)
        proc.wait_exit(self.start_wait_s)

    def stop(self) -> None:
        """Stop every member (SIGTERM, then SIGKILL). Idempotent."""
        for proc in self.processes.values():
            proc.stop()
