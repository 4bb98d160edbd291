"""``mqadmin`` ACL 2.0 verbs: users and ACLs on one broker (``-b``) or every master of a cluster (``-c``).

Mirrors org.apache.rocketmq.tools.command.auth (CreateUserSubCommand, UpdateUserSubCommand, DeleteUserSubCommand,
GetUserSubCommand, ListUserSubCommand, CreateAclSubCommand, UpdateAclSubCommand, DeleteAclSubCommand,
GetAclSubCommand, ListAclSubCommand): same verbs, option letters and list separators (``-r``, ``-a``, ``-i`` take
comma-separated values). Unlike RocketMQ, getUser/listUser never print a password (the column is left out).
Requests are signed (MQv2-HMAC-SHA1) with ``--accessKey`` / ``--secretKey`` (or MQ_ACCESS_KEY / MQ_SECRET_KEY;
prefer the environment for the secret, command lines are visible to other local users). Registers on
mq_client.admin.cli_common.app; every verb takes ``--output table|json``. Main thread; each verb runs its own loop.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, TypeVar

import typer
from mq_common.auth.model import (
    Acl,
    Action,
    Decision,
    Policy,
    PolicyEntry,
    PolicyType,
    Resource,
    User,
    UserStatus,
    UserType,
)
from mq_common.channels import ChannelPool
from mq_common.protocol.auth import DeleteAclRequestHeader, ListAclRequestHeader, UserInfo, UserUpdate
from rich.console import Console
from rich.table import Table

from mq_client.admin.admin_client import MQAdminClient
from mq_client.admin.cli_common import (
    OutputFormat,
    OutputOption,
    admin_tls,
    app,
    emit,
    global_credentials,
    require_one_target,
    run_admin,
)
from mq_client.auth_admin_calls import AuthAdminCalls

__all__ = ["parse_acl"]

_T = TypeVar("_T")
BrokerAddrOption = Annotated[str | None, typer.Option("-b", "--brokerAddr", help="broker address")]
ClusterOption = Annotated[str | None, typer.Option("-c", "--clusterName", help="every master of this cluster")]
AccessKeyOption = Annotated[
    str | None, typer.Option("--accessKey", envvar="MQ_ACCESS_KEY", help="access key (username) to sign with")
]
SecretKeyOption = Annotated[
    str | None,
    typer.Option("--secretKey", envvar="MQ_SECRET_KEY", help="secret key to sign with (prefer MQ_SECRET_KEY)"),
]
UsernameOption = Annotated[str, typer.Option("-u", "--username", help="the username")]
SubjectOption = Annotated[str, typer.Option("-s", "--subject", help="the subject, e.g. User:alice")]


def _enum_option(cls: type[UserType] | type[UserStatus], value: str | None) -> UserType | UserStatus | None:
    if value is None:
        return None
    for member in cls:
        if member.value.lower() == value.strip().lower():
            return member
    raise typer.BadParameter(f"'{value}' is not one of {', '.join(m.value for m in cls)}")


def _split(value: str | None) -> list[str]:
    return [v.strip() for v in (value or "").split(",") if v.strip()]


def parse_acl(subject: str, resources: str, actions: str, source_ips: str | None, decision: str) -> Acl:
    """createAcl/updateAcl's options -> one CUSTOM policy with an entry per resource. Raises typer.BadParameter
    (usage error, exit 2) for a bad subject, resource, action, IP or decision."""
    try:
        parsed_actions = frozenset(Action.parse(a) for a in _split(actions))
        ips = tuple(_split(source_ips))
        entries = tuple(
            PolicyEntry(Resource.parse(r), parsed_actions, Decision.parse(decision), ips) for r in _split(resources)
        )
        return Acl(subject.strip(), (Policy(PolicyType.CUSTOM, entries),))
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None


def _run_auth(
    broker_addr: str | None,
    cluster_name: str | None,
    credentials: tuple[str | None, str | None],
    action: Callable[[AuthAdminCalls, str], Awaitable[_T]],
) -> list[tuple[str, _T]]:
    """``action`` on each target broker (``-b`` or the masters of ``-c``), in address order: (addr, answer)."""
    access_key, secret_key = credentials
    fallback = global_credentials()
    if access_key and secret_key:
        signing: tuple[str, str] | None = (access_key, secret_key)
    else:
        signing = (fallback.access_key, fallback.secret_key) if fallback is not None else None

    async def each(admin: MQAdminClient) -> list[tuple[str, _T]]:
        addrs = await admin.resolve_broker_addrs(broker_addr, cluster_name)
        pool = ChannelPool(admin_tls())  # the brokers' port is TLS when the invocation is
        try:
            calls = AuthAdminCalls(pool, signing)
            return [(addr, await action(calls, addr)) for addr in addrs]
        finally:
            await pool.close()

    return run_admin(each)


def _report(output: OutputFormat, verb: str, what: str, done: list[tuple[str, None]]) -> None:
    """``<verb> <what> to <addr> success.`` per broker (RocketMQ's lines); JSON ``{"<verb>d": [addrs]}``."""

    def render(out: Console) -> None:
        for addr, _ in done:
            out.print(f"{verb} {what} to {addr} success.")

    emit(output, {f"{verb}d": [addr for addr, _ in done]}, render)


def _user_table(output: OutputFormat, found: list[tuple[str, list[UserInfo]]]) -> None:
    rows = [(addr, u) for addr, users in found for u in users]

    def render(out: Console) -> None:
        table = Table("#Broker", "#UserName", "#UserType", "#UserStatus", title="Users")
        for addr, u in rows:
            table.add_row(addr, u.username, u.user_type.value, u.user_status.value)
        out.print(table)

    emit(output, {"users": [{"broker_addr": addr, **_user_json(u)} for addr, u in rows]}, render)


def _user_json(user: UserInfo) -> dict[str, str]:
    return {"username": user.username, "user_type": user.user_type.value, "user_status": user.user_status.value}


def _acl_table(output: OutputFormat, found: list[tuple[str, list[Acl]]]) -> None:
    rows = [
        (addr, acl.subject, p.policy_type.value, e)
        for addr, acls in found
        for acl in acls
        for p in acl.policies
        for e in p.entries
    ]

    def render(out: Console) -> None:
        table = Table("#Broker", "#Subject", "#PolicyType", "#Resource", "#Actions", "#SourceIp", "#Decision")
        for addr, subject, policy_type, e in rows:
            actions = ",".join(sorted(a.value for a in e.actions))
            table.add_row(addr, subject, policy_type, e.resource.key, actions, ",".join(e.source_ips), e.decision.value)
        out.print(table)

    document = [
        {"broker_addr": addr, "subject": subject, "policy_type": policy_type, "resource": e.resource.key,
         "actions": sorted(a.value for a in e.actions), "source_ips": list(e.source_ips), "decision": e.decision.value}
        for addr, subject, policy_type, e in rows
    ]  # fmt: skip
    emit(output, {"acls": document}, render)


# --- users ------------------------------------------------------------------------------------------------------


@app.command("createUser")
def create_user(
    username: UsernameOption,
    password: Annotated[str, typer.Option("-p", "--password", help="the password (secret key) of the user")],
    user_type: Annotated[str, typer.Option("-t", "--userType", help="Super or Normal")] = "Normal",
    broker_addr: BrokerAddrOption = None,
    cluster_name: ClusterOption = None,
    access_key: AccessKeyOption = None,
    secret_key: SecretKeyOption = None,
    output: OutputOption = OutputFormat.TABLE,
) -> None:
    """Create a user on one broker (-b) or every master of a cluster (-c)."""
    require_one_target("createUser", broker_addr, cluster_name)
    kind = _enum_option(UserType, user_type)
    assert isinstance(kind, UserType)
    try:
        user = User(username.strip(), password, kind)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    done = _run_auth(broker_addr, cluster_name, (access_key, secret_key), lambda c, a: c.create_user(a, user))
    _report(output, "create", "user", done)


@app.command("updateUser")
def update_user(
    username: UsernameOption,
    password: Annotated[str | None, typer.Option("-p", "--password", help="the new password")] = None,
    user_type: Annotated[str | None, typer.Option("-t", "--userType", help="Super or Normal")] = None,
    user_status: Annotated[str | None, typer.Option("-s", "--userStatus", help="enable or disable")] = None,
    broker_addr: BrokerAddrOption = None,
    cluster_name: ClusterOption = None,
    access_key: AccessKeyOption = None,
    secret_key: SecretKeyOption = None,
    output: OutputOption = OutputFormat.TABLE,
) -> None:
    """Change a user's password, type or status."""
    require_one_target("updateUser", broker_addr, cluster_name)
    kind, status = _enum_option(UserType, user_type), _enum_option(UserStatus, user_status)
    assert kind is None or isinstance(kind, UserType)
    assert status is None or isinstance(status, UserStatus)
    update = UserUpdate(username.strip(), password or None, kind, status)
    done = _run_auth(broker_addr, cluster_name, (access_key, secret_key), lambda c, a: c.update_user(a, update))
    _report(output, "update", "user", done)


@app.command("deleteUser")
def delete_user(
    username: UsernameOption,
    broker_addr: BrokerAddrOption = None,
    cluster_name: ClusterOption = None,
    access_key: AccessKeyOption = None,
    secret_key: SecretKeyOption = None,
    output: OutputOption = OutputFormat.TABLE,
) -> None:
    """Delete a user and its ACL."""
    require_one_target("deleteUser", broker_addr, cluster_name)
    name = username.strip()
    done = _run_auth(broker_addr, cluster_name, (access_key, secret_key), lambda c, a: c.delete_user(a, name))
    _report(output, "delete", "user", done)


@app.command("getUser")
def get_user(
    username: UsernameOption,
    broker_addr: BrokerAddrOption = None,
    cluster_name: ClusterOption = None,
    access_key: AccessKeyOption = None,
    secret_key: SecretKeyOption = None,
    output: OutputOption = OutputFormat.TABLE,
) -> None:
    """Show a user (never its password)."""
    require_one_target("getUser", broker_addr, cluster_name)
    name = username.strip()
    found = _run_auth(broker_addr, cluster_name, (access_key, secret_key), lambda c, a: c.get_user_info(a, name))
    _user_table(output, [(addr, [u] if u is not None else []) for addr, u in found])


@app.command("listUser")
def list_user(
    name_filter: Annotated[str, typer.Option("-f", "--filter", help="the filter to list users")] = "",
    broker_addr: BrokerAddrOption = None,
    cluster_name: ClusterOption = None,
    access_key: AccessKeyOption = None,
    secret_key: SecretKeyOption = None,
    output: OutputOption = OutputFormat.TABLE,
) -> None:
    """List users whose name contains the filter (never their passwords)."""
    require_one_target("listUser", broker_addr, cluster_name)
    found = _run_auth(broker_addr, cluster_name, (access_key, secret_key), lambda c, a: c.list_user(a, name_filter))
    _user_table(output, found)


# --- ACLs -------------------------------------------------------------------------------------------------------

ResourcesOption = Annotated[str, typer.Option("-r", "--resources", help="resources, e.g. Topic:orders,Group:g*")]
ActionsOption = Annotated[str, typer.Option("-a", "--actions", help="actions, e.g. Pub,Sub")]
SourceIpOption = Annotated[str | None, typer.Option("-i", "--sourceIp", help="source IPs or CIDRs, comma-separated")]
DecisionOption = Annotated[str, typer.Option("-d", "--decision", help="Allow or Deny")]


def _acl_merge_verb(verb: str, doc: str) -> Callable[..., None]:
    """createAcl / updateAcl: the same options and, on the broker, the same merge (AuthorizationMetadataManagerImpl
    merges a created ACL into an existing one too); they differ in the RPC and the report line."""

    def command(
        subject: SubjectOption,
        resources: ResourcesOption,
        actions: ActionsOption,
        decision: DecisionOption,
        source_ip: SourceIpOption = None,
        broker_addr: BrokerAddrOption = None,
        cluster_name: ClusterOption = None,
        access_key: AccessKeyOption = None,
        secret_key: SecretKeyOption = None,
        output: OutputOption = OutputFormat.TABLE,
    ) -> None:
        require_one_target(f"{verb}Acl", broker_addr, cluster_name)
        acl = parse_acl(subject, resources, actions, source_ip, decision)

        async def call(calls: AuthAdminCalls, addr: str) -> None:
            if verb == "create":
                await calls.create_acl(addr, acl)
            else:
                await calls.update_acl(addr, acl)

        _report(output, verb, "acl", _run_auth(broker_addr, cluster_name, (access_key, secret_key), call))

    command.__doc__ = doc
    return command


app.command("createAcl")(
    _acl_merge_verb("create", "Grant or deny actions on resources to a subject (merged into its ACL).")
)
app.command("updateAcl")(
    _acl_merge_verb("update", "Replace the entries of these resources in a subject's ACL (others are kept).")
)


@app.command("deleteAcl")
def delete_acl(
    subject: SubjectOption,
    resources: Annotated[str | None, typer.Option("-r", "--resources", help="resources; none: the whole ACL")] = None,
    broker_addr: BrokerAddrOption = None,
    cluster_name: ClusterOption = None,
    access_key: AccessKeyOption = None,
    secret_key: SecretKeyOption = None,
    output: OutputOption = OutputFormat.TABLE,
) -> None:
    """Delete a subject's entries of some resources, or its whole ACL."""
    require_one_target("deleteAcl", broker_addr, cluster_name)
    try:
        header = DeleteAclRequestHeader(subject.strip(), resources=tuple(Resource.parse(r) for r in _split(resources)))
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    done = _run_auth(broker_addr, cluster_name, (access_key, secret_key), lambda c, a: c.delete_acl(a, header))
    _report(output, "delete", "acl", done)


@app.command("getAcl")
def get_acl(
    subject: SubjectOption,
    broker_addr: BrokerAddrOption = None,
    cluster_name: ClusterOption = None,
    access_key: AccessKeyOption = None,
    secret_key: SecretKeyOption = None,
    output: OutputOption = OutputFormat.TABLE,
) -> None:
    """Show a subject's ACL."""
    require_one_target("getAcl", broker_addr, cluster_name)
    name = subject.strip()
    found = _run_auth(broker_addr, cluster_name, (access_key, secret_key), lambda c, a: c.get_acl(a, name))
    _acl_table(output, [(addr, [acl] if acl is not None else []) for addr, acl in found])


@app.command("listAcl")
def list_acl(
    subject_filter: Annotated[str, typer.Option("-s", "--subject", help="the subject filter")] = "",
    resource_filter: Annotated[str, typer.Option("-r", "--resource", help="the resource filter")] = "",
    broker_addr: BrokerAddrOption = None,
    cluster_name: ClusterOption = None,
    access_key: AccessKeyOption = None,
    secret_key: SecretKeyOption = None,
    output: OutputOption = OutputFormat.TABLE,
) -> None:
    """List ACLs whose subject and entries' resources contain the filters."""
    require_one_target("listAcl", broker_addr, cluster_name)
    header = ListAclRequestHeader(subject_filter.strip(), resource_filter.strip())
    found = _run_auth(broker_addr, cluster_name, (access_key, secret_key), lambda c, a: c.list_acl(a, header))
    _acl_table(output, found)
