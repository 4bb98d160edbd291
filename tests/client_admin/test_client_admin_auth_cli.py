"""mqadmin's ACL 2.0 verbs end to end against a real local cluster (mqnamesrv + two mqbroker processes with
authentication and authorization on, a super user from init_authentication_user): users and ACLs created, shown,
merged and deleted on every master (-c) or one broker (-b), requests signed from MQ_ACCESS_KEY / MQ_SECRET_KEY,
unsigned ones refused with NO_PERMISSION, and no password in any output."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from click.testing import Result
from mq_client.admin.cli import app
from mq_common.response_code import ResponseCode
from mq_local.cluster import LocalCluster
from mq_local.testing import spec_for_tests
from typer.testing import CliRunner

pytestmark = pytest.mark.integration

CLUSTER = "DefaultCluster"
ROOT_SECRET = "root-secret-4711"
ALICE_SECRET = "alice-secret-0815"
SIGNED = {"MQ_ACCESS_KEY": "root", "MQ_SECRET_KEY": ROOT_SECRET}


@pytest.fixture(scope="module")
def auth_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    broker_env = {
        "MQ_BROKER_AUTHENTICATION_ENABLED": "true",
        "MQ_BROKER_AUTHORIZATION_ENABLED": "true",
        "MQ_BROKER_INIT_AUTHENTICATION_USER": json.dumps({"username": "root", "password": ROOT_SECRET}),
    }
    spec = spec_for_tests(tmp_path_factory.mktemp("admin-auth-cluster"), 2, broker_env=broker_env, start_wait_s=60.0)
    with LocalCluster(spec) as cluster:
        yield cluster


def mqadmin(cluster: LocalCluster, *args: str, signed: bool = True) -> Result:
    env = {"COLUMNS": "250", "MQ_NAMESRV_ADDR": "", "MQ_ACCESS_KEY": "", "MQ_SECRET_KEY": ""}
    if signed:
        env.update(SIGNED)
    return CliRunner().invoke(app, ["-n", cluster.namesrv_addr, *args], env=env)


def ok(cluster: LocalCluster, *args: str) -> str:
    result = mqadmin(cluster, *args)
    assert result.exit_code == 0, result.output
    assert ROOT_SECRET not in result.output
    assert ALICE_SECRET not in result.output
    return result.stdout


def as_json(cluster: LocalCluster, *args: str) -> Any:
    return json.loads(ok(cluster, *args, "--output", "json"))


def test_users_across_the_cluster(auth_cluster: LocalCluster) -> None:

    unsigned = mqadmin(auth_cluster, "createUser", "-c", CLUSTER, "-u", "alice", "-p", ALICE_SECRET, signed=False)
    assert unsigned.exit_code == 1
    assert unsigned.stderr.startswith(f"NO_PERMISSION ({ResponseCode.NO_PERMISSION}): ")
    assert ALICE_SECRET not in unsigned.output
    out = ok(auth_cluster, "createUser", "-c", CLUSTER, "-u", "alice", "-p", ALICE_SECRET)
    assert out.count("create user to ") == 2
    dup = mqadmin(auth_cluster, "createUser", "-c", CLUSTER, "-u", "alice", "-p", "x")
    assert dup.exit_code == 1
    assert "The user is existed" in dup.stderr
    users = as_json(auth_cluster, "listUser", "-c", CLUSTER, "-f", "ali")["users"]
    assert [(u["username"], u["user_type"], u["user_status"]) for u in users] == [("alice", "Normal", "enable")] * 2
    assert all("password" not in u for u in users)
    table = ok(auth_cluster, "getUser", "-c", CLUSTER, "-u", "alice")
    assert "alice" in table
    assert "Normal" in table
    ok(auth_cluster, "updateUser", "-c", CLUSTER, "-u", "alice", "-s", "disable")
    got = as_json(auth_cluster, "getUser", "-c", CLUSTER, "-u", "alice")["users"]
    assert {u["user_status"] for u in got} == {"disable"}
    ok(auth_cluster, "deleteUser", "-c", CLUSTER, "-u", "alice")
    assert as_json(auth_cluster, "listUser", "-c", CLUSTER, "-f", "ali")["users"] == []


def test_acls_on_one_broker(auth_cluster: LocalCluster) -> None:
    listed = as_json(auth_cluster, "listUser", "-c", CLUSTER, "-f", "root")["users"]
    addr = sorted({u["broker_addr"] for u in listed})[0]
    ok(auth_cluster, "createUser", "-b", addr, "-u", "bob", "-p", "bob-secret")
    ok(auth_cluster, "createAcl", "-b", addr, "-s", "User:bob", "-r", "Topic:orders,Group:g1", "-a", "Pub,Sub",
       "-d", "Allow", "-i", "127.0.0.1")  # fmt: skip
    ok(auth_cluster, "updateAcl", "-b", addr, "-s", "User:bob", "-r", "Topic:orders", "-a", "Pub", "-d", "Deny")
    rows = as_json(auth_cluster, "getAcl", "-b", addr, "-s", "User:bob")["acls"]
    assert [(r["resource"], r["actions"], r["source_ips"], r["decision"]) for r in rows] == [
        ("Topic:orders", ["Pub"], [], "Deny"),
        ("Group:g1", ["Pub", "Sub"], ["127.0.0.1"], "Allow"),
    ]
    table = ok(auth_cluster, "listAcl", "-b", addr, "-r", "Group")
    assert "Group:g1" in table
    assert "Topic:orders" not in table
    ok(auth_cluster, "deleteAcl", "-b", addr, "-s", "User:bob", "-r", "Group:g1")
    rows = as_json(auth_cluster, "getAcl", "-b", addr, "-s", "User:bob")["acls"]
    assert [r["resource"] for r in rows] == ["Topic:orders"]
    ok(auth_cluster, "deleteAcl", "-b", addr, "-s", "User:bob")
    assert as_json(auth_cluster, "getAcl", "-b", addr, "-s", "User:bob")["acls"] == []
    missing = mqadmin(auth_cluster, "deleteAcl", "-b", addr, "-s", "User:bob")
    assert missing.exit_code == 1
    assert "The acl is not exist." in missing.stderr


def test_usage_errors_exit_2(auth_cluster: LocalCluster) -> None:
    bad_action = mqadmin(
        auth_cluster, "createAcl", "-c", CLUSTER, "-s", "User:x", "-r", "Topic:a", "-a", "Fly", "-d", "Allow"
    )
    assert bad_action.exit_code == 2
    assert "Fly" in bad_action.output
    assert mqadmin(auth_cluster, "listUser").exit_code == 2  # neither -b nor -c
    bad_type = mqadmin(auth_cluster, "createUser", "-c", CLUSTER, "-u", "x", "-p", "y", "-t", "Root")
    assert bad_type.exit_code == 2


def test_topic_verbs_sign_with_the_global_credentials(auth_cluster: LocalCluster) -> None:
    """Every verb (not only the ACL ones) signs with MQ_ACCESS_KEY/MQ_SECRET_KEY: a topic change by the super user
    passes where the unsigned one is refused and changes nothing."""
    unsigned = mqadmin(auth_cluster, "updateTopic", "-c", CLUSTER, "-t", "signed_topic", signed=False)
    assert unsigned.exit_code == 1
    assert unsigned.stderr.startswith(f"NO_PERMISSION ({ResponseCode.NO_PERMISSION}): ")
    assert "signed_topic" not in ok(auth_cluster, "topicList")
    ok(auth_cluster, "updateTopic", "-c", CLUSTER, "-t", "signed_topic")
    assert "signed_topic" in ok(auth_cluster, "topicList")
