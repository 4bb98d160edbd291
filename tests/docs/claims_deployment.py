"""Claims of docs/deployment.md's blocks: (file, text unique to the block) -> the test executing it."""

from __future__ import annotations

from typing import Final

CLAIMS: Final[dict[tuple[str, str], str]] = {}
