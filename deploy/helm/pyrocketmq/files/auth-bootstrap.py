"""The chart's auth bootstrap Job: create or update auth.users and auth.acls on every master broker with mqadmin.

Runs once per install/upgrade (a Helm post-install/post-upgrade hook) in the services image. Input: the plan JSON
the chart renders (``cluster``, ``brokers`` = the number of broker groups, ``users`` [{username, userType,
passwordEnv}], ``acls`` [{subject, resources, actions, decision, sourceIps}]); each user's password in the env var
its ``passwordEnv`` names (secretKeyRef); the init super user's JSON in MQ_BOOTSTRAP_INIT_USER (mqadmin signs with
it through MQ_ACCESS_KEY / MQ_SECRET_KEY); mqadmin's TLS from MQ_ADMIN_TLS_* and the name servers from
MQ_NAMESRV_ADDR. It waits until the name servers list every broker group's master, then per broker: createUser,
or updateUser when the user exists; createAcl (merged into an existing ACL). The whole plan is retried every
RETRY_PAUSE_S until it succeeds or the Job's deadline ends it. Secrets never reach the output: every password is
masked in what mqadmin printed. Mirrors no RocketMQ class (RocketMQ's operators run mqadmin by hand).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

RETRY_PAUSE_S = 5.0
COMMAND_TIMEOUT_S = 60.0
MASK = "***"


class StepFailed(Exception):
    """One mqadmin call failed; the message is its output with secrets masked."""


def _env_and_secrets(plan: dict[str, Any]) -> tuple[dict[str, str], list[str]]:
    env = dict(os.environ)
    secrets = [env[u["passwordEnv"]] for u in plan["users"]]
    raw = env.pop("MQ_BOOTSTRAP_INIT_USER", "")
    if raw:
        init_user = json.loads(raw)
        env["MQ_ACCESS_KEY"] = str(init_user["username"])
        env["MQ_SECRET_KEY"] = str(init_user["password"])
        secrets.append(env["MQ_SECRET_KEY"])
    return env, [s for s in secrets if s]


def _mqadmin(args: Sequence[str], env: dict[str, str], secrets: Sequence[str]) -> Any:
    """Run ``mqadmin <args> --output json``; its JSON answer. Raises StepFailed."""
    proc = subprocess.run(
        ["mqadmin", *args, "--output", "json"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=COMMAND_TIMEOUT_S,
    )
    if proc.returncode != 0:
        text = (proc.stdout + proc.stderr).strip()
        for secret in secrets:
            text = text.replace(secret, MASK)
        shown = [a if a not in secrets else MASK for a in args]
        raise StepFailed(f"mqadmin {' '.join(shown)}: exit {proc.returncode}: {text[-2000:]}")
    return json.loads(proc.stdout)


def _masters(plan: dict[str, Any], env: dict[str, str], secrets: Sequence[str]) -> list[str]:
    listed = _mqadmin(["clusterList"], env, secrets)["brokers"]
    addrs = sorted(b["addr"] for b in listed if b["cluster"] == plan["cluster"] and b["broker_id"] == 0)
    if len(addrs) < plan["brokers"]:
        raise StepFailed(f"{len(addrs)} of {plan['brokers']} broker groups registered so far")
    return addrs


def _apply(plan: dict[str, Any], env: dict[str, str], secrets: Sequence[str]) -> None:
    for addr in _masters(plan, env, secrets):
        for user in plan["users"]:
            who = ["-u", user["username"], "-p", env[user["passwordEnv"]], "-t", user["userType"], "-b", addr]
            try:
                _mqadmin(["createUser", *who], env, secrets)
            except StepFailed:
                _mqadmin(["updateUser", *who], env, secrets)
            print(json.dumps({"event": "user_applied", "user": user["username"], "broker": addr}), flush=True)
        for acl in plan["acls"]:
            args = ["createAcl", "-s", acl["subject"], "-r", ",".join(acl["resources"])]
            args += ["-a", ",".join(acl["actions"]), "-d", acl["decision"], "-b", addr]
            if acl["sourceIps"]:
                args += ["-i", ",".join(acl["sourceIps"])]
            _mqadmin(args, env, secrets)
            print(json.dumps({"event": "acl_applied", "subject": acl["subject"], "broker": addr}), flush=True)


def main(plan_file: str) -> int:
    plan = json.loads(Path(plan_file).read_text(encoding="utf-8"))
    env, secrets = _env_and_secrets(plan)
    attempt = 0
    while True:
        attempt += 1
        try:
            _apply(plan, env, secrets)
        except (StepFailed, subprocess.TimeoutExpired, ValueError, KeyError) as exc:
            detail = str(exc)
            for secret in secrets:
                detail = detail.replace(secret, MASK)
            print(json.dumps({"event": "bootstrap_retry", "attempt": attempt, "reason": detail}), flush=True)
            time.sleep(RETRY_PAUSE_S)
            continue
        print(json.dumps({"event": "bootstrap_done", "attempts": attempt}), flush=True)
        return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
