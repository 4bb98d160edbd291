"""``mqadmin`` controller verbs (RocketMQ 5 controller mode): getSyncStateSet, electMaster, getControllerMetaData.

Mirrors org.apache.rocketmq.tools.command.ha.GetSyncStateSetSubCommand, controller.ReElectMasterSubCommand and
controller.GetControllerMetaDataSubCommand: their options (``-a/--controllerAddress``; electMaster's ``-b/--brokerId``
and ``-bn/--brokerName``) and their ``#Key<TAB>value`` lines
(printed as they are: tabs kept, no wrapping); ``--output json`` prints one JSON document instead.
Calls go through mq_common.controller_client.ControllerClient, signed with the global ``--accessKey``/``--secretKey``
and over the global ``--tls`` options. Registers on mq_client.admin.cli_common.app; main thread, a loop per verb.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Annotated, TypeVar

import typer
from mq_common.auth.interceptor import signing_pool
from mq_common.controller_client import ControllerClient
from mq_common.errors import MQError
from mq_common.protocol.controller import ReplicaIdentity
from mq_common.response_code import ResponseCode
from rich.console import Console

from mq_client.admin.cli_common import (
    OutputFormat,
    OutputOption,
    admin_tls,
    app,
    emit,
    fail,
    global_credentials,
    split_addrs,
)

_T = TypeVar("_T")
ControllerOption = Annotated[str, typer.Option("-a", "--controllerAddress", help="the address of controller")]


def run_controller(addrs: str, action: Callable[[ControllerClient], Awaitable[_T]]) -> _T:
    """Run ``action`` with a ControllerClient on a new loop. An MQError prints ``NAME (code): remark`` on stderr
    and raises typer.Exit(1)."""

    async def main() -> _T:
        pool = signing_pool(admin_tls(), global_credentials())
        try:
            return await action(ControllerClient(split_addrs(addrs), pool))
        finally:
            await pool.close()

    try:
        return asyncio.run(main())
    except MQError as exc:
        raise fail(f"{ResponseCode.name_of(exc.code)} ({exc.code}): {exc.remark}") from None


def _identity(r: ReplicaIdentity) -> str:
    """BrokerReplicasInfo.ReplicaIdentity#toString."""
    alive = "true" if r.alive else "false"
    return (
        f"ReplicaIdentity{{brokerName='{r.broker_name}', brokerId={r.broker_id}, "
        f"brokerAddress='{r.broker_addr}', alive={alive}}}"
    )


@app.command("getSyncStateSet")
def get_sync_state_set(
    controller: ControllerOption,
    broker_name: Annotated[str | None, typer.Option("-b", "--brokerName", help="which broker to fetch")] = None,
    cluster_name: Annotated[str | None, typer.Option("-c", "--clusterName", help="which cluster")] = None,
    output: OutputOption = OutputFormat.TABLE,
) -> None:
    """Show the master, epochs and in-sync replicas of a broker group (-b) or of every group of a cluster (-c)."""
    if (broker_name is None) == (cluster_name is None):
        raise fail("getSyncStateSet: set exactly one of -b/--brokerName and -c/--clusterName", 2)
    names = [broker_name] if broker_name is not None else []
    groups = run_controller(controller, lambda client: client.get_sync_state_data(names))
    groups = tuple(g for g in groups if cluster_name is None or g.cluster_name == cluster_name)

    def render(_: Console) -> None:
        for g in groups:
            info = g.replica_info
            typer.echo(
                f"\n#brokerName\t{g.broker_name}\n#MasterBrokerId\t{info.master_broker_id}\n"
                f"#MasterAddr\t{info.master_addr}\n#MasterEpoch\t{info.master_epoch}\n"
                f"#SyncStateSetEpoch\t{info.sync_state_set_epoch}\n#SyncStateSetNums\t{len(info.sync_state_set)}"
            )
            for member in g.in_sync_replicas:
                typer.echo(f"\nInSyncReplica:\t{_identity(member)}")
            for member in g.not_in_sync_replicas:
                typer.echo(f"\nNotInSyncReplica:\t{_identity(member)}")

    emit(output, {"groups": groups}, render)


@app.command("electMaster")
def elect_master(
    controller: ControllerOption,
    cluster_name: Annotated[str, typer.Option("-c", "--clusterName", help="the clusterName of broker")],
    broker_name: Annotated[
        str, typer.Option("-bn", "--brokerName", help="The broker name of the replicas that require to be manipulated")
    ],
    broker_id: Annotated[
        int | None, typer.Option("-b", "--brokerId", help="The id of the broker which requires to become master")
    ] = None,
    output: OutputOption = OutputFormat.TABLE,
) -> None:
    """Make broker -b master of group -bn (a manual switch); without -b the election policy chooses."""
    info = run_controller(controller, lambda client: client.elect_master(cluster_name, broker_name, broker_id))

    def render(_: Console) -> None:
        typer.echo(
            f"\n#ClusterName\t{cluster_name}\n#BrokerName\t{broker_name}\n#BrokerMasterAddr\t{info.master_addr}"
            f"\n#MasterEpoch\t{info.master_epoch}\n#SyncStateSetEpoch\t{info.sync_state_set_epoch}"
        )
        typer.echo(f"\t#Broker\t{info.master_broker_id}\t{info.master_addr}")

    emit(output, {"cluster_name": cluster_name, "broker_name": broker_name, "replica_info": info}, render)


@app.command("getControllerMetaData")
def get_controller_meta_data(controller: ControllerOption, output: OutputOption = OutputFormat.TABLE) -> None:
    """Show the controller that answered and the etcd cluster its state lives in."""
    meta = run_controller(controller, lambda client: client.get_controller_meta_data())

    def render(_: Console) -> None:
        typer.echo(
            f"\n#ControllerGroup\tetcd\n#ControllerLeaderId\t{meta.etcd_leader_id}"
            f"\n#ControllerLeaderAddress\t{meta.controller_addr}"
        )
        for peer in meta.etcd_endpoints:
            typer.echo(f"\n#Peer:\t{peer}")

    emit(output, meta, render)
