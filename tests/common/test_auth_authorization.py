"""ACL 2.0 decisions: examples of each rule and hypothesis properties over random ACLs."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from mq_common.auth.authorization import authorize
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

ALICE = User("alice", "pw")
ORDERS = Resource.of_topic("orders")
IP = "127.0.0.5"


def entry(key: str, *actions: Action, decision: Decision = Decision.ALLOW, ips: tuple[str, ...] = ()) -> PolicyEntry:
    return PolicyEntry(Resource.parse(key), frozenset(actions), decision, ips)


def acl(*entries: PolicyEntry, default: tuple[PolicyEntry, ...] = ()) -> Acl:
    policies = [Policy(PolicyType.CUSTOM, entries)]
    if default:
        policies.append(Policy(PolicyType.DEFAULT, default))
    return Acl("User:alice", tuple(policies))


def allowed(the_acl: Acl | None, resource: Resource = ORDERS, action: Action = Action.PUB, ip: str = IP) -> bool:
    return authorize(the_acl, ALICE, resource, action, ip).allowed


def test_no_acl_or_no_matching_entry_is_denied() -> None:
    assert not allowed(None)
    assert not allowed(acl(entry("Topic:payments", Action.PUB)))
    assert not allowed(acl(entry("Topic:orders", Action.SUB)))


def test_literal_prefix_and_any_entries_allow() -> None:
    assert allowed(acl(entry("Topic:orders", Action.PUB)))
    assert allowed(acl(entry("Topic:ord*", Action.PUB)))
    assert allowed(acl(entry("Topic:*", Action.ALL)))
    assert allowed(acl(entry("*", Action.PUB)))
    assert not allowed(acl(entry("Group:orders", Action.PUB)))


def test_the_most_specific_entry_decides() -> None:
    assert allowed(acl(entry("Topic:*", Action.PUB, decision=Decision.DENY), entry("Topic:orders", Action.PUB)))
    assert not allowed(acl(entry("Topic:ord*", Action.PUB, decision=Decision.DENY), entry("Topic:o*", Action.PUB)))
    assert allowed(acl(entry("Topic:o*", Action.PUB, decision=Decision.DENY), entry("Topic:ord*", Action.PUB)))
    assert allowed(acl(entry("*", Action.PUB, decision=Decision.DENY), entry("Topic:*", Action.PUB)))


def test_deny_wins_at_equal_specificity() -> None:
    both = acl(entry("Topic:orders", Action.PUB), entry("Topic:orders", Action.PUB, decision=Decision.DENY))
    result = authorize(both, ALICE, ORDERS, Action.PUB, IP)
    assert not result.allowed
    assert "User:alice" in result.reason
    assert "Pub" in result.reason
    assert "Topic:orders" in result.reason


def test_default_policy_applies_only_when_no_custom_entry_matches() -> None:
    default_deny = (entry("Topic:*", Action.PUB, decision=Decision.DENY),)
    assert allowed(acl(entry("Topic:orders", Action.PUB), default=default_deny))
    assert not allowed(acl(entry("Topic:other", Action.PUB), default=default_deny))
    assert allowed(acl(default=(entry("Topic:*", Action.PUB),)))


def test_source_ip_ranges_filter_entries() -> None:
    ranged = acl(entry("Topic:orders", Action.PUB, ips=("127.0.0.0/29",)))
    assert allowed(ranged, ip="127.0.0.5")
    assert not allowed(ranged, ip="127.0.0.9")
    assert not authorize(ranged, ALICE, ORDERS, Action.PUB, None).allowed


def test_action_any_matches_any_entry_action() -> None:
    assert allowed(acl(entry("Topic:orders", Action.SUB)), action=Action.ANY)


def test_super_users_pass_and_disabled_users_fail() -> None:
    assert authorize(None, User("root", "pw", UserType.SUPER), ORDERS, Action.PUB, IP).allowed
    disabled = User("alice", "pw", user_status=UserStatus.DISABLE)
    assert not authorize(acl(entry("*", Action.ALL)), disabled, ORDERS, Action.PUB, IP).allowed


NAMES = st.sampled_from(["orders", "ord", "o", "payments", "pay"])
KEYS = st.one_of(
    st.just("*"),
    st.builds(lambda t, n, p: f"{t}:{n}{p}", st.sampled_from(["Topic", "Group"]), NAMES, st.sampled_from(["", "*"])),
    st.sampled_from(["Topic:*", "Group:*"]),
)
ACTIONS = st.sampled_from([Action.PUB, Action.SUB, Action.ALL, Action.GET])
ENTRIES = st.builds(
    lambda key, actions, decision, ips: entry(key, *actions, decision=decision, ips=ips),
    KEYS,
    st.lists(ACTIONS, min_size=1, max_size=2),
    st.sampled_from(list(Decision)),
    st.sampled_from([(), ("127.0.0.0/29",), ("127.0.1.0/24",)]),
)
REQUESTS = st.tuples(
    st.builds(
        Resource, st.sampled_from([Resource.of_topic("x").resource_type, Resource.of_group("x").resource_type]), NAMES
    ),
    st.sampled_from([Action.PUB, Action.SUB, Action.ANY]),
    st.sampled_from(["127.0.0.5", "127.0.1.7"]),
)


@given(st.lists(ENTRIES, max_size=6), st.lists(ENTRIES, max_size=3), ENTRIES, REQUESTS)
def test_adding_a_deny_never_turns_a_denial_into_an_allow(
    custom: list[PolicyEntry], default: list[PolicyEntry], extra: PolicyEntry, request: tuple[Resource, Action, str]
) -> None:
    resource, action, ip = request
    deny = PolicyEntry(extra.resource, extra.actions, Decision.DENY, extra.source_ips)
    if not authorize(acl(*custom, default=tuple(default)), ALICE, resource, action, ip).allowed:
        assert not authorize(acl(*custom, deny, default=tuple(default)), ALICE, resource, action, ip).allowed


@given(st.lists(ENTRIES, max_size=6), st.lists(ENTRIES, max_size=3), REQUESTS)
def test_a_literal_deny_of_the_request_always_denies(
    custom: list[PolicyEntry], default: list[PolicyEntry], request: tuple[Resource, Action, str]
) -> None:
    resource, action, ip = request
    deny = PolicyEntry(resource, frozenset({Action.ALL}), Decision.DENY)
    assert not authorize(acl(*custom, deny, default=tuple(default)), ALICE, resource, action, ip).allowed


@given(st.lists(ENTRIES, max_size=6), REQUESTS)
def test_a_super_user_is_always_allowed(custom: list[PolicyEntry], request: tuple[Resource, Action, str]) -> None:
    resource, action, ip = request
    assert authorize(acl(*custom), User("alice", "pw", UserType.SUPER), resource, action, ip).allowed


@given(st.lists(ENTRIES, max_size=6), REQUESTS)
def test_an_allow_needs_a_matching_allow_entry(
    custom: list[PolicyEntry], request: tuple[Resource, Action, str]
) -> None:
    resource, action, ip = request
    if authorize(acl(*custom), ALICE, resource, action, ip).allowed:
        assert any(
            e.decision is Decision.ALLOW
            and e.resource.matches(resource)
            and e.matches_action(action)
            and e.matches_source_ip(ip)
            for e in custom
        )


@given(st.lists(ENTRIES, max_size=6), REQUESTS)
def test_removing_every_deny_never_turns_an_allow_into_a_denial(
    custom: list[PolicyEntry], request: tuple[Resource, Action, str]
) -> None:
    resource, action, ip = request
    allows_only = [e for e in custom if e.decision is Decision.ALLOW]
    if authorize(acl(*custom), ALICE, resource, action, ip).allowed:
        assert authorize(acl(*allows_only), ALICE, resource, action, ip).allowed
