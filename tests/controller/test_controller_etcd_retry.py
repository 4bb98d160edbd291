"""Which etcd errors move a controller's call on to the next member (EtcdReplicaStateStore._call): no etcd needed,
the store's call loop is driven with actions that fail as aetcd reports failures."""

from __future__ import annotations

import pytest
from aetcd import exceptions as etcd_errors
from mq_controller.etcd_store import EtcdReplicaStateStore, is_retried
from mq_controller.state_store import StateStoreUnavailableError


@pytest.mark.parametrize(
    ("error", "retried"),
    [
        (etcd_errors.ConnectionFailedError("failed to connect to all addresses"), True),
        (etcd_errors.ConnectionTimeoutError("Deadline Exceeded"), True),
        (etcd_errors.InternalError("etcdserver: leader changed"), True),
        # the call's deadline passed inside a member waiting out a leader election (gRPC UNKNOWN; seen in CI)
        (etcd_errors.ClientError("context deadline exceeded"), True),
        (etcd_errors.ClientError("etcdserver: mvcc: required revision has been compacted"), False),
        (etcd_errors.PreconditionFailedError("context deadline exceeded"), False),
        (etcd_errors.InvalidArgumentError("etcdserver: key is not provided"), False),
    ],
)
def test_is_retried(error: Exception, retried: bool) -> None:
    assert is_retried(error) is retried


async def test_a_server_side_deadline_moves_the_call_to_the_next_member() -> None:
    store = EtcdReplicaStateStore(["127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"], "/t", call_timeout_ms=100)
    tried: list[object] = []

    async def action() -> str:
        tried.append(store._client)
        if len(tried) == 1:
            raise etcd_errors.ClientError("context deadline exceeded")
        return "answer"

    assert await store._call("keepalive", action) == "answer"
    assert len(tried) == 2
    assert tried[0] is not tried[1]  # the second attempt went to another member


async def test_other_errors_propagate_at_once_and_retries_are_bounded() -> None:
    store = EtcdReplicaStateStore(["127.0.0.1:1", "127.0.0.1:2"], "/t", call_timeout_ms=100)
    calls = 0

    async def compacted() -> None:
        nonlocal calls
        calls += 1
        raise etcd_errors.RevisionCompactedError(1)

    with pytest.raises(etcd_errors.RevisionCompactedError):
        await store._call("range", compacted)
    assert calls == 1

    async def always_late() -> None:
        nonlocal calls
        calls += 1
        raise etcd_errors.ClientError("context deadline exceeded")

    calls = 0
    with pytest.raises(StateStoreUnavailableError):
        await store._call("range", always_late)
    assert calls > 1
