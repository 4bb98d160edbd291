"""The fenced code blocks of the README and docs/, for the tests that execute them.

Every block has a language tag. A block tagged ``text`` is a picture or a sample of output, never a command;
every other block is executed by a test, listed in :data:`CLAIMS` by a line of text unique to the block.
``test_doc_claims.py`` fails on a block that no claim names, so a new example in the docs cannot go unexecuted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Final

ROOT: Final = Path(__file__).resolve().parents[2]
DOC_FILES: Final = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))
_FENCE: Final = re.compile(r"^```([A-Za-z0-9_+-]*)[^\n]*\n(.*?)^```\s*$", re.MULTILINE | re.DOTALL)


@dataclass(frozen=True, slots=True)
class CodeBlock:
    """One fenced block: its file (relative to the repository root), 0-based index in that file, tag and text."""

    path: str
    index: int
    language: str
    text: str

    @property
    def key(self) -> str:
        return f"{self.path}#{self.index}"

    def lines(self) -> list[str]:
        """The block's command lines: comments and blank lines dropped, backslash continuations joined."""
        joined = re.sub(r"\\\n\s*", " ", self.text)
        return [line.strip() for line in joined.splitlines() if line.strip() and not line.strip().startswith("#")]


def blocks(path: Path) -> list[CodeBlock]:
    """Every fenced block of ``path`` in order; a block without a language tag raises ValueError."""
    found = []
    text = path.read_text(encoding="utf-8")
    for index, match in enumerate(_FENCE.finditer(text)):
        language, body = match.group(1), match.group(2)
        rel = str(path.relative_to(ROOT))
        if not language:
            raise ValueError(f"{rel}: code block {index} has no language tag")
        found.append(CodeBlock(rel, index, language, body))
    return found


def all_blocks() -> list[CodeBlock]:
    return [block for path in DOC_FILES for block in blocks(path)]


def find(path: str, contains: str) -> CodeBlock:
    """The one block of ``path`` whose text contains ``contains`` (AssertionError if none or several)."""
    matches = [b for b in blocks(ROOT / path) if contains in b.text]
    assert len(matches) == 1, f"{path}: {len(matches)} blocks contain {contains!r}"
    return matches[0]


# (file, text unique to the block) -> the test that executes that block ("path::name").
_README_TESTS: Final = "tests/docs/test_readme_blocks.py"
CLAIMS: Final[dict[tuple[str, str], str]] = {
    ("README.md", "make run"): f"{_README_TESTS}::test_readme_commands_are_make_targets_ci_runs",
    ("README.md", "consumer import PullConsumer"): f"{_README_TESTS}::test_readme_python_send_and_receive",
    ("README.md", "receive_as_audit"): f"{_README_TESTS}::test_readme_consume_as_group",
    ("README.md", "@grpc/proto-loader"): f"{_README_TESTS}::test_readme_node_send_batch",
    ("README.md", "-t sdk-orders -w 4"): f"{_README_TESTS}::test_readme_rocketmq5_sdks",
    ("README.md", "from rocketmq import"): f"{_README_TESTS}::test_readme_rocketmq5_sdks",
    ("README.md", 'require("rocketmq-client-nodejs")'): f"{_README_TESTS}::test_readme_rocketmq5_sdks",
    ("README.md", "uv run mqadmin clusterList"): f"{_README_TESTS}::test_readme_mqadmin_verbs",
    ("README.md", 'format("rocketmq")'): f"{_README_TESTS}::test_readme_spark_snippet",
    (
        "docs/spark.md",
        '"body binary, keys string',
    ): "tests/docs/test_spark_blocks.py::test_spark_doc_write_read_and_stream",
    (
        "docs/spark.md",
        'orders(subscription="TagA")',
    ): "tests/docs/test_spark_blocks.py::test_spark_doc_write_read_and_stream",
    ("docs/spark.md", "readStream"): "tests/docs/test_spark_blocks.py::test_spark_doc_write_read_and_stream",
    (
        "docs/security.md",
        "make up MQLOCAL_ARGS=--tls",
    ): "tests/docs/test_security_blocks.py::test_security_tls_local_cluster",
    (
        "docs/security.md",
        "make up MQLOCAL_ARGS=--auth",
    ): "tests/docs/test_security_blocks.py::test_security_auth_local_cluster",
}
