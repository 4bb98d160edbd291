"""Logger factory for the producer core.

Works around mq_common.logging.get_logger, which passes ``logger=`` to structlog.get_logger and fails with
"wrap_logger() got multiple values for argument 'logger'". The logger is a lazy proxy, so it follows
configure_logging even when created at import time.
"""

from __future__ import annotations

import structlog


def get_logger(name: str) -> structlog.typing.FilteringBoundLogger:
    """A lazy structlog logger whose events carry ``logger_name=name``."""
    logger: structlog.typing.FilteringBoundLogger = structlog.get_logger(logger_name=name)
    return logger
