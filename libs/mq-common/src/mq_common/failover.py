"""Failover over a list of equivalent servers (name servers, controllers): the last one that answered goes first.

Mirrors the name server rotation of MQClientAPIImpl/NettyRemotingClient (and BrokerOuterAPI's controller address
list). Used on the caller's asyncio loop; holds no lock (one index, updated after an answer).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from mq_common.errors import MQClientError, RemotingError
from mq_common.response_code import ResponseCode

_R = TypeVar("_R")


class Failover:
    """``addrs`` tried in turn from the last one that answered. Raises MQClientError (RPC_ADDR_IS_NULL, -1002)
    naming ``what`` when ``addrs`` has no address."""

    def __init__(self, addrs: Sequence[str], what: str) -> None:
        cleaned = tuple(a.strip() for a in addrs if a.strip())
        if not cleaned:
            raise MQClientError(f"No {what} address, please set it", ResponseCode.RPC_ADDR_IS_NULL)
        self.addrs = cleaned
        self.what = what
        self.index = 0

    async def call(self, attempt: Callable[[str], Awaitable[_R]]) -> _R:
        """``attempt(addr)`` on each address until one answers; a RemotingError (transport failure) moves on,
        any other error or answer is final. Raises RemotingError naming every failure when none answered."""
        errors: list[str] = []
        for step in range(len(self.addrs)):
            index = (self.index + step) % len(self.addrs)
            try:
                result = await attempt(self.addrs[index])
            except RemotingError as exc:
                errors.append(exc.remark)
                continue
            self.index = index
            return result
        raise RemotingError(f"no {self.what} answered: " + "; ".join(errors))
