"""The requests of the ACL 2.0 admin RPCs (users and ACLs kept by the brokers), beyond the model's values.

Mirrors org.apache.rocketmq.remoting.protocol.header.{UpdateUserRequestHeader, DeleteAclRequestHeader,
ListAclsRequestHeader} and remoting.protocol.body.UserInfo as mqadmin prints it. The users and ACLs themselves are
mq_common.auth.model's User and Acl; the proto converters are in mq_common.protocol.auth_convert. Pure values.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mq_common.auth.model import PolicyType, Resource, UserStatus, UserType


@dataclass(frozen=True, slots=True)
class UserUpdate:
    """AUTH_UPDATE_USER: what to change of ``username``; None leaves the stored value as it is."""

    username: str
    password: str | None = field(default=None, repr=False)
    user_type: UserType | None = None
    user_status: UserStatus | None = None


@dataclass(frozen=True, slots=True)
class UserInfo:
    """A user as listed to operators: never its password (GetUser / ListUser answers seen by mqadmin)."""

    username: str
    user_type: UserType
    user_status: UserStatus


@dataclass(frozen=True, slots=True)
class DeleteAclRequestHeader:
    """AUTH_DELETE_ACL: the entries of ``resources`` in ``subject``'s ``policy_type`` policy, or (no resources) the
    whole ACL."""

    subject: str
    policy_type: PolicyType = PolicyType.CUSTOM
    resources: tuple[Resource, ...] = ()


@dataclass(frozen=True, slots=True)
class ListAclRequestHeader:
    """AUTH_LIST_ACL: ACLs whose subject contains ``subject_filter``, keeping the entries whose resource key contains
    ``resource_filter`` (empty filters match everything)."""

    subject_filter: str = ""
    resource_filter: str = ""
