"""Port layout of a local cluster: one name server, N broker groups, one gateway, all on 127.0.0.1.

Defaults keep RocketMQ's numbers (name server 9876, broker 10911, the 5.x proxy's 8081); the broker groups
of one host are spaced ``BROKER_PORT_STEP`` apart (10911, 10921, ...) like RocketMQ's multi-instance
examples. Tests use :meth:`PortLayout.free` so that parallel runs never collide.

Before a start, :func:`port_is_free` judges each port the way the servers bind it (SO_REUSEADDR on 127.0.0.1, so
TIME-WAIT leftovers of the last run do not count) and :func:`describe_busy_ports` names the process holding a busy
one (from /proc).
"""

from __future__ import annotations

import ipaddress
import os
import socket
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

LOCAL_HOST: Final = "127.0.0.1"
DEFAULT_NAMESRV_PORT: Final = 9876
DEFAULT_BROKER_BASE_PORT: Final = 10911
DEFAULT_GATEWAY_PORT: Final = 8081
BROKER_PORT_STEP: Final = 10
MAX_BROKER_GROUPS: Final = 26  # broker-a .. broker-z
PROC_ROOT: Final = Path("/proc")
MAX_HOLDERS_SHOWN: Final = 3  # per port, in describe_busy_ports
MAX_COMMAND_CHARS: Final = 80
FREE_PORT_ATTEMPTS_PER_PORT: Final = 20  # draws of the kernel (free_port) / of free_port (PortLayout.free) per port
RECENT_PORTS: Final = 64  # free_port() does not hand out a port again within this many of its own draws
_recent_ports: deque[int] = deque(maxlen=RECENT_PORTS)


def broker_name_of(index: int) -> str:
    """``broker-a`` for 0, ``broker-b`` for 1, ... (RocketMQ's sample broker names). Raises ValueError past z."""
    if not 0 <= index < MAX_BROKER_GROUPS:
        raise ValueError(f"broker index must be in [0, {MAX_BROKER_GROUPS}), got {index}")
    return f"broker-{chr(ord('a') + index)}"


def free_port(host: str = LOCAL_HOST) -> int:
    """A TCP port that is free on ``host`` right now (bind to port 0, read it, close). Runs on the caller's thread;
    raises OSError only when ``host`` cannot be bound at all.

    Sound for servers that bind with SO_REUSEADDR: without it here, the kernel hands out only a port no socket uses
    at all, not even a TIME-WAIT one (a port another test's cluster has just left stays out of the draw), and such a
    port takes any bind. The port is unreserved once returned: another process may still take it first. The kernel
    may hand the same port to two draws in a row (nothing holds it in between), so a port this process drew among
    its last ``RECENT_PORTS`` draws is drawn again: callers that draw several ports get distinct ones.
    """
    for _ in range(FREE_PORT_ATTEMPTS_PER_PORT):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind((host, 0))
            port: int = sock.getsockname()[1]
        if port not in _recent_ports:
            break
    _recent_ports.append(port)
    return port


def port_is_free(port: int, host: str = LOCAL_HOST) -> bool:
    """True when a server can listen on ``host:port`` now: a test socket binds and listens there with SO_REUSEADDR,
    as every server of the cluster does (gRPC sets it, the broker's HA port too), then closes. Runs on the caller's
    thread; never raises (a bind refused for another reason than EADDRINUSE, e.g. EACCES, also counts as busy).

    TIME-WAIT connections left on the port by a stopped server (its side closed first) do not make it busy: Linux
    lets a SO_REUSEADDR socket bind over them. Without SO_REUSEADDR the bind would fail (``make up`` right after
    ``make down`` refused ports nothing listened on).
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
            sock.listen(1)
        except OSError:
            return False
        return True


@dataclass(frozen=True, slots=True)
class PortHolder:
    """A process that holds a socket bound to a port: its PID and command line (shortened)."""

    pid: int
    command: str


def port_holders(ports: Iterable[int], proc_root: Path = PROC_ROOT) -> dict[int, tuple[PortHolder, ...]]:
    """The processes holding each port on 127.0.0.1 (a socket in any state but TIME-WAIT bound to 127.0.0.1,
    0.0.0.0, ``::`` or ``::ffff:127.0.0.1`` there, read from ``/proc/net/tcp`` and ``tcp6``), found through the
    ``socket:[inode]`` links of ``/proc/<pid>/fd``. Only processes whose fd folder this user may read are seen (its
    own; all for root); a port whose holder is not seen maps to ``()``. Runs on the caller's thread, reads /proc once
    per call; never raises (an unreadable /proc yields no holders).
    """
    wanted = set(ports)
    port_of_inode = {inode: port for port, inode in _bound_sockets(proc_root) if port in wanted}
    found: dict[int, list[PortHolder]] = {port: [] for port in wanted}
    for pid, inode in _socket_fds(proc_root, set(port_of_inode)):
        holders = found[port_of_inode[inode]]
        if len(holders) < MAX_HOLDERS_SHOWN and all(h.pid != pid for h in holders):
            holders.append(PortHolder(pid, _command_of(proc_root, pid)))
    return {port: tuple(holders) for port, holders in found.items()}


def describe_busy_ports(ports: Sequence[int], proc_root: Path = PROC_ROOT) -> str:
    """``9876 by pid 4242 (python -m mq_namesrv.main), 8081 by an unknown process``: who holds each port (see
    :func:`port_holders`). Runs on the caller's thread; never raises."""
    holders = port_holders(ports, proc_root)
    parts = []
    for port in ports:
        named = [f"pid {h.pid} ({h.command})" for h in holders.get(port, ())]
        parts.append(f"{port} by {', '.join(named) if named else 'an unknown process'}")
    return ", ".join(parts)


# /proc/net/tcp* columns: sl local_address rem_address st ... inode (index 9); addresses are hex, IPv4 as one
# host-order 32-bit word, IPv6 as four such words; the port is big-endian hex.
_TCP_TIME_WAIT: Final = "06"
_HOLDING_ADDRESSES: Final = frozenset(
    {
        ipaddress.ip_address("127.0.0.1"),
        ipaddress.ip_address("0.0.0.0"),
        ipaddress.ip_address("::"),
        ipaddress.ip_address("::ffff:127.0.0.1"),
        ipaddress.ip_address("::ffff:0.0.0.0"),
    }
)


def _bound_sockets(proc_root: Path) -> Iterator[tuple[int, int]]:
    """(port, inode) of every TCP socket whose local address covers 127.0.0.1, TIME-WAIT ones left out."""
    for table in ("tcp", "tcp6"):
        try:
            lines = (proc_root / "net" / table).read_text(encoding="ascii").splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 10 or fields[3] == _TCP_TIME_WAIT or fields[9] == "0":
                continue
            address_hex, _sep, port_hex = fields[1].partition(":")
            try:
                words = [bytes.fromhex(address_hex[i : i + 8])[::-1] for i in range(0, len(address_hex), 8)]
                address, port, inode = ipaddress.ip_address(b"".join(words)), int(port_hex, 16), int(fields[9])
            except ValueError:  # not a socket line
                continue
            if address in _HOLDING_ADDRESSES:
                yield port, inode


def _socket_fds(proc_root: Path, inodes: set[int]) -> Iterator[tuple[int, int]]:
    """(pid, inode) for each open fd of a readable process that is a socket in ``inodes``."""
    if not inodes:
        return
    links = {f"socket:[{inode}]": inode for inode in inodes}
    for entry in _listdir(proc_root):
        if not entry.isdigit():
            continue
        fd_dir = proc_root / entry / "fd"
        for fd in _listdir(fd_dir):
            try:
                inode = links.get(os.readlink(fd_dir / fd))
            except OSError:  # closed meanwhile
                continue
            if inode is not None:
                yield int(entry), inode


def _listdir(folder: Path) -> list[str]:
    """The names in ``folder``; none when it cannot be read."""
    try:
        return os.listdir(folder)
    except OSError:  # not ours to read, or gone
        return []


def _command_of(proc_root: Path, pid: int) -> str:
    """``python -m mq_namesrv.main``: argv on one line with argv[0]'s folder cut, at most MAX_COMMAND_CHARS
    characters; comm when the command line is empty (a kernel thread, a zombie); ``?`` when unreadable."""
    try:
        argv = (proc_root / str(pid) / "cmdline").read_bytes().decode(errors="replace").split("\0")
        command = " ".join(" ".join([os.path.basename(argv[0]), *argv[1:]]).split())  # one line
        if not command:
            command = (proc_root / str(pid) / "comm").read_text(errors="replace").strip()
    except OSError:
        return "?"
    return command if len(command) <= MAX_COMMAND_CHARS else command[: MAX_COMMAND_CHARS - 3] + "..."


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
        """Ports that are free now (:func:`free_port`, distinct; a race with another process binding them is still
        possible). Runs on the caller's thread; raises RuntimeError when the kernel keeps handing out taken ones."""
        wanted = broker_groups + 2
        seen: set[int] = set()
        for _ in range(FREE_PORT_ATTEMPTS_PER_PORT * wanted):
            seen.add(free_port())
            if len(seen) == wanted:
                break
        else:
            raise RuntimeError(f"no {wanted} distinct free ports after {FREE_PORT_ATTEMPTS_PER_PORT * wanted} draws")
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
        """The ports of this layout a server cannot listen on now (:func:`port_is_free`: TIME-WAIT leftovers do not
        count; :func:`describe_busy_ports` names the holders). Runs on the caller's thread; never raises."""
        return [p for p in (self.namesrv_port, *self.broker_ports, self.gateway_port) if not port_is_free(p)]
