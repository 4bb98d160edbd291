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
