"""mq_local.ports' pre-start check: TIME-WAIT leftovers never make a port busy; a listener does, and is named.

Every port here comes from binding port 0, so parallel tests never collide.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from mq_local.ports import LOCAL_HOST, RECENT_PORTS, PortLayout, describe_busy_ports, free_port, port_is_free

TCP_LISTEN = "0A"
TCP_TIME_WAIT = "06"
TIME_WAIT_WAIT_S = 2.0


def _local_port_states(port: int) -> list[str]:
    """The states (hex, as /proc/net/tcp* shows them) of every TCP socket whose local port is ``port``."""
    states = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text(encoding="ascii").splitlines()[1:]:
            fields = line.split()
            if int(fields[1].rpartition(":")[2], 16) == port:
                states.append(fields[3])
    return states


def _reuseaddr_listener(host: str = LOCAL_HOST, port: int = 0, family: int = socket.AF_INET) -> socket.socket:
    """A listening socket as the servers make it (gRPC and the broker's HA port set SO_REUSEADDR)."""
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen()
    return sock


def _leave_time_wait_on_a_listening_port() -> int:
    """A port on 127.0.0.1 where only a TIME-WAIT connection is left, as after ``mqlocal down`` with a client still
    connected: listen, connect, accept, close the accepted (server) side first, then the client and the listener.
    The side that closes first keeps the TIME-WAIT, so it lands on the listening port."""
    with _reuseaddr_listener() as listener:
        port: int = listener.getsockname()[1]
        with socket.create_connection((LOCAL_HOST, port), timeout=5) as client:
            served, _peer = listener.accept()
            served.close()  # the server's FIN first
            assert client.recv(1) == b""  # drained to EOF: closing now sends a FIN, not a RST
    deadline = time.monotonic() + TIME_WAIT_WAIT_S
    while _local_port_states(port) != [TCP_TIME_WAIT]:  # the last ACK crosses loopback in microseconds
        assert time.monotonic() < deadline, f"no lone TIME-WAIT on {port}: {_local_port_states(port)}"
        time.sleep(0.01)
    return port


def test_a_port_with_only_time_wait_connections_is_free() -> None:
    port = _leave_time_wait_on_a_listening_port()
    assert port_is_free(port)  # the old check, a bind without SO_REUSEADDR, judged it busy
    assert _local_port_states(port) == [TCP_TIME_WAIT]  # judged while the TIME-WAIT was there
    with _reuseaddr_listener(port=port):  # and the verdict is right: a server listens there
        assert TCP_LISTEN in _local_port_states(port)


@pytest.fixture(params=["127.0.0.1", "0.0.0.0", "::ffff:127.0.0.1"])
def listener(request: pytest.FixtureRequest) -> Iterator[int]:
    """A port this process listens on: on 127.0.0.1, on every address, and as gRPC binds 127.0.0.1 (an IPv6 socket
    on the v4-mapped address: /proc/net/tcp6)."""
    host: str = request.param
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with _reuseaddr_listener(host, family=family) as sock:
        yield sock.getsockname()[1]


def test_a_port_with_a_listener_is_busy_and_the_message_names_this_process(listener: int) -> None:
    assert not port_is_free(listener)
    others = PortLayout.free(1)  # free_port() never hands out a port that is listened on
    assert PortLayout(listener, others.broker_ports, others.gateway_port).busy_ports() == [listener]
    message = describe_busy_ports([listener])
    assert message.startswith(f"{listener} by pid {os.getpid()} (")
    assert "pytest" in message or "python" in message  # the command line, shortened


def test_a_holder_that_cannot_be_read_is_an_unknown_process(tmp_path: Path) -> None:
    with _reuseaddr_listener() as sock:
        port = sock.getsockname()[1]
        assert not port_is_free(port)
        assert describe_busy_ports([port], proc_root=tmp_path) == f"{port} by an unknown process"  # no /proc there


def test_free_port_draws_in_a_row_are_distinct() -> None:
    """The kernel may give the same port to two bind(0) calls in a row (nothing holds it in between); a test that
    draws the namesrv, broker and gateway ports one by one then got a layout with a repeated port."""
    drawn = [free_port() for _ in range(RECENT_PORTS)]
    assert len(set(drawn)) == len(drawn)
