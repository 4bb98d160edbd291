"""Proto <-> domain converters of the ACL 2.0 admin RPCs (mq.broker.v1 User, Acl and their requests): the edge,
the one place they are written, used by the broker's servicer and mq_client.auth_admin_calls.

Enums travel by name: model ``Action.PUB`` <-> ``ACTION_PUB``, ``UserType.SUPER`` <-> ``USER_TYPE_SUPER``, and so
on; UNSPECIFIED reads as "not given" (the model's default on create, "unchanged" on update, CUSTOM for a policy).
A resource travels as its key text (``Topic:ord*``). ``*_from_proto`` raises ValueError for a malformed value (the
servicer answers INVALID_PARAMETER 29 with its text). Pure functions; any thread.
"""

from __future__ import annotations

from enum import Enum
from typing import Any, Final, TypeVar

from google.protobuf.descriptor import EnumDescriptor
from mq.broker.v1 import broker_pb2

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
from mq_common.protocol.auth import DeleteAclRequestHeader, ListAclRequestHeader, UserInfo, UserUpdate

_E = TypeVar("_E", bound=Enum)


def _enum_to_proto(prefix: str, value: Enum | None) -> Any:
    """``Action.PUB`` -> the number of ``ACTION_PUB`` (typed as the generated enum's value); None -> 0
    (UNSPECIFIED)."""
    if value is None:
        return 0
    return _PROTO_ENUMS[prefix].values_by_name[f"{prefix}_{value.name}"].number


def _enum_from_proto(prefix: str, number: int, cls: type[_E]) -> _E | None:
    """The number of ``ACTION_PUB`` -> ``Action.PUB``; 0 -> None. Raises ValueError for an unknown number."""
    if number == 0:
        return None
    value = _PROTO_ENUMS[prefix].values_by_number.get(number)
    if value is None:
        raise ValueError(f"unknown {cls.__name__} {number}")
    return cls[value.name.removeprefix(f"{prefix}_")]


_PROTO_ENUMS: Final[dict[str, EnumDescriptor]] = {
    prefix: broker_pb2.DESCRIPTOR.enum_types_by_name[name]
    for prefix, name in (
        ("USER_TYPE", "UserType"),
        ("USER_STATUS", "UserStatus"),
        ("ACTION", "Action"),
        ("DECISION", "Decision"),
        ("POLICY_TYPE", "PolicyType"),
    )
}

# --- users ----------------------------------------------------------------------------------------------------------


def user_to_proto(user: User, *, with_password: bool = True) -> broker_pb2.User:
    """The user; its password only ``with_password`` (callers that may read it)."""
    return broker_pb2.User(
        username=user.username,
        password=user.password if with_password else "",
        user_type=_enum_to_proto("USER_TYPE", user.user_type),
        user_status=_enum_to_proto("USER_STATUS", user.user_status),
    )


def user_from_proto(p: broker_pb2.User) -> User:
    """A whole user (CreateUser; GetUser answers with the password). Raises ValueError (blank name or password)."""
    return User(
        username=p.username,
        password=p.password,
        user_type=_enum_from_proto("USER_TYPE", p.user_type, UserType) or UserType.NORMAL,
        user_status=_enum_from_proto("USER_STATUS", p.user_status, UserStatus) or UserStatus.ENABLE,
    )


def user_info_from_proto(p: broker_pb2.User) -> UserInfo:
    """A user without its password (what operators see). Raises ValueError for an unknown enum number."""
    return UserInfo(
        username=p.username,
        user_type=_enum_from_proto("USER_TYPE", p.user_type, UserType) or UserType.NORMAL,
        user_status=_enum_from_proto("USER_STATUS", p.user_status, UserStatus) or UserStatus.ENABLE,
    )


def user_update_to_proto(update: UserUpdate) -> broker_pb2.User:
    return broker_pb2.User(
        username=update.username,
        password=update.password or "",
        user_type=_enum_to_proto("USER_TYPE", update.user_type),
        user_status=_enum_to_proto("USER_STATUS", update.user_status),
    )


def user_update_from_proto(p: broker_pb2.User) -> UserUpdate:
    """Raises ValueError for an unknown enum number."""
    return UserUpdate(
        username=p.username,
        password=p.password or None,
        user_type=_enum_from_proto("USER_TYPE", p.user_type, UserType),
        user_status=_enum_from_proto("USER_STATUS", p.user_status, UserStatus),
    )


# --- ACLs -----------------------------------------------------------------------------------------------------------


def policy_entry_to_proto(entry: PolicyEntry) -> broker_pb2.PolicyEntry:
    actions = sorted(entry.actions, key=lambda a: list(Action).index(a))
    return broker_pb2.PolicyEntry(
        resource=entry.resource.key,
        actions=[_enum_to_proto("ACTION", a) for a in actions],
        source_ips=list(entry.source_ips),
        decision=_enum_to_proto("DECISION", entry.decision),
    )


def policy_entry_from_proto(p: broker_pb2.PolicyEntry) -> PolicyEntry:
    """Raises ValueError (bad resource key, no or unknown action, bad source IP; decision UNSPECIFIED is Allow)."""
    actions = [_enum_from_proto("ACTION", a, Action) for a in p.actions]
    return PolicyEntry(
        resource=Resource.parse(p.resource),
        actions=frozenset(a for a in actions if a is not None),
        decision=_enum_from_proto("DECISION", p.decision, Decision) or Decision.ALLOW,
        source_ips=tuple(p.source_ips),
    )


def policy_type_from_proto(number: int) -> PolicyType:
    """UNSPECIFIED -> CUSTOM. Raises ValueError for an unknown number."""
    return _enum_from_proto("POLICY_TYPE", number, PolicyType) or PolicyType.CUSTOM


def acl_to_proto(acl: Acl) -> broker_pb2.Acl:
    return broker_pb2.Acl(
        subject=acl.subject,
        policies=[
            broker_pb2.Policy(
                policy_type=_enum_to_proto("POLICY_TYPE", p.policy_type),
                entries=[policy_entry_to_proto(e) for e in p.entries],
            )
            for p in acl.policies
        ],
    )


def acl_from_proto(p: broker_pb2.Acl) -> Acl:
    """Raises ValueError (bad subject, policy or entry)."""
    policies = tuple(
        Policy(policy_type_from_proto(policy.policy_type), tuple(policy_entry_from_proto(e) for e in policy.entries))
        for policy in p.policies
    )
    return Acl(subject=p.subject, policies=policies)


def delete_acl_request_to_proto(header: DeleteAclRequestHeader) -> broker_pb2.DeleteAclRequest:
    return broker_pb2.DeleteAclRequest(
        subject=header.subject,
        policy_type=_enum_to_proto("POLICY_TYPE", header.policy_type),
        resources=[r.key for r in header.resources],
    )


def delete_acl_request_from_proto(p: broker_pb2.DeleteAclRequest) -> DeleteAclRequestHeader:
    """Raises ValueError (bad resource key or policy type)."""
    return DeleteAclRequestHeader(
        subject=p.subject,
        policy_type=policy_type_from_proto(p.policy_type),
        resources=tuple(Resource.parse(r) for r in p.resources),
    )


def list_acl_request_to_proto(header: ListAclRequestHeader) -> broker_pb2.ListAclRequest:
    return broker_pb2.ListAclRequest(subject_filter=header.subject_filter, resource_filter=header.resource_filter)


def list_acl_request_from_proto(p: broker_pb2.ListAclRequest) -> ListAclRequestHeader:
    return ListAclRequestHeader(subject_filter=p.subject_filter, resource_filter=p.resource_filter)
