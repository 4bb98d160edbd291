"""Claims of docs/deployment.md's blocks and docs/security.md's chart values: (file, unique text) -> the test."""

from __future__ import annotations

from typing import Final

_TESTS: Final = "tests/e2e/test_docs_deployment.py"
CLAIMS: Final[dict[tuple[str, str], str]] = {
    ("docs/deployment.md", "helm install "): f"{_TESTS}::test_helm_install_lines_render",
    ("docs/deployment.md", "-- mqadmin "): f"{_TESTS}::test_mqadmin_lines_run_against_a_cluster",
    ("docs/deployment.md", "helm upgrade "): f"{_TESTS}::test_helm_upgrade_line_renders",
    ("docs/deployment.md", "- name: broker-c"): f"{_TESTS}::test_broker_groups_block_renders_its_claims",
    ("docs/deployment.md", "kubectl apply -f deploy/spark/"): f"{_TESTS}::test_spark_manifests_apply",
    ("docs/deployment.md", "spark-submit --master"): f"{_TESTS}::test_spark_submit_runs_as_shown",
    ("docs/security.md", "passwordSecret: {name: spark-flights-user"): f"{_TESTS}::test_security_values_block_renders",
}
