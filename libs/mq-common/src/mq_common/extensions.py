"""The switch that keeps the optional C extensions unloaded: ``MQ_NO_EXTENSIONS=1``.

Two modules have a C fast path, ``mq_broker.store._native`` (the CommitLog append loop) and ``mq_gateway._wire``
(SendBatch's bytes to a MessageBatch body). Each falls back to a Python path that writes the same bytes when the
extension is not built. ``MQ_NO_EXTENSIONS=1`` makes both behave as if not built (their ``AVAILABLE`` is False
and the extension is never imported), so the Python paths can be run and tested on a machine that has a compiler
(``make test-pure``). Read once, when those modules are imported. No RocketMQ counterpart.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Final

NO_EXTENSIONS_ENV: Final = "MQ_NO_EXTENSIONS"
_OFF_VALUES: Final = frozenset({"", "0", "false", "no"})


def extensions_disabled(environ: Mapping[str, str] = os.environ) -> bool:
    """True when ``MQ_NO_EXTENSIONS`` is set to anything but '', '0', 'false' or 'no' (case-insensitive)."""
    return environ.get(NO_EXTENSIONS_ENV, "").strip().lower() not in _OFF_VALUES
