"""RocketMQ 5's gRPC API (``apache.rocketmq.v2.MessagingService``) served by the gateway: the 5.x proxy.

The modules only translate between the vendored v2 protos and what the gateway already has (the producer core's
route cache, MQFaultStrategy, retry and coalescing; the broker's POP, offsets and long polling). Mirrors
org.apache.rocketmq.proxy.grpc.v2.
"""
