"""gRPC channel options every PyRocketMQ channel and server starts from (message size limits, keepalive).

A leaf module (grpc itself not imported): a client that needs only these constants, such as a Spark task's gateway
sender, does not load the server kit (mq_common.grpc_server: health, reflection, structlog, TLS settings), which is
about 0.1 s of CPU in every cold Spark Python worker. mq_common.grpc_server re-exports both names.
"""

from __future__ import annotations

from typing import Final

# 4 MiB bodies x a batch plus headers; a batch larger than this is refused by gRPC itself.
MAX_GRPC_MESSAGE_BYTES: Final = 64 * 1024 * 1024
CHANNEL_OPTIONS: Final[list[tuple[str, int]]] = [
    ("grpc.max_send_message_length", MAX_GRPC_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", MAX_GRPC_MESSAGE_BYTES),
    ("grpc.keepalive_time_ms", 30_000),
    ("grpc.keepalive_timeout_ms", 10_000),
    ("grpc.http2.max_pings_without_data", 0),
    ("grpc.keepalive_permit_without_calls", 1),
]
