"""Every code block of the README and docs/ is executed by a test (doc_blocks.CLAIMS names which)."""

from __future__ import annotations

from claims_deployment import CLAIMS as DEPLOYMENT_CLAIMS
from doc_blocks import CLAIMS as README_CLAIMS
from doc_blocks import ROOT, all_blocks, find

CLAIMS = {**README_CLAIMS, **DEPLOYMENT_CLAIMS}


def test_every_block_is_claimed_by_a_test() -> None:
    claimed = {find(path, contains).key for path, contains in CLAIMS}
    unclaimed = [b.key for b in all_blocks() if b.language != "text" and b.key not in claimed]
    assert unclaimed == [], f"code blocks no test executes (add one to doc_blocks.CLAIMS): {unclaimed}"


def test_every_claim_names_a_test_that_exists() -> None:
    for (path, contains), test in CLAIMS.items():
        file, _, name = test.partition("::")
        source = (ROOT / file).read_text(encoding="utf-8")
        assert f"def {name}(" in source, f"{path} block {contains!r}: {test} does not exist"


def test_development_budget_has_a_row_per_ci_step() -> None:
    """docs/development.md's budget table names every step .ci/run runs, with the chaos rounds CI passes."""
    ci_steps = [line.removeprefix("newcomer ").strip() for line in (ROOT / ".ci/run").read_text().splitlines()]
    ci_steps = [step for step in ci_steps if step.startswith("make ")]
    assert ci_steps[:2] == ["make test", "make test-pure"], ci_steps
    table = (ROOT / "docs/development.md").read_text(encoding="utf-8")
    for step in ci_steps:
        target, *variables = step.split()[1:]
        assert f"| `make {target}`" in table, f"docs/development.md has no row for {step!r}"
        rounds = " ".join(variables)
        assert rounds in table, f"docs/development.md does not show CI's {rounds!r}"
