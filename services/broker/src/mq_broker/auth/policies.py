"""How ACLs change: RocketMQ's merge of policies by type and of entries by resource, deletion of entries, and the
resource filter of AUTH_LIST_ACL.

Mirrors org.apache.rocketmq.auth.authorization.model.Acl#updatePolicy / #deletePolicy and Policy#updateEntry /
#deleteEntry, over the immutable mq_common.auth.model values (each function returns a new Acl). Pure; any thread.
"""

from __future__ import annotations

from collections.abc import Iterable

from mq_common.auth.model import Acl, Policy, PolicyEntry, PolicyType, Resource


def _merge_entries(old: tuple[PolicyEntry, ...], new: Iterable[PolicyEntry]) -> tuple[PolicyEntry, ...]:
    """Policy#updateEntry: an entry for a resource already present replaces it in place (actions, source IPs,
    decision); others are appended in order."""
    merged = list(old)
    for entry in new:
        at = next((i for i, e in enumerate(merged) if e.resource == entry.resource), None)
        if at is None:
            merged.append(entry)
        else:
            merged[at] = entry
    return tuple(merged)


def merge_acl(old: Acl | None, new: Acl) -> Acl:
    """Acl#updatePolicy: ``new``'s policies merged into ``old``'s by policy type (``old`` None: ``new``).

    Raises ValueError when a merged policy exceeds MAX_ENTRIES_PER_POLICY (the model's bound)."""
    if old is None:
        return new
    policies = list(old.policies)
    for policy in new.policies:
        at = next((i for i, p in enumerate(policies) if p.policy_type is policy.policy_type), None)
        if at is None:
            policies.append(policy)
        else:
            policies[at] = Policy(policy.policy_type, _merge_entries(policies[at].entries, policy.entries))
    return Acl(old.subject, tuple(policies))


def delete_entries(acl: Acl, policy_type: PolicyType, resources: Iterable[Resource]) -> Acl | None:
    """Acl#deletePolicy for each resource: drop the entries of ``resources`` from the ``policy_type`` policy; a
    policy left empty goes. None when no policy is left (the whole ACL is then deleted)."""
    gone = set(resources)
    policies: list[Policy] = []
    for policy in acl.policies:
        if policy.policy_type is policy_type:
            policy = Policy(policy.policy_type, tuple(e for e in policy.entries if e.resource not in gone))
        if policy.entries:
            policies.append(policy)
    return Acl(acl.subject, tuple(policies)) if policies else None


def filter_resources(acl: Acl, resource_filter: str) -> Acl | None:
    """LocalAuthorizationMetadataProvider#listAcl's resource filter: keep the entries whose resource key contains
    ``resource_filter`` (all when it is empty); policies left empty go; None when nothing is left."""
    if not resource_filter:
        return acl
    policies = tuple(
        Policy(p.policy_type, kept)
        for p in acl.policies
        if (kept := tuple(e for e in p.entries if resource_filter in e.resource.key))
    )
    return Acl(acl.subject, policies) if policies else None
