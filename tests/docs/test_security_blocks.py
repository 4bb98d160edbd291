"""docs/security.md's local TLS cluster block, executed: ``make up MQLOCAL_ARGS=--tls`` is what the Makefile passes
to ``mqlocal up`` (run here on free ports in a temporary data folder), the exports make ``mqadmin clusterList``
work over mutual TLS, and ``make down`` stops it; the auth block likewise (``--auth``: private credential files, no
secret printed, unsigned admin calls refused, the block's mqadmin calls signed through ``source .../admin.env``)."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Final

import pytest
from doc_blocks import ROOT, find
from mq_local.ports import free_port

pytestmark = pytest.mark.integration
SECURITY: Final = "docs/security.md"
BIN: Final = Path(sys.executable).parent
DOC_DATA_DIR: Final = ".run/local/cluster"
RUN_BOUND_S: Final = 180


def run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=RUN_BOUND_S, check=False)
    assert done.returncode == 0, f"{shlex.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done


def start_doc_cluster(flag: str, tmp_path: Path) -> tuple[list[str], Path, str, dict[str, str], str]:
    """Check the block starting ``make up MQLOCAL_ARGS=<flag>`` and the Makefile recipe, then run ``mqlocal up
    <flag>`` on free ports in ``tmp_path``: (block lines, data folder, name server, env without MQ_*, up's output)."""
    lines = find(SECURITY, f"make up MQLOCAL_ARGS={flag}").lines()
    assert (lines[0], lines[-1]) == (f"make up MQLOCAL_ARGS={flag}", "make down"), lines
    recipe = run(["make", "-n", "up", f"MQLOCAL_ARGS={flag}"], dict(os.environ)).stdout
    assert f"mqlocal up --data-dir {DOC_DATA_DIR} {flag}" in recipe, recipe
    data = tmp_path / "cluster"
    ports = ["--namesrv-port", str(free_port()), "--broker-base-port", str(free_port())]
    ports += ["--gateway-port", str(free_port()), "--brokers", "1"]
    env = {k: v for k, v in {**os.environ, "COLUMNS": "200"}.items() if not k.startswith("MQ_")}
    started = run([str(BIN / "mqlocal"), "up", "--data-dir", str(data), flag, *ports], env)
    return lines, data, f"127.0.0.1:{ports[1]}", env, started.stdout + started.stderr


def test_security_tls_local_cluster(tmp_path: Path) -> None:
    lines, data, namesrv, env, _ = start_doc_cluster("--tls", tmp_path)
    try:
        for line in lines[1:-1]:
            args = shlex.split(line.replace(DOC_DATA_DIR, str(data)))
            if args[0] == "export":
                env.update(dict(a.split("=", 1) for a in args[1:]))
                continue
            assert args[:3] == ["uv", "run", "mqadmin"], line
            out = run([str(BIN / "mqadmin"), "-n", namesrv, *args[3:]], env).stdout
            assert "broker-a" in out, out
        plaintext = {k: v for k, v in env.items() if not k.startswith("MQ_ADMIN_TLS_")}
        refused = subprocess.run(
            [str(BIN / "mqadmin"), "-n", namesrv, "clusterList"],
            env=plaintext,
            capture_output=True,
            text=True,
            timeout=RUN_BOUND_S,
            check=False,
        )
        assert refused.returncode == 1, refused.stdout + refused.stderr
    finally:
        run([str(BIN / "mqlocal"), "down", "--data-dir", str(data)], env)


def _exports(path: Path) -> dict[str, str]:
    """The ``export A=1 B=2`` lines of an env file, as a dict."""
    pairs: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        words = shlex.split(line)
        if words and words[0] == "export":
            pairs.update(dict(w.split("=", 1) for w in words[1:]))
    return pairs


def test_security_auth_local_cluster(tmp_path: Path) -> None:
    lines, data, namesrv, env, started = start_doc_cluster("--auth", tmp_path)
    try:
        auth_dir = data / "auth"
        assert (auth_dir.stat().st_mode & 0o777, (auth_dir / "admin.env").stat().st_mode & 0o777) == (0o700, 0o600)
        secret = _exports(auth_dir / "admin.env")["MQ_SECRET_KEY"]
        assert "admin.env" in started
        assert secret not in started
        outputs = []
        unsigned = subprocess.run(
            [str(BIN / "mqadmin"), "-n", namesrv, *shlex.split(lines[2])[3:]],
            env=env, capture_output=True, text=True, timeout=RUN_BOUND_S, check=False,
        )  # fmt: skip
        assert unsigned.returncode == 1, unsigned.stdout + unsigned.stderr
        assert "NO_PERMISSION" in unsigned.stderr
        for line in lines[1:-1]:
            args = shlex.split(line.replace(DOC_DATA_DIR, str(data)))
            if args[0] == "source":
                env.update(_exports(Path(args[1])))
                continue
            assert args[:3] == ["uv", "run", "mqadmin"], line
            outputs.append(run([str(BIN / "mqadmin"), "-n", namesrv, *args[3:]], env).stdout)
        assert "Topic:flights" in outputs[-1], outputs[-1]
        assert all(secret not in out and "spark-secret-1" not in out for out in outputs)
    finally:
        run([str(BIN / "mqlocal"), "down", "--data-dir", str(data)], env)
