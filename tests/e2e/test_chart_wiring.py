"""The rendered objects fit together: DNS names, ports, probes, selectors, ConfigMap keys and settings."""

from __future__ import annotations

import re
from typing import Any

import pytest
from chart_testkit import AUTH_SECRET, AUTH_SECRET_DATA, NAMESPACE, VALUE_SETS, Rendered
from mq_broker.settings import BrokerSettings
from mq_common.settings import ServiceSettings
from mq_gateway.settings import GatewaySettings
from mq_namesrv.settings import NamesrvSettings

pytestmark = pytest.mark.e2e

SETTINGS: dict[str, tuple[str, type[ServiceSettings]]] = {
    "namesrv": ("MQ_NAMESRV_", NamesrvSettings),
    "broker": ("MQ_BROKER_", BrokerSettings),
    "gateway": ("MQ_GATEWAY_", GatewaySettings),
}
SETS = list(VALUE_SETS)
PRODUCTION_AUTH_SECRET = "pyrocketmq-auth"  # ci/values-production.yaml


def _component(doc: dict[str, Any]) -> str:
    component: str = doc["metadata"]["labels"]["app.kubernetes.io/component"]
    return component


def _workloads(r: Rendered) -> list[dict[str, Any]]:
    return r.kind("StatefulSet") + r.kind("Deployment")


def _container(workload: dict[str, Any]) -> dict[str, Any]:
    containers = workload["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    container: dict[str, Any] = containers[0]
    return container


def _env(r: Rendered, workload: dict[str, Any]) -> dict[str, str]:
    """The container's environment as Kubernetes builds it: envFrom ConfigMaps, then env with $(VAR) expanded and
    secretKeyRef resolved from AUTH_SECRET_DATA."""
    container = _container(workload)
    auth_secret = PRODUCTION_AUTH_SECRET if r.name == "production" else AUTH_SECRET
    env: dict[str, str] = {}
    for source in container.get("envFrom", []):
        env.update(r.get("ConfigMap", source["configMapRef"]["name"])["data"])
    pod_name = f"{workload['metadata']['name']}-0"
    for item in container.get("env", []):
        if "secretKeyRef" in item.get("valueFrom", {}):
            ref = item["valueFrom"]["secretKeyRef"]
            assert ref["name"] == auth_secret, ref  # the only Secret passed as env: auth.existingSecret
            env[item["name"]] = AUTH_SECRET_DATA[ref["key"]]
        elif "valueFrom" in item:
            assert item["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
            env[item["name"]] = pod_name
        else:
            env[item["name"]] = re.sub(r"\$\((\w+)\)", lambda m: env[m.group(1)], item["value"])
    return env


def _namesrv_dns_names(r: Rendered) -> list[str]:
    """<pod>.<headless service>.<ns>.svc.cluster.local:<port> for each name server replica."""
    sts = r.get("StatefulSet", "mq-namesrv")
    headless = r.get("Service", sts["spec"]["serviceName"])
    assert headless["spec"]["clusterIP"] == "None"
    assert headless["spec"]["selector"].items() <= sts["spec"]["template"]["metadata"]["labels"].items()
    port = next(p["port"] for p in headless["spec"]["ports"] if p["name"] == "grpc")
    svc = headless["metadata"]["name"]
    return [f"mq-namesrv-{i}.{svc}.{NAMESPACE}.svc.cluster.local:{port}" for i in range(sts["spec"]["replicas"])]


@pytest.mark.parametrize("name", SETS)
def test_namesrv_addresses_are_the_headless_dns_names(rendered: dict[str, Rendered], name: str) -> None:
    r = rendered[name]
    expected = ";".join(_namesrv_dns_names(r))
    for workload in _workloads(r):
        component = _component(workload)
        if component in ("broker", "gateway"):
            prefix = SETTINGS[component][0]
            assert _env(r, workload)[f"{prefix}NAMESRV_ADDR"] == expected, workload["metadata"]["name"]
    if name == "default":  # the contract's literal form
        assert expected == (
            "mq-namesrv-0.mq-namesrv-headless.messaging.svc.cluster.local:9876;"
            "mq-namesrv-1.mq-namesrv-headless.messaging.svc.cluster.local:9876"
        )


@pytest.mark.parametrize("name", SETS)
def test_brokers_advertise_their_stable_dns_name(rendered: dict[str, Rendered], name: str) -> None:
    r = rendered[name]
    for sts in r.kind("StatefulSet"):
        if _component(sts) != "broker":
            continue
        headless = r.get("Service", sts["spec"]["serviceName"])
        assert headless["spec"]["clusterIP"] == "None"
        assert headless["spec"]["publishNotReadyAddresses"] is True
        assert headless["spec"]["selector"].items() <= sts["spec"]["template"]["metadata"]["labels"].items()
        env = _env(r, sts)
        pod = f"{sts['metadata']['name']}-0"
        assert env["MQ_BROKER_BROKER_IP"] == f"{pod}.{headless['metadata']['name']}.{NAMESPACE}.svc.cluster.local"
        group = sts["metadata"]["labels"]["pyrocketmq.io/broker-group"]
        assert env["MQ_BROKER_BROKER_NAME"] == group
        settings = BrokerSettings(**_fields(env, "MQ_BROKER_"))  # type: ignore[arg-type]
        assert settings.broker_addr(settings.listen_port) == f"{env['MQ_BROKER_BROKER_IP']}:{settings.listen_port}"
        assert sts["spec"]["replicas"] == 1
        assert settings.broker_id == 0
        claim = sts["spec"]["volumeClaimTemplates"][0]
        mounts = {m["name"]: m["mountPath"] for m in _container(sts)["volumeMounts"]}
        assert str(settings.store_path_root_dir).startswith(mounts[claim["metadata"]["name"]] + "/")


def _fields(env: dict[str, str], prefix: str) -> dict[str, str]:
    return {k[len(prefix) :].lower(): v for k, v in env.items() if k.startswith(prefix)}


@pytest.mark.parametrize("name", SETS)
def test_every_configmap_key_is_a_settings_field_and_parses(rendered: dict[str, Rendered], name: str) -> None:
    r = rendered[name]
    seen = set()
    for workload in _workloads(r):
        component = _component(workload)
        prefix, cls = SETTINGS[component]
        for source in _container(workload)["envFrom"]:
            data = r.get("ConfigMap", source["configMapRef"]["name"])["data"]
            assert all(k.startswith(prefix) for k in data), data
            unknown = set(_fields(data, prefix)) - set(cls.model_fields)
            assert unknown == set(), f"{component}: not settings fields: {unknown}"
        fields = _fields(_env(r, workload), prefix)
        settings = cls(**fields)  # type: ignore[arg-type]  # every value parses and passes the field's constraints
        assert settings.listen_host == "0.0.0.0"
        seen.add(component)
    assert seen == {"namesrv", "broker", "gateway"}


@pytest.mark.parametrize("name", SETS)
def test_probes_and_service_ports_match_container_ports(rendered: dict[str, Rendered], name: str) -> None:
    r = rendered[name]
    for workload in _workloads(r):
        container = _container(workload)
        ports = {p["name"]: p["containerPort"] for p in container["ports"]}
        prefix, _ = SETTINGS[_component(workload)]
        env = _env(r, workload)
        assert ports["grpc"] == int(env[f"{prefix}LISTEN_PORT"])
        if "metrics" in ports:
            assert ports["metrics"] == int(env[f"{prefix}METRICS_PORT"]) == 5557
        # Native gRPC probes in plaintext; with TLS the kubelet (no TLS in its gRPC probe) opens a TCP connection.
        action = "tcpSocket" if env.get(f"{prefix}TLS_ENABLED") == "true" else "grpc"
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            assert container[probe][action] == {"port": ports["grpc"]}, probe
        labels = workload["spec"]["template"]["metadata"]["labels"]
        for svc in r.kind("Service"):
            if svc["spec"]["selector"].items() <= labels.items():
                for port in svc["spec"]["ports"]:
                    assert port["targetPort"] in ports, (svc["metadata"]["name"], port)


@pytest.mark.parametrize("name", SETS)
def test_pods_run_restricted(rendered: dict[str, Rendered], name: str) -> None:
    r = rendered[name]
    for workload in _workloads(r):
        pod = workload["spec"]["template"]["spec"]
        assert pod["automountServiceAccountToken"] is False
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["runAsUser"] == 10001
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        sa = r.get("ServiceAccount", pod["serviceAccountName"])
        assert sa["automountServiceAccountToken"] is False
        c = _container(workload)
        sc = c["securityContext"]
        assert sc["allowPrivilegeEscalation"] is False
        assert sc["readOnlyRootFilesystem"] is True
        assert sc["capabilities"] == {"drop": ["ALL"]}
        assert {"requests", "limits"} <= c["resources"].keys()
        # args, not command: the image's ENTRYPOINT (tini) stays PID 1, forwarding signals and reaping children
        assert c["args"] == [f"mq{_component(workload)}"]
        assert "command" not in c
        tmp = next(m for m in c["volumeMounts"] if m["mountPath"] == "/tmp")
        assert "emptyDir" in next(v for v in pod["volumes"] if v["name"] == tmp["name"])


@pytest.mark.parametrize("name", SETS)
def test_selectors_match_their_pods(rendered: dict[str, Rendered], name: str) -> None:
    r = rendered[name]
    pods = {_component(w): w["spec"]["template"]["metadata"]["labels"] for w in _workloads(r)}
    for workload in _workloads(r):
        assert (
            workload["spec"]["selector"]["matchLabels"].items()
            <= workload["spec"]["template"]["metadata"]["labels"].items()
        )
    for pdb in r.kind("PodDisruptionBudget"):
        assert pdb["spec"]["selector"]["matchLabels"].items() <= pods[_component(pdb)].items()
    for hpa in r.kind("HorizontalPodAutoscaler"):
        target = r.get(hpa["spec"]["scaleTargetRef"]["kind"], hpa["spec"]["scaleTargetRef"]["name"])
        assert "replicas" not in target["spec"]


def _allows(policy: dict[str, Any], labels: dict[str, str], port: str) -> bool:
    """Whether the policy admits a same-namespace pod with ``labels`` on the named port."""
    for rule in policy["spec"]["ingress"]:
        if port not in {p["port"] for p in rule.get("ports", [])}:
            continue
        if "from" not in rule:
            return True
        for peer in rule["from"]:
            if "namespaceSelector" in peer or "podSelector" not in peer:
                continue
            sel = peer["podSelector"]
            ok = sel.get("matchLabels", {}).items() <= labels.items()
            for expr in sel.get("matchExpressions", []):
                ok = ok and expr["operator"] == "In" and labels.get(expr["key"]) in expr["values"]
            if ok:
                return True
    return False


@pytest.mark.parametrize("name", ["default", "syncflush"])
def test_network_policies(rendered: dict[str, Rendered], name: str) -> None:
    r = rendered[name]
    pods = {_component(w): w["spec"]["template"]["metadata"]["labels"] for w in _workloads(r)}
    policy = {_component(p): p for p in r.kind("NetworkPolicy")}
    outsider = {"app": "someone-else"}
    admin = {"pyrocketmq.io/admin": "true"}
    assert _allows(policy["gateway"], outsider, "grpc")
    assert not _allows(policy["broker"], outsider, "grpc")
    assert not _allows(policy["namesrv"], outsider, "grpc")
    assert _allows(policy["broker"], pods["gateway"], "grpc")
    assert _allows(policy["broker"], pods["broker"], "grpc")
    assert not _allows(policy["broker"], pods["namesrv"], "grpc")
    for component in ("namesrv", "broker"):
        assert _allows(policy[component], admin, "grpc")
    assert _allows(policy["namesrv"], pods["broker"], "grpc")
    assert _allows(policy["namesrv"], pods["gateway"], "grpc")
    for p in policy.values():
        assert p["spec"]["podSelector"]["matchLabels"].items() <= pods[_component(p)].items()
        metrics = [rule for rule in p["spec"]["ingress"] if {"port": "metrics", "protocol": "TCP"} in rule["ports"]]
        assert metrics[0]["from"] == [
            {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
        ]
        assert not _allows(p, outsider, "metrics")
