"""Port layout of a local cluster: one name server, N broker groups, one gateway, all on 127.0.0.1.

Defaults keep RocketMQ's numbers (name server 9876, broker 10911, the 5.x proxy's 8081); the broker groups
of one host are spaced ``BROKER_PORT_STEP`` apart (10911, 10921, ...) like RocketMQ's multi-instance
examples. Tests use :meth:`PortLayout.free` so that parallel runs never collide.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from typing import Final

LOCAL_HOST: Final = "127.0.0.1"
DEFAULT_NAMESRV_PORT: Final = 9876
DEFAULT_BROKER_BASE_PORT: Final = 10911
DEFAULT_GATEWAY_PORT: Final = 8081
BROKER_PORT_STEP: Final = 10
MAX_BROKER_GROUPS: Final = 26  # broker-a .. broker-z


def broker_name_of(index: int) -> str:
    """``broker-a`` for 0, ``broker-b`` for 1, ... (RocketMQ's sample broker names). Raises ValueError past z."""
    if not 0 <= index < MAX_BROKER_GROUPS:
        raise ValueError(f"broker index must be in [0, {MAX_BROKER_GROUPS}), got {index}")
    return f"broker-{chr(ord('a') + index)}"


def free_port(host: str = LOCAL_HOST) -> int:
    """A TCP port that is free on ``host`` right now (bind to port 0, read it, close)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def port_is_free(port: int, host: str = LOCAL_HOST) -> bool:
    """True when ``host:port`` can be bound now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
        return True


@dataclass(frozen=True, slots=True)
class PortLayout:
    """The TCP ports of one local cluster (all on 127.0.0.1).

    ``broker_ports[i]`` belongs to :func:`broker_name_of` (i).
    """

    namesrv_port: int
    broker_ports: tuple[int, ...]
    gateway_port: int

    def __post_init__(self) -> None:
        ports = [self.namesrv_port, *self.broker_ports, self.gateway_port]
        if len(set(ports)) != len(ports):
            raise ValueError(f"ports must be distinct, got {ports}")
        if not self.broker_ports or len(self.broker_ports) > MAX_BROKER_GROUPS:
            raise ValueError(f"need 1..{MAX_BROKER_GROUPS} broker ports, got {len(self.broker_ports)}")
        for port in ports:
            if not 0 < port < 65536:
                raise ValueError(f"port out of range: {port}")

    @classmethod
    def default(cls, broker_groups: int) -> PortLayout:
        """9876; 10911, 10921, ...; 8081."""
        return cls.from_base(DEFAULT_NAMESRV_PORT, DEFAULT_BROKER_BASE_PORT, DEFAULT_GATEWAY_PORT, broker_groups)

    @classmethod
    def from_base(cls, namesrv_port: int, broker_base_port: int, gateway_port: int, broker_groups: int) -> PortLayout:
        """Brokers at ``broker_base_port + BROKER_PORT_STEP * i``."""
        brokers = tuple(broker_base_port + BROKER_PORT_STEP * i for i in range(broker_groups))
        return cls(namesrv_port, brokers, gateway_port)

    @classmethod
    def free(cls, broker_groups: int) -> PortLayout:
        """Ports that are free now (distinct; a race with another process binding them is still possible)."""
        seen: set[int] = set()
        while len(seen) < broker_groups + 2:
            seen.add(free_port())
        ports = list(seen)
        return cls(ports[0], tuple(ports[1 : 1 + broker_groups]), ports[-1])

    @property
    def namesrv_addr(self) -> str:
        return f"{LOCAL_HOST}:{self.namesrv_port}"

    @property
    def gateway_addr(self) -> str:
        return f"{LOCAL_HOST}:{self.gateway_port}"

    def broker_addr(self, index: int) -> str:
        return f"{LOCAL_HOST}:{self.broker_ports[index]}"

    def busy_ports(self) -> list[int]:
        """The ports of this layout that cannot be bound now (another process holds them)."""
        return [p for p in (self.namesrv_port, *self.broker_ports, self.gateway_port) if not port_is_free(p)]
