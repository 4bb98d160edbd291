"""The rendered objects fit together: DNS names, ports, probes, selectors, ConfigMap keys and settings."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path
from typing import Any

import chart_schema
import pytest
from chart_testkit import NAMESPACE, PENDING_FIELDS, VALUE_SETS, Rendered, exec_env, secret_data
from mq_broker.settings import BrokerSettings
from mq_common.settings import ServiceSettings
from mq_gateway.settings import GatewaySettings
from mq_namesrv.settings import NamesrvSettings

pytestmark = pytest.mark.e2e

SETTINGS: dict[str, tuple[str, type[ServiceSettings] | None]] = {
    "namesrv": ("MQ_NAMESRV_", NamesrvSettings),
    "broker": ("MQ_BROKER_", BrokerSettings),
    "gateway": ("MQ_GATEWAY_", GatewaySettings),
    # None until services/controller is in the workspace: then its keys are checked against PENDING_FIELDS
    "controller": ("MQ_CONTROLLER_", chart_schema.controller_settings()),  # type: ignore[dict-item]
}
SERVICES = tuple(SETTINGS)  # workloads running a PyRocketMQ service (etcd is etcd)
SETS = list(VALUE_SETS)
# ci/values-production.yaml names its own auth Secret (not rendered): what the tests resolve its secretKeyRefs from
PRODUCTION_AUTH_SECRET = "pyrocketmq-auth"
PRODUCTION_AUTH_DATA = {
    "initAuthenticationUser": '{"username": "rocketmq", "password": "init-user-secret-1"}',
    "innerClientAuthenticationCredentials": '{"accessKey": "inner", "secretKey": "inner-secret-1"}',
}


def _component(doc: dict[str, Any]) -> str:
    component: str = doc["metadata"]["labels"]["app.kubernetes.io/component"]
    return component


def _workloads(r: Rendered) -> list[dict[str, Any]]:
    return r.kind("StatefulSet") + r.kind("Deployment")


def _services(r: Rendered) -> list[dict[str, Any]]:
    return [w for w in _workloads(r) if _component(w) in SERVICES]


def _container(workload: dict[str, Any]) -> dict[str, Any]:
    containers = workload["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    container: dict[str, Any] = containers[0]
    return container


def _env(r: Rendered, workload: dict[str, Any], ordinal: int = 0) -> dict[str, str]:
    """The environment of pod ``ordinal``'s service as Kubernetes builds it (envFrom ConfigMaps, then env with $(VAR)
    expanded and secretKeyRef resolved from the rendered Secrets, or PRODUCTION_AUTH_DATA for the production values'
    own Secret) and as the container's args then leave it (a broker's per-pod script, run under a real sh)."""
    container = _container(workload)
    # the only Secret passed as env: the auth Secret, auth.existingSecret or the one the chart generates
    auth_secret = PRODUCTION_AUTH_SECRET if r.name == "production" else "mq-auth"
    secrets = {PRODUCTION_AUTH_SECRET: PRODUCTION_AUTH_DATA} if r.name == "production" else secret_data(r.docs)
    env: dict[str, str] = {}
    for source in container.get("envFrom", []):
        env.update(r.get("ConfigMap", source["configMapRef"]["name"])["data"])
    pod_name = f"{workload['metadata']['name']}-{ordinal}"
    for item in container.get("env", []):
        if "secretKeyRef" in item.get("valueFrom", {}):
            ref = item["valueFrom"]["secretKeyRef"]
            assert ref["name"] == auth_secret, ref
            env[item["name"]] = secrets[ref["name"]][ref["key"]]
        elif "valueFrom" in item:
            assert item["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
            env[item["name"]] = pod_name
        else:
            env[item["name"]] = re.sub(r"\$\((\w+)\)", lambda m: env[m.group(1)], item["value"])
    with tempfile.TemporaryDirectory() as scratch:
        program, env = exec_env(container["args"], env, Path(scratch))
    assert program == f"mq{_component(workload)}"
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
    """Every pod of every group: its own DNS name, the group's broker name, its broker id (and role) from its
    ordinal as the chart's mode wants it, the store on its own claim."""
    r = rendered[name]
    for sts in r.kind("StatefulSet"):
        if _component(sts) != "broker":
            continue
        headless = r.get("Service", sts["spec"]["serviceName"])
        assert headless["spec"]["clusterIP"] == "None"
        assert headless["spec"]["publishNotReadyAddresses"] is True
        assert headless["spec"]["selector"].items() <= sts["spec"]["template"]["metadata"]["labels"].items()
        replicas = sts["spec"]["replicas"]
        ids = []
        for ordinal in range(replicas):
            env = _env(r, sts, ordinal)
            pod = f"{sts['metadata']['name']}-{ordinal}"
            assert env["MQ_BROKER_BROKER_IP"] == f"{pod}.{headless['metadata']['name']}.{NAMESPACE}.svc.cluster.local"
            group = sts["metadata"]["labels"]["pyrocketmq.io/broker-group"]
            assert env["MQ_BROKER_BROKER_NAME"] == group
            settings = BrokerSettings(**_parseable(env, "broker"))  # type: ignore[arg-type]
            assert settings.broker_addr(settings.listen_port) == f"{env['MQ_BROKER_BROKER_IP']}:{settings.listen_port}"
            ids.append(settings.broker_id)
            controller_mode = env.get("MQ_BROKER_ENABLE_CONTROLLER_MODE") == "true"
            if replicas > 1 and not controller_mode:
                assert (settings.broker_role.value == "SLAVE") == (ordinal > 0)
        if env.get("MQ_BROKER_ENABLE_CONTROLLER_MODE") == "true":
            assert ids == list(range(1, replicas + 1))  # ordinal + 1: the controller elects the master
        else:
            assert ids == list(range(replicas))  # 0 = the master (MixAll.MASTER_ID), then the slaves
        claim = sts["spec"]["volumeClaimTemplates"][0]
        mounts = {m["name"]: m["mountPath"] for m in _container(sts)["volumeMounts"]}
        assert str(settings.store_path_root_dir).startswith(mounts[claim["metadata"]["name"]] + "/")


def _fields(env: dict[str, str], prefix: str) -> dict[str, str]:
    return {k[len(prefix) :].lower(): v for k, v in env.items() if k.startswith(prefix)}


def _pending(component: str) -> frozenset[str]:
    """PENDING_FIELDS of ``component`` its settings class does not have yet (all of them when it is absent)."""
    cls = SETTINGS[component][1]
    known = set(cls.model_fields) if cls is not None else set()
    return PENDING_FIELDS.get(component, frozenset()) - known


def _parseable(env: dict[str, str], component: str) -> dict[str, str]:
    """The component's settings fields from ``env``, without the pending ones (the class would refuse them)."""
    pending = _pending(component)
    return {k: v for k, v in _fields(env, SETTINGS[component][0]).items() if k not in pending}


@pytest.mark.parametrize("name", SETS)
def test_every_configmap_key_is_a_settings_field_and_parses(rendered: dict[str, Rendered], name: str) -> None:
    r = rendered[name]
    seen = set()
    for workload in _services(r):
        component = _component(workload)
        prefix, cls = SETTINGS[component]
        for source in _container(workload)["envFrom"]:
            data = r.get("ConfigMap", source["configMapRef"]["name"])["data"]
            assert all(k.startswith(prefix) for k in data), data
            known = set(cls.model_fields) if cls is not None else set()
            unknown = set(_fields(data, prefix)) - known - _pending(component)
            assert unknown == set(), f"{component}: not settings fields: {unknown}"
        fields = _parseable(_env(r, workload), component)
        if cls is not None:
            settings = cls(**fields)  # type: ignore[arg-type]  # every value parses and passes the field's constraints
            assert settings.listen_host == "0.0.0.0"
        seen.add(component)
    controller = any(_component(w) == "controller" for w in _workloads(r))
    assert seen == {"namesrv", "broker", "gateway"} | ({"controller"} if controller else set())


@pytest.mark.parametrize("name", SETS)
def test_controllers_dial_every_etcd_member_as_it_serves(rendered: dict[str, Rendered], name: str) -> None:
    """The controllers' parsed etcd endpoints are the members' advertised client URLs: same DNS names and port, and
    mutual TLS (https, the controller's own certificate) exactly when etcd's client port serves TLS."""
    r = rendered[name]
    controllers = [w for w in _workloads(r) if _component(w) == "controller"]
    if not controllers or SETTINGS["controller"][1] is None:
        pytest.skip("no controller in this value set")
    etcd = r.get("StatefulSet", "mq-etcd")
    flags = dict(a.removeprefix("--").split("=", 1) for a in _container(etcd)["args"][1:])
    scheme, _, _ = flags["advertise-client-urls"].partition("://")
    headless = etcd["spec"]["serviceName"]
    port = flags["listen-client-urls"].rpartition(":")[2]
    members = [f"mq-etcd-{i}.{headless}.{NAMESPACE}.svc.cluster.local:{port}" for i in range(etcd["spec"]["replicas"])]
    (controller,) = controllers
    settings: Any = SETTINGS["controller"][1](**_parseable(_env(r, controller), "controller"))  # type: ignore[misc]
    assert list(settings.etcd_endpoint_list) == members
    tls = settings.etcd_tls_client_config()
    assert (tls is not None) == (scheme == "https") == ("client-cert-auth" in flags)
    if tls is not None:
        assert (tls.cert_file, tls.ca_file) == (settings.tls_cert_file, settings.tls_ca_file)
        assert flags["trusted-ca-file"].rpartition("/")[2] == tls.ca_file.name  # both trust the Secret's ca.crt


@pytest.mark.parametrize("name", SETS)
def test_probes_and_service_ports_match_container_ports(rendered: dict[str, Rendered], name: str) -> None:
    r = rendered[name]
    for workload in _services(r):
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
        # args, not command: the image's ENTRYPOINT (tini) stays PID 1, forwarding signals and reaping children;
        # a replicated broker's args are a sh script ending in `exec mqbroker` (checked by _env)
        expected = {"broker": ("mqbroker", "sh"), "etcd": ("etcd",)}.get(
            _component(workload), (f"mq{_component(workload)}",)
        )
        assert c["args"][0] in expected
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


@pytest.mark.parametrize("name", SETS)
def test_name_servers_and_controllers_know_the_super_users_when_auth_is_on(
    rendered: dict[str, Rendered], name: str
) -> None:
    """With auth on, name servers verify route changes (DeleteTopicInNamesrv, UnregisterBroker) and controllers
    elections and reads (ElectMaster, GetSyncStateData) against the init user and the inner credentials, from the
    auth Secret by secretKeyRef; with auth off they get neither."""
    r = rendered[name]
    seen = set()
    for workload in _workloads(r):
        component = _component(workload)
        if component not in ("namesrv", "controller"):
            continue
        seen.add(component)
        prefix, cls = SETTINGS[component]
        assert cls is not None
        settings = cls(**_parseable(_env(r, workload), component))  # type: ignore[arg-type]
        by_ref = {e["name"]: e for e in _container(workload).get("env", []) if "valueFrom" in e}
        if not settings.authentication_enabled:  # type: ignore[attr-defined]
            assert by_ref == {}
            continue
        assert set(by_ref) == {f"{prefix}INIT_AUTHENTICATION_USER", f"{prefix}INNER_CLIENT_AUTHENTICATION_CREDENTIALS"}
        assert all("secretKeyRef" in e["valueFrom"] for e in by_ref.values())
        assert settings.init_user() is not None  # type: ignore[attr-defined]
        assert settings.inner_client_credentials() is not None  # type: ignore[attr-defined]
    assert "namesrv" in seen
