"""ACL 2.0's data model: users, resources with patterns, actions, policy entries, ACLs.

Mirrors org.apache.rocketmq.auth.authentication.model.User, org.apache.rocketmq.auth.authorization.model
(Resource, PolicyEntry, Policy, Acl, Environment) and org.apache.rocketmq.common.action.Action /
common.resource.ResourceType / ResourcePattern. Pure values: no I/O, safe on any thread or loop.

Text forms are RocketMQ's, so `mqadmin` arguments and stored JSON read the same as there:
- a resource key is ``*`` (any resource), ``Topic:*`` (any topic), ``Topic:orders`` (literal) or ``Topic:ord*``
  (prefixed); types are Cluster, Namespace, Topic, Group;
- actions are All, Any, Pub, Sub, Create, Update, Delete, Get, List;
- a subject key is ``User:<username>``.
Malformed text raises ValueError (the admin RPCs answer it as ResponseCode INVALID_PARAMETER 215 + remark).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from enum import Enum
from typing import Final

ASTERISK: Final = "*"
SUBJECT_USER_PREFIX: Final = "User:"
# Bounds on what one user or ACL may hold (stored whole in the broker's config and sent whole over gRPC).
MAX_NAME_CHARS: Final = 255
MAX_ENTRIES_PER_POLICY: Final = 1_000
MAX_SOURCE_IPS_PER_ENTRY: Final = 100


class UserType(Enum):
    """A super user passes every authorisation check; a normal user needs a matching Allow entry."""

    SUPER = "Super"
    NORMAL = "Normal"


class UserStatus(Enum):
    """A disabled user fails authentication (UNAUTHORIZED 40100 / NO_PERMISSION 16)."""

    ENABLE = "enable"
    DISABLE = "disable"


class ResourceType(Enum):
    ANY = "Any"
    CLUSTER = "Cluster"
    NAMESPACE = "Namespace"
    TOPIC = "Topic"
    GROUP = "Group"


class ResourcePattern(Enum):
    ANY = "ANY"
    LITERAL = "LITERAL"
    PREFIXED = "PREFIXED"


class Action(Enum):
    """What a request does to a resource. ALL in an entry grants every action; ANY in a request matches any entry
    action (used by QueryRoute: a topic's route is readable with Pub or Sub)."""

    ALL = "All"
    ANY = "Any"
    PUB = "Pub"
    SUB = "Sub"
    CREATE = "Create"
    UPDATE = "Update"
    DELETE = "Delete"
    GET = "Get"
    LIST = "List"

    @classmethod
    def parse(cls, text: str) -> Action:
        """``"pub"``/``"Pub"`` -> PUB (case-insensitive). Raises ValueError naming the bad action."""
        for action in cls:
            if action.value.lower() == text.strip().lower():
                return action
        raise ValueError(f"unknown action {text!r}: one of {', '.join(a.value for a in cls)}")


class Decision(Enum):
    ALLOW = "Allow"
    DENY = "Deny"

    @classmethod
    def parse(cls, text: str) -> Decision:
        """``"allow"``/``"Deny"`` (case-insensitive). Raises ValueError."""
        for decision in cls:
            if decision.value.lower() == text.strip().lower():
                return decision
        raise ValueError(f"unknown decision {text!r}: Allow or Deny")


class PolicyType(Enum):
    """CUSTOM entries are the user's own; DEFAULT entries apply only when no CUSTOM entry matches."""

    CUSTOM = "Custom"
    DEFAULT = "Default"


def _check_name(kind: str, name: str) -> str:
    if not name or len(name) > MAX_NAME_CHARS or any(c.isspace() for c in name):
        raise ValueError(f"illegal {kind} {name!r}: 1-{MAX_NAME_CHARS} characters, no spaces")
    return name


@dataclass(frozen=True, slots=True)
class Resource:
    """What a policy entry or a request names. ``name`` is "" for ResourceType.ANY or ResourcePattern.ANY."""

    resource_type: ResourceType
    name: str = ""
    pattern: ResourcePattern = ResourcePattern.LITERAL

    @classmethod
    def of_topic(cls, topic: str) -> Resource:
        return cls(ResourceType.TOPIC, topic)

    @classmethod
    def of_group(cls, group: str) -> Resource:
        return cls(ResourceType.GROUP, group)

    @classmethod
    def of_cluster(cls, cluster: str) -> Resource:
        return cls(ResourceType.CLUSTER, cluster)

    @classmethod
    def parse(cls, key: str) -> Resource:
        """``"*"``, ``"Topic:*"``, ``"Topic:orders"``, ``"Group:g*"`` (type case-insensitive). Raises ValueError."""
        key = key.strip()
        if key == ASTERISK:
            return cls(ResourceType.ANY, "", ResourcePattern.ANY)
        type_text, sep, name = key.partition(":")
        resource_type = next(
            (t for t in ResourceType if t is not ResourceType.ANY and t.value.lower() == type_text.lower()), None
        )
        if not sep or resource_type is None:
            raise ValueError(f"illegal resource {key!r}: '*' or <Cluster|Namespace|Topic|Group>:<name>[*]")
        if name == ASTERISK:
            return cls(resource_type, "", ResourcePattern.ANY)
        if name.endswith(ASTERISK):
            return cls(resource_type, _check_name("resource name", name[:-1]), ResourcePattern.PREFIXED)
        return cls(resource_type, _check_name("resource name", name), ResourcePattern.LITERAL)

    @property
    def key(self) -> str:
        """The text form :meth:`parse` reads (``Topic:ord*``)."""
        if self.resource_type is ResourceType.ANY:
            return ASTERISK
        if self.pattern is ResourcePattern.ANY:
            return f"{self.resource_type.value}:{ASTERISK}"
        suffix = ASTERISK if self.pattern is ResourcePattern.PREFIXED else ""
        return f"{self.resource_type.value}:{self.name}{suffix}"

    def matches(self, requested: Resource) -> bool:
        """Whether this (entry) resource covers ``requested`` (a literal resource of a request)."""
        if self.resource_type is ResourceType.ANY:
            return True
        if self.resource_type is not requested.resource_type:
            return False
        if self.pattern is ResourcePattern.ANY:
            return True
        if self.pattern is ResourcePattern.PREFIXED:
            return requested.name.startswith(self.name)
        return requested.name == self.name


def parse_source_ip(text: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
    """``"127.0.0.1"`` or ``"127.0.0.0/8"`` or ``"::1"`` (an address is a /32 or /128). Raises ValueError."""
    return ipaddress.ip_network(text.strip(), strict=False)


@dataclass(frozen=True, slots=True)
class PolicyEntry:
    """One rule: ``decision`` for ``actions`` on ``resource``, from ``source_ips`` (empty = from anywhere)."""

    resource: Resource
    actions: frozenset[Action]
    decision: Decision = Decision.ALLOW
    source_ips: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.actions:
            raise ValueError(f"policy entry for {self.resource.key} has no action")
        if len(self.source_ips) > MAX_SOURCE_IPS_PER_ENTRY:
            raise ValueError(f"policy entry for {self.resource.key}: over {MAX_SOURCE_IPS_PER_ENTRY} source IPs")
        for ip in self.source_ips:
            parse_source_ip(ip)

    def matches_action(self, action: Action) -> bool:
        return action is Action.ANY or Action.ALL in self.actions or action in self.actions

    def matches_source_ip(self, source_ip: str | None) -> bool:
        """True when the entry has no source IPs; False for an unknown or unparsable ``source_ip`` otherwise."""
        if not self.source_ips:
            return True
        if not source_ip:
            return False
        try:
            address = ipaddress.ip_address(source_ip)
        except ValueError:
            return False
        return any(address in parse_source_ip(net) for net in self.source_ips)


@dataclass(frozen=True, slots=True)
class Policy:
    policy_type: PolicyType = PolicyType.CUSTOM
    entries: tuple[PolicyEntry, ...] = ()

    def __post_init__(self) -> None:
        if len(self.entries) > MAX_ENTRIES_PER_POLICY:
            raise ValueError(f"a policy holds at most {MAX_ENTRIES_PER_POLICY} entries")


@dataclass(frozen=True, slots=True)
class Acl:
    """The policies of one subject (``User:<username>``)."""

    subject: str
    policies: tuple[Policy, ...] = ()

    def __post_init__(self) -> None:
        if not self.subject.startswith(SUBJECT_USER_PREFIX):
            raise ValueError(f"illegal subject {self.subject!r}: User:<username>")
        _check_name("username", self.subject[len(SUBJECT_USER_PREFIX) :])

    @property
    def username(self) -> str:
        return self.subject[len(SUBJECT_USER_PREFIX) :]

    def policy(self, policy_type: PolicyType) -> Policy | None:
        return next((p for p in self.policies if p.policy_type is policy_type), None)


@dataclass(frozen=True, slots=True)
class User:
    """An ACL 2.0 user. ``password`` is the secret key the SDKs sign with (their access key is ``username``);
    it never appears in ``repr``, logs, metrics or remarks."""

    username: str
    password: str = field(repr=False)
    user_type: UserType = UserType.NORMAL
    user_status: UserStatus = UserStatus.ENABLE

    def __post_init__(self) -> None:
        _check_name("username", self.username)
        if not self.password or len(self.password) > MAX_NAME_CHARS:
            raise ValueError(f"user {self.username}: the password must have 1-{MAX_NAME_CHARS} characters")

    @property
    def subject(self) -> str:
        return f"{SUBJECT_USER_PREFIX}{self.username}"
