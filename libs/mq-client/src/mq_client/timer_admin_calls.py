"""Admin-side timer broker call by address: QueryTimers (a topic's pending timer and delay-level messages, and one
message's timer state).

A client adapter like mq_client.consumer_admin_calls (the only kind of mq_client module that touches generated
protobuf types): it translates broker.proto's QueryTimersResponse into :class:`TimerStatus`, nothing more. Used by
mq_client.admin.MQAdminClient (mqadmin timerStatus and queryMsgById). Runs on the caller's asyncio loop; transport
failures map to mq_common.grpc_errors.transport_error, a non-zero code to error_for_code (raised).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from mq.broker.v1 import broker_pb2, broker_pb2_grpc
from mq_common.channels import DEFAULT_RPC_TIMEOUT_MS, ChannelPool
from mq_common.channels import seconds as _seconds
from mq_common.grpc_errors import invoke as _invoke
from mq_common.namesrv_client import check_code as _check

__all__ = ["TimerAdminCalls", "TimerState", "TimerStatus"]


class TimerState(enum.StrEnum):
    """A timer or delay-level message's state as QueryTimers names it for a UNIQ_KEY."""

    PENDING = "PENDING"
    """Held (rmq_sys_wheel_timer or SCHEDULE_TOPIC_XXXX), not delivered to its real topic yet."""
    DELIVERED = "DELIVERED"
    """Put to its real topic."""
    RECALLED = "RECALLED"
    """Cancelled by RecallMessage before its time."""
    UNKNOWN = "UNKNOWN"
    """The broker knows no timer of that UNIQ_KEY (or the answer named a state this client does not know)."""

    @classmethod
    def of(cls, text: str) -> TimerState:
        """The state named ``text`` (case-insensitive), UNKNOWN for anything else."""
        try:
            return cls(text.strip().upper())
        except ValueError:
            return cls.UNKNOWN


@dataclass(frozen=True, slots=True)
class TimerStatus:
    """One broker's QueryTimers answer for a real topic.

    ``pending_timers``: timer messages of the topic held on rmq_sys_wheel_timer, not delivered nor recalled;
    ``earliest_deliver_ms`` / ``latest_deliver_ms``: their earliest and latest due time, ms since the epoch (0 when
    none); ``pending_delay_level_messages``: the topic's messages on SCHEDULE_TOPIC_XXXX not re-put yet. With a
    UNIQ_KEY asked: ``state`` (None when none was asked) and ``message_deliver_ms``, that message's due time (ms
    since the epoch, 0 when unknown)."""

    pending_timers: int
    earliest_deliver_ms: int
    latest_deliver_ms: int
    pending_delay_level_messages: int
    state: TimerState | None = None
    message_deliver_ms: int = 0


class TimerAdminCalls:
    """The timer admin RPC of the Broker service. Runs on the caller's loop; channels come from (and belong to)
    ``pool``."""

    def __init__(self, pool: ChannelPool) -> None:
        self._pool = pool

    async def query_timers(
        self,
        addr: str,
        topic: str,
        uniq_key: str = "",
        deliver_ms: int = 0,
        timeout_ms: int = DEFAULT_RPC_TIMEOUT_MS,
    ) -> TimerStatus:
        """QueryTimers at ``addr``: the pending timer and delay-level messages of real topic ``topic`` and, given
        ``uniq_key`` (with its due time ``deliver_ms`` when known, else 0), that message's state.

        Raises error_for_code(code, remark) on a non-zero code (e.g. TOPIC_NOT_EXIST 17, INVALID_PARAMETER 29),
        RemotingError / its subclasses on transport failure."""
        request = broker_pb2.QueryTimersRequest(topic=topic, uniq_key=uniq_key, deliver_ms=deliver_ms)
        stub: broker_pb2_grpc.BrokerAsyncStub = broker_pb2_grpc.BrokerStub(self._pool.get(addr))
        resp = await _invoke(stub.QueryTimers(request, timeout=_seconds(timeout_ms)), addr)
        _check(resp.code, resp.remark)
        return TimerStatus(
            pending_timers=resp.pending_timers,
            earliest_deliver_ms=resp.earliest_deliver_ms,
            latest_deliver_ms=resp.latest_deliver_ms,
            pending_delay_level_messages=resp.pending_delay_level_messages,
            state=TimerState.of(resp.state) if uniq_key else None,
            message_deliver_ms=resp.message_deliver_ms,
        )
