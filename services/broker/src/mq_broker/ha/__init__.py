"""High availability of a broker group: replication of the CommitLog, the slave's synchronisation of its
master's metadata, and reads from slaves. Mirrors org.apache.rocketmq.store.ha and org.apache.rocketmq.broker.slave.
"""
