"""A real Prometheus (Debian package ``prometheus``; ``make test`` installs it) on 127.0.0.1 scrapes a local
cluster every second while a bounded load runs through the gateway; then, through its HTTP API, every PromQL
expression of every dashboard panel returns data, every alert expression parses and the rules file loads.
Also: the scraped families match metric_names.yaml; the request id of a gateway call reaches the broker's log
lines; no message body shows up in any log. A consumer phase (obs_consumers.py: commit offsets, pull, send one
message per broker to the DLQ) feeds the consumer families and the consumer dashboard: the tests that use it need the
consumer side of issue 17 merged and wired (see obs_consumers.py). Timer, transaction and FIFO phases (obs_timers.py,
obs_transactions.py, obs_fifo.py) feed their rows of the broker dashboard.
"""

from __future__ import annotations

import asyncio
import shutil
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import grpc
import pytest
import requests
import yaml
from apache.rocketmq.v2 import definition_pb2, service_pb2, service_pb2_grpc
from mq.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from mq_common.grpc_server import CHANNEL_OPTIONS
from mq_common.request_context import REQUEST_ID_METADATA_KEY
from mq_local.cluster import LocalCluster
from mq_local.ports import free_port
from mq_local.testing import make_topic, spec_for_tests
from obs_consumers import CONSUMER_GROUP, ConsumedBroker, consume_on_every_broker
from obs_fifo import FIFO_GROUP, consume_orderly
from obs_testkit import (
    RULES_FILE,
    alert_expressions,
    check_exposition,
    concrete,
    dashboard_queries,
    expected_for,
    exported_families,
)
from obs_timers import TimersSent, send_timers
from obs_transactions import TRANSACTION_ENV, send_transactions
from prometheus_client.parser import text_string_to_metric_families

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("prometheus") is None, reason="prometheus not installed (make prometheus)"),
]

# Two replicated broker groups in controller mode (a master and a slave each, etcd and the controller), so every
# dashboard row has data: replication lag, in-sync slaves, SyncStateSet sizes and elections included.
SERVICES: Final = ("namesrv", "controller", "broker-a", "broker-a-s1", "broker-b", "broker-b-s1", "gateway")
BATCH_CALLS: Final = 40
BATCH_SIZE: Final = 100
SINGLE_SENDS: Final = 20
BODY_MARK: Final = b"OBS-BODY-MARK-7f3a"
REQUEST_ID: Final = "obs-test-request-0001"
PROMETHEUS_START_S: Final = 30.0
SCRAPE_WAIT_S: Final = 30.0
# Scrapes of a new series before its rate() has data (two samples) with margin.
SCRAPES_PER_NEW_SERIES: Final = 3
# A lag latency above this means the store time was misread (the load ran a few seconds ago).
MAX_PLAUSIBLE_LAG_LATENCY_MS: Final = 600_000


def service_kind(name: str) -> str:
    return "broker" if name.startswith("broker") else name


@pytest.fixture(scope="module")
def metrics_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalCluster, dict[str, int]]]:
    ports = {name: free_port() for name in SERVICES}
    spec = spec_for_tests(
        tmp_path_factory.mktemp("obs") / "data",
        metrics_ports=ports,
        controller=True,
        replicas_per_broker_group=2,
        broker_env=TRANSACTION_ENV,
    )
    with LocalCluster(spec) as cluster:
        yield cluster, ports


def prometheus_config(ports: dict[str, int]) -> dict[str, Any]:
    jobs: dict[str, list[str]] = {}
    for name, port in ports.items():
        jobs.setdefault(f"pyrocketmq-{service_kind(name)}", []).append(f"127.0.0.1:{port}")
    return {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s", "scrape_timeout": "900ms"},
        "rule_files": [str(RULES_FILE)],
        "scrape_configs": [{"job_name": job, "static_configs": [{"targets": t}]} for job, t in jobs.items()],
    }


@pytest.fixture(scope="module")
def prometheus(
    metrics_cluster: tuple[LocalCluster, dict[str, int]], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """Prometheus on 127.0.0.1:<free port> scraping the cluster; its base URL. Stopped by PID."""
    folder = tmp_path_factory.mktemp("prometheus")
    config = folder / "prometheus.yml"
    config.write_text(yaml.safe_dump(prometheus_config(metrics_cluster[1])), encoding="utf-8")
    port = free_port()
    log = (folder / "prometheus.log").open("wb")
    proc = subprocess.Popen(
        [
            "prometheus",
            f"--config.file={config}",
            f"--storage.tsdb.path={folder / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--storage.tsdb.retention.time=1h",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + PROMETHEUS_START_S
        while True:
            assert proc.poll() is None, (folder / "prometheus.log").read_text(errors="replace")[-3000:]
            try:
                if requests.get(f"{url}/-/ready", timeout=1).status_code == 200:
                    break
            except requests.RequestException:
                pass
            assert time.monotonic() < deadline, "prometheus did not become ready"
            time.sleep(0.2)
        yield url
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
        log.close()


def query(url: str, expr: str) -> list[dict[str, Any]]:
    resp = requests.get(f"{url}/api/v1/query", params={"query": expr}, timeout=10)
    body = resp.json()
    assert resp.status_code == 200, f"{expr}: {body}"
    assert body["status"] == "success", f"{expr}: {body}"
    result: list[dict[str, Any]] = body["data"]["result"]
    return result


async def run_load(cluster: LocalCluster, topic: str) -> int:
    """Bounded load through the gateway to ``topic``: SendBatch calls (one with two bad messages), single Sends, a
    SendOneway, then v2 calls (no message). Returns the number of messages the gateway accepted."""
    body = BODY_MARK + b"." * (1024 - len(BODY_MARK))
    batch = [gateway_pb2.Message(topic=topic, body=body, keys=[f"k{i}"]) for i in range(BATCH_SIZE)]
    bad = [gateway_pb2.Message(topic=topic, body=b""), gateway_pb2.Message(topic="", body=body)]
    ok = 0
    async with grpc.aio.insecure_channel(cluster.gateway_addr, options=CHANNEL_OPTIONS) as channel:
        stub = gateway_pb2_grpc.ProducerGatewayStub(channel)
        meta = ((REQUEST_ID_METADATA_KEY, REQUEST_ID),)
        for i in range(BATCH_CALLS):
            msgs = batch + bad if i == 0 else batch
            resp = await stub.SendBatch(gateway_pb2.SendBatchRequest(messages=msgs), metadata=meta, timeout=30)
            ok += sum(1 for r in resp.results if r.code == 0)
            await asyncio.sleep(0.05)
        for _ in range(SINGLE_SENDS):
            resp1 = await stub.Send(gateway_pb2.SendRequest(message=batch[0]), timeout=30)
            ok += resp1.result.code == 0
        oneway = await stub.SendOneway(gateway_pb2.SendOnewayRequest(message=batch[0]), timeout=30)
        ok += oneway.code == 0
        await v2_calls(channel, topic)
    return ok


async def v2_calls(channel: grpc.aio.Channel, topic: str) -> None:
    """A few RocketMQ 5 API calls (route, heartbeat) from a "JAVA" client: the dashboard's v2 panels."""
    stub = service_pb2_grpc.MessagingServiceStub(channel)
    meta = (("x-mq-client-id", "obs@1@1@v2"), ("x-mq-language", "JAVA"))
    route = await stub.QueryRoute(
        service_pb2.QueryRouteRequest(topic=definition_pb2.Resource(name=topic)), metadata=meta, timeout=30
    )
    assert route.status.code == definition_pb2.OK, route.status.message
    beat = await stub.Heartbeat(service_pb2.HeartbeatRequest(), metadata=meta, timeout=30)
    assert beat.status.code == definition_pb2.OK


@pytest.fixture(scope="module")
def load_topic(metrics_cluster: tuple[LocalCluster, dict[str, int]]) -> str:
    return asyncio.run(make_topic(metrics_cluster[0], "obs_load"))


def wait_for(url: str, expr: str, want: float) -> None:
    """Poll Prometheus until ``expr`` (one sample) reaches ``want`` (SCRAPE_WAIT_S at most)."""
    deadline = time.monotonic() + SCRAPE_WAIT_S
    while True:
        result = query(url, expr)
        if result and float(result[0]["value"][1]) >= want:
            return
        assert time.monotonic() < deadline, f"{expr}: scraped {result}, want {want}"
        time.sleep(0.5)


@pytest.fixture(scope="module")
def loaded(metrics_cluster: tuple[LocalCluster, dict[str, int]], prometheus: str, load_topic: str) -> str:
    """Run the load, then wait until Prometheus has scraped all of it. Returns the Prometheus URL."""
    cluster, _ports = metrics_cluster
    accepted = asyncio.run(run_load(cluster, load_topic))
    assert accepted == BATCH_CALLS * BATCH_SIZE + SINGLE_SENDS + 1
    wait_for(
        prometheus, 'sum(rocketmq_messages_in_total) + sum(mq_gateway_messages_total{result="success"})', 2 * accepted
    )
    time.sleep(2.5)  # a few more scrapes: rate() windows see the increase and the idle tail
    return prometheus


@pytest.fixture(scope="module")
def consumed(
    metrics_cluster: tuple[LocalCluster, dict[str, int]], loaded: str, load_topic: str
) -> dict[str, ConsumedBroker]:
    """After the load: the consumer phase on every broker (obs_consumers.py; needs issue 17's consumer side), then
    wait until Prometheus has scraped its figures SCRAPES_PER_NEW_SERIES times. Broker name -> what was done."""
    cluster, _ports = metrics_cluster
    done = asyncio.run(consume_on_every_broker(cluster.broker_addrs, load_topic))
    group = f'consumer_group="{CONSUMER_GROUP}"'
    wait_for(loaded, f"sum(rocketmq_send_to_dlq_messages_total{{{group}}})", sum(d.sent_to_dlq for d in done.values()))
    wait_for(loaded, f"sum(rocketmq_messages_out_total{{{group}}})", sum(d.pulled for d in done.values()))
    wait_for(loaded, f"count(rocketmq_consumer_lag_messages{{{group}}})", len(done))
    for name in ("rocketmq_send_to_dlq_messages_total", "rocketmq_messages_out_total"):
        wait_for(loaded, f"min(count_over_time({name}{{{group}}}[1m]))", SCRAPES_PER_NEW_SERIES)
    return done


@pytest.fixture(scope="module")
def timed(metrics_cluster: tuple[LocalCluster, dict[str, int]], loaded: str) -> TimersSent:
    """After the load: the timer phase (obs_timers.py; needs issue 32's broker timers wired to BrokerMetrics), then
    wait until Prometheus has scraped the fired timers and re-put delay-level messages SCRAPES_PER_NEW_SERIES
    times."""
    sent = asyncio.run(send_timers(metrics_cluster[0]))
    topic = f'topic="{sent.topic}"'
    wait_for(loaded, f"sum(rocketmq_timer_dequeue_total{{{topic}}})", sent.soon)
    wait_for(loaded, f"sum(mq_broker_schedule_dequeue_total{{{topic}}})", sent.delay_level)
    wait_for(loaded, f"sum(rocketmq_timing_messages{{{topic}}})", sent.far)
    for name in ("rocketmq_timer_dequeue_total", "mq_broker_schedule_dequeue_total", "rocketmq_timing_messages"):
        wait_for(loaded, f"min(count_over_time({name}{{{topic}}}[1m]))", SCRAPES_PER_NEW_SERIES)
    return sent


def test_every_dashboard_query_returns_data(
    loaded: str, consumed: dict[str, ConsumedBroker], timed: TimersSent, transacted: str, fifo_consumed: str
) -> None:
    queries = dashboard_queries()
    assert len(queries) >= 40
    empty = [(board, title, expr) for board, title, expr in queries if not query(loaded, concrete(expr))]
    assert empty == []


def test_every_alert_expression_parses_and_the_rules_load(loaded: str) -> None:
    alerts = alert_expressions()
    assert len(alerts) >= 6
    for _name, expr in alerts:
        query(loaded, expr)  # a parse error is a 400 answer
    rules = requests.get(f"{loaded}/api/v1/rules", timeout=10).json()["data"]["groups"]
    loaded_rules = {r["name"]: r["health"] for g in rules for r in g["rules"]}
    assert loaded_rules == {name: "ok" for name, _ in alerts}


def test_every_target_is_up(loaded: str) -> None:
    up = {r["metric"]["instance"]: r["value"][1] for r in query(loaded, "up")}
    assert len(up) == len(SERVICES)
    assert set(up.values()) == {"1"}


TRANSACTION_FAMILIES = (
    "rocketmq_half_messages",
    "rocketmq_commit_messages",
    "rocketmq_rollback_messages",
    "rocketmq_finish_message_latency",
    "mq_broker_transaction_checks",
    "mq_broker_transaction_check_max",
)


@pytest.fixture(scope="module")
def transacted(metrics_cluster: tuple[LocalCluster, dict[str, int]], loaded: str) -> str:
    """After the load: the transaction phase (obs_transactions.py), then wait until Prometheus has scraped every
    transaction series SCRAPES_PER_NEW_SERIES times."""
    topic = asyncio.run(send_transactions(metrics_cluster[0]))
    series = [
        "rocketmq_half_messages",
        "rocketmq_commit_messages_total",
        "rocketmq_rollback_messages_total",
        "rocketmq_finish_message_latency_count",
        "mq_broker_transaction_checks_total",
        "mq_broker_transaction_check_max_total",
    ]
    for name in series:
        # max: a broker's gauge series ends when its last open transaction ends ("u" is discarded)
        wait_for(loaded, f'max(count_over_time({name}{{topic="{topic}"}}[1m]))', SCRAPES_PER_NEW_SERIES)
    return topic


@pytest.fixture(scope="module")
def fifo_consumed(metrics_cluster: tuple[LocalCluster, dict[str, int]], loaded: str) -> str:
    """After the load: the FIFO phase (obs_fifo.py), then wait until Prometheus has scraped every FIFO series of its
    topic SCRAPES_PER_NEW_SERIES times on every master. Returns the topic."""
    cluster, _ports = metrics_cluster
    topic = asyncio.run(consume_orderly(cluster))
    masters = len(cluster.broker_addrs)
    labels = f'topic="{topic}", consumer_group="{FIFO_GROUP}"'
    wait_for(loaded, f"sum(mq_broker_fifo_blocked_queues{{{labels}}})", masters)
    wait_for(loaded, f"sum(mq_broker_fifo_order_wait_ms_count{{{labels}}})", masters)
    for name in ("mq_broker_fifo_blocked_queues", "mq_broker_fifo_block_age_ms", "mq_broker_fifo_order_wait_ms_count"):
        wait_for(loaded, f"min(count_over_time({name}{{{labels}}}[1m]))", SCRAPES_PER_NEW_SERIES)
    return topic


def test_brokers_export_the_fifo_figures_of_the_orderly_phase(
    metrics_cluster: tuple[LocalCluster, dict[str, int]], fifo_consumed: str
) -> None:
    """On every master: the queue left blocked (one queue, a real age), one block ended (one order wait)."""
    cluster, ports = metrics_cluster
    labels = {"topic": fifo_consumed, "consumer_group": FIFO_GROUP}
    for name in cluster.broker_addrs:
        got = scrape_samples(ports[name])
        assert one_value(got, "mq_broker_fifo_blocked_queues", labels) == 1, name
        assert 0 < one_value(got, "mq_broker_fifo_block_age_ms", labels) < MAX_PLAUSIBLE_LAG_LATENCY_MS, name
        assert one_value(got, "mq_broker_fifo_order_wait_ms_count", labels) == 1, name


def test_scraped_families_match_the_metric_list(
    metrics_cluster: tuple[LocalCluster, dict[str, int]],
    consumed: dict[str, ConsumedBroker],
    timed: TimersSent,
    transacted: str,
    fifo_consumed: str,
) -> None:
    """Each process exports only listed families with their labels; each kind's processes together export every
    family listed for it (a slave has no per-slave lag series, a master no replicated bytes of its own)."""
    _cluster, ports = metrics_cluster
    exported: dict[str, set[str]] = {}
    for name, port in ports.items():
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
        assert check_exposition(text, service_kind(name), require_all=False) == [], name
        exported.setdefault(service_kind(name), set()).update(exported_families(text))
    for kind, families in exported.items():
        assert set(expected_for(kind)) - families == set(), kind


def test_request_id_reaches_the_broker_and_no_body_is_logged(
    metrics_cluster: tuple[LocalCluster, dict[str, int]], loaded: str
) -> None:
    cluster, _ports = metrics_cluster
    logs = {p.name: p.read_bytes() for p in Path(cluster.spec.data_dir).glob("*.log")}
    assert set(logs) >= {"gateway.log", "broker-a.log", "broker-b.log", "namesrv.log"}
    assert any(REQUEST_ID.encode() in logs[n] for n in ("broker-a.log", "broker-b.log"))
    assert all(BODY_MARK not in text for text in logs.values())


def scrape_samples(port: int) -> dict[str, list[tuple[dict[str, str], float]]]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, []).append((sample.labels, sample.value))
    return out


def one_value(samples: dict[str, list[tuple[dict[str, str], float]]], family: str, labels: dict[str, str]) -> float:
    """The value of the only sample of ``family`` whose labels include ``labels``."""
    found = [v for lab, v in samples.get(family, []) if lab.items() >= labels.items()]
    assert len(found) == 1, (family, labels, samples.get(family))
    return found[0]


def test_each_broker_exports_the_consumer_figures_of_what_was_consumed(
    metrics_cluster: tuple[LocalCluster, dict[str, int]], load_topic: str, consumed: dict[str, ConsumedBroker]
) -> None:
    """Scraped from each broker process: lag = every stored message of the topic (offset 0 committed, pulls commit
    nothing), all of it ready and none in flight, dated by a real store time; out = what the pulls answered; one
    message sent to the DLQ. Needs issue 17's consumer side merged and wired (obs_consumers.py)."""
    _cluster, ports = metrics_cluster
    base = {"topic": load_topic, "consumer_group": CONSUMER_GROUP, "is_system": "false"}
    first = base | {"is_retry": "false"}
    for name, done in consumed.items():
        assert done.stored > 0, name
        got = scrape_samples(ports[name])
        assert one_value(got, "rocketmq_consumer_lag_messages", first) == done.stored, name
        assert one_value(got, "rocketmq_consumer_ready_messages", first) == done.stored, name
        assert one_value(got, "rocketmq_consumer_inflight_messages", first) == 0, name
        for family in ("rocketmq_consumer_lag_latency", "rocketmq_consumer_queueing_latency"):
            assert 0 < one_value(got, family, first) < MAX_PLAUSIBLE_LAG_LATENCY_MS, (name, family)
        assert one_value(got, "rocketmq_messages_out_total", first) == done.pulled, name
        assert one_value(got, "rocketmq_throughput_out_total", first) == done.pulled_bytes, name
        assert one_value(got, "rocketmq_send_to_dlq_messages_total", base) == done.sent_to_dlq, name


def test_brokers_export_the_timer_figures_of_what_was_sent(
    metrics_cluster: tuple[LocalCluster, dict[str, int]], timed: TimersSent
) -> None:
    """Summed over the brokers, for the timer phase's topic: every timer enqueued, the ones due soon fired (one
    lateness each, none negative), the far ones pending, every delay-level message re-put (one lateness each).
    Needs issue 32's broker timers wired to BrokerMetrics (obs_timers.py)."""
    _cluster, ports = metrics_cluster
    topic = {"topic": timed.topic}
    totals: dict[str, float] = {}
    for name, port in ports.items():
        if service_kind(name) != "broker":
            continue
        got = scrape_samples(port)
        for family, labels in [
            ("rocketmq_timer_enqueue_total", topic),
            ("rocketmq_timer_dequeue_total", topic),
            ("rocketmq_timing_messages", topic),
            ("mq_broker_schedule_dequeue_total", topic),
            ("mq_broker_timer_lateness_ms_count", topic | {"timer_type": "timer"}),
            ("mq_broker_timer_lateness_ms_count", topic | {"timer_type": "delay_level"}),
        ]:
            key = f"{family}{labels.get('timer_type', '')}"
            found = [v for lab, v in got.get(family, []) if lab.items() >= labels.items()]
            totals[key] = totals.get(key, 0.0) + sum(found)
    assert totals == {
        "rocketmq_timer_enqueue_total": timed.soon + timed.far,
        "rocketmq_timer_dequeue_total": timed.soon,
        "rocketmq_timing_messages": timed.far,
        "mq_broker_schedule_dequeue_total": timed.delay_level,
        "mq_broker_timer_lateness_ms_counttimer": timed.soon,
        "mq_broker_timer_lateness_ms_countdelay_level": timed.delay_level,
    }
