"""Chart tests: shared fixtures; chart_testkit.py and chart_schema.py importable (--import-mode=importlib). The
container suite's session fixtures live in containers_fixtures.py: imported here, the test_containers*.py modules
share one replicated topology."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

pytest.importorskip("helm_python")

from chart_testkit import (  # noqa: E402
    CHART,
    VALUE_SETS,
    Rendered,
    load_values,
    render_docs,
    run_checkov,
    spark_docs,
    write_docs,
)
from containers_fixtures import (  # noqa: E402, F401 (fixtures: pytest finds them by name)
    bootstrapped,
    containers_docs,
    docker_daemon,
    images,
    pki,
    secrets,
    spark_app,
    topology,
)


@pytest.fixture(scope="session")
def rendered_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("rendered")


@pytest.fixture(scope="session")
def rendered(rendered_dir: Path) -> dict[str, Rendered]:
    """Every value set rendered once (release "mq" in namespace "messaging"), plus deploy/spark as "spark"."""
    out: dict[str, Rendered] = {}
    for name in VALUE_SETS:
        docs = render_docs(load_values(name))
        out[name] = Rendered(name, docs, write_docs(docs, rendered_dir / f"{name}.yaml"))
    docs = spark_docs()
    out["spark"] = Rendered("spark", docs, write_docs(docs, rendered_dir / "spark.yaml"))
    return out


@pytest.fixture(scope="session")
def checkov_report(rendered: dict[str, Rendered], rendered_dir: Path) -> dict[str, dict[str, list[Any]]]:
    """checkov's passed/failed/skipped checks per rendered file (one checkov run for all of them)."""
    return run_checkov(rendered, rendered_dir)


@pytest.fixture
def chart_copy(tmp_path: Path) -> Path:
    """A scratch copy of the chart, for tests that add files (dashboards, rules)."""
    dest = tmp_path / "pyrocketmq"
    shutil.copytree(CHART, dest)
    return dest
