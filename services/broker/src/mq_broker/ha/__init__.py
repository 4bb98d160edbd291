"""High availability of a broker group: master/slave replication of the CommitLog, the slave's synchronisation of
its master's metadata, and reads from slaves (RocketMQ 4's static roles; the controller drives the same API).

Mirrors org.apache.rocketmq.store.ha and org.apache.rocketmq.broker.slave:
:class:`~mq_broker.ha.ha_service.HAService` (the master's HA port and one
:class:`~mq_broker.ha.ha_connection.HAConnection` per slave), :class:`~mq_broker.ha.ha_client.HAClient` (the slave's
connection to its master), :class:`~mq_broker.ha.slave_synchronize.SlaveSynchronize` (topics, groups and offsets
from the master) and :mod:`mq_broker.ha.read_suggestion` (suggestWhichBrokerId). The wire format is in
:mod:`mq_broker.ha.protocol`; the transport is a plain asyncio TCP stream (TLS with client certificates when the
broker's TLS is on), chosen by measurement (docs/performance.md, "Replication transport").
"""
