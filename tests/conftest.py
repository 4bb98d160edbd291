"""Fixtures every test folder may use."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from mq_common.channels import ChannelPool


@pytest.fixture
async def pool() -> AsyncIterator[ChannelPool]:
    """A ChannelPool closed at teardown."""
    channels = ChannelPool()
    try:
        yield channels
    finally:
        await channels.close()
