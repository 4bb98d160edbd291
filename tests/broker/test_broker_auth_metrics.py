"""The broker's refusals are counted: BrokerAuthGuard tells BrokerMetrics.on_auth_refusal each NO_PERMISSION with its
stage (authentication, admin, authorization), resource type and action (mq_broker_auth_refusals_total)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from mq_broker.auth.guard import NO_LABEL, BrokerAuthGuard
from mq_broker.auth.metadata_manager import AuthMetadataManager
from mq_broker.metrics import BrokerMetrics
from mq_common.auth.model import Action, Resource, User, UserType
from mq_common.auth.signature import SignatureVerifier, sign
from mq_common.errors import MQError
from mq_common.metrics import NodeIdentity
from mq_common.response_code import ResponseCode
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

FAMILY = "mq_broker_auth_refusals"


def refusals(metrics: BrokerMetrics) -> dict[tuple[str, str, str], float]:
    text = generate_latest(metrics.registry).decode()
    [family] = [f for f in text_string_to_metric_families(text) if f.name == FAMILY]
    return {
        (s.labels["stage"], s.labels["resource_type"], s.labels["action"]): s.value
        for s in family.samples
        if s.name == f"{FAMILY}_total"
    }


def refused(call: object) -> None:
    with pytest.raises(MQError) as caught:
        call()  # type: ignore[operator]
    assert caught.value.code == ResponseCode.NO_PERMISSION


async def test_each_refusal_is_counted_by_stage(tmp_path: Path) -> None:
    metrics = BrokerMetrics(NodeIdentity("c1", "broker", "broker-a"), max_topics=10, flush_disk_type="ASYNC_FLUSH")
    manager = AuthMetadataManager(tmp_path, max_users=10, max_acls=10)
    manager.load()
    await manager.create_user(User("alice", "alice-secret", UserType.NORMAL))
    guard = BrokerAuthGuard(
        manager,
        SignatureVerifier(120_000, 60_000),
        authentication_enabled=True,
        authorization_enabled=True,
        on_refusal=metrics.on_auth_refusal,
    )
    now = datetime.now(UTC)
    alice = dict(sign("alice", "alice-secret", now))
    assert refusals(metrics) == {("authentication", NO_LABEL, NO_LABEL): 0, ("admin", NO_LABEL, NO_LABEL): 0}
    refused(lambda: guard.authenticate({}, "127.0.0.1"))
    assert refusals(metrics)[("authentication", NO_LABEL, NO_LABEL)] == 1
    refused(lambda: guard.authenticate(dict(sign("alice", "guessed", now)), "127.0.0.1"))
    caller = guard.authenticate(alice, "127.0.0.1")
    refused(lambda: guard.require_admin(caller, "UpdateTopic"))
    refused(lambda: guard.require(caller, Resource.of_topic("orders"), Action.SUB))
    refused(lambda: guard.require(caller, Resource.of_topic("orders"), Action.SUB))
    assert refusals(metrics) == {
        ("authentication", NO_LABEL, NO_LABEL): 2,
        ("admin", NO_LABEL, NO_LABEL): 1,
        ("authorization", "Topic", "Sub"): 2,
    }
