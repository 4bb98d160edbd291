"""The SDK scenarios with their assertions, shared by test_v2_sdk_python.py and test_v2_sdk_node.py: each check
runs one SDK's scenario script(s) against a real cluster's gateway and asserts on the JSON they print and on what
the brokers stored."""

from __future__ import annotations

from collections import Counter
from typing import Any, Final

from mq_common.auth.metadata import InMemoryAuthMetadataProvider
from mq_common.auth.model import Acl, Action, Policy, PolicyEntry, Resource, User
from mq_local.cluster import LocalCluster
from sdk_testkit import (
    SdkRunner,
    assert_stored,
    assert_views_match,
    gateway_replica,
    sample_messages,
    set_retry_max_times,
    wait_stored,
)

MESSAGES: Final = 6
INVISIBLE_S: Final = 10  # the proxy's minimum invisible time for a receive (minInvisibleTimeMillsForRecv)
AWAIT_S: Final = 6  # long polling: the proxy clamps it to 5..20 s
EARLY_S: Final = 2  # how much sooner than its invisible time a redelivery may be seen (clock reads, RPC time)
SCENARIO_DEADLINE_S: Final = 150
RETRY_MAX_TIMES: Final = 2  # max delivery attempts = retry_max_times + 1


def send(runner: SdkRunner, addr: str, topic: str, sent: list[dict[str, Any]]) -> list[str]:
    """The SDK's Producer sends ``sent`` through the gateway at ``addr``: the message ids of its SendReceipts."""
    receipts = runner.run("produce", {"endpoints": addr, "topic": topic, "messages": sent})["receipts"]
    ids = [r["message_id"] for r in receipts]
    assert len(set(ids)) == len(sent), receipts
    assert all(r["offset"] >= 0 for r in receipts), receipts
    return ids


def consumer_cfg(addr: str, group: str, topic: str, **more: Any) -> dict[str, Any]:
    return {"endpoints": addr, "group": group, "topic": topic, "deadline_s": SCENARIO_DEADLINE_S, **more}


def check_send_and_simple_consumer(cluster: LocalCluster, runner: SdkRunner, topic: str, group: str) -> None:
    """Producer -> SendReceipts, stored as 4.x messages; SimpleConsumer receives all with what was sent, acks,
    changes one's invisible duration (a new handle, acked), and gets the unacked one again (attempt 2)."""
    sent = sample_messages(f"{runner.name}-simple", MESSAGES)
    ids = send(runner, cluster.gateway_addr, topic, sent)
    assert_stored(cluster, topic, sent, ids)
    cfg = consumer_cfg(cluster.gateway_addr, group, topic, count=MESSAGES, invisible_s=INVISIBLE_S)
    out = runner.run("simple", {**cfg, "change_s": INVISIBLE_S, "await_s": AWAIT_S})
    assert_views_match(out["first"], sent, ids)
    assert [v["delivery_attempt"] for v in out["first"]] == [1] * MESSAGES, out["first"]
    assert out["changed"]["handle_changed"], out["changed"]
    left = out["left"]
    again = out["again"]
    assert [(v["message_id"], v["delivery_attempt"]) for v in again] == [(left, 2)], again
    assert_views_match(again, [sent[ids.index(left)]], [left])
    assert out["again_after_s"] >= INVISIBLE_S - EARLY_S, out["again_after_s"]
    assert out["after"] == [], out["after"]


def check_empty_receive_waits(cluster: LocalCluster, runner: SdkRunner, topic: str, group: str) -> None:
    """A receive with nothing to deliver answers [] after the long poll, not at once."""
    out = runner.run("empty", consumer_cfg(cluster.gateway_addr, group, topic, await_s=AWAIT_S))
    assert out["messages"] == [], out
    assert out["elapsed_s"] >= AWAIT_S * 0.8, out


def check_push_consumer_retries_then_dlq(cluster: LocalCluster, runner: SdkRunner, topic: str, group: str) -> None:
    """PushConsumer with a listener failing the "fail" bodies: the others are consumed once; the failing ones are
    delivered retry_max_times + 1 times (delivery_attempt 1, 2, 3) and then stored in %DLQ%<group>."""
    set_retry_max_times(cluster, group, RETRY_MAX_TIMES)
    ok = sample_messages(f"{runner.name}-push-ok", MESSAGES)
    failing = sample_messages(f"{runner.name}-push-fail", 2)
    send(runner, cluster.gateway_addr, topic, ok + failing)
    max_attempts = RETRY_MAX_TIMES + 1
    ok_bodies, fail_bodies = [m["body"] for m in ok], [m["body"] for m in failing]
    cfg = consumer_cfg(cluster.gateway_addr, group, topic, ok_bodies=ok_bodies, fail_bodies=fail_bodies)
    deliveries = runner.run("push", {**cfg, "max_attempts": max_attempts, "linger_s": 1})["deliveries"]
    attempts: dict[str, list[int]] = {}
    for d in deliveries:
        attempts.setdefault(d["body"], []).append(d["delivery_attempt"])
    assert {b: attempts.get(b) for b in ok_bodies} == {b: [1] for b in ok_bodies}, deliveries
    expected = list(range(1, max_attempts + 1))
    assert {b: sorted(attempts.get(b, [])) for b in fail_bodies} == dict.fromkeys(fail_bodies, expected), deliveries
    dlq = wait_stored(cluster, f"%DLQ%{group}", lambda ms: len(ms) >= len(fail_bodies))
    assert Counter(m.body.decode() for m in dlq) == Counter(fail_bodies), dlq


def check_two_gateway_replicas(cluster: LocalCluster, runner: SdkRunner, topic: str, group: str) -> None:
    """Producer on replica A, SimpleConsumer on replica B receives and acks all; then A has nothing left."""
    sent = sample_messages(f"{runner.name}-replicas", MESSAGES)
    ids = send(runner, cluster.gateway_addr, topic, sent)
    with gateway_replica(cluster) as replica_b:
        cfg = consumer_cfg(replica_b, group, topic, count=MESSAGES, invisible_s=INVISIBLE_S * 3, await_s=AWAIT_S)
        out = runner.run("drain", cfg)
    assert_views_match(out["messages"], sent, ids)
    left = runner.run("empty", consumer_cfg(cluster.gateway_addr, group, topic, await_s=AWAIT_S))
    assert left["messages"] == [], left


def signed_user_provider(username: str, secret: str, prefix: str) -> InMemoryAuthMetadataProvider:
    """One user allowed Pub+Sub on ``Topic:<prefix>*`` and Sub on ``Group:<prefix>*`` (an auth gateway's users)."""
    entries = (
        PolicyEntry(Resource.parse(f"Topic:{prefix}*"), frozenset({Action.PUB, Action.SUB})),
        PolicyEntry(Resource.parse(f"Group:{prefix}*"), frozenset({Action.SUB})),
    )
    acl = Acl(f"User:{username}", (Policy(entries=entries),))
    return InMemoryAuthMetadataProvider((User(username, secret),), (acl,))


def check_signed_send_and_receive(
    cluster: LocalCluster, runner: SdkRunner, gateway_addr: str, topic: str, group: str, credentials: dict[str, str]
) -> None:
    """The SDK with ``credentials`` ({"access_key", "secret_key"}) sends through an auth gateway, the brokers store
    what it sent, and its SimpleConsumer receives every message."""
    sent = sample_messages(f"{runner.name}-auth", 4)
    produce = {"endpoints": gateway_addr, "topic": topic, "messages": sent, **credentials}
    ids = [r["message_id"] for r in runner.run("produce", produce)["receipts"]]
    assert_stored(cluster, topic, sent, ids)
    out = runner.run("drain", {**consumer_cfg(gateway_addr, group, topic, count=len(sent)), **credentials})
    assert sorted({m["message_id"] for m in out["messages"]}) == sorted(ids)
