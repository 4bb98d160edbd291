"""Writes ``_record_layout.h``: mq_common.record_layout's integer constants as C ``#define``s, for _native.c and
_reput.c, so the C loops read the CommitLog record with the names (and values) the Python readers use.

    python -m mq_broker.store.record_layout_header            # rewrite the header next to this file
    python -m mq_broker.store.record_layout_header --check    # exit 1 (header untouched) when it is out of date

tests/broker/test_broker_record_layout_header.py fails when the committed header differs from :func:`render` or a
``#define`` differs from the module. Build time only; nothing imports this at run time.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from mq_common import record_layout

HEADER_PATH: Final = Path(__file__).with_name("_record_layout.h")
_GUARD: Final = "MQ_BROKER_STORE_RECORD_LAYOUT_H"


def layout_constants() -> dict[str, int]:
    """Every public integer constant of mq_common.record_layout, in the order the module defines them."""
    return {
        name: value
        for name, value in vars(record_layout).items()
        if name.isupper() and not name.startswith("_") and type(value) is int
    }


def _c_literal(name: str, value: int) -> str:
    """Magic codes as unsigned 32-bit hex (they pass INT_MAX), SYSFLAG bits in hex, the rest in decimal."""
    if name.endswith("_MAGIC_CODE"):
        return f"0x{value:08X}u"
    if name.endswith(("_FLAG", "_FLAGS")):
        return f"0x{value:X}"
    return str(value)


def render() -> str:
    """The header's text."""
    lines = [
        "/*",
        " * Generated from mq_common/record_layout.py by `python -m mq_broker.store.record_layout_header`:",
        " * do not edit. The CommitLog message record, format v1 (big-endian): offsets and sizes in bytes, the magic",
        " * codes and the SYSFLAG bits that make a host field IPv6; record_layout.py's docstring has the table.",
        " */",
        f"#ifndef {_GUARD}",
        f"#define {_GUARD}",
        "",
    ]
    lines += [f"#define {name} {_c_literal(name, value)}" for name, value in layout_constants().items()]
    lines += ["", "#endif", ""]
    return "\n".join(lines)


def main(argv: Sequence[str]) -> int:
    """Rewrite the header, or with ``--check`` report whether it is current (0) or not (1)."""
    text = render()
    current = HEADER_PATH.read_text(encoding="utf-8") if HEADER_PATH.exists() else ""
    if "--check" in argv:
        if current != text:
            print(f"{HEADER_PATH} is out of date: run python -m mq_broker.store.record_layout_header", file=sys.stderr)
            return 1
        return 0
    if current != text:
        HEADER_PATH.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
