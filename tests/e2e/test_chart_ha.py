"""Replicated broker groups in the chart (issue 20): master + slave pods per group with anti-affinity, the controller
and a 3-member etcd wired together, static roles without the controller, one broker per group as before."""

from __future__ import annotations

import re
from typing import Any

import helm_python
import pytest
from chart_testkit import NAMESPACE, render_docs, render_files

pytestmark = pytest.mark.e2e

ETCD_DOMAIN = f"mq-etcd-headless.{NAMESPACE}.svc.cluster.local"


def _by(docs: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == kind}


def _component_of(doc: dict[str, Any]) -> str:
    return str(doc["metadata"]["labels"]["app.kubernetes.io/component"])


def _pod(workload: dict[str, Any]) -> dict[str, Any]:
    pod: dict[str, Any] = workload["spec"]["template"]["spec"]
    return pod


def _container(workload: dict[str, Any]) -> dict[str, Any]:
    container: dict[str, Any] = _pod(workload)["containers"][0]
    return container


@pytest.fixture(scope="module")
def default_docs() -> list[dict[str, Any]]:
    return render_docs({})


def test_default_groups_have_two_pods_kept_apart(default_docs: list[dict[str, Any]]) -> None:
    sts = _by(default_docs, "StatefulSet")["mq-broker-broker-a"]
    assert sts["spec"]["replicas"] == 2
    assert sts["spec"]["volumeClaimTemplates"][0]["metadata"]["name"] == "store"  # one PVC per pod
    anti = _pod(sts)["affinity"]["podAntiAffinity"]
    group_term, spread_term = anti["preferredDuringSchedulingIgnoredDuringExecution"]
    assert group_term["weight"] == 100
    assert group_term["podAffinityTerm"]["labelSelector"]["matchLabels"]["pyrocketmq.io/broker-group"] == "broker-a"
    assert group_term["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert "pyrocketmq.io/broker-group" not in spread_term["podAffinityTerm"]["labelSelector"]["matchLabels"]
    assert spread_term["weight"] < group_term["weight"]


def test_hard_preset_requires_the_pods_of_a_group_apart() -> None:
    docs = render_docs({"broker": {"podAntiAffinityPreset": "hard", "groups": [{"name": "a"}, {"name": "b"}]}})
    for name in ("a", "b"):
        anti = _pod(_by(docs, "StatefulSet")[f"mq-broker-{name}"])["affinity"]["podAntiAffinity"]
        (required,) = anti["requiredDuringSchedulingIgnoredDuringExecution"]
        assert required["labelSelector"]["matchLabels"]["pyrocketmq.io/broker-group"] == name
        # other groups may share a node: only preferred
        (preferred,) = anti["preferredDuringSchedulingIgnoredDuringExecution"]
        assert "pyrocketmq.io/broker-group" not in preferred["podAffinityTerm"]["labelSelector"]["matchLabels"]


def test_default_brokers_run_in_controller_mode(default_docs: list[dict[str, Any]]) -> None:
    data = _by(default_docs, "ConfigMap")["mq-broker-broker-a"]["data"]
    assert data["MQ_BROKER_ENABLE_CONTROLLER_MODE"] == "true"
    assert data["MQ_BROKER_CONTROLLER_ADDR"] == f"mq-controller.{NAMESPACE}.svc.cluster.local:9878"
    assert data["MQ_BROKER_HA_LISTEN_PORT"] == "10912"
    assert data["MQ_BROKER_BROKER_ROLE"] == "SYNC_MASTER"
    assert "MQ_BROKER_BROKER_ID" not in data  # per pod: ordinal + 1 (test_chart_wiring runs the script)
    controller = _by(default_docs, "Service")["mq-controller"]
    (port,) = controller["spec"]["ports"]
    assert port["port"] == 9878
    deployment = _by(default_docs, "Deployment")["mq-controller"]
    assert deployment["spec"]["replicas"] == 2
    assert controller["spec"]["selector"].items() <= deployment["spec"]["template"]["metadata"]["labels"].items()
    assert _container(deployment)["args"] == ["mqcontroller"]
    settings = _by(default_docs, "ConfigMap")["mq-controller"]["data"]
    members = [f"https://mq-etcd-{i}.{ETCD_DOMAIN}:2379" for i in range(3)]  # mutual TLS, as etcdctl writes it
    assert settings["MQ_CONTROLLER_ETCD_ENDPOINTS"] == ",".join(members)
    assert settings["MQ_CONTROLLER_COMPONENT_IDENTITIES"] == "mq-broker,mq-admin"
    # the certificate the controller presents to etcd: its own (the Secret mounted at tls.mountPath)
    mounts = {m["name"]: m["mountPath"] for m in _container(deployment)["volumeMounts"]}
    assert settings["MQ_CONTROLLER_TLS_ENABLED"] == "true"
    assert settings["MQ_CONTROLLER_TLS_CERT_FILE"] == mounts["tls"] + "/tls.crt"
    assert settings["MQ_CONTROLLER_TLS_CA_FILE"] == mounts["tls"] + "/ca.crt"
    volumes = {v["name"]: v for v in _pod(deployment)["volumes"]}
    assert volumes["tls"]["secret"]["secretName"] == "mq-controller-tls"
    assert _by(default_docs, "PodDisruptionBudget")["mq-controller"]["spec"]["maxUnavailable"] == 1


def test_etcd_is_three_members_that_find_each_other(default_docs: list[dict[str, Any]]) -> None:
    sts = _by(default_docs, "StatefulSet")["mq-etcd"]
    assert sts["spec"]["replicas"] == 3
    assert sts["spec"]["podManagementPolicy"] == "Parallel"
    headless = _by(default_docs, "Service")[sts["spec"]["serviceName"]]
    assert headless["spec"]["clusterIP"] == "None"
    assert headless["spec"]["publishNotReadyAddresses"] is True
    args = _container(sts)["args"]
    assert args[0] == "etcd"
    flags = dict(a.removeprefix("--").split("=", 1) for a in args[1:])
    members = dict(m.split("=", 1) for m in flags["initial-cluster"].split(","))
    assert members == {f"mq-etcd-{i}": f"https://mq-etcd-{i}.{ETCD_DOMAIN}:2380" for i in range(3)}
    assert flags["initial-advertise-peer-urls"] == f"https://$(POD_NAME).{ETCD_DOMAIN}:2380"
    assert flags["name"] == "$(POD_NAME)"
    assert flags["peer-client-cert-auth"] == "true"
    assert flags["peer-cert-allowed-cn"] == "mq-etcd"
    mounts = {m["name"]: m["mountPath"] for m in _container(sts)["volumeMounts"]}
    assert flags["data-dir"].startswith(mounts[sts["spec"]["volumeClaimTemplates"][0]["metadata"]["name"]] + "/")
    assert flags["peer-cert-file"].startswith(mounts["tls"] + "/")
    # the client port (the controllers' gRPC API) takes only mutual TLS, with the same etcd certificate
    assert flags["listen-client-urls"] == "https://0.0.0.0:2379"
    assert flags["advertise-client-urls"] == f"https://$(POD_NAME).{ETCD_DOMAIN}:2379"
    tls_dir = mounts["tls"]
    assert (flags["cert-file"], flags["key-file"]) == (f"{tls_dir}/tls.crt", f"{tls_dir}/tls.key")
    assert flags["trusted-ca-file"] == f"{tls_dir}/ca.crt"
    assert flags["client-cert-auth"] == "true"
    assert flags["client-cert-allowed-hostname"] == "mq-controller"  # no other component of the CA gets in
    assert flags["enable-grpc-gateway"] == "false"  # it would dial the client port with the etcd certificate
    assert flags["peer-cert-file"] == flags["cert-file"]  # no new Secret: the one mounted for peer TLS
    (tls_volume,) = (v for v in _pod(sts)["volumes"] if v["name"] == "tls")
    assert tls_volume["secret"]["secretName"] == "mq-etcd-tls"
    container = _container(sts)
    assert container["readinessProbe"]["httpGet"] == {"path": "/health", "port": "metrics"}
    assert container["livenessProbe"]["tcpSocket"] == {"port": "client"}
    assert _by(default_docs, "PodDisruptionBudget")["mq-etcd"]["spec"]["maxUnavailable"] == 1
    assert container["securityContext"]["readOnlyRootFilesystem"] is True


def test_without_tls_etcd_and_the_controller_stay_plaintext() -> None:
    docs = render_docs({"tls": {"enabled": False}, "auth": {"enabled": False}})
    flags = dict(
        a.removeprefix("--").split("=", 1) for a in _container(_by(docs, "StatefulSet")["mq-etcd"])["args"][1:]
    )
    assert flags["listen-client-urls"] == "http://0.0.0.0:2379"
    assert flags["advertise-client-urls"] == f"http://$(POD_NAME).{ETCD_DOMAIN}:2379"
    assert not {"cert-file", "key-file", "trusted-ca-file", "client-cert-auth", "peer-cert-file"} & set(flags)
    assert "client-cert-allowed-hostname" not in flags
    settings = _by(docs, "ConfigMap")["mq-controller"]["data"]
    assert settings["MQ_CONTROLLER_ETCD_ENDPOINTS"] == ",".join(f"mq-etcd-{i}.{ETCD_DOMAIN}:2379" for i in range(3))
    assert "MQ_CONTROLLER_TLS_ENABLED" not in settings


def _peer_allows(policy: dict[str, Any], component: str, port: str) -> bool:
    for rule in policy["spec"]["ingress"]:
        if port not in {p["port"] for p in rule["ports"]}:
            continue
        for peer in rule.get("from", []):
            for expr in peer.get("podSelector", {}).get("matchExpressions", []):
                if expr["key"] == "app.kubernetes.io/component" and component in expr["values"]:
                    return True
    return False


def test_ha_port_is_served_and_open_only_between_brokers(default_docs: list[dict[str, Any]]) -> None:
    sts = _by(default_docs, "StatefulSet")["mq-broker-broker-a"]
    assert {"name": "ha", "containerPort": 10912, "protocol": "TCP"} in _container(sts)["ports"]
    headless = _by(default_docs, "Service")["mq-broker-broker-a-headless"]
    assert {"name": "ha", "port": 10912, "targetPort": "ha"} in headless["spec"]["ports"]
    policies = _by(default_docs, "NetworkPolicy")
    broker = policies["mq-broker"]
    ha_rules = [r for r in broker["spec"]["ingress"] if {"port": "ha", "protocol": "TCP"} in r["ports"]]
    assert len(ha_rules) == 1
    assert [p["podSelector"]["matchExpressions"][0]["values"] for p in ha_rules[0]["from"]] == [["broker"]]
    for outsider in ("gateway", "namesrv", "controller"):
        assert not _peer_allows(broker, outsider, "ha")
    assert _peer_allows(policies["mq-controller"], "broker", "grpc")
    assert not _peer_allows(policies["mq-controller"], "gateway", "grpc")
    etcd = policies["mq-etcd"]
    assert _peer_allows(etcd, "controller", "client")
    for outsider in ("broker", "gateway", "namesrv", "etcd"):
        assert not _peer_allows(etcd, outsider, "client")
    assert _peer_allows(etcd, "etcd", "peer")
    assert not _peer_allows(etcd, "controller", "peer")


def test_one_pod_per_group_renders_as_before() -> None:
    docs = render_docs({"broker": {"replicasPerBrokerGroup": 1}})
    assert not {_component_of(d) for d in docs} & {"controller", "etcd"}
    sts = _by(docs, "StatefulSet")["mq-broker-broker-a"]
    assert sts["spec"]["replicas"] == 1
    assert _container(sts)["args"] == ["mqbroker"]
    assert [p["name"] for p in _container(sts)["ports"]] == ["grpc", "metrics"]
    data = _by(docs, "ConfigMap")["mq-broker-broker-a"]["data"]
    assert data["MQ_BROKER_BROKER_ID"] == "0"
    assert not {k for k in data if re.search("HA_|CONTROLLER|BROKER_ROLE", k)}
    anti = _pod(sts)["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert [t["podAffinityTerm"]["labelSelector"]["matchLabels"].get("pyrocketmq.io/broker-group") for t in anti] == [
        None
    ]
    ports = _by(docs, "Service")["mq-broker-broker-a-headless"]["spec"]["ports"]
    assert [p["name"] for p in ports] == ["grpc", "metrics"]


def test_controller_can_run_with_one_pod_per_group() -> None:
    docs = render_docs({"broker": {"replicasPerBrokerGroup": 1}, "controller": {"enabled": True}})
    assert "mq-etcd" in _by(docs, "StatefulSet")
    data = _by(docs, "ConfigMap")["mq-broker-broker-a"]["data"]
    assert data["MQ_BROKER_ENABLE_CONTROLLER_MODE"] == "true"
    assert "MQ_BROKER_BROKER_ID" not in data


def test_static_roles_point_slaves_at_the_master() -> None:
    docs = render_docs(
        {"broker": {"replicasPerBrokerGroup": 3, "role": "ASYNC_MASTER"}, "controller": {"enabled": False}}
    )
    assert not {_component_of(d) for d in docs} & {"controller", "etcd"}
    sts = _by(docs, "StatefulSet")["mq-broker-broker-a"]
    assert sts["spec"]["replicas"] == 3
    script = _container(sts)["args"][2]
    master = f"mq-broker-broker-a-0.mq-broker-broker-a-headless.{NAMESPACE}.svc.cluster.local:10912"
    assert f"MQ_BROKER_HA_MASTER_ADDRESS={master}" in script
    assert "MQ_BROKER_BROKER_ROLE=ASYNC_MASTER" in script
    data = _by(docs, "ConfigMap")["mq-broker-broker-a"]["data"]
    assert "MQ_BROKER_ENABLE_CONTROLLER_MODE" not in data
    assert data["MQ_BROKER_HA_LISTEN_PORT"] == "10912"


def test_certificates_name_the_controller_and_etcd() -> None:
    values = {"tls": {"certManager": {"enabled": True, "issuerRef": {"name": "ca"}}}}
    certs = _by(render_docs(values), "Certificate")
    assert certs["mq-controller"]["spec"]["commonName"] == "mq-controller"
    assert f"mq-controller.{NAMESPACE}.svc.cluster.local" in certs["mq-controller"]["spec"]["dnsNames"]
    assert certs["mq-controller"]["spec"]["dnsNames"].count("mq-controller") == 1  # the identity etcd admits
    renamed = render_docs({"tls": {**values["tls"], "identities": {"controller": "ctl.example"}}})
    assert "ctl.example" in _by(renamed, "Certificate")["mq-controller"]["spec"]["dnsNames"]
    etcd_args = _container(_by(renamed, "StatefulSet")["mq-etcd"])["args"]
    assert "--client-cert-allowed-hostname=ctl.example" in etcd_args
    assert certs["mq-etcd"]["spec"]["dnsNames"] == [f"*.{ETCD_DOMAIN}"]
    assert {"server auth", "client auth"} <= set(certs["mq-etcd"]["spec"]["usages"])
    single = _by(render_docs({**values, "broker": {"replicasPerBrokerGroup": 1}}), "Certificate")
    assert sorted(single) == ["mq-admin", "mq-broker", "mq-gateway", "mq-namesrv"]


def test_existing_secrets_must_name_the_controller_and_etcd_certificates() -> None:
    secrets = {c: f"{c}-tls" for c in ("namesrv", "broker", "gateway", "admin")}
    with pytest.raises(
        helm_python.HelmRenderError, match=r"tls\.existingSecrets\.controller, tls\.existingSecrets\.etcd"
    ):
        render_files({"tls": {"existingSecrets": secrets}, "auth": {"enabled": False}})
    render_files(
        {"tls": {"existingSecrets": secrets}, "auth": {"enabled": False}, "broker": {"replicasPerBrokerGroup": 1}}
    )
