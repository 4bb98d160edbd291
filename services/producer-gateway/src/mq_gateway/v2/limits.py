"""The limits the v2 producer side and Telemetry apply, filled from GatewaySettings by name.

Mirrors the fields of org.apache.rocketmq.proxy.config.ProxyConfig the proxy's SendMessageActivity and
GrpcClientSettingsManager read (units in our names). A frozen value; any thread.
"""

from __future__ import annotations

from dataclasses import dataclass

from mq_common.constants import MAX_MESSAGE_SIZE_BYTES


@dataclass(frozen=True, slots=True)
class V2Limits:
    """``max_message_size_bytes``: largest body (41301 above); ``max_user_property_size_bytes``: user properties
    plus tag plus keys (43101 above); ``user_property_max_num``: user properties (43101 above);
    ``max_message_group_size_bytes``: a message_group must be shorter (40006); ``max_delay_time_ms``: latest
    delivery time from now; ``v2_producer_max_attempts``: what producer settings advertise;
    ``receive_batch_size_max`` / ``long_polling_timeout_max_ms``: what consumer settings advertise;
    ``client_idle_timeout_ms``: a silent Telemetry stream is closed after it; ``max_telemetry_sessions``: bound of
    the session table; ``enable_topic_message_type_check``: SendMessage refuses a message whose type the topic does
    not accept (40014), and producer settings ask the SDKs to check too (validate_message_type)."""

    max_message_size_bytes: int = MAX_MESSAGE_SIZE_BYTES
    max_user_property_size_bytes: int = 16_384
    user_property_max_num: int = 128
    max_message_group_size_bytes: int = 64
    max_delay_time_ms: int = 259_200_000
    v2_producer_max_attempts: int = 3
    receive_batch_size_max: int = 32
    long_polling_timeout_max_ms: int = 20_000
    client_idle_timeout_ms: int = 120_000
    max_telemetry_sessions: int = 100_000
    enable_topic_message_type_check: bool = True
