"""A do-nothing RocketMQ 5 SendMessage server for bench_v2's floor row (not a pytest module): every SendMessage is
answered OK with one entry echoing the message id, and nothing else happens. The gateway's CPU per message set
against this one's, under the same load generator, shows what the gateway adds to its gRPC front's own per-call cost.

``argv[1]``: the front, ``grpcio`` (grpc.aio; the default) or ``native`` (pygrpc-native), built as ServiceServer
builds it (mq_common.grpc_front.aio_server; no interceptors). Runs on uvloop when it is installed (the gateway's
loop, mq_gateway.main), else on asyncio's own loop. Binds 127.0.0.1 on a free port, prints "<port> <loop>" on one
line, serves until SIGTERM.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import Callable
from typing import Any

import grpc
from apache.rocketmq.v2 import definition_pb2, service_pb2, service_pb2_grpc
from mq_common.grpc_front import GrpcFront, aio_server

OK = definition_pb2.Status(code=definition_pb2.Code.OK, message="OK")


class FloorMessaging(service_pb2_grpc.MessagingServiceServicer):
    async def SendMessage(self, request: Any, context: Any) -> Any:
        mid = request.messages[0].system_properties.message_id
        entry = service_pb2.SendResultEntry(status=OK, message_id=mid, transaction_id=mid)
        return service_pb2.SendMessageResponse(status=OK, entries=[entry])


async def serve(front: GrpcFront) -> None:
    server: grpc.aio.Server = aio_server(front, [], [])
    service_pb2_grpc.add_MessagingServiceServicer_to_server(FloorMessaging(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    print(port, type(asyncio.get_running_loop()).__module__.split(".")[0], flush=True)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await stop.wait()
    await server.stop(None)


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


if __name__ == "__main__":
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        runner.run(serve("native" if sys.argv[1:] == ["native"] else "grpcio"))
