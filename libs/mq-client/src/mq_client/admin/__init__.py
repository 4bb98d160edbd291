"""Admin client and the ``mqadmin`` CLI. Mirrors org.apache.rocketmq.tools.admin and tools.command."""

from mq_client.admin.admin_client import MQAdminClient

__all__ = ["MQAdminClient"]
