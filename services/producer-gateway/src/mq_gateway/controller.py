"""Wires the gateway together: the producer core, the gRPC server, start and graceful stop.

Mirrors the 5.x proxy's ProxyStartup/ProducerProcessor wiring. Everything runs on one asyncio loop.
"""

from __future__ import annotations

from mq_client.producer import DefaultMQProducer, ProducerConfig
from mq_common.grpc_server import ServiceServer
from mq_common.logging import get_logger

from mq_gateway.grpc_api import SERVICE_NAME, ProducerGatewayServicer, add_to_server
from mq_gateway.settings import GatewaySettings

log = get_logger("mq_gateway.controller")


def producer_config(settings: GatewaySettings) -> ProducerConfig:
    """The producer core's config from the gateway settings."""
    return ProducerConfig(
        producer_group=settings.producer_group,
        send_msg_timeout_ms=settings.send_msg_timeout_ms,
        retry_times_when_send_failed=settings.retry_times_when_send_failed,
        retry_another_broker_when_not_store_ok=settings.retry_another_broker_when_not_store_ok,
        send_latency_fault_enable=settings.send_latency_fault_enable,
        compress_msg_body_over_howmuch_bytes=settings.compress_msg_body_over_howmuch_bytes,
        max_message_size_bytes=settings.max_message_size_bytes,
        poll_name_server_interval_ms=settings.poll_name_server_interval_ms,
        default_topic_queue_nums=settings.default_topic_queue_nums,
    )


class GatewayController:
    """The gateway's parts. Create, ``await start()``, later ``await stop()``; one loop.

    ``producer`` defaults to a DefaultMQProducer over gRPC to ``settings.namesrv_addrs()``.
    """

    def __init__(self, settings: GatewaySettings, producer: DefaultMQProducer | None = None) -> None:
        self.settings = settings
        self.producer = producer or DefaultMQProducer.connect(producer_config(settings), settings.namesrv_addrs())
        self.server = ServiceServer([SERVICE_NAME])
        servicer = ProducerGatewayServicer(
            self.producer,
            max_send_timeout_ms=settings.max_send_msg_timeout_ms,
            max_batch_messages=settings.max_batch_messages,
        )
        add_to_server(servicer, self.server.server)

    @property
    def port(self) -> int:
        """The bound port (after :meth:`start`)."""
        return self.server.port

    @property
    def addr(self) -> str:
        """``"host:port"`` clients use (after :meth:`start`)."""
        return f"{self.settings.listen_host}:{self.server.port}"

    async def start(self) -> int:
        """Start the producer, bind ``listen_host:listen_port``, serve. Returns the bound port.

        Raises RuntimeError when the port cannot be bound; MQClientError for a bad producer group."""
        await self.producer.start()
        try:
            port = self.server.bind(self.settings.listen_host, self.settings.listen_port)
            await self.server.start()
        except BaseException:
            await self.producer.shutdown()
            raise
        return port

    async def stop(self, grace_s: float | None = None) -> None:
        """Stop taking calls, let in-flight ones finish (``grace_s``, default shutdown_grace_ms), then shut the
        producer down (route refresh task, channels)."""
        grace = self.settings.shutdown_grace_ms / 1000.0 if grace_s is None else grace_s
        await self.server.stop(grace)
        await self.producer.shutdown()
        log.info("gateway_stopped", port=self.server.port)
