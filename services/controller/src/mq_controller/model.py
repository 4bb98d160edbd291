"""What the controller keeps per broker group, and how it is stored (JSON values in etcd).

Mirrors org.apache.rocketmq.controller.impl.manager.{SyncStateInfo, BrokerReplicaInfo} (one :class:`GroupState`
per broker name) and controller.impl.heartbeat.BrokerLiveInfo (:class:`BrokerLiveInfo`, one per live broker, held
under a lease). Encoded as compact UTF-8 JSON; decoding raises ValueError on anything malformed. Plain values;
any thread.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace
from typing import Any, Final

from mq_common.protocol.controller import NO_MASTER_ID, BrokerHeartbeat, ReplicaInfo

FORMAT_VERSION: Final = 1


@dataclass(frozen=True, slots=True)
class BrokerReplica:
    """A broker ever seen in a group: its id and last known addresses (BrokerReplicaInfo's brokerIdInfo)."""

    broker_id: int
    broker_addr: str
    ha_server_addr: str = ""


@dataclass(frozen=True, slots=True)
class GroupState:
    """One group's replica state (SyncStateInfo + BrokerReplicaInfo). ``master_broker_id`` NO_MASTER_ID (0): no
    master; ``master_epoch`` 0: the group never had one. ``replicas`` sorted by id."""

    cluster_name: str
    broker_name: str
    master_broker_id: int = NO_MASTER_ID
    master_epoch: int = 0
    sync_state_set: frozenset[int] = frozenset()
    sync_state_set_epoch: int = 0
    replicas: tuple[BrokerReplica, ...] = ()

    def replica(self, broker_id: int) -> BrokerReplica | None:
        return next((r for r in self.replicas if r.broker_id == broker_id), None)

    def with_replica(self, replica: BrokerReplica) -> GroupState:
        """This state with ``replica`` added or its addresses updated."""
        others = [r for r in self.replicas if r.broker_id != replica.broker_id]
        return replace(self, replicas=tuple(sorted([*others, replica], key=lambda r: r.broker_id)))

    def replica_info(self) -> ReplicaInfo:
        master = self.replica(self.master_broker_id) if self.master_broker_id != NO_MASTER_ID else None
        return ReplicaInfo(
            self.master_broker_id,
            master.broker_addr if master is not None else "",
            master.ha_server_addr if master is not None else "",
            self.master_epoch,
            self.sync_state_set,
            self.sync_state_set_epoch,
        )

    def encode(self) -> bytes:
        doc = asdict(self)
        doc["sync_state_set"] = sorted(self.sync_state_set)
        doc["version"] = FORMAT_VERSION
        return json.dumps(doc, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, raw: bytes) -> GroupState:
        """Raises ValueError for a value this version cannot read."""
        doc = _object(raw)
        try:
            return cls(
                str(doc["cluster_name"]),
                str(doc["broker_name"]),
                int(doc["master_broker_id"]),
                int(doc["master_epoch"]),
                frozenset(int(i) for i in doc["sync_state_set"]),
                int(doc["sync_state_set_epoch"]),
                tuple(
                    BrokerReplica(int(r["broker_id"]), str(r["broker_addr"]), str(r["ha_server_addr"]))
                    for r in doc["replicas"]
                ),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"malformed group state: {exc}") from None


@dataclass(frozen=True, slots=True)
class BrokerLiveInfo:
    """A live broker's last heartbeat (BrokerLiveInfo): offsets in bytes, its epoch and election priority."""

    cluster_name: str
    broker_name: str
    broker_id: int
    broker_addr: str
    ha_server_addr: str
    max_offset: int
    confirm_offset: int
    epoch: int
    election_priority: int

    @classmethod
    def of(cls, hb: BrokerHeartbeat) -> BrokerLiveInfo:
        return cls(
            hb.cluster_name,
            hb.broker_name,
            hb.broker_id,
            hb.broker_addr,
            hb.ha_server_addr,
            hb.max_offset,
            hb.confirm_offset,
            hb.epoch,
            hb.election_priority,
        )

    def encode(self) -> bytes:
        return json.dumps(asdict(self), separators=(",", ":")).encode()

    @classmethod
    def decode(cls, raw: bytes) -> BrokerLiveInfo:
        """Raises ValueError for a malformed value."""
        doc = _object(raw)
        try:
            return cls(
                str(doc["cluster_name"]),
                str(doc["broker_name"]),
                int(doc["broker_id"]),
                str(doc["broker_addr"]),
                str(doc["ha_server_addr"]),
                int(doc["max_offset"]),
                int(doc["confirm_offset"]),
                int(doc["epoch"]),
                int(doc["election_priority"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"malformed broker live info: {exc}") from None


def _object(raw: bytes) -> dict[str, Any]:
    try:
        doc = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise ValueError("not a JSON object")
    return doc
