"""The JSON forms of users and ACLs in ``config/users.json`` and ``config/acls.json``, in the shape of RocketMQ's
UserInfo / AclInfo bodies (camelCase keys, enum text as mqadmin prints it)::

    users.json: {"dataVersion": {...}, "users": {"<username>": {"username": "alice", "password": "...",
                 "userType": "Normal", "userStatus": "enable"}}}
    acls.json:  {"dataVersion": {...}, "acls": {"User:alice": {"subject": "User:alice", "policies": [
                 {"policyType": "Custom", "entries": [{"resource": "Topic:orders", "actions": ["Pub", "Sub"],
                  "sourceIps": ["127.0.0.0/8"], "decision": "Allow"}]}]}}}

Mirrors org.apache.rocketmq.remoting.protocol.body.{UserInfo, AclInfo, PolicyInfo, PolicyEntryInfo}. Decoding
raises ValueError / KeyError / TypeError for a malformed object (the broker then refuses to start). Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

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


def user_to_json(user: User) -> dict[str, Any]:
    return {
        "username": user.username,
        "password": user.password,
        "userType": user.user_type.value,
        "userStatus": user.user_status.value,
    }


def user_from_json(data: Mapping[str, Any]) -> User:
    return User(
        username=str(data["username"]),
        password=str(data["password"]),
        user_type=UserType(data.get("userType", UserType.NORMAL.value)),
        user_status=UserStatus(data.get("userStatus", UserStatus.ENABLE.value)),
    )


def _entry_to_json(entry: PolicyEntry) -> dict[str, Any]:
    return {
        "resource": entry.resource.key,
        "actions": sorted(a.value for a in entry.actions),
        "sourceIps": list(entry.source_ips),
        "decision": entry.decision.value,
    }


def _entry_from_json(data: Mapping[str, Any]) -> PolicyEntry:
    return PolicyEntry(
        resource=Resource.parse(str(data["resource"])),
        actions=frozenset(Action.parse(str(a)) for a in data["actions"]),
        decision=Decision.parse(str(data.get("decision", Decision.ALLOW.value))),
        source_ips=tuple(str(ip) for ip in data.get("sourceIps", ())),
    )


def acl_to_json(acl: Acl) -> dict[str, Any]:
    return {
        "subject": acl.subject,
        "policies": [
            {"policyType": p.policy_type.value, "entries": [_entry_to_json(e) for e in p.entries]} for p in acl.policies
        ],
    }


def acl_from_json(data: Mapping[str, Any]) -> Acl:
    policies = tuple(
        Policy(
            PolicyType(p.get("policyType", PolicyType.CUSTOM.value)), tuple(_entry_from_json(e) for e in p["entries"])
        )
        for p in data["policies"]
    )
    return Acl(subject=str(data["subject"]), policies=policies)
