"""The images run the topology the chart describes: 2 name servers, 2 broker groups of a master and a slave each
(controller mode, with the controller Deployment and the etcd StatefulSet), 1 gateway, then the Spark job.

Both images are built offline (docker/build-images.sh: debootstrap base, host wheels, ``--network none``). Each
workload's image, command, args, environment (envFrom ConfigMaps + env), mounts and security context come from
the chart rendered by the real Helm engine with tests/e2e/values-containers.yaml; the Spark job's from
deploy/spark/sparkapplication.yaml. Only what host networking forces is overridden (containers_topology's
HOST_NETWORK_OVERRIDES). TLS and auth are on with the chart's default values: the chart generates the CA, the
certificates and the auth Secret, and the kit projects the rendered Secrets into the containers the way the kubelet
would (the users' password Secrets are the suite's, as an operator's). The chart's bootstrap Job creates the Spark
and SDK users on every master; every client of the suite trusts the generated CA, calls over TLS with the chart's
admin certificate and signs as the generated init super user. Then: every flight stored once (the Spark
user, Pub on Topic:flights only); refused clients store nothing; a fake broker cannot register; the official SDKs
send and receive with credentials over TLS; SIGTERM one group's master -> exit 0, no abort file, unregistered, its
slave elected; start it again on the same volume -> data intact, it rejoins as the slave; SIGTERM the gateway ->
drained, and a new gateway pod serves. test_containers_ha.py (same topology) shows replication and SIGKILL
failover. Timings go to .build/e2e-timings.json.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
from pathlib import Path
from typing import Any

import grpc
import pytest
from apache.rocketmq.v2 import definition_pb2
from containers_kit import (
    PodRun,
    RunningPod,
    free_ports,
    json_lines,
    record_timings,
    start_container,
    wait_serving,
)
from containers_topology import (
    SERVING_TIMEOUT_S,
    Topology,
    wait_in_sync,
    wait_master,
    wait_topic_on,
)
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from e2e_security import (
    SDK_USER,
    Pki,
    headers,
    presented_certificate,
    register_as,
    v2_send,
)
from mq_client.admin.admin_client import MQAdminClient
from mq_client.auth_admin_calls import AuthAdminCalls
from mq_common.auth.interceptor import signing_interceptors
from mq_common.channels import ChannelPool
from mq_common.errors import MQError
from mq_common.protocol import TopicConfig
from mq_common.response_code import ResponseCode
from mq_common.tls import TlsClientConfig
from mq_spark.jobs.publish_flights import FLIGHTS_ROWS, FLIGHTS_TOPIC
from spark_standalone_kit import driver_run, make_flights_topic, read_back, spark_security_env, spark_tls_dir

from tests.v2.sdk.sdk_testkit import assert_views_match, node_runner, python_runner, sample_messages

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1_800)]

SPARK_TIMEOUT_S = 1_200.0
PROBE_TOPIC = "e2e-probe"
REFUSED_TOPIC = "e2e-refused"
FAILOVER_DEADLINE_S = 30.0  # SIGTERM of a master -> its slave listed as master (the controller: 3 s lease + scan)
Code = definition_pb2.Code


def test_image_entrypoint_tini_forwards_sigterm(images: dict[str, str]) -> None:
    """Without a Kubernetes ``command:`` the image's ENTRYPOINT (tini) is PID 1 and passes SIGTERM on."""
    (port,) = free_ports(1)
    run = PodRun(
        pod_name="tini-namesrv",
        image=images["services"],
        command=(),
        args=("mqnamesrv",),
        env={"MQ_NAMESRV_LISTEN_HOST": "127.0.0.1", "MQ_NAMESRV_LISTEN_PORT": str(port)},
        mounts={"/tmp": ("emptyDir", "64Mi")},
        user="10001:10001",
        read_only_root=True,
        drop_all_capabilities=True,
        no_new_privileges=True,
        grpc_port=port,
        termination_grace_s=30,
    )
    pod = start_container(run, {})
    try:
        wait_serving(pod, f"127.0.0.1:{port}", SERVING_TIMEOUT_S)  # no TLS settings: plaintext
        assert pod.inspect()["Config"]["Entrypoint"] == ["tini", "--"]
        pod.signal("SIGTERM")
        code = pod.wait_exit(run.termination_grace_s)
        logs = pod.logs()
    finally:
        pod.remove()
    assert code == 0, logs[-4000:]
    assert [e.get("event") for e in json_lines(logs)][-1] == "stopped"


async def _cluster_brokers(namesrv_addr: str, tls: TlsClientConfig) -> dict[str, list[str]]:
    """broker name -> addresses registered on one name server."""
    async with MQAdminClient([namesrv_addr], tls=tls) as admin:
        info = await admin.cluster_list()
    return {name: sorted(data.broker_addrs.values()) for name, data in info.broker_addr_table.items()}


async def _wait_registered(topology: Topology, expected: dict[str, list[str]], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    seen: list[dict[str, list[str]]] = []
    while time.monotonic() < deadline:
        seen = [await _cluster_brokers(a, topology.admin_tls) for a in topology.namesrv_addrs]
        if all({k: v for k, v in s.items() if v} == expected for s in seen):
            return
        await asyncio.sleep(0.5)
    raise AssertionError(f"name servers list {seen}, expected {expected}")


def _registered(topology: Topology, leaving: RunningPod | None = None) -> dict[str, list[str]]:
    """group -> the gRPC addresses of its running pods (but ``leaving``), as the name servers should list them."""
    return {name: sorted(topology.local(p) for p in pods if p is not leaving) for name, pods in topology.groups.items()}


async def test_topology_runs_as_the_chart_describes(topology: Topology) -> None:
    expected = _registered(topology)
    assert sorted(expected) == ["broker-a", "broker-b"]
    assert all(len(addrs) == 2 for addrs in expected.values()), expected
    await _wait_registered(topology, expected, 30.0)
    services = [*topology.namesrvs, *topology.controllers, *topology.brokers(), topology.gateway]
    for pod in [*services, *topology.etcds]:
        attrs = pod.inspect()
        host = attrs["HostConfig"]
        assert host["NetworkMode"] == "host"
        assert not host.get("PortBindings")
        assert host["ReadonlyRootfs"] is True
        assert host["CapDrop"] == ["ALL"]
        assert attrs["Config"]["User"] == "10001:10001"
        # The chart sets args only: the image's ENTRYPOINT (tini, PID 1) runs the service (or etcd) they name.
        assert attrs["Config"]["Entrypoint"] == ["tini", "--"]
        assert attrs["Config"]["Cmd"] == list(pod.args)
    for pod in services:
        started = [e for e in json_lines(pod.logs()) if e.get("event") == "started"]
        assert len(started) == 1, pod.logs()[-2000:]


# ------------------------------------------------------------------------------------------ TLS and auth


def test_pods_present_the_certificates_the_chart_generated(
    topology: Topology, containers_docs: list[dict[str, Any]]
) -> None:
    """Every gRPC server (and etcd's client port) presents its component's certificate from the Secret the chart
    rendered, verified against the chart's CA under the address dialled here: the suite issued none of them."""
    rendered = {d["metadata"]["name"]: d for d in containers_docs if d["kind"] == "Secret"}
    servers = [(p, "namesrv", "grpc", "broker") for p in topology.namesrvs]
    servers += [(p, "broker", "grpc", "gateway") for p in topology.brokers()]
    servers += [(p, "controller", "grpc", "admin") for p in topology.controllers]
    servers += [(p, "etcd", "client", "controller") for p in topology.etcds]
    servers.append((topology.gateway, "gateway", "grpc", "admin"))
    for pod, component, port, client in servers:
        secret = rendered[f"mq-{component}-tls"]
        assert secret["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
        der = presented_certificate(topology.local(pod, port), topology.pki, client)
        expected = x509.load_pem_x509_certificate(base64.b64decode(secret["data"]["tls.crt"]))
        assert der == expected.public_bytes(serialization.Encoding.DER), pod.run.pod_name
    assert topology.pki.ca_pem == base64.b64decode(rendered["mq-ca"]["data"]["tls.crt"])


def test_bootstrap_job_creates_the_users_and_acls(topology: Topology, bootstrapped: str) -> None:
    events = list(json_lines(bootstrapped))
    applied = {(e["event"], e.get("user") or e.get("subject"), e["broker"]) for e in events if "broker" in e}
    # the Job applies them on every group's master (the name servers' broker id 0)
    brokers = {topology.local(p) for p in asyncio.run(topology.masters()).values()}
    assert len(brokers) == len(topology.groups)
    for broker in brokers:
        assert {("user_applied", "spark-flights", broker), ("user_applied", "sdk-app", broker)} <= applied
        assert ("acl_applied", "User:spark-flights", broker) in applied
    assert events[-1]["event"] == "bootstrap_done"
    assert not [s for s in topology.credentials.shown_nowhere if s in bootstrapped]

    async def users_on_every_broker() -> list[set[str]]:
        pool = ChannelPool(topology.admin_tls, signing_interceptors(topology.super_user))
        try:
            calls = AuthAdminCalls(pool, (topology.super_user.access_key, topology.super_user.secret_key))
            return [{u.username for u in await calls.list_user(addr)} for addr in sorted(brokers)]
        finally:
            await pool.close()

    for names in asyncio.run(users_on_every_broker()):
        assert {"spark-flights", "sdk-app", topology.super_user.access_key} <= names


REFUSALS = {
    "no credentials": Code.UNAUTHORIZED,
    "wrong signature": Code.UNAUTHORIZED,
    "stale date-time": Code.UNAUTHORIZED,
    "lacking the action": Code.FORBIDDEN,
}


@pytest.mark.parametrize("case", list(REFUSALS))
async def test_refused_clients_store_nothing(topology: Topology, bootstrapped: str, case: str) -> None:
    async with topology.admin() as admin:
        await admin.update_topic(TopicConfig(REFUSED_TOPIC, 2, 2), cluster_name="DefaultCluster")
    status = await v2_send(topology.gateway_addr, topology.pki.ca_pem, REFUSED_TOPIC, headers(case, f"e2e-{case}"))
    assert status.code == REFUSALS[case], status.message
    assert not [s for s in topology.credentials.shown_nowhere if s in status.message]
    if REFUSALS[case] == Code.FORBIDDEN:
        assert f"Topic:{REFUSED_TOPIC}" in status.message
    offsets = await _topic_offsets(topology, REFUSED_TOPIC)
    assert offsets, "the topic has queues"
    assert all(high == 0 for _, high in offsets.values()), offsets


async def test_a_broker_without_the_component_certificate_cannot_register(topology: Topology) -> None:
    expected = _registered(topology)
    await _wait_registered(topology, expected, 30.0)
    impostor = "127.0.0.1:1"
    # Signed by the cluster's CA but not the brokers' identity: the name server answers NO_PERMISSION (16).
    for namesrv in topology.namesrv_addrs:
        code, remark = await register_as(namesrv, topology.pki.client("outsider"), impostor)
        assert code == ResponseCode.NO_PERMISSION, remark
    # Without a certificate of the CA the handshake fails: no RPC at all.
    stranger = Pki.own(topology.pki.directory.parent / "stranger-pki")
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await register_as(topology.namesrv_addrs[0], stranger.client("broker"), impostor)
    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
    await _wait_registered(topology, expected, 5.0)  # routes unchanged
    async with topology.admin() as admin:
        info = await admin.cluster_list()
    assert impostor not in info.broker_addr_table["broker-a"].broker_addrs.values()


@pytest.mark.parametrize("sdk", ["python", "node"])
def test_official_sdks_send_and_receive_with_credentials_over_tls(
    topology: Topology, bootstrapped: str, sdk: str, tmp_path: Path
) -> None:
    topic, group = f"e2e-sdk-{sdk}", f"e2e-sdk-{sdk}-group"
    asyncio.run(_make_topic(topology, topic))
    runner = python_runner(tmp_path / "home") if sdk == "python" else node_runner(tmp_path / "home")
    runner.env["GRPC_DEFAULT_SSL_ROOTS_FILE_PATH"] = str(topology.pki.ca_file)
    host_port = topology.gateway_addr.replace("127.0.0.1", "localhost")  # the SDKs verify a host name
    cfg = {"endpoints": host_port, "access_key": SDK_USER.access_key, "secret_key": SDK_USER.secret_key, "tls": True}
    messages = sample_messages(f"e2e-{sdk}", 4)
    sent = runner.run("produce", {**cfg, "topic": topic, "messages": messages})
    ids = [r["message_id"] for r in sent["receipts"]]
    assert len(ids) == len(messages)
    got = runner.run("drain", {**cfg, "topic": topic, "group": group, "count": len(messages), "deadline_s": 120})
    assert_views_match(got["messages"], messages, ids)


async def _make_topic(topology: Topology, topic: str) -> None:
    async with topology.admin() as admin:
        await admin.update_topic(TopicConfig(topic, 2, 2), cluster_name="DefaultCluster")


def test_spark_image_publishes_every_flight_once(
    topology: Topology, bootstrapped: str, spark_app: dict[str, Any], tmp_path: Path
) -> None:
    asyncio.run(make_flights_topic(topology))
    spec = spark_app["spec"]
    # What the operator starts in the driver pod (spark_standalone_kit.driver_run); the master is local[2] here
    # (executor pods need an API server; test_containers_spark_executor_kill.py runs executors in containers).
    run = driver_run(spec, topology, spark_tls_dir(topology, tmp_path), "local[2]")
    started = time.monotonic()
    pod = start_container(run, {"SPARK_LOCAL_IP": "127.0.0.1", **spark_security_env()})
    try:
        code = pod.wait_exit(SPARK_TIMEOUT_S)
        seconds = time.monotonic() - started
        logs = pod.logs()
    finally:
        pod.remove()
    assert code == 0, logs[-6000:]
    summary = [e for e in json_lines(logs) if "published" in e][-1]
    assert summary["published"] == summary["rows"] == FLIGHTS_ROWS, summary
    assert summary["failed"] == 0
    assert not [s for s in topology.credentials.shown_nowhere if s in logs]
    check = asyncio.run(read_back(topology, FLIGHTS_TOPIC, FLIGHTS_ROWS))
    report = check.report()
    record_timings({"spark_publish_s": round(seconds, 1), "spark_summary": summary, "verify": report})
    assert (check.verified, check.missing, check.duplicates, check.unexpected) == (FLIGHTS_ROWS, 0, 0, 0), report
    assert set(check.per_broker) == {"broker-a", "broker-b"}
    assert check.keys_on_many_queues == 0


async def _topic_offsets(topology: Topology, topic: str, broker: str | None = None) -> dict[int, tuple[int, int]]:
    """queue id -> (min, max offset) of ``topic`` on ``broker`` (None: summed over every broker)."""
    async with topology.admin() as admin:
        stats = await admin.topic_status(topic)
    if broker is None:
        out: dict[int, tuple[int, int]] = {}
        for s in stats:
            low, high = out.get(s.queue_id, (0, 0))
            out[s.queue_id] = (low + s.min_offset, high + s.max_offset)
        return out
    return {s.queue_id: (s.min_offset, s.max_offset) for s in stats if s.broker_name == broker}


async def _send_until(topology: Topology, topic: str, broker: str, limit: int) -> int:
    """Send probe messages through the gateway until one lands on ``broker``; returns how many were sent."""
    deadline = time.monotonic() + 60.0
    async with topology.admin(gateway=True) as admin:
        for i in range(limit):
            result = await admin.send_message(topic, json.dumps({"probe": i}).encode(), keys=[f"probe-{i}"])
            assert result.send_status == "SEND_OK"
            if result.broker_name == broker:
                return i + 1
            if time.monotonic() > deadline:
                break
            await asyncio.sleep(0.1)
    raise AssertionError(f"no probe landed on {broker} within {limit} sends")


async def test_master_sigterm_is_clean_its_slave_takes_over_and_it_rejoins(topology: Topology) -> None:
    name = "broker-b"
    pod = (await topology.masters())[name]
    (peer,) = [p for p in topology.groups[name] if p is not pod]
    async with topology.admin() as admin:
        await admin.update_topic(TopicConfig(PROBE_TOPIC, 2, 2), cluster_name="DefaultCluster")
    await _wait_registered(topology, _registered(topology), 30.0)
    await wait_topic_on(peer, PROBE_TOPIC, 60.0)  # the slave, once elected, serves the topic
    await _send_until(topology, PROBE_TOPIC, name, 40)
    before = await _topic_offsets(topology, PROBE_TOPIC, name)
    assert sum(hi for _, hi in before.values()) > 0
    store_root = pod.host_path(pod.env["MQ_BROKER_STORE_PATH_ROOT_DIR"])
    assert (store_root / "abort").exists(), "a running broker keeps its abort file"

    stop_sending = asyncio.Event()
    sender = asyncio.create_task(_send_while(topology, stop_sending))  # sends in flight across the SIGTERM
    await asyncio.sleep(0.5)
    started = time.monotonic()
    pod.signal("SIGTERM")
    code = await asyncio.to_thread(pod.wait_exit, pod.run.termination_grace_s)
    stop_s = time.monotonic() - started
    logs = pod.logs()
    assert code == 0, logs[-4000:]
    assert any(e.get("event") == "broker_stopped" for e in json_lines(logs)), logs[-4000:]
    assert not (store_root / "abort").exists(), "clean shutdown removes the abort file"
    assert (store_root / "checkpoint").exists()
    await _wait_registered(topology, _registered(topology, leaving=pod), 5.0)  # unregistered at once
    await wait_master(topology, name, peer, FAILOVER_DEADLINE_S)  # the controller elects the slave
    takeover_s = time.monotonic() - started
    stop_sending.set()
    acked = await sender

    started = time.monotonic()
    again = await asyncio.to_thread(topology.restart, pod)
    restart_s = time.monotonic() - started
    (line,) = [e for e in json_lines(again.logs()) if e.get("event") == "started"]
    assert line["last_exit_ok"] is True
    await _wait_registered(topology, _registered(topology), 30.0)
    await wait_in_sync(topology, name, 60.0)  # back as the slave of the new master, nothing behind
    assert (await topology.masters())[name] is peer
    restored = await _topic_offsets(topology, PROBE_TOPIC, name)
    assert restored.keys() == before.keys()
    assert all(restored[q][1] >= before[q][1] for q in before), (before, restored)
    lost = [(b, q, o) for b, q, o in acked if b == name and o >= restored[q][1]]
    assert not lost, f"acknowledged sends missing after the failover: {lost[:10]}"
    if await _has_topic(topology):  # the Spark test ran: every flight is still there, once
        check = await read_back(topology, FLIGHTS_TOPIC, FLIGHTS_ROWS)
        assert (check.verified, check.missing, check.duplicates) == (FLIGHTS_ROWS, 0, 0), check.report()
    sent = await _send_until(topology, PROBE_TOPIC, name, 40)
    after = await _topic_offsets(topology, PROBE_TOPIC, name)
    assert sum(hi for _, hi in after.values()) > sum(hi for _, hi in before.values())
    record_timings(
        {
            "broker_sigterm_stop_s": round(stop_s, 2),
            "slave_master_after_sigterm_s": round(takeover_s, 1),
            "broker_restart_s": round(restart_s, 1),
            "sends_acked_across_sigterm": len(acked),
            "of_them_on_the_stopped_group": sum(1 for b, _, _ in acked if b == name),
        }
    )
    assert sent >= 1
    assert len(acked) > 0


async def _send_while(topology: Topology, stop: asyncio.Event, limit: int = 3_000) -> list[tuple[str, int, int]]:
    """Probe sends through the gateway until ``stop`` (at most ``limit``); returns the acknowledged ones as
    (broker name, queue id, queue offset). Failed sends (the broker going away) are allowed, not counted."""
    acked: list[tuple[str, int, int]] = []
    async with topology.admin(gateway=True) as admin:
        for i in range(limit):
            if stop.is_set():
                break
            try:
                result = await admin.send_message(PROBE_TOPIC, json.dumps({"inflight": i}).encode())
            except MQError:
                await asyncio.sleep(0.05)
                continue
            if result.send_status == "SEND_OK":
                acked.append((result.broker_name, result.queue_id, result.queue_offset))
    return acked


async def _has_topic(topology: Topology) -> bool:
    async with topology.admin() as admin:
        return FLIGHTS_TOPIC in await admin.topic_list()


async def test_gateway_sigterm_drains_and_exits_cleanly(topology: Topology) -> None:
    gateway = topology.gateway
    async with topology.admin(gateway=True) as admin:
        await admin.update_topic(TopicConfig(PROBE_TOPIC, 2, 2), cluster_name="DefaultCluster")
        result = await admin.send_message(PROBE_TOPIC, b'{"before": "sigterm"}')
    assert result.send_status == "SEND_OK"
    gateway.signal("SIGTERM")
    code = await asyncio.to_thread(gateway.wait_exit, gateway.run.termination_grace_s)
    logs = gateway.logs()
    assert code == 0, logs[-4000:]
    events = [e.get("event") for e in json_lines(logs)]
    assert "gateway_stopped" in events
    assert events[-1] == "stopped"
    # as the Deployment would: a new gateway pod (same spec) serves in its place
    again = await asyncio.to_thread(topology.restart, gateway)
    async with topology.admin(gateway=True) as admin:
        result = await admin.send_message(PROBE_TOPIC, b'{"after": "sigterm"}')
    assert result.send_status == "SEND_OK"
    assert again is topology.gateway
