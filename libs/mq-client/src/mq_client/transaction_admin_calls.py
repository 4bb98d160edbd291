"""Admin-side transaction broker call by address: QueryOpenTransactions (a topic's open transactions, and one
message's transaction state).

A client adapter like mq_client.timer_admin_calls (the only kind of mq_client module that touches generated protobuf
types): it translates transaction.proto's QueryOpenTransactionsResponse into :class:`OpenTransactionsStatus`, nothing
more. Used by mq_client.admin.MQAdminClient (mqadmin queryTransactions and queryMsgById). Runs on the caller's
asyncio loop; transport failures map to mq_common.grpc_errors.transport_error, a non-zero code to error_for_code
(raised).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from mq.broker.v1 import transaction_pb2, transaction_pb2_grpc
from mq_common.channels import DEFAULT_RPC_TIMEOUT_MS, ChannelPool
from mq_common.channels import seconds as _seconds
from mq_common.grpc_errors import invoke as _invoke
from mq_common.namesrv_client import check_code as _check
from mq_common.protocol.transaction import OpenTransaction
from mq_common.protocol.transaction_convert import open_transaction_from_proto

__all__ = ["OpenTransaction", "OpenTransactionsStatus", "TransactionAdminCalls", "TransactionState"]


class TransactionState(enum.StrEnum):
    """A transaction (half) message's state as QueryOpenTransactions names it for a UNIQ_KEY."""

    OPEN = "OPEN"
    """Neither committed nor rolled back yet: checked back until transactionCheckMax."""
    COMMITTED = "COMMITTED"
    """Committed: the real message is on its topic."""
    ROLLED_BACK = "ROLLED_BACK"
    """Rolled back: never delivered."""
    CHECK_MAX = "CHECK_MAX"
    """Checked transactionCheckMax times without an answer: moved to TRANS_CHECK_MAX_TIME_TOPIC, never delivered."""
    UNKNOWN = "UNKNOWN"
    """The broker knows no half message of that UNIQ_KEY (or named a state this client does not know)."""

    @classmethod
    def of(cls, text: str) -> TransactionState:
        """The state named ``text`` (case-insensitive), UNKNOWN for anything else."""
        try:
            return cls(text.strip().upper())
        except ValueError:
            return cls.UNKNOWN


@dataclass(frozen=True, slots=True)
class OpenTransactionsStatus:
    """One broker's answer: ``transactions`` oldest first (at most the max asked), ``total_open`` (all of the
    topic's open transactions on that broker); for a UNIQ_KEY ``state`` (None when none was asked) and, when OPEN,
    ``transaction``."""

    transactions: tuple[OpenTransaction, ...]
    total_open: int
    state: TransactionState | None = None
    transaction: OpenTransaction | None = None


class TransactionAdminCalls:
    """The TransactionAdmin service of a broker. Runs on the caller's loop; channels come from (and belong to)
    ``pool``."""

    def __init__(self, pool: ChannelPool) -> None:
        self._pool = pool

    async def query_open_transactions(
        self,
        addr: str,
        topic: str,
        max_num: int = 0,
        uniq_key: str = "",
        timeout_ms: int = DEFAULT_RPC_TIMEOUT_MS,
    ) -> OpenTransactionsStatus:
        """QueryOpenTransactions at ``addr``: the open transactions of real topic ``topic`` (at most ``max_num``,
        0: the broker's default 1000) or, given ``uniq_key``, that message's transaction state.

        Raises error_for_code(code, remark) on a non-zero code (INVALID_PARAMETER 29, SERVICE_NOT_AVAILABLE 14 on a
        slave, NO_PERMISSION 16), RemotingError / its subclasses on transport failure."""
        request = transaction_pb2.QueryOpenTransactionsRequest(topic=topic, max_num=max_num, uniq_key=uniq_key)
        stub: transaction_pb2_grpc.TransactionAdminAsyncStub = transaction_pb2_grpc.TransactionAdminStub(
            self._pool.get(addr)
        )
        resp = await _invoke(stub.QueryOpenTransactions(request, timeout=_seconds(timeout_ms)), addr)
        _check(resp.code, resp.remark)
        return OpenTransactionsStatus(
            transactions=tuple(open_transaction_from_proto(t) for t in resp.transactions),
            total_open=resp.total_open,
            state=TransactionState.of(resp.state) if uniq_key else None,
            transaction=open_transaction_from_proto(resp.transaction) if resp.HasField("transaction") else None,
        )
