"""Master/slave replication of the CommitLog (RocketMQ 4's static roles; the controller drives the same API).

Mirrors org.apache.rocketmq.store.ha: :class:`~mq_broker.ha.ha_service.HAService` (the master's HA port and one
:class:`~mq_broker.ha.ha_connection.HAConnection` per slave) and :class:`~mq_broker.ha.ha_client.HAClient` (the
slave's connection to its master). The wire format is in :mod:`mq_broker.ha.protocol`; the transport is a plain
asyncio TCP stream (TLS with client certificates when the broker's TLS is on), chosen by measurement
(docs/performance.md, "Replication transport").
"""
