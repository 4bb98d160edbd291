"""signing_interceptors signs every kind of call: grpc.aio files an interceptor under the first call kind it
subclasses, so one object for all four kinds left streams (the gateway's SendStream to brokers) unsigned."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc
from mq_common.auth.interceptor import signing_interceptors, signing_pool
from mq_common.auth.settings import Credentials
from mq_common.auth.signature import AUTHORIZATION, DATE_TIME, hmac_sha1_hex, parse_authorization

SECRET = "kinds-secret-5"


async def test_unary_and_streaming_calls_are_all_signed() -> None:
    seen: list[dict[str, str]] = []

    def record(context: grpc.aio.ServicerContext[bytes, bytes]) -> None:
        seen.append({k: str(v) for k, v in context.invocation_metadata() or ()})

    async def unary(request: bytes, context: grpc.aio.ServicerContext[bytes, bytes]) -> bytes:
        record(context)
        return request

    async def streamed(request: bytes, context: grpc.aio.ServicerContext[bytes, bytes]) -> AsyncIterator[bytes]:
        record(context)
        yield request

    async def gather(requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext[bytes, bytes]) -> bytes:
        record(context)
        return b"".join([r async for r in requests])

    async def echo(
        requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext[bytes, bytes]
    ) -> AsyncIterator[bytes]:
        record(context)
        async for r in requests:
            yield r

    handlers = {
        "UU": grpc.unary_unary_rpc_method_handler(unary),
        "US": grpc.unary_stream_rpc_method_handler(streamed),
        "SU": grpc.stream_unary_rpc_method_handler(gather),
        "SS": grpc.stream_stream_rpc_method_handler(echo),
    }
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("t.Kinds", handlers),))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    channel = grpc.aio.insecure_channel(
        f"127.0.0.1:{port}", interceptors=signing_interceptors(Credentials("k", SECRET))
    )

    async def one() -> AsyncIterator[bytes]:
        yield b"x"

    try:
        assert await channel.unary_unary("/t.Kinds/UU")(b"x") == b"x"
        assert [r async for r in channel.unary_stream("/t.Kinds/US")(b"x")] == [b"x"]
        assert await channel.stream_unary("/t.Kinds/SU")(one()) == b"x"
        call = channel.stream_stream("/t.Kinds/SS")()  # opened without requests, written to, as SendStream is
        await call.write(b"x")
        await call.done_writing()
        assert [r async for r in call] == [b"x"]
    finally:
        await channel.close()
        await server.stop(0)
    assert len(seen) == 4
    for headers in seen:
        header = parse_authorization(headers[AUTHORIZATION])
        assert header is not None
        assert (header.access_key, header.signature) == ("k", hmac_sha1_hex(SECRET, headers[DATE_TIME]))


def test_no_credentials_no_interceptors() -> None:
    assert signing_interceptors(None) == []


async def test_signing_pool_signs_streams_through_their_opening_metadata() -> None:
    pool = signing_pool(None, Credentials("k", SECRET))
    try:
        headers = dict(pool.stream_metadata() or ())
        header = parse_authorization(headers[AUTHORIZATION])
        assert header is not None
        assert header.signature == hmac_sha1_hex(SECRET, headers[DATE_TIME])
    finally:
        await pool.close()
    assert signing_pool(None, None).stream_metadata() is None
