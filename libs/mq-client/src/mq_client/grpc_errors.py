"""Kept for mq_client.send_stream's import: the one mapping lives in mq_common.grpc_errors."""

from mq_common.grpc_errors import transport_error

__all__ = ["transport_error"]
