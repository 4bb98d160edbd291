"""Settings base: one pydantic-settings class per service, read from the environment and an optional YAML.

Each service subclasses :class:`ServiceSettings` with its own env prefix (``MQ_NAMESRV_``, ``MQ_BROKER_``,
``MQ_GATEWAY_``). Precedence: constructor arguments, then environment, then the YAML file named by
``<PREFIX>CONFIG_FILE``, then defaults. Read once at start-up on the main thread.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import yaml
from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from mq_common.config_fields import DESCRIPTION_KEY, field_of
from mq_common.grpc_front import GrpcServerChoice
from mq_common.grpc_guard import DEFAULT_MAX_CONCURRENT_STREAMS
from mq_common.tls.settings import TlsSettings

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

_C = TypeVar("_C", bound="DataclassInstance")


class _YamlSource(PydanticBaseSettingsSource):
    """Values from the YAML file named by ``<env_prefix>CONFIG_FILE`` (keys are field names)."""

    def __init__(self, settings_cls: type[BaseSettings]) -> None:
        super().__init__(settings_cls)
        prefix = str(settings_cls.model_config.get("env_prefix", ""))
        path = os.environ.get(f"{prefix}CONFIG_FILE")
        self._data: dict[str, Any] = {}
        if path:
            loaded = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
            if not isinstance(loaded, dict):
                raise ValueError(f"{path}: the YAML config must be a mapping of field names to values")
            self._data = loaded

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return self._data.get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return {k: v for k, v in self._data.items() if k in self.settings_cls.model_fields}


class ServiceSettings(TlsSettings):
    """Fields every service has (the TLS ones from mq_common.tls.settings.TlsSettings)."""

    model_config: ClassVar[SettingsConfigDict] = SettingsConfigDict(extra="forbid", frozen=True)

    listen_host: str = Field(default="127.0.0.1", description="Address the gRPC server binds.")
    metrics_port: int = Field(default=0, ge=0, le=65535, description="Prometheus /metrics port; 0 disables.")
    metrics_max_topics: int = Field(
        default=256, ge=0, description="Distinct topic label values per metric; later topics count as '_other'."
    )
    cluster_name: str = Field(default="DefaultCluster", description="RocketMQ brokerClusterName.")
    log_level: str = Field(default="INFO", description="structlog level: DEBUG, INFO, WARNING, ERROR.")
    log_json: bool = Field(default=True, description="JSON log lines (false: console renderer).")
    # --- hostile input (docs/security.md, "Hostile input and limits") ---
    max_concurrent_streams: int = Field(
        default=DEFAULT_MAX_CONCURRENT_STREAMS,
        gt=0,
        description="Calls one client connection may have in flight at once (grpc.max_concurrent_streams); "
        "later ones wait for a free stream.",
    )
    grpc_server: GrpcServerChoice = Field(
        default="grpcio",
        description="The gRPC server: grpcio (grpc.aio), native (pygrpc-native: HTTP/2 in Rust, plaintext only, "
        "refused with tls_enabled) or auto (native when TLS is off and pygrpc-native is installed, else grpcio).",
    )

    @model_validator(mode="after")
    def _check_grpc_server(self) -> ServiceSettings:
        if self.grpc_server == "native" and self.tls_enabled:
            raise ValueError(
                "grpc_server=native cannot serve TLS (pygrpc-native is plaintext only): "
                "set grpc_server to grpcio or auto with tls_enabled"
            )
        return self

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, env_settings, _YamlSource(settings_cls))


def mirrored_field(config_cls: type[Any], name: str, **constraints: Any) -> Any:
    """A settings Field for the field ``name`` of dataclass ``config_cls``: its default and description come from
    there (declared once with mq_common.config_fields.described); ``constraints`` (ge, le, pattern, ...) are the
    settings' validation, and ``default=`` may override the dataclass default for this service."""
    source = field_of(config_cls, name)
    constraints.setdefault("default", source.default)
    return Field(description=source.metadata[DESCRIPTION_KEY], **constraints)


def config_from_settings(config_cls: type[_C], settings: BaseSettings, **values: Any) -> _C:
    """``config_cls(...)`` with every field the settings class also has, by name, plus ``values``."""
    names = {f.name for f in dataclasses.fields(config_cls)} & set(type(settings).model_fields)
    return config_cls(**{name: getattr(settings, name) for name in names}, **values)
