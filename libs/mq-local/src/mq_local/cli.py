"""``mqlocal``: start a local cluster in the background, show it, stop it (``make up`` / ``make down``).

    mqlocal up [--brokers 2] [--flush-disk-type SYNC_FLUSH] [--data-dir .run/local] [--tls] [--auth]
               [--controller [--controller-port 9878]] [--replicas 2 [--broker-role SYNC_MASTER]]
    mqlocal status [--data-dir .run/local]
    mqlocal down [--data-dir .run/local]
    mqlocal --version

``up`` starts the processes, waits until they serve, writes ``<data>/cluster.json`` and returns, leaving
them running; ``down`` stops the processes listed there by PID (SIGTERM, then SIGKILL after a bound).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from mq_client.cli_version import version_option
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from mq_local.auth_files import LocalAuthFiles
from mq_local.cluster import DEFAULT_CONTROLLER_PORT, ClusterSpec, ClusterStartError, FlushDiskType, LocalCluster
from mq_local.etcd import CLIENT_IDENTITY, is_member_name
from mq_local.ports import (
    DEFAULT_BROKER_BASE_PORT,
    DEFAULT_GATEWAY_PORT,
    DEFAULT_NAMESRV_PORT,
    PortLayout,
    describe_busy_ports,
)
from mq_local.processes import STOP_GRACE_S, stop_record
from mq_local.readiness import health_status
from mq_local.roles import BrokerRoleView, broker_roles
from mq_local.state import DataDirError, default_data_dir, read_state, remove_state
from mq_local.tls_files import LocalTlsFiles

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Run a local PyRocketMQ cluster on 127.0.0.1.")
console = Console(stderr=True)

DataDirOption = Annotated[
    Path | None, typer.Option("--data-dir", help="Data folder (default: <repo>/.run/local).", show_default=False)
]


@app.callback()
def _global_options(
    version: Annotated[bool, version_option("mqlocal")] = False,
) -> None:
    """Run a local PyRocketMQ cluster on 127.0.0.1."""


def _data_dir(value: Path | None) -> Path:
    return value if value is not None else default_data_dir("local")


@app.command()
def up(
    data_dir: DataDirOption = None,
    brokers: Annotated[int, typer.Option(min=1, max=26, help="Broker groups (broker-a, broker-b, ...).")] = 2,
    flush_disk_type: Annotated[str, typer.Option(help="SYNC_FLUSH or ASYNC_FLUSH.")] = "SYNC_FLUSH",
    auto_create_topic: Annotated[bool, typer.Option(help="Brokers auto-create unknown topics (TBW102).")] = True,
    namesrv_port: int = DEFAULT_NAMESRV_PORT,
    broker_base_port: Annotated[int, typer.Option(help="broker-a's port; the next groups +10 each.")] = (
        DEFAULT_BROKER_BASE_PORT
    ),
    gateway_port: int = DEFAULT_GATEWAY_PORT,
    keep_data: Annotated[bool, typer.Option(help="Keep the previous run's store instead of starting empty.")] = False,
    tls: Annotated[
        bool, typer.Option("--tls", help="TLS everywhere: a local CA in <data>/tls, mutual TLS between components.")
    ] = False,
    auth: Annotated[
        bool,
        typer.Option(
            "--auth",
            help="Authentication + ACL on brokers and gateway, signed route changes on the name server: a generated "
            "super user in <data>/auth.",
        ),
    ] = False,
    controller: Annotated[
        bool,
        typer.Option(
            "--controller",
            help="Also start etcd and a controller (RocketMQ 5 controller mode) on --controller-port; with --tls "
            "etcd takes only mutual TLS (the controller presents its certificate).",
        ),
    ] = False,
    controller_port: Annotated[int, typer.Option(help="The controller's port (with --controller).")] = (
        DEFAULT_CONTROLLER_PORT
    ),
    replicas: Annotated[
        int, typer.Option(min=1, max=9, help="Processes per broker group: a master and replicas-1 slaves.")
    ] = 1,
    broker_role: Annotated[str, typer.Option(help="The masters' role: ASYNC_MASTER or SYNC_MASTER.")] = (
        "ASYNC_MASTER"
    ),
) -> None:
    """Start the cluster in the background and return once every service serves."""
    if flush_disk_type not in ("SYNC_FLUSH", "ASYNC_FLUSH"):
        raise typer.BadParameter("must be SYNC_FLUSH or ASYNC_FLUSH", param_hint="--flush-disk-type")
    if broker_role not in ("ASYNC_MASTER", "SYNC_MASTER"):
        raise typer.BadParameter("must be ASYNC_MASTER or SYNC_MASTER", param_hint="--broker-role")
    flush: FlushDiskType = "SYNC_FLUSH" if flush_disk_type == "SYNC_FLUSH" else "ASYNC_FLUSH"
    ports = PortLayout.from_base(namesrv_port, broker_base_port, gateway_port, brokers)
    busy = ports.busy_ports()  # a server could not listen there; TIME-WAIT leftovers of `down` do not count
    if busy:
        holders = escape(describe_busy_ports(busy))
        console.print(
            f"[red]ports already in use: {holders}[/red]; is a cluster running? try `mqlocal status`", soft_wrap=True
        )
        raise typer.Exit(1)
    folder = _data_dir(data_dir)
    spec = ClusterSpec(
        data_dir=folder,
        ports=ports,
        flush_disk_type=flush,
        auto_create_topic_enable=auto_create_topic,
        tls=tls,
        auth=auth,
        controller=controller,
        controller_port=controller_port,
        replicas_per_broker_group=replicas,
        broker_role=broker_role,
    )
    try:
        cluster = LocalCluster(spec, fresh=not keep_data).start()
    except (ClusterStartError, DataDirError) as exc:
        console.print(f"[red]{exc}[/red]")
        raise typer.Exit(1) from exc
    state = cluster.detach()
    _print_state_table(folder)
    console.print(f"name server {state.namesrv_addr}, gateway {state.gateway_addr}; stop with `mqlocal down`")
    if tls:
        console.print(f"TLS: CA and client certificates in {LocalTlsFiles.of_data_dir(folder).directory}")
    if auth:
        _print_auth_usage(LocalAuthFiles.of_data_dir(folder))


def _print_auth_usage(files: LocalAuthFiles) -> None:
    """How to sign mqadmin with the generated super user (the secret stays in the file, never printed)."""
    console.print(
        f"auth: super user {files.super_user().access_key!r}; its keys are in {files.admin_env_file} (0600).\n"
        f"  source {files.admin_env_file}\n"
        "  uv run mqadmin createUser -c DefaultCluster -u <user> -p <secret>\n"
        "  uv run mqadmin createAcl -c DefaultCluster -s User:<user> -r Topic:<topic> -a Pub -d Allow"
    )


@app.command()
def down(
    data_dir: DataDirOption = None,
    grace_s: Annotated[float, typer.Option(help="Seconds between SIGTERM and SIGKILL.")] = STOP_GRACE_S,
) -> None:
    """Stop the processes listed in the data folder's state file (by PID)."""
    folder = _data_dir(data_dir)
    state = read_state(folder)
    if state is None:
        console.print(f"no cluster state in {folder}; nothing to stop")
        return
    failed = [p.name for p in reversed(state.processes) if not stop_record(p, grace_s)]
    if failed:
        console.print(f"[red]could not stop: {failed}[/red]")
        raise typer.Exit(1)
    remove_state(folder)
    console.print(f"stopped {len(state.processes)} processes from {folder}")


@app.command()
def status(data_dir: DataDirOption = None) -> None:
    """Show each process of the cluster: PID, port, alive, grpc.health status, log file; for a broker also its role
    (as ``mqadmin clusterList``: asked of the broker), broker id and master epoch (controller mode)."""
    folder = _data_dir(data_dir)
    if read_state(folder) is None:
        console.print(f"no cluster state in {folder}")
        raise typer.Exit(1)
    if not _print_state_table(folder):
        raise typer.Exit(1)


def _role_cells(view: BrokerRoleView | None) -> tuple[str, str, str]:
    if view is None:
        return "", "", ""
    return view.role, str(view.broker_id), "-" if view.master_epoch is None else str(view.master_epoch)


def _print_state_table(folder: Path) -> bool:
    """Print the state table; True when every process is alive and SERVING (roles are shown, not judged)."""
    state = read_state(folder)
    assert state is not None
    table = Table(title=f"PyRocketMQ local cluster ({folder})")
    for column in ("service", "pid", "address", "process", "health", "role", "broker id", "epoch"):
        table.add_column(column, no_wrap=True)
    table.add_column("log", overflow="fold")
    all_ok = True
    files = LocalTlsFiles.of_data_dir(folder) if state.tls else None
    roles = broker_roles(state, folder)
    for rec in state.processes:
        alive = rec.alive()
        addr = f"127.0.0.1:{rec.port}"
        # etcd's client port admits the controller's certificate only; every other port takes the admin one
        tls = files.client_config(CLIENT_IDENTITY if is_member_name(rec.name) else "admin") if files else None
        health = health_status(addr, tls=tls) if alive else "-"
        all_ok = all_ok and alive and health == "SERVING"
        table.add_row(
            rec.name, str(rec.pid), addr, "alive" if alive else "gone", health, *_role_cells(roles.get(addr)),
            rec.log_path,
        )  # fmt: skip
    Console().print(table)
    return all_ok


def main() -> None:
    """Console script entry point ``mqlocal``."""
    app()
