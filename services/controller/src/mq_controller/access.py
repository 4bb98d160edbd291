"""Who may call what on the controller (issue 20 item 5; RocketMQ's controller relies on network isolation).

- BrokerHeartbeat and AlterSyncStateSet change who is master: with mutual TLS (tls_client_auth=require) only a
  component certificate (mq_common.tls.ComponentGuard) may call them, as only brokers register at the name server.
- ElectMaster and the reads need a component or an admin: with authentication on, a component certificate or a
  call signed by a SUPER user (the init user or the inner client credentials of the settings; mq_common.auth's HMAC
  signature check). With authentication off there are no users: any caller the transport let in (with mutual TLS,
  a certificate the CA verified) counts as an admin.

The checks are mq_common.auth.admin_access's (the name server makes the same ones). A refusal is NO_PERMISSION (16)
whose remark names the RPC and the caller, never a secret. Runs on the controller's loop.
"""

from __future__ import annotations

from mq_common.auth.admin_access import AdminAccess


class ControllerAccess(AdminAccess):
    """The checks of :mod:`mq_controller.access`. ``check_component`` / ``check_admin`` raise NO_PERMISSION (16);
    ``ControllerAccess.from_settings(ControllerSettings)``."""
