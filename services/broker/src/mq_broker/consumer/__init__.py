"""The broker's consumer-side state: subscription groups, consumer offsets, live consumer instances, and the
atomic JSON persistence they share (RocketMQ's ConfigManager files under ``<store root>/config/``).

Mirrors org.apache.rocketmq.broker.{subscription, offset, client} packages. No gRPC and no protobuf here.
"""
