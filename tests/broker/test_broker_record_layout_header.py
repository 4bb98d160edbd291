"""The C header of the store's loops (_record_layout.h) says what mq_common.record_layout says: the committed file is
the generator's output, and every ``#define`` in it has the module's value (checked by parsing, independently of the
generator)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from mq_broker.store import record_layout_header
from mq_common import record_layout

_DEFINE = re.compile(r"^#define\s+([A-Z][A-Z0-9_]*)\s+(0x[0-9A-Fa-f]+|\d+)u?\s*$", re.MULTILINE)


def _mismatches(header_text: str) -> dict[str, tuple[int | None, int | None]]:
    """name -> (header value, module value) for every name the two do not agree on (missing on one side: None)."""
    defined = {name: int(value, 0) for name, value in _DEFINE.findall(header_text)}
    module = {name: value for name, value in vars(record_layout).items() if name.isupper() and type(value) is int}
    return {
        name: (defined.get(name), module.get(name))
        for name in defined.keys() | module.keys()
        if defined.get(name) != module.get(name)
    }


def test_committed_header_is_the_generators_output() -> None:
    committed = record_layout_header.HEADER_PATH.read_text(encoding="utf-8")
    assert committed == record_layout_header.render(), "run: python -m mq_broker.store.record_layout_header"
    assert record_layout_header.main(["--check"]) == 0


def test_every_define_has_the_modules_value() -> None:
    text = record_layout_header.HEADER_PATH.read_text(encoding="utf-8")
    assert _mismatches(text) == {}
    assert "#define SYS_FLAG_OFFSET 36" in text
    assert "#define MESSAGE_MAGIC_CODE 0xDAA320A7u" in text


def test_a_drifted_or_missing_define_is_reported() -> None:
    text = record_layout_header.HEADER_PATH.read_text(encoding="utf-8")
    drifted = text.replace("#define SYS_FLAG_OFFSET 36\n", "#define SYS_FLAG_OFFSET 37\n")
    assert _mismatches(drifted) == {"SYS_FLAG_OFFSET": (37, 36)}
    missing = text.replace("#define MIN_RECORD_BYTES 91\n", "")
    assert _mismatches(missing) == {"MIN_RECORD_BYTES": (None, 91)}
    extra = text.replace("#endif", "#define BORN_HOST_BYTES 8\n#endif")
    assert _mismatches(extra) == {"BORN_HOST_BYTES": (8, None)}


def test_check_mode_fails_on_a_stale_header(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stale = tmp_path / "_record_layout.h"
    stale.write_text(record_layout_header.render().replace("91", "92"), encoding="utf-8")
    monkeypatch.setattr(record_layout_header, "HEADER_PATH", stale)
    assert record_layout_header.main(["--check"]) == 1
    assert record_layout_header.main([]) == 0
    assert stale.read_text(encoding="utf-8") == record_layout_header.render()
