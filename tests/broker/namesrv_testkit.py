"""A recording name server for the broker tests: an mq.namesrv.v1.NameServer servicer on 127.0.0.1 that keeps
every RegisterBroker and UnregisterBroker it is sent and answers SUCCESS (the wire contract is what is tested)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import grpc
from mq.namesrv.v1 import namesrv_pb2, namesrv_pb2_grpc
from mq_common.response_code import ResponseCode


class RecordingNameServer(namesrv_pb2_grpc.NameServerServicer):
    def __init__(self) -> None:
        self.registrations: list[namesrv_pb2.RegisterBrokerRequest] = []
        self.unregistrations: list[namesrv_pb2.UnregisterBrokerRequest] = []
        self.register_delay_s = 0.0  # a slow name server: each RegisterBroker is recorded this much later

    async def RegisterBroker(
        self, request: namesrv_pb2.RegisterBrokerRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> namesrv_pb2.RegisterBrokerResponse:
        if self.register_delay_s:
            await asyncio.sleep(self.register_delay_s)
        self.registrations.append(request)
        return namesrv_pb2.RegisterBrokerResponse(code=ResponseCode.SUCCESS)

    async def UnregisterBroker(
        self, request: namesrv_pb2.UnregisterBrokerRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> namesrv_pb2.UnregisterBrokerResponse:
        self.unregistrations.append(request)
        return namesrv_pb2.UnregisterBrokerResponse(code=ResponseCode.SUCCESS)


@asynccontextmanager
async def recording_namesrv() -> AsyncIterator[tuple[RecordingNameServer, str]]:
    """A started RecordingNameServer and its ``127.0.0.1:port``; stopped on exit."""
    server = grpc.aio.server()
    recorder = RecordingNameServer()
    namesrv_pb2_grpc.add_NameServerServicer_to_server(recorder, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        yield recorder, f"127.0.0.1:{port}"
    finally:
        await server.stop(0)
