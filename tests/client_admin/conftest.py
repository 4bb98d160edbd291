"""Client tests: a ChannelPool closed after each test."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from mq_common.channels import ChannelPool


@pytest.fixture
async def pool() -> AsyncIterator[ChannelPool]:
    p = ChannelPool()
    try:
        yield p
    finally:
        await p.close()
