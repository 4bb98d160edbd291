"""gRPC face of the broker's ACL 2.0 admin RPCs (CreateUser ... ListAcl) and of its request authentication: a
mixin of mq_broker.grpc_api.BrokerServicer that translates mq.broker.v1 <-> mq_common.auth.model with
mq_common.protocol.auth_convert, nothing else.

Mirrors AdminBrokerProcessor's auth handlers (#createUser ... #listAcl). Every user/ACL RPC is an admin RPC: with
auth on it needs a super user or a component (NO_PERMISSION 16). A malformed user or ACL is INVALID_PARAMETER 29
with the model's text; GetUser/ListUser carry passwords only to callers that may read them (components verify
signatures with them); mqadmin never prints them. Handlers run on the service's asyncio loop and never raise into
gRPC (the servicer's ``_run`` maps errors to code + remark).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, cast

import grpc
from mq.broker.v1 import broker_pb2
from mq_common.auth.model import Action, Resource
from mq_common.errors import MQError
from mq_common.protocol.auth_convert import (
    acl_from_proto,
    acl_to_proto,
    delete_acl_request_from_proto,
    list_acl_request_from_proto,
    user_from_proto,
    user_to_proto,
    user_update_from_proto,
)
from mq_common.response_code import ResponseCode

from mq_broker.auth.guard import BrokerAuthGuard, Caller
from mq_broker.auth.metadata_manager import AuthMetadataManager

_Resp = TypeVar("_Resp")
_Context = grpc.aio.ServicerContext[object, object]
_T = TypeVar("_T")


def peer_ip(peer: str) -> str | None:
    """``"ipv4:1.2.3.4:5"`` -> ``"1.2.3.4"``, ``"ipv6:[::1]:5"`` -> ``"::1"``; None for other peers."""
    for prefix in ("ipv4:", "ipv6:"):
        if peer.startswith(prefix):
            return peer[len(prefix) :].rpartition(":")[0].strip("[]") or None
    return None


def parsed(convert: Callable[[], _T]) -> _T:
    """``convert()``; its ValueError becomes MQError INVALID_PARAMETER 29 with the model's text."""
    try:
        return convert()
    except ValueError as exc:
        raise MQError(str(exc), ResponseCode.INVALID_PARAMETER) from exc


class AuthServicerMixin:
    """The user/ACL handlers and :meth:`_caller`. The servicer sets ``_auth_metadata`` / ``_auth_guard`` (None: the
    broker serves no ACL RPCs and checks nothing) and provides ``_run`` (its error-to-code wrapper)."""

    _auth_metadata: AuthMetadataManager | None
    _auth_guard: BrokerAuthGuard | None
    # The name of the call's verified component certificate, None when it has none (h/tls's peer identity).
    _component_identity: Callable[[_Context], str | None] | None

    async def _run(self, rpc: str, make_error: Callable[..., _Resp], handler: Callable[[], Awaitable[_Resp]]) -> _Resp:
        raise NotImplementedError

    def _caller(self, context: _Context) -> Caller:
        """The request's authenticated caller (anonymous with auth off). Raises MQError NO_PERMISSION 16."""
        ip = peer_ip(context.peer())
        if self._auth_guard is None or not self._auth_guard.enabled:
            return Caller(None, ip)
        component = self._component_identity(context) if self._component_identity is not None else None
        if component is not None:
            return Caller(None, ip, component)
        headers = {k.lower(): v for k, v in (context.invocation_metadata() or ()) if isinstance(v, str)}
        return self._auth_guard.authenticate(headers, ip)

    def require_pub_on_groups(self, context: grpc.aio.ServicerContext[Any, Any], groups: frozenset[str]) -> None:
        """Pub on each of ``groups`` for the caller of ``context`` (nothing with auth off): who may receive a producer
        group's transaction checks (mq_broker.transaction.grpc_api). Raises MQError NO_PERMISSION 16."""
        caller = self._caller(cast(_Context, context))
        if self._auth_guard is not None:
            for group in sorted(groups):
                self._auth_guard.require(caller, Resource.of_group(group), Action.PUB)

    def _admin_caller(self, context: _Context, rpc: str) -> Caller:
        """:meth:`_caller`, which must be allowed admin RPCs. Raises MQError NO_PERMISSION 16."""
        caller = self._caller(context)
        if self._auth_guard is not None:
            self._auth_guard.require_admin(caller, rpc)
        return caller

    def _metadata(self) -> AuthMetadataManager:
        if self._auth_metadata is None:
            raise MQError("this broker keeps no users or ACLs", ResponseCode.REQUEST_CODE_NOT_SUPPORTED)
        return self._auth_metadata

    async def _auth_admin(
        self, rpc: str, context: _Context, make: Callable[..., _Resp], action: Callable[[Caller], Awaitable[_Resp]]
    ) -> _Resp:
        async def handle() -> _Resp:
            return await action(self._admin_caller(context, rpc))

        return await self._run(rpc, make, handle)

    async def CreateUser(
        self, request: broker_pb2.CreateUserRequest, context: _Context
    ) -> broker_pb2.CreateUserResponse:
        async def act(_: Caller) -> broker_pb2.CreateUserResponse:
            await self._metadata().create_user(parsed(lambda: user_from_proto(request.user)))
            return broker_pb2.CreateUserResponse(code=ResponseCode.SUCCESS)

        return await self._auth_admin("CreateUser", context, broker_pb2.CreateUserResponse, act)

    async def UpdateUser(
        self, request: broker_pb2.UpdateUserRequest, context: _Context
    ) -> broker_pb2.UpdateUserResponse:
        async def act(_: Caller) -> broker_pb2.UpdateUserResponse:
            await self._metadata().update_user(parsed(lambda: user_update_from_proto(request.user)))
            return broker_pb2.UpdateUserResponse(code=ResponseCode.SUCCESS)

        return await self._auth_admin("UpdateUser", context, broker_pb2.UpdateUserResponse, act)

    async def DeleteUser(
        self, request: broker_pb2.DeleteUserRequest, context: _Context
    ) -> broker_pb2.DeleteUserResponse:
        async def act(_: Caller) -> broker_pb2.DeleteUserResponse:
            await self._metadata().delete_user(request.username)
            return broker_pb2.DeleteUserResponse(code=ResponseCode.SUCCESS)

        return await self._auth_admin("DeleteUser", context, broker_pb2.DeleteUserResponse, act)

    def _with_password(self, caller: Caller) -> bool:
        return self._auth_guard is None or self._auth_guard.may_read_secrets(caller)

    async def GetUser(self, request: broker_pb2.GetUserRequest, context: _Context) -> broker_pb2.GetUserResponse:
        async def act(caller: Caller) -> broker_pb2.GetUserResponse:
            if not request.username.strip():
                raise MQError("The username is blank", ResponseCode.INVALID_PARAMETER)
            user = self._metadata().get_user(request.username)
            if user is None:
                return broker_pb2.GetUserResponse(code=ResponseCode.SUCCESS)
            proto = user_to_proto(user, with_password=self._with_password(caller))
            return broker_pb2.GetUserResponse(code=ResponseCode.SUCCESS, user=proto)

        return await self._auth_admin("GetUser", context, broker_pb2.GetUserResponse, act)

    async def ListUser(self, request: broker_pb2.ListUserRequest, context: _Context) -> broker_pb2.ListUserResponse:
        async def act(caller: Caller) -> broker_pb2.ListUserResponse:
            with_password = self._with_password(caller)
            users = [user_to_proto(u, with_password=with_password) for u in self._metadata().list_users(request.filter)]
            return broker_pb2.ListUserResponse(code=ResponseCode.SUCCESS, users=users)

        return await self._auth_admin("ListUser", context, broker_pb2.ListUserResponse, act)

    async def CreateAcl(self, request: broker_pb2.CreateAclRequest, context: _Context) -> broker_pb2.CreateAclResponse:
        async def act(_: Caller) -> broker_pb2.CreateAclResponse:
            await self._metadata().update_acl(parsed(lambda: acl_from_proto(request.acl)))
            return broker_pb2.CreateAclResponse(code=ResponseCode.SUCCESS)

        return await self._auth_admin("CreateAcl", context, broker_pb2.CreateAclResponse, act)

    async def UpdateAcl(self, request: broker_pb2.UpdateAclRequest, context: _Context) -> broker_pb2.UpdateAclResponse:
        async def act(_: Caller) -> broker_pb2.UpdateAclResponse:
            await self._metadata().update_acl(parsed(lambda: acl_from_proto(request.acl)))
            return broker_pb2.UpdateAclResponse(code=ResponseCode.SUCCESS)

        return await self._auth_admin("UpdateAcl", context, broker_pb2.UpdateAclResponse, act)

    async def DeleteAcl(self, request: broker_pb2.DeleteAclRequest, context: _Context) -> broker_pb2.DeleteAclResponse:
        async def act(_: Caller) -> broker_pb2.DeleteAclResponse:
            await self._metadata().delete_acl(parsed(lambda: delete_acl_request_from_proto(request)))
            return broker_pb2.DeleteAclResponse(code=ResponseCode.SUCCESS)

        return await self._auth_admin("DeleteAcl", context, broker_pb2.DeleteAclResponse, act)

    async def GetAcl(self, request: broker_pb2.GetAclRequest, context: _Context) -> broker_pb2.GetAclResponse:
        async def act(_: Caller) -> broker_pb2.GetAclResponse:
            acl = self._metadata().get_acl(request.subject)
            if acl is None:
                return broker_pb2.GetAclResponse(code=ResponseCode.SUCCESS)
            return broker_pb2.GetAclResponse(code=ResponseCode.SUCCESS, acl=acl_to_proto(acl))

        return await self._auth_admin("GetAcl", context, broker_pb2.GetAclResponse, act)

    async def ListAcl(self, request: broker_pb2.ListAclRequest, context: _Context) -> broker_pb2.ListAclResponse:
        async def act(_: Caller) -> broker_pb2.ListAclResponse:
            acls = self._metadata().list_acls(list_acl_request_from_proto(request))
            return broker_pb2.ListAclResponse(code=ResponseCode.SUCCESS, acls=[acl_to_proto(a) for a in acls])

        return await self._auth_admin("ListAcl", context, broker_pb2.ListAclResponse, act)
