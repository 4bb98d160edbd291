"""Session fixtures of the container suite (the test_containers*.py modules share one topology).

conftest.py imports them, so every module gets the same instances: the Docker daemon, both images (built twice:
cold-or-warm, then warm), the Secrets (the ones the chart rendered, with its default TLS and auth values, plus the
users' passwords an operator adds), the PKI read from them, the replicated topology of containers_topology.py and
the log of the chart's auth bootstrap Job, run once on it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from chart_testkit import NAMESPACE, SPARK_DIR, render_docs, secret_data
from containers_kit import (
    build_images,
    dangling_project_images,
    image_exists,
    localize,
    pod_runs,
    record_timings,
    remove_leftover_containers,
    start_container,
    start_docker,
    stop_docker,
)
from containers_topology import VALUES, Topology, start_topology, workloads
from e2e_security import Pki, operator_secrets

BOOTSTRAP_TIMEOUT_S = 300.0


@pytest.fixture(scope="session")
def containers_docs() -> list[dict[str, Any]]:
    """The chart rendered with tests/e2e/values-containers.yaml."""
    docs: list[dict[str, Any]] = render_docs(yaml.safe_load(VALUES.read_text(encoding="utf-8")))
    return docs


@pytest.fixture(scope="session")
def secrets(containers_docs: list[dict[str, Any]]) -> dict[str, dict[str, str]]:
    """The cluster's Secrets (name -> key -> value as pods see them): the ones the chart rendered, and the users'
    passwords the values name (an operator's)."""
    rendered = secret_data(containers_docs)
    assert not set(rendered) & set(operator_secrets()), "the chart renders a Secret the operator was to create"
    return {**rendered, **operator_secrets()}


@pytest.fixture(scope="session")
def pki(secrets: dict[str, dict[str, str]], tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return Pki.of_release(secrets, tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="session")
def spark_app() -> dict[str, Any]:
    docs = yaml.safe_load_all((SPARK_DIR / "sparkapplication.yaml").read_text(encoding="utf-8"))
    return next(d for d in docs if d and d["kind"] == "SparkApplication")


@pytest.fixture(scope="session")
def docker_daemon() -> Iterator[None]:
    clock = time.monotonic()
    started = start_docker()
    remove_leftover_containers()
    yield
    remove_leftover_containers()
    record_timings({"containers_suite_s": round(time.monotonic() - clock, 1)})
    if started:
        stop_docker()


@pytest.fixture(scope="session")
def images(docker_daemon: None, containers_docs: list[dict[str, Any]], spark_app: dict[str, Any]) -> dict[str, str]:
    """Build both images (the tags the manifests name), once cold-or-warm and once more warm; timings kept."""
    services = {c["image"] for d in containers_docs if d["kind"] in ("StatefulSet", "Deployment")
                for c in d["spec"]["template"]["spec"]["containers"]}  # fmt: skip
    assert len(services) == 1, services
    service_image = services.pop()
    repo, tag = service_image.rsplit(":", 1)
    assert repo == "pyrocketmq"
    assert spark_app["spec"]["image"] == f"pyrocketmq-spark:{tag}"
    first = build_images(tag)
    warm = build_images(tag)
    record_timings({"image_build_first": first, "image_build_warm": warm})
    assert image_exists(service_image)
    assert image_exists(spark_app["spec"]["image"])
    assert dangling_project_images() == [], "a rebuild must not leave untagged stage or superseded images"
    return {"services": service_image, "spark": spark_app["spec"]["image"]}


@pytest.fixture(scope="session")
def topology(
    images: dict[str, str],
    containers_docs: list[dict[str, Any]],
    tmp_path_factory: pytest.TempPathFactory,
    pki: Pki,
    secrets: dict[str, dict[str, str]],
) -> Iterator[Topology]:
    started = time.monotonic()
    with start_topology(containers_docs, secrets, pki, tmp_path_factory) as topology:  # removes every container
        record_timings({"topology_start_s": round(time.monotonic() - started, 1)})
        yield topology


@pytest.fixture(scope="session")
def bootstrapped(
    topology: Topology,
    containers_docs: list[dict[str, Any]],
    secrets: dict[str, dict[str, str]],
    tmp_path_factory: pytest.TempPathFactory,
) -> str:
    """Run the chart's auth bootstrap Job (the post-install hook) as Kubernetes would after the install; its log.
    Once per session: the Spark and SDK users exist for every module that uses them."""
    (job,) = workloads(containers_docs, "Job", "auth-bootstrap")
    (run,) = pod_runs(containers_docs, "Job", job, NAMESPACE, secrets, tmp_path_factory.mktemp("bootstrap"))
    namesrvs = localize(run.env["MQ_NAMESRV_ADDR"], topology.addrs, "bootstrap Job MQ_NAMESRV_ADDR")
    assert sorted(namesrvs.split(";")) == sorted(topology.namesrv_addrs), namesrvs
    pod = start_container(run, {"MQ_NAMESRV_ADDR": namesrvs})
    topology.pods.append(pod)
    started = time.monotonic()
    code = pod.wait_exit(BOOTSTRAP_TIMEOUT_S)
    logs = pod.logs()
    record_timings({"auth_bootstrap_job_s": round(time.monotonic() - started, 1)})
    assert code == 0, logs[-4000:]
    return logs
