"""deploy/spark fits the chart: the job points at the gateway and name server Services of release "pyrocketmq"
in namespace "pyrocketmq", its driver carries the admin label the NetworkPolicies admit, its pods run under
the chart's security posture, it publishes exactly once with Spark's task retries on, and its executors get the
Spark user's keys and TLS files as its driver does."""

from __future__ import annotations

import re
from typing import Any, Final

import pytest
from chart_testkit import SPARK_DIR, Rendered, render_docs
from mq_spark.job_security import TLS_CERT_FILE_ENV, TLS_KEY_FILE_ENV
from mq_spark.jobs import publish_flights
from mq_spark.options import (
    ACCESS_KEY_ENV,
    AT_LEAST_ONCE,
    EXACTLY_ONCE,
    SECRET_KEY_ENV,
    TLS_CA_FILE_ENV,
    WriterOptions,
)

pytestmark = pytest.mark.e2e

SPARK_DEFAULT_MAX_FAILURES: Final = 4


@pytest.fixture(scope="module")
def release() -> list[dict[str, Any]]:
    return render_docs({}, name="pyrocketmq", namespace="pyrocketmq")


def _service_dns(docs: list[dict[str, Any]], name: str) -> str:
    svc = next(d for d in docs if d["kind"] == "Service" and d["metadata"]["name"] == name)
    port = next(p["port"] for p in svc["spec"]["ports"] if p["name"] == "grpc")
    return f"{name}.{svc['metadata']['namespace']}.svc.cluster.local:{port}"


def test_spark_application_points_at_the_release(rendered: dict[str, Rendered], release: list[dict[str, Any]]) -> None:
    app = rendered["spark"].get("SparkApplication", "publish-flights")
    assert app["apiVersion"] == "sparkoperator.k8s.io/v1beta2"
    assert app["spec"]["mode"] == "cluster"
    args = app["spec"]["arguments"]
    assert args[args.index("--gateway") + 1] == _service_dns(release, "pyrocketmq-gateway")
    assert args[args.index("--namesrv") + 1] == _service_dns(release, "pyrocketmq-namesrv")
    submit = (SPARK_DIR / "spark-submit.sh").read_text(encoding="utf-8")
    assert "${RELEASE}-gateway.${NAMESPACE}.svc.cluster.local:8081" in submit
    assert app["spec"]["mainApplicationFile"] in submit
    for template in ("driver-pod-template.yaml", "executor-pod-template.yaml"):
        assert f"${{here}}/{template}" in submit


def test_driver_may_reach_name_servers_and_brokers(
    rendered: dict[str, Rendered], release: list[dict[str, Any]]
) -> None:
    policy = next(d for d in release if d["kind"] == "NetworkPolicy" and d["metadata"]["name"] == "pyrocketmq-broker")
    admin = policy["spec"]["ingress"][0]["from"][1]["podSelector"]["matchLabels"]
    spark = rendered["spark"]
    app = spark.get("SparkApplication", "publish-flights")
    assert admin.items() <= app["spec"]["driver"]["labels"].items()
    assert admin.items() <= spark.get("Pod", "publish-flights-driver")["metadata"]["labels"].items()
    assert not admin.items() <= app["spec"]["executor"]["labels"].items()
    binding = spark.get("RoleBinding", "pyrocketmq-spark-driver")
    assert binding["subjects"][0]["name"] == app["spec"]["driver"]["serviceAccount"]


def test_spark_pods_share_the_chart_security_posture(
    rendered: dict[str, Rendered], release: list[dict[str, Any]]
) -> None:
    gateway = next(d for d in release if d["kind"] == "Deployment")["spec"]["template"]["spec"]
    chart_sc = gateway["containers"][0]["securityContext"]
    spark = rendered["spark"]
    app = spark.get("SparkApplication", "publish-flights")["spec"]
    for role in ("driver", "executor"):
        assert app[role]["securityContext"] == chart_sc
        assert app[role]["podSecurityContext"]["runAsUser"] == gateway["securityContext"]["runAsUser"]
        assert {"name": "tmp", "mountPath": "/tmp"} in app[role]["volumeMounts"]
        pod = spark.get("Pod", f"publish-flights-{role}")["spec"]
        assert pod["containers"][0]["securityContext"] == chart_sc
        assert pod["automountServiceAccountToken"] is (role == "driver")


def _submit_confs(submit: str) -> dict[str, str]:
    """The ``--conf key=value`` settings of deploy/spark/spark-submit.sh."""
    return dict(m.split("=", 1) for m in re.findall(r"--conf\s+(\S+=\S+)", submit))


def test_spark_job_publishes_exactly_once_with_task_retries_on(rendered: dict[str, Rendered]) -> None:
    """Issue 34: the manifests run the exactly-once job with task retries on (never spark.task.maxFailures 1)."""
    app = rendered["spark"].get("SparkApplication", "publish-flights")["spec"]
    submit = _submit_confs((SPARK_DIR / "spark-submit.sh").read_text(encoding="utf-8"))
    for where, confs in (("sparkapplication.yaml", app["sparkConf"]), ("spark-submit.sh", submit)):
        assert int(confs.get("spark.task.maxFailures", SPARK_DEFAULT_MAX_FAILURES)) > 1, where
        assert confs.get("spark.task.maxFailures") == str(SPARK_DEFAULT_MAX_FAILURES), f"{where}: written out"
        assert not [k for k in confs if "guarantee" in k.lower()], f"{where}: the guarantee is the sink's"
    # The job's arguments choose exactly_once (publish_flights --guarantee), which is also the sink's default.
    assert WriterOptions.parse({"gateway": "127.0.0.1:8081", "topic": "flights"}, env={}).exactly_once
    job = publish_flights._parse_args(app["arguments"])
    assert job.guarantee == EXACTLY_ONCE
    assert "--guarantee exactly_once" in (SPARK_DIR / "spark-submit.sh").read_text(encoding="utf-8")
    assert AT_LEAST_ONCE not in " ".join(app["arguments"])
    for name in ("sparkapplication.yaml", "spark-submit.sh", "executor-pod-template.yaml"):
        text = (SPARK_DIR / name).read_text(encoding="utf-8")
        assert "exactly_once" in text, f"{name} documents the guarantee"
        assert "spark.task.maxFailures" in text, f"{name} documents the retries"


SECURITY_ENV: Final = (ACCESS_KEY_ENV, SECRET_KEY_ENV, TLS_CA_FILE_ENV, TLS_CERT_FILE_ENV, TLS_KEY_FILE_ENV)


def _security(env: list[dict[str, Any]], mounts: list[dict[str, Any]], volumes: list[dict[str, Any]]) -> dict[str, Any]:
    """What one pod gets of the Spark user: each MQ_SPARK_* env entry (its value or its secretKeyRef) and the
    Secret each TLS file path lies in (the Secret volume mounted at the path's folder)."""
    entries: dict[str, Any] = {e["name"]: e.get("value", e.get("valueFrom")) for e in env if e["name"] in SECURITY_ENV}
    secrets = {v["name"]: v["secret"] for v in volumes if "secret" in v}
    files = {}
    for name in (TLS_CA_FILE_ENV, TLS_CERT_FILE_ENV, TLS_KEY_FILE_ENV):
        folder = str(entries[name]).rsplit("/", 1)[0]
        (mount,) = [m for m in mounts if m["mountPath"] == folder]
        files[name] = secrets[mount["name"]]["secretName"]
        assert mount.get("readOnly") is True
    return {"env": entries, "files": files}


def test_executors_get_the_spark_users_keys_and_tls_files_as_the_driver(rendered: dict[str, Rendered]) -> None:
    """The sink sends the messages from the executors: they read the Spark user's keys and the TLS files there
    (mq_spark.options, job_security), so every executor pod gets what the driver pod gets, in both manifests."""
    spark = rendered["spark"]
    app = spark.get("SparkApplication", "publish-flights")["spec"]
    got = {}
    for role in ("driver", "executor"):
        got[f"app {role}"] = _security(app[role]["env"], app[role]["volumeMounts"], app["volumes"])
        pod = spark.get("Pod", f"publish-flights-{role}")["spec"]
        container = pod["containers"][0]
        got[f"template {role}"] = _security(container["env"], container["volumeMounts"], pod["volumes"])
    first = got["app driver"]
    assert set(first["env"]) == set(SECURITY_ENV)
    assert first["env"][ACCESS_KEY_ENV]["secretKeyRef"]["name"] == first["env"][SECRET_KEY_ENV]["secretKeyRef"]["name"]
    assert len(set(first["files"].values())) == 1
    assert {where: value for where, value in got.items() if value != first} == {}
