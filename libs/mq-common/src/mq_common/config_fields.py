"""One declaration per configuration field: a dataclass default with its description (no pydantic here).

The frozen config values (MessageStoreConfig, ProducerConfig) declare each field once with :func:`described`;
the services' pydantic settings take default and description from there (mq_common.settings.mirrored_field)
and build the value by field name (mq_common.settings.config_from_settings), so a field is never declared or
copied twice.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

_T = TypeVar("_T")
DESCRIPTION_KEY = "description"


def described(default: _T, description: str) -> _T:
    """A dataclass field with ``default`` whose description (it names the RocketMQ property mirrored) is kept in
    the field's metadata. ``default`` must be immutable (it is shared)."""
    return dataclasses.field(default=default, metadata={DESCRIPTION_KEY: description})


def field_of(config_cls: type[Any], name: str) -> dataclasses.Field[Any]:
    """The dataclass field ``name`` of ``config_cls``. Raises KeyError when there is none."""
    return {f.name: f for f in dataclasses.fields(config_cls)}[name]
