"""ACL 2.0 admin broker calls by address: users and ACLs (the broker's CreateUser ... ListAcl RPCs).

A client adapter like mq_client.consumer_admin_calls (the only kind of mq_client module that touches generated
protobuf types): it translates between mq_common.auth.model / mq_common.protocol.auth and broker.proto with
mq_common.protocol.auth_convert, nothing more. Used by mqadmin's auth verbs (mq_client.admin.cli_auth) and by the
gateway's AuthMetadataProvider (:meth:`AuthAdminCalls.get_user`, :meth:`AuthAdminCalls.get_acl`). Runs on the
caller's asyncio loop (channels belong to the loop that created them). Errors: a gRPC status ->
mq_common.grpc_errors.transport_error (RemotingTimeoutError, RemotingError, ...); a non-zero business ``code`` ->
mq_common.errors.error_for_code(code, remark), raised (e.g. NO_PERMISSION 16 "The user is existed",
INVALID_PARAMETER 29 for a malformed user or ACL).
"""

from __future__ import annotations

from mq.broker.v1 import broker_pb2, broker_pb2_grpc
from mq_common.auth.interceptor import SigningInterceptor
from mq_common.auth.model import Acl, User
from mq_common.auth.settings import Credentials
from mq_common.channels import DEFAULT_RPC_TIMEOUT_MS, ChannelPool, StubCache
from mq_common.channels import seconds as _seconds
from mq_common.errors import MQClientError
from mq_common.grpc_errors import invoke as _invoke
from mq_common.namesrv_client import check_code as _check
from mq_common.protocol.auth import DeleteAclRequestHeader, ListAclRequestHeader, UserInfo, UserUpdate
from mq_common.protocol.auth_convert import (
    acl_from_proto,
    acl_to_proto,
    delete_acl_request_to_proto,
    list_acl_request_to_proto,
    user_from_proto,
    user_info_from_proto,
    user_to_proto,
    user_update_to_proto,
)
from mq_common.response_code import ResponseCode

__all__ = ["AuthAdminCalls"]


class AuthAdminCalls:
    """The user and ACL RPCs of the Broker service, one method each. Mirrors MQClientAPIImpl's createUser,
    updateUser, deleteUser, getUser, listUser, createAcl, updateAcl, deleteAcl, getAcl, listAcl. Runs on the
    caller's loop; channels come from (and belong to) ``pool`` (whose interceptors sign the calls when the caller
    has credentials)."""

    def __init__(self, pool: ChannelPool, credentials: tuple[str, str] | None = None) -> None:
        """``credentials`` (access key, secret key): sign every call (MQv2-HMAC-SHA1, the headers of the current
        second from mq_common.auth.interceptor.SigningInterceptor); None sends unsigned calls (or lets ``pool``'s
        interceptors sign)."""
        self._stubs = StubCache(pool, broker_pb2_grpc.BrokerStub)
        self._signer = SigningInterceptor(Credentials(*credentials)) if credentials is not None else None

    def _signed(self) -> tuple[tuple[str, str], ...] | None:
        return self._signer.headers() if self._signer is not None else None

    def _stub(self, addr: str) -> broker_pb2_grpc.BrokerAsyncStub:
        return self._stubs.get(addr)

    # --- what the gateway's AuthMetadataProvider reads ------------------------------------------------------------

    async def get_user(self, broker_addr: str, username: str, timeout_ms: int = DEFAULT_RPC_TIMEOUT_MS) -> User | None:
        """AUTH_GET_USER with the password (the secret key signatures are verified with); None when unknown.

        Raises MQClientError NO_PERMISSION (16) when the broker withheld the password (the caller is neither a
        super user nor a component), error_for_code(...) on a non-zero code, RemotingError on transport failure."""
        user = await self._get_user(broker_addr, username, timeout_ms)
        if user is None:
            return None
        if not user.password:
            remark = f"the broker {broker_addr} did not give the secret of User:{username} to this caller"
            raise MQClientError(remark, ResponseCode.NO_PERMISSION)
        return user_from_proto(user)

    async def get_acl(self, broker_addr: str, subject: str, timeout_ms: int = DEFAULT_RPC_TIMEOUT_MS) -> Acl | None:
        """AUTH_GET_ACL: ``subject``'s (``User:<name>``) ACL; None when it has none.

        Raises error_for_code(...) on a non-zero code (NO_PERMISSION 16 "The subject is not exist." when the
        user is unknown), RemotingError on transport failure."""
        request = broker_pb2.GetAclRequest(subject=subject)
        resp = await _invoke(
            self._stub(broker_addr).GetAcl(request, timeout=_seconds(timeout_ms), metadata=self._signed()), broker_addr
        )
        _check(resp.code, resp.remark)
        return acl_from_proto(resp.acl) if resp.HasField("acl") else None

    # --- users ----------------------------------------------------------------------------------------------------

    async def _get_user(self, addr: str, username: str, timeout_ms: int) -> broker_pb2.User | None:
        request = broker_pb2.GetUserRequest(username=username)
        resp = await _invoke(
            self._stub(addr).GetUser(request, timeout=_seconds(timeout_ms), metadata=self._signed()), addr
        )
        _check(resp.code, resp.remark)
        return resp.user if resp.HasField("user") else None

    async def get_user_info(
        self, addr: str, username: str, timeout_ms: int = DEFAULT_RPC_TIMEOUT_MS
    ) -> UserInfo | None:
        """AUTH_GET_USER without the password (mqadmin getUser); None when unknown. Raises as :meth:`get_user`."""
        user = await self._get_user(addr, username, timeout_ms)
        return user_info_from_proto(user) if user is not None else None

    async def list_user(
        self, addr: str, name_filter: str = "", timeout_ms: int = DEFAULT_RPC_TIMEOUT_MS
    ) -> list[UserInfo]:
        """AUTH_LIST_USER: the users whose name contains ``name_filter`` (all when empty), without passwords, in the
        broker's order. Raises error_for_code(...) on a non-zero code."""
        request = broker_pb2.ListUserRequest(filter=name_filter)
        resp = await _invoke(
            self._stub(addr).ListUser(request, timeout=_seconds(timeout_ms), metadata=self._signed()), addr
        )
        _check(resp.code, resp.remark)
        return [user_info_from_proto(u) for u in resp.users]

    async def create_user(self, addr: str, user: User, timeout_ms: int = DEFAULT_RPC_TIMEOUT_MS) -> None:
        """AUTH_CREATE_USER. Raises error_for_code(...): NO_PERMISSION 16 "The user is existed", INVALID_PARAMETER
        29 past the broker's user bound."""
        request = broker_pb2.CreateUserRequest(user=user_to_proto(user))
        resp = await _invoke(
            self._stub(addr).CreateUser(request, timeout=_seconds(timeout_ms), metadata=self._signed()), addr
        )
        _check(resp.code, resp.remark)

    async def update_user(self, addr: str, update: UserUpdate, timeout_ms: int = DEFAULT_RPC_TIMEOUT_MS) -> None:
        """AUTH_UPDATE_USER: change what ``update`` sets. Raises error_for_code(...): NO_PERMISSION 16 "The user is
        not exist"."""
        request = broker_pb2.UpdateUserRequest(user=user_update_to_proto(update))
        resp = await _invoke(
            self._stub(addr).UpdateUser(request, timeout=_seconds(timeout_ms), metadata=self._signed()), addr
        )
        _check(resp.code, resp.remark)

    async def delete_user(self, addr: str, username: str, timeout_ms: int = DEFAULT_RPC_TIMEOUT_MS) -> None:
        """AUTH_DELETE_USER: the user and its ACL (nothing to do when unknown). Raises error_for_code(...)."""
        request = broker_pb2.DeleteUserRequest(username=username)
        resp = await _invoke(
            self._stub(addr).DeleteUser(request, timeout=_seconds(timeout_ms), metadata=self._signed()), addr
        )
        _check(resp.code, resp.remark)

    # --- ACLs -----------------------------------------------------------------------------------------------------

    async def create_acl(self, addr: str, acl: Acl, timeout_ms: int = DEFAULT_RPC_TIMEOUT_MS) -> None:
        """AUTH_CREATE_ACL (merged into an existing ACL as update_acl does). Raises error_for_code(...):
        NO_PERMISSION 16 when the subject's user does not exist or the policies are empty."""
        request = broker_pb2.CreateAclRequest(acl=acl_to_proto(acl))
        resp = await _invoke(
            self._stub(addr).CreateAcl(request, timeout=_seconds(timeout_ms), metadata=self._signed()), addr
        )
        _check(resp.code, resp.remark)

    async def update_acl(self, addr: str, acl: Acl, timeout_ms: int = DEFAULT_RPC_TIMEOUT_MS) -> None:
        """AUTH_UPDATE_ACL: merge ``acl``'s entries by resource into the stored ACL. Raises as :meth:`create_acl`."""
        request = broker_pb2.UpdateAclRequest(acl=acl_to_proto(acl))
        resp = await _invoke(
            self._stub(addr).UpdateAcl(request, timeout=_seconds(timeout_ms), metadata=self._signed()), addr
        )
        _check(resp.code, resp.remark)

    async def delete_acl(
        self, addr: str, header: DeleteAclRequestHeader, timeout_ms: int = DEFAULT_RPC_TIMEOUT_MS
    ) -> None:
        """AUTH_DELETE_ACL: the entries of ``header.resources`` or the whole ACL. Raises error_for_code(...):
        NO_PERMISSION 16 "The acl is not exist."."""
        request = delete_acl_request_to_proto(header)
        resp = await _invoke(
            self._stub(addr).DeleteAcl(request, timeout=_seconds(timeout_ms), metadata=self._signed()), addr
        )
        _check(resp.code, resp.remark)

    async def list_acl(
        self, addr: str, header: ListAclRequestHeader, timeout_ms: int = DEFAULT_RPC_TIMEOUT_MS
    ) -> list[Acl]:
        """AUTH_LIST_ACL: the ACLs (and entries) matching ``header``'s filters. Raises error_for_code(...)."""
        request = list_acl_request_to_proto(header)
        resp = await _invoke(
            self._stub(addr).ListAcl(request, timeout=_seconds(timeout_ms), metadata=self._signed()), addr
        )
        _check(resp.code, resp.remark)
        return [acl_from_proto(a) for a in resp.acls]
