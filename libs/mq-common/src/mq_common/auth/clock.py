"""The ``x-mq-date-time`` freshness rule, for SDKs that send LOCAL time labelled ``Z``.

Java, Python and Go send ``yyyyMMddTHHmmssZ`` in the client's local time zone with a literal ``Z``; Node sends
UTC. So the server cannot compare the value with its own clock directly. The rule (:class:`ClientClocks`):

- the client's offset is ``value read as UTC - server UTC now``; it must lie within ``clock_skew_ms`` of a whole
  quarter hour (every real zone offset is one) between UTC-12:00 and UTC+14:00: a client in any zone passes, a
  value one day old never does;
- on first sight of a client (access key + ``x-mq-client-id``) its offset is learned; afterwards the offset may
  move forward (the client's clock runs on, or its zone springs forward) but never back by more than
  ``clock_skew_ms``: a date-time one hour old from the same client is refused as stale, even though it would
  look like a client one zone to the west.

Limits, stated plainly: a client seen for the first time is only held to "some zone": a one-hour-old header
replayed under a NEW client id passes this rule (the replay window of signature.py refuses it while its triple is
still cached; TLS keeps headers from being captured at all). A client whose zone falls back (end of daylight
saving) is refused until it restarts with a new client id. RocketMQ checks no date-time at all: this is ours.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Final

from mq_common.auth.lru import BoundedLru

ZONE_STEP_MS: Final = 15 * 60_000
MAX_ZONE_AHEAD_MS: Final = 14 * 3_600_000
MAX_ZONE_BEHIND_MS: Final = 12 * 3_600_000
# The skew must stay below half a zone step, else every offset would be "near some zone".
MAX_CLOCK_SKEW_MS: Final = ZONE_STEP_MS // 2 - 1
# Learned clients: one entry per (access key, client id); the least recently seen is forgotten first.
MAX_LEARNED_CLIENTS: Final = 100_000
_DATE_TIME_CHARS: Final = 16


def parse_date_time_ms(text: str) -> int | None:
    """``yyyyMMddTHHmmssZ`` read as UTC -> epoch milliseconds; None when malformed. Never raises."""
    if len(text) != _DATE_TIME_CHARS or text[8] != "T" or text[15] != "Z":
        return None
    try:
        parsed = datetime.strptime(text, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    except ValueError:
        return None
    return int(parsed.timestamp()) * 1000


class ClientClocks:
    """The learned clock offset of each client (bounded LRU). Use from one loop. ``clock_skew_ms`` is clamped to
    0..MAX_CLOCK_SKEW_MS (a larger skew would make every offset "near some zone" and the rule moot)."""

    def __init__(self, clock_skew_ms: int, max_clients: int = MAX_LEARNED_CLIENTS) -> None:
        self._skew_ms = min(max(clock_skew_ms, 0), MAX_CLOCK_SKEW_MS)
        self._offsets: BoundedLru[tuple[str, str], int] = BoundedLru(max_clients)

    def accept(self, client: tuple[str, str], client_time_ms: int, now_ms: int) -> bool:
        """Whether ``client_time_ms`` (the header read as UTC) is fresh for ``client`` at server time ``now_ms``
        (both epoch ms); learns the client's offset when it is. Never raises."""
        offset_ms = client_time_ms - now_ms
        zone_ms = round(offset_ms / ZONE_STEP_MS) * ZONE_STEP_MS
        if not -MAX_ZONE_BEHIND_MS <= zone_ms <= MAX_ZONE_AHEAD_MS or abs(offset_ms - zone_ms) > self._skew_ms:
            return False
        learned_ms = self._offsets.get(client)
        if learned_ms is not None and offset_ms < learned_ms - self._skew_ms:
            return False
        if learned_ms is None or offset_ms > learned_ms:
            self._offsets.put(client, offset_ms)
        return True
