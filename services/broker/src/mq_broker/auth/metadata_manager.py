"""The broker's ACL 2.0 metadata: users in ``config/users.json``, ACLs in ``config/acls.json``.

Mirrors org.apache.rocketmq.auth.authentication.manager.AuthenticationMetadataManagerImpl and
auth.authorization.manager.AuthorizationMetadataManagerImpl over a local store (RocketMQ's
LocalAuthenticationMetadataProvider / LocalAuthorizationMetadataProvider keep RocksDB; here each table is one JSON
file written atomically by mq_broker.consumer.config_file: temp + fsync + rename, ``.bak`` kept).

Reads are in memory. A change runs on the event loop under one lock: the new table is computed, written through
``asyncio.to_thread`` and only then becomes current, so a success answer means the change is on disk and a failed
write changes nothing (MQError SYSTEM_ERROR 1). Refusals are RocketMQ's: MQError NO_PERMISSION 16 with its remark
("The user is existed", "The user is not exist", "The subject of User:x is not exist.", "The acl is not exist.",
"The policies is empty.", "The actions can not be Any."), MQError INVALID_PARAMETER 29 past the table bounds
(``max_users`` / ``max_acls``) or for a blank username. Passwords never reach logs or remarks.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, Final, Generic, TypeVar

from mq_common.auth.model import Acl, Action, User, UserType
from mq_common.errors import MQError
from mq_common.logging import get_logger
from mq_common.protocol import DataVersion
from mq_common.protocol.auth import DeleteAclRequestHeader, ListAclRequestHeader, UserUpdate
from mq_common.response_code import ResponseCode

from mq_broker.auth.json_form import acl_from_json, acl_to_json, user_from_json, user_to_json
from mq_broker.auth.policies import delete_entries, filter_resources, merge_acl
from mq_broker.consumer.config_file import load_json, persist_json

log = get_logger("mq_broker.auth.metadata_manager")

USERS_FILE: Final = "users.json"
ACLS_FILE: Final = "acls.json"
SYSTEM_ERROR_REMARK: Final = "An system error occurred, please try again later."
_V = TypeVar("_V")


def _refuse(remark: str) -> MQError:
    return MQError(remark, ResponseCode.NO_PERMISSION)


class _JsonTable(Generic[_V]):
    """name -> value, persisted whole as ``{"dataVersion": ..., <key>: {name: json}}``."""

    def __init__(
        self, path: Path, key: str, encode: Callable[[_V], dict[str, Any]], decode: Callable[[Mapping[str, Any]], _V]
    ) -> None:
        self.path = path
        self._key = key
        self._encode = encode
        self._decode = decode
        self.rows: dict[str, _V] = {}
        self.data_version = DataVersion()

    def load(self) -> None:
        """Blocking. Raises ValueError when the file (and its .bak) is unusable or malformed."""
        data = load_json(self.path)
        if data is None:
            return
        try:
            self.data_version = DataVersion.from_json(data.get("dataVersion"))
            self.rows = {str(name): self._decode(row) for name, row in dict(data[self._key]).items()}
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise ValueError(f"{self.path}: malformed {self._key}: {exc}") from exc

    async def replace(self, rows: dict[str, _V]) -> None:
        """Write ``rows`` (off the loop), then make them current. Raises MQError SYSTEM_ERROR when the write
        fails (the table is then unchanged)."""
        version = self.data_version.next_version()
        document = {"dataVersion": version.to_json(), self._key: {n: self._encode(v) for n, v in rows.items()}}
        try:
            await asyncio.to_thread(persist_json, self.path, document)
        except OSError as exc:
            log.error("auth_metadata_persist_failed", path=str(self.path), error=str(exc))
            raise MQError(SYSTEM_ERROR_REMARK, ResponseCode.SYSTEM_ERROR) from exc
        self.rows, self.data_version = rows, version


class AuthMetadataManager:
    """Users and ACLs of one broker. Runs on the broker's event loop (load: blocking, at start)."""

    def __init__(self, config_dir: Path, *, max_users: int, max_acls: int) -> None:
        self.max_users = max_users
        self.max_acls = max_acls
        self._users: _JsonTable[User] = _JsonTable(config_dir / USERS_FILE, "users", user_to_json, user_from_json)
        self._acls: _JsonTable[Acl] = _JsonTable(config_dir / ACLS_FILE, "acls", acl_to_json, acl_from_json)
        self._lock = asyncio.Lock()

    def load(self) -> None:
        """Read both files (or their .bak). Blocking. Raises ValueError when one is unusable."""
        self._users.load()
        self._acls.load()

    async def init_users(self, users: Iterable[User]) -> None:
        """AuthenticationMetadataManagerImpl#initUser: create each of ``users`` (the init authentication user and
        the inner client's credentials) as a SUPER user unless a user of that name exists."""
        for user in users:
            if self.get_user(user.username) is None:
                await self.create_user(User(user.username, user.password, UserType.SUPER, user.user_status))
                log.info("auth_init_user_created", username=user.username)

    # --- users ----------------------------------------------------------------------------------------------------

    def get_user(self, username: str) -> User | None:
        return self._users.rows.get(username)

    def is_super_user(self, username: str) -> bool:
        user = self.get_user(username)
        return user is not None and user.user_type is UserType.SUPER

    def list_users(self, name_filter: str = "") -> list[User]:
        """Users whose name contains ``name_filter`` (all when empty), sorted by name."""
        return [u for name, u in sorted(self._users.rows.items()) if name_filter in name]

    async def create_user(self, user: User) -> None:
        """Raises NO_PERMISSION "The user is existed", INVALID_PARAMETER past ``max_users``, SYSTEM_ERROR."""
        async with self._lock:
            rows = self._users.rows
            if user.username in rows:
                raise _refuse("The user is existed")
            if len(rows) >= self.max_users:
                raise MQError(f"this broker holds at most {self.max_users} users", ResponseCode.INVALID_PARAMETER)
            await self._users.replace({**rows, user.username: user})

    async def update_user(self, update: UserUpdate) -> User:
        """Change what ``update`` sets; returns the stored user. Raises NO_PERMISSION "The user is not exist"."""
        async with self._lock:
            old = self._users.rows.get(update.username)
            if old is None:
                raise _refuse("The user is not exist")
            new = User(
                old.username,
                update.password or old.password,
                update.user_type or old.user_type,
                update.user_status or old.user_status,
            )
            await self._users.replace({**self._users.rows, new.username: new})
            return new

    async def delete_user(self, username: str) -> None:
        """The user and its ACL; nothing when unknown. Raises INVALID_PARAMETER for a blank name."""
        if not username.strip():
            raise MQError("username can not be blank", ResponseCode.INVALID_PARAMETER)
        async with self._lock:
            if username in self._users.rows:
                await self._users.replace({n: u for n, u in self._users.rows.items() if n != username})
            subject = f"User:{username}"
            if subject in self._acls.rows:
                await self._acls.replace({s: a for s, a in self._acls.rows.items() if s != subject})

    async def replace_users_from_master(self, users: Iterable[User]) -> bool:
        """SlaveSynchronize on a slave: the master's users become this broker's, persisted (temp + fsync + rename,
        ``.bak`` kept) before they are current. Nothing is written when they equal the current table. Returns
        whether the table changed. Raises MQError INVALID_PARAMETER 29 past ``max_users`` and SYSTEM_ERROR 1 when
        the write fails (the table is then unchanged either way)."""
        return await self._replace_from_master(self._users, {u.username: u for u in users}, self.max_users, "users")

    async def replace_acls_from_master(self, acls: Iterable[Acl]) -> bool:
        """SlaveSynchronize on a slave: the master's ACLs become this broker's, as
        :meth:`replace_users_from_master` (no subject check: the master's table is taken as it is). Raises MQError
        INVALID_PARAMETER 29 past ``max_acls``, SYSTEM_ERROR 1 when the write fails."""
        return await self._replace_from_master(self._acls, {a.subject: a for a in acls}, self.max_acls, "ACLs")

    async def _replace_from_master(self, table: _JsonTable[_V], rows: dict[str, _V], limit: int, what: str) -> bool:
        """``rows`` become ``table``'s under the lock unless equal (False); INVALID_PARAMETER 29 past ``limit``."""
        async with self._lock:
            if rows == table.rows:
                return False
            if len(rows) > limit:
                raise MQError(f"this broker holds at most {limit} {what}", ResponseCode.INVALID_PARAMETER)
            await table.replace(rows)
            return True

    # --- ACLs -----------------------------------------------------------------------------------------------------

    def _check_subject(self, subject: str, remark: str) -> None:
        username = subject.removeprefix("User:")
        if not subject.startswith("User:") or username not in self._users.rows:
            raise _refuse(remark)

    def get_acl(self, subject: str) -> Acl | None:
        """Raises NO_PERMISSION "The subject is not exist." when the subject's user is unknown."""
        self._check_subject(subject, "The subject is not exist.")
        return self._acls.rows.get(subject)

    def acl_of(self, subject: str) -> Acl | None:
        """The ACL of ``subject`` for authorisation checks (no subject check)."""
        return self._acls.rows.get(subject)

    def list_acls(self, header: ListAclRequestHeader) -> list[Acl]:
        """ACLs whose subject contains the subject filter, trimmed to entries matching the resource filter (ACLs
        left empty are skipped), sorted by subject."""
        found = (
            filter_resources(acl, header.resource_filter)
            for subject, acl in sorted(self._acls.rows.items())
            if header.subject_filter in subject
        )
        return [acl for acl in found if acl is not None]

    async def update_acl(self, acl: Acl) -> None:
        """CreateAcl and UpdateAcl alike (AuthorizationMetadataManagerImpl#createAcl/#updateAcl): merge ``acl``'s
        policies into the stored ACL by type and its entries by resource.

        Raises NO_PERMISSION ("The policies is empty.", "The policy entries is empty.", "The actions can not be
        Any.", "The subject of User:x is not exist."), INVALID_PARAMETER past ``max_acls`` or
        MAX_ENTRIES_PER_POLICY, SYSTEM_ERROR."""
        _validate(acl)
        async with self._lock:
            self._check_subject(acl.subject, f"The subject of {acl.subject} is not exist.")
            rows = self._acls.rows
            if acl.subject not in rows and len(rows) >= self.max_acls:
                raise MQError(f"this broker holds at most {self.max_acls} ACLs", ResponseCode.INVALID_PARAMETER)
            try:
                merged = merge_acl(rows.get(acl.subject), acl)
            except ValueError as exc:
                raise MQError(str(exc), ResponseCode.INVALID_PARAMETER) from exc
            await self._acls.replace({**rows, acl.subject: merged})

    async def delete_acl(self, header: DeleteAclRequestHeader) -> None:
        """The entries of ``header.resources`` in its policy type, or the whole ACL without resources (also when
        no entry is left). Raises NO_PERMISSION "The subject is not exist." / "The acl is not exist."."""
        async with self._lock:
            self._check_subject(header.subject, "The subject is not exist.")
            old = self._acls.rows.get(header.subject)
            if old is None:
                raise _refuse("The acl is not exist.")
            left = delete_entries(old, header.policy_type, header.resources) if header.resources else None
            rows = {s: a for s, a in self._acls.rows.items() if s != header.subject}
            if left is not None:
                rows[header.subject] = left
            await self._acls.replace(rows)


def _validate(acl: Acl) -> None:
    """AuthorizationMetadataManagerImpl#validate's refusals of a new ACL (NO_PERMISSION 16)."""
    if not acl.policies:
        raise _refuse("The policies is empty.")
    for policy in acl.policies:
        if not policy.entries:
            raise _refuse("The policy entries is empty.")
        if any(Action.ANY in e.actions for e in policy.entries):
            raise _refuse("The actions can not be Any.")
