"""docs/deployment.md's code blocks, executed as far as this machine allows (no cluster, no helm binary).

- ``helm install`` / ``helm upgrade`` lines: parsed like the helm CLI (release, chart, ``-n``, ``-f``, ``--set``)
  and rendered by the real Helm engine with exactly those values; the install block's ``kubectl get secret`` lines
  run with a real kubectl against a stand-in API server holding the Secrets the first install generated.
- The broker-groups values block: rendered, and its comment's object names and size checked.
- ``kubectl exec deploy/<gateway> -- mqadmin ...`` lines: the kubectl part must target what the chart renders;
  the mqadmin part runs for real against a local cluster (in-cluster addresses swapped for local ones).
- The Spark block: every applied file validates (strict schemas), ``spark-submit.sh`` runs with a stand-in
  ``spark-submit`` that records its argv, which must hold every option and argument the next block shows.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import helm_python
import pytest
import yaml
from chart_testkit import (
    CRD_KINDS,
    KUBE_VERSIONS,
    ROOT,
    FakeApiServer,
    kubernetes_validate,
    render_docs,
    render_files,
    write_docs,
)
from mq_local.cluster import LocalCluster
from mq_local.testing import read_all, spec_for_tests

pytestmark = pytest.mark.e2e

sys.path.insert(0, str(ROOT / "tests" / "docs"))  # doc_blocks: the docs' fenced blocks
from doc_blocks import CodeBlock, find  # noqa: E402

DOC = "docs/deployment.md"
MQADMIN = Path(sys.executable).parent / "mqadmin"
MQADMIN_TIMEOUT_S = 60
WORKLOADS = ("Deployment", "StatefulSet")
TLS_COMPONENTS = ("namesrv", "broker", "gateway", "admin", "controller", "etcd")


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """Helm's CLI merge of values sources: maps merge key by key, anything else is replaced."""
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            _merge(base[key], value)
        else:
            base[key] = value
    return base


@dataclass(slots=True)
class HelmCommand:
    """One ``helm install|upgrade RELEASE CHART`` line, parsed the way the helm CLI reads it."""

    verb: str
    release: str
    chart: Path
    namespace: str = "default"
    values_files: list[Path] = field(default_factory=list)
    sets: list[str] = field(default_factory=list)

    @classmethod
    def parse(cls, line: str, supplied: dict[str, Path]) -> HelmCommand:
        argv = shlex.split(line)
        assert argv[:1] == ["helm"], line
        assert argv[1] in ("install", "upgrade"), line
        positional: list[str] = []
        namespace, files, sets = "default", [], []
        args = iter(argv[2:])
        for arg in args:
            if arg in ("-n", "--namespace"):
                namespace = next(args)
            elif arg in ("-f", "--values"):
                files.append(_path(next(args), supplied))
            elif arg == "--set":
                sets.append(next(args))
            elif arg == "--create-namespace" and argv[1] == "install":
                pass
            elif arg == "--timeout":  # how long helm waits (hooks included); nothing to render
                next(args)
            else:
                assert not arg.startswith("-"), f"{line}: flag {arg} not understood by this test"
                positional.append(arg)
        assert len(positional) == 2, f"{line}: expected RELEASE CHART, got {positional}"
        helm_python.validate_release_name(positional[0])
        return cls(argv[1], positional[0], _path(positional[1], supplied), namespace, files, sets)

    def values(self) -> dict[str, Any]:
        """``-f`` files in order, then every ``--set`` (the helm CLI applies --set after all files)."""
        merged: dict[str, Any] = {}
        for path in self.values_files:
            _merge(merged, helm_python.values_from_yaml(path.read_text(encoding="utf-8")))
        for expression in self.sets:
            _merge(merged, helm_python.parse_set_string(expression))
        return merged

    def render(self) -> list[dict[str, Any]]:
        return render_docs(
            self.values(),
            chart=self.chart,
            name=self.release,
            namespace=self.namespace,
            is_upgrade=self.verb == "upgrade",
        )


def _path(name: str, supplied: dict[str, Path]) -> Path:
    """A path of the doc, relative to the repository root; a file the reader brings comes from ``supplied``."""
    path = ROOT / name
    if not path.exists() and name in supplied:
        return supplied[name]
    assert path.exists(), f"{DOC} names {name}, which does not exist"
    return path


def _named(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    found = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(found) == 1, f"{kind}/{name}: {len(found)} rendered"
    return found[0]


def _containers(doc: dict[str, Any]) -> list[dict[str, Any]]:
    spec = doc["spec"]["template"]["spec"]
    return [*spec.get("initContainers", []), *spec["containers"]]


def _broker_sets(docs: list[dict[str, Any]]) -> set[str]:
    return {d["metadata"]["name"] for d in docs if d["kind"] == "StatefulSet" and "-broker-" in d["metadata"]["name"]}


def _assert_release(cmd: HelmCommand, docs: list[dict[str, Any]]) -> None:
    """What an install/upgrade of the chart with these values must create, derived from the merged values."""
    final = helm_python.Chart.load(str(cmd.chart)).merge_values(cmd.values())
    assert docs, "nothing rendered"
    for d in docs:
        assert d["metadata"]["name"].startswith(f"{cmd.release}-"), d["metadata"]["name"]
        assert d["metadata"]["namespace"] == cmd.namespace, d["metadata"]["name"]
    image = final["image"]
    expected = f"{image['repository']}:{image['tag']}"
    for d in docs:
        if d["kind"] in WORKLOADS:
            assert {c["image"] for c in _containers(d)} == {expected}, d["metadata"]["name"]
    groups = {f"{cmd.release}-broker-{g['name']}" for g in final["broker"]["groups"]}
    assert _broker_sets(docs) == groups
    namesrv = _named(docs, "StatefulSet", f"{cmd.release}-namesrv")
    assert namesrv["spec"]["replicas"] == final["namesrv"]["replicas"]
    _named(docs, "Deployment", f"{cmd.release}-gateway")


def _upgrade_block() -> CodeBlock:
    return find(DOC, "helm upgrade ")


def _broker_groups_block() -> CodeBlock:
    return find(DOC, "- name: broker-c")


def _install_commands() -> list[HelmCommand]:
    lines = [line for line in find(DOC, "helm install ").lines() if not line.startswith("kubectl ")]
    assert [line.split()[:2] for line in lines] == [["helm", "install"]] * 3, lines
    return [HelmCommand.parse(line, {}) for line in lines]


def _secret(docs: list[dict[str, Any]], name: str, key: str) -> bytes:
    return base64.b64decode(_named(docs, "Secret", name)["data"][key])


def test_helm_install_lines_render(tmp_path: Path) -> None:
    """The getting-started install generates its Secrets (the block's kubectl lines, run with a real kubectl against
    a cluster holding them, print the super user and write the CA); the production install generates none and
    asks cert-manager; the dev install is one pod of each."""
    commands = _install_commands()
    for cmd in commands:
        assert cmd.verb == "install"
        _assert_release(cmd, cmd.render())
    started, production, dev = commands
    for cmd in (started, production):
        assert cmd.sets
        assert not cmd.values_files
        repository = helm_python.parse_set_string(cmd.sets[0])["image"]["repository"]
        workloads = [d for d in cmd.render() if d["kind"] in WORKLOADS]
        assert all(c["image"].startswith(f"{repository}:") for d in workloads for c in _containers(d))
    release = started.release
    docs = started.render()
    generated = [d for d in docs if d["kind"] == "Secret"]
    assert sorted(d["metadata"]["name"] for d in generated) == sorted(
        f"{release}-{name}" for name in ("auth", "ca", *(f"{c}-tls" for c in TLS_COMPONENTS))
    )
    kubectl = [line for line in find(DOC, "helm install ").lines() if line.startswith("kubectl ")]
    assert len(kubectl) == 2, kubectl
    with FakeApiServer(generated) as api:
        user, ca = (api.kubectl(line, tmp_path) for line in kubectl)
    assert user.returncode == 0, user.stderr
    shown = json.loads(user.stdout)
    assert shown == json.loads(_secret(docs, f"{release}-auth", "initAuthenticationUser"))
    assert shown["username"] == "rocketmq"
    assert ca.returncode == 0, ca.stderr
    assert (tmp_path / "ca.crt").read_bytes() == _secret(docs, f"{release}-ca", "tls.crt")
    production_docs = production.render()
    assert [d for d in production_docs if d["kind"] == "Secret"] == []
    assert {d["kind"] for d in production_docs} >= {"Certificate"}
    # "single-node dev cluster": one name server, one broker group, one gateway pod, no autoscaler.
    docs = dev.render()
    assert _named(docs, "StatefulSet", f"{dev.release}-namesrv")["spec"]["replicas"] == 1
    assert len(_broker_sets(docs)) == 1
    assert _named(docs, "Deployment", f"{dev.release}-gateway")["spec"]["replicas"] == 1
    assert not [d for d in docs if d["kind"] == "HorizontalPodAutoscaler"]


def _upgrade_command(tmp_path: Path) -> HelmCommand:
    """The upgrade line; ``my-values.yaml`` is the reader's values file: the broker-groups block appends to it."""
    mine = tmp_path / "my-values.yaml"
    mine.write_text(_broker_groups_block().text, encoding="utf-8")
    (line,) = _upgrade_block().lines()
    cmd = HelmCommand.parse(line, {"my-values.yaml": mine})
    assert cmd.verb == "upgrade"
    assert cmd.values_files == [mine]
    assert not cmd.sets
    return cmd


def test_helm_upgrade_line_renders(tmp_path: Path) -> None:
    cmd = _upgrade_command(tmp_path)
    docs = cmd.render()
    _assert_release(cmd, docs)
    # Every pod template carries checksum/config: the hash of its own ConfigMap.
    for d in docs:
        if d["kind"] in WORKLOADS:
            assert d["spec"]["template"]["metadata"]["annotations"]["checksum/config"], d["metadata"]["name"]


def test_broker_groups_block_renders_its_claims(tmp_path: Path) -> None:
    block = _broker_groups_block()
    values = helm_python.values_from_yaml(block.text)
    cmd = _upgrade_command(tmp_path)  # "Append to the list and upgrade": the upgrade line with these values
    assert cmd.values() == values
    docs = cmd.render()
    # "# new: StatefulSet pyrocketmq-broker-broker-c, PVC store-pyrocketmq-broker-broker-c-0"
    comment = next(raw for raw in block.text.splitlines() if "# new:" in raw).split("# new:")[1]
    claimed_sts, claimed_pvc = (part.split()[-1] for part in comment.split(","))
    default_size = helm_python.Chart.load(str(cmd.chart)).merge_values({})["broker"]["persistence"]["size"]
    groups = values["broker"]["groups"]
    for group in groups:
        sts = _named(docs, "StatefulSet", f"{cmd.release}-broker-{group['name']}")
        (claim,) = sts["spec"]["volumeClaimTemplates"]
        pvc = f"{claim['metadata']['name']}-{sts['metadata']['name']}-0"  # <template>-<statefulset>-<ordinal>
        size = group.get("persistence", {}).get("size", default_size)
        assert claim["spec"]["resources"]["requests"]["storage"] == size
        assert sts["spec"]["persistentVolumeClaimRetentionPolicy"]["whenDeleted"] == "Retain"
        if group["name"] == "broker-c":
            assert (sts["metadata"]["name"], pvc) == (claimed_sts, claimed_pvc)
            assert size != default_size  # its own persistence overrides the shared one
    assert len(_broker_sets(docs)) == len(groups)


def _run_mqadmin(args: list[str]) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MQ_")}
    env["COLUMNS"] = "250"
    return subprocess.run(
        [str(MQADMIN), *args], capture_output=True, text=True, env=env, timeout=MQADMIN_TIMEOUT_S, check=False
    )


def _verb(args: list[str]) -> str:
    """mqadmin's sub-command: the first word after the global options (``-n ADDR``)."""
    rest = iter(args)
    for arg in rest:
        if arg in ("-n", "--namesrvAddr"):
            next(rest)
        else:
            return arg
    raise AssertionError(f"no mqadmin verb in {args}")


def test_mqadmin_lines_run_against_a_cluster(tmp_path: Path) -> None:
    (install, _, _) = _install_commands()
    # The lines are NOTES.txt's for a cluster without auth (the docs say the unsigned sendMessage needs it off).
    plaintext = {**install.values(), "tls": {"enabled": False}, "auth": {"enabled": False}}
    rendered = render_files(plaintext, name=install.release, namespace=install.namespace)
    docs = [d for path, text in rendered.items() if path.endswith(".yaml") for d in yaml.safe_load_all(text) if d]
    notes = " ".join(next(t for p, t in rendered.items() if p.endswith("NOTES.txt")).replace("\\\n", " ").split())
    namesrv_svc = _named(docs, "Service", f"{install.release}-namesrv")
    namesrv_port = next(p["port"] for p in namesrv_svc["spec"]["ports"] if p["name"] == "grpc")
    namesrv_dns = f"{namesrv_svc['metadata']['name']}.{install.namespace}.svc.cluster.local:{namesrv_port}"
    gateway = _named(docs, "Deployment", f"{install.release}-gateway")
    gateway_port = next(
        p["containerPort"] for c in _containers(gateway) for p in c.get("ports", []) if p["name"] == "grpc"
    )
    in_pod_gateway = f"127.0.0.1:{gateway_port}"  # mqadmin runs in the gateway pod: the gateway is on loopback

    lines = find(DOC, "-- mqadmin ").lines()
    assert len(lines) == 3
    commands = []
    for line in lines:
        kubectl, _, admin = line.partition(" -- ")
        argv = shlex.split(kubectl)
        assert argv[0] == "kubectl", line
        assert argv[argv.index("-n") + 1] == install.namespace, line
        assert argv[argv.index("exec") + 1] == f"deploy/{gateway['metadata']['name']}", line
        admin_argv = shlex.split(admin)
        assert admin_argv[0] == "mqadmin", line
        verb = _verb(admin_argv[1:])
        shown = " ".join(admin_argv[: admin_argv.index(verb) + 1])
        assert f"{kubectl} -- {shown}" in notes, f"NOTES.txt does not give {shown}"
        for addr in (namesrv_dns, in_pod_gateway):
            if addr in admin_argv:
                assert addr in notes
        commands.append(admin_argv[1:])
    assert [_verb(c) for c in commands] == ["clusterList", "updateTopic", "sendMessage"]
    assert any(namesrv_dns in c for c in commands)
    assert any(in_pod_gateway in c for c in commands)

    with LocalCluster(spec_for_tests(tmp_path / "cluster")) as cluster:
        local = {namesrv_dns: cluster.namesrv_addr, in_pod_gateway: cluster.gateway_addr}
        outputs = {}
        for args in commands:
            proc = _run_mqadmin([local.get(a, a) for a in args])
            assert proc.returncode == 0, f"mqadmin {args}: {proc.stdout}{proc.stderr}"
            outputs[_verb(args)] = proc.stdout
        cluster_name = commands[1][commands[1].index("-c") + 1]
        topic = commands[1][commands[1].index("-t") + 1]
        for name, addr in cluster.broker_addrs.items():
            assert cluster_name in outputs["clusterList"]
            assert name in outputs["clusterList"]
            assert addr in outputs["clusterList"]
            assert f"create topic to {addr} success." in outputs["updateTopic"]
        send = commands[2]
        assert send[send.index("-t") + 1] == topic
        assert "sendStatus=SEND_OK" in outputs["sendMessage"]
        msg_id = outputs["sendMessage"].split("msgId=")[1].split(",")[0]
        stored = asyncio.run(read_all(cluster.namesrv_addr, topic))
        body = send[send.index("-p") + 1]
        assert [(m.body.decode(), m.uniq_key) for _, m in stored] == [(body, msg_id)]


def _spark_block() -> CodeBlock:
    return find(DOC, "kubectl apply -f deploy/spark/")


def _spark_line_kind(line: str) -> str:
    if line.startswith("kubectl apply "):
        return "apply"
    if line.startswith("kubectl -n ") and " get " in line:
        return "get"
    return "submit" if "spark-submit.sh" in line else line


def test_spark_manifests_apply(tmp_path: Path) -> None:
    lines = _spark_block().lines()
    # Each line is one these two tests execute: apply and get (this test), spark-submit.sh (the next one).
    assert sorted(map(_spark_line_kind, lines)) == ["apply", "apply", "get", "submit"], lines
    applied = [
        _path(argv[i + 1], {})
        for argv in map(shlex.split, lines)
        if argv[:2] == ["kubectl", "apply"]
        for i, arg in enumerate(argv)
        if arg == "-f"
    ]
    assert len(applied) == 3
    docs = [d for path in applied for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d]
    (get,) = [shlex.split(line) for line in lines if line.startswith("kubectl -n ")]
    namespace = get[get.index("-n") + 1]
    kind, name = get[get.index("get") + 1 : get.index("get") + 3]
    for d in docs:
        assert d["metadata"]["namespace"] == namespace, d["metadata"]["name"]
    (app,) = [d for d in docs if d["kind"].lower() == kind]
    assert app["metadata"]["name"] == name
    assert app["apiVersion"] == "sparkoperator.k8s.io/v1beta2"
    accounts = {d["metadata"]["name"] for d in docs if d["kind"] == "ServiceAccount"}
    assert app["spec"]["driver"]["serviceAccount"] in accounts
    builtin = write_docs([d for d in docs if d["kind"] not in CRD_KINDS], tmp_path / "applied.yaml")
    for version in KUBE_VERSIONS:
        proc = kubernetes_validate([builtin], version)
        assert proc.returncode == 0, proc.stdout + proc.stderr


def _split_submit(argv: list[str]) -> tuple[list[tuple[str, str]], str, list[str]]:
    """spark-submit argv -> its (option, value) pairs, the application file, the job's arguments.

    Every spark-submit option the script uses takes a value: options come in pairs before the application file.
    """
    (app_index,) = [i for i, a in enumerate(argv) if a.startswith("local://")]
    options = argv[:app_index]
    pairs = list(zip(options[::2], options[1::2], strict=True))
    assert all(flag.startswith("--") and not value.startswith("--") for flag, value in pairs), options
    return pairs, argv[app_index], argv[app_index + 1 :]


def test_spark_submit_runs_as_shown(tmp_path: Path) -> None:
    (line,) = [line for line in _spark_block().lines() if "spark-submit.sh" in line]
    argv = shlex.split(line)
    assignments = dict(a.split("=", 1) for a in argv if "=" in a and not a.startswith("-"))
    assert set(assignments) == {"K8S_MASTER"}
    script = argv[len(assignments) :]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    recorded = tmp_path / "argv"
    stand_in = bin_dir / "spark-submit"
    stand_in.write_text(f'#!/bin/sh\nprintf "%s\\0" "$@" > {shlex.quote(str(recorded))}\n', encoding="utf-8")
    stand_in.chmod(0o755)
    overrides = ("NAMESPACE", "RELEASE", "SPARK_IMAGE", "GATEWAY", "NAMESRV")  # the script's defaults apply
    env = {k: v for k, v in os.environ.items() if k not in overrides}
    env.update(assignments, PATH=f"{bin_dir}{os.pathsep}{env['PATH']}")
    proc = subprocess.run(script, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    # Paths the script passes absolute are shown relative to the repository root, where the doc runs it.
    got = [a.replace(f"{ROOT}/", "") for a in recorded.read_text(encoding="utf-8").split("\0")[:-1]]

    (shown,) = find(DOC, "spark-submit --master").lines()
    expected = [a for a in shlex.split(shown) if a != "..."]
    assert expected[0] == "spark-submit"
    got_pairs, got_app, got_args = _split_submit(got)
    want_pairs, want_app, want_args = _split_submit(expected[1:])
    assert want_pairs
    assert [o for o in want_pairs if o not in got_pairs] == []
    assert got_app == want_app
    assert got_args == want_args
    # Without K8S_MASTER the script refuses to run (it has no default API server).
    env.pop("K8S_MASTER")
    proc = subprocess.run(script, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode != 0
    assert "K8S_MASTER" in proc.stderr


def test_security_values_block_renders() -> None:
    """docs/security.md "In Kubernetes": the values alone (no Secret names added) render the Certificates, the
    bootstrap Job with the Spark user's password by secretKeyRef, and the plan with its ACL."""
    block = find("docs/security.md", "passwordSecret: {name: spark-flights-user")
    docs = render_docs(helm_python.values_from_yaml(block.text))
    certificates = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Certificate"}
    # the controller's and etcd's too: replicated broker groups (the default) run them
    assert sorted(certificates) == ["mq-admin", "mq-broker", "mq-controller", "mq-etcd", "mq-gateway", "mq-namesrv"]
    assert {c["spec"]["issuerRef"]["name"] for c in certificates.values()} == {"messaging-ca"}
    assert "server auth" not in certificates["mq-admin"]["spec"]["usages"]
    job = _named(docs, "Job", "mq-auth-bootstrap")
    env = {e["name"]: e for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["MQ_BOOTSTRAP_PASSWORD_0"]["valueFrom"]["secretKeyRef"] == {
        "name": "spark-flights-user",
        "key": "password",
    }
    plan = json.loads(_named(docs, "ConfigMap", "mq-auth-bootstrap")["data"]["plan.json"])
    assert plan["acls"] == [
        {"subject": "User:spark-flights", "resources": ["Topic:flights"], "actions": ["Pub"], "decision": "Allow",
         "sourceIps": []}
    ]  # fmt: skip
