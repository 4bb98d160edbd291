"""DefaultElectPolicy and the ReplicasInfoManager transitions on plain data (no etcd)."""

from __future__ import annotations

import pytest
from mq_common.errors import MQError
from mq_common.response_code import ResponseCode
from mq_controller.elect_policy import elect
from mq_controller.model import BrokerLiveInfo, BrokerReplica, GroupState
from mq_controller.replicas_info_manager import (
    ElectionReason,
    alter_sync_state_set,
    ensure_master,
    manual_elect,
)


def live(broker_id: int, max_offset: int = 0, epoch: int = 1, priority: int = 0) -> BrokerLiveInfo:
    return BrokerLiveInfo("c", "g", broker_id, f"127.0.0.{broker_id}:1", "", max_offset, 0, epoch, priority)


def group(master: int, in_sync: set[int], master_epoch: int = 1, sss_epoch: int = 1) -> GroupState:
    replicas = tuple(BrokerReplica(i, f"127.0.0.{i}:1") for i in (1, 2, 3))
    return GroupState("c", "g", master, master_epoch, frozenset(in_sync), sss_epoch, replicas)


def table(*infos: BrokerLiveInfo) -> dict[int, BrokerLiveInfo]:
    return {i.broker_id: i for i in infos}


def test_largest_offset_of_the_in_sync_set_wins() -> None:
    assert elect(group(1, {1, 2, 3}), table(live(2, 100), live(3, 300))) == 3


def test_epoch_before_offset_then_priority_then_lowest_id() -> None:
    assert elect(group(1, {1, 2, 3}), table(live(2, 900, epoch=1), live(3, 100, epoch=2))) == 3
    assert elect(group(1, {1, 2, 3}), table(live(2, 5, priority=2), live(3, 5, priority=1))) == 3
    assert elect(group(1, {1, 2, 3}), table(live(2, 5, priority=0), live(3, 5, priority=7))) == 3
    assert elect(group(1, {1, 2, 3}), table(live(3, 5), live(2, 5))) == 2


def test_out_of_set_replica_only_when_unclean() -> None:
    state = group(1, {1, 2})
    assert elect(state, table(live(3, 999))) is None
    assert elect(state, table(live(3, 999)), unclean=True) == 3
    assert elect(state, table(live(2, 1), live(3, 999)), unclean=True) == 2


def test_a_live_master_is_kept_and_the_designated_must_qualify() -> None:
    state = group(1, {1, 2})
    assert elect(state, table(live(1), live(2, 50))) == 1
    assert elect(state, table(live(1), live(2)), designated=2) == 2
    assert elect(state, table(live(1), live(3)), designated=3) is None


def test_new_group_takes_any_live_replica_and_an_election_starts_a_term() -> None:
    fresh = GroupState("c", "g", replicas=(BrokerReplica(2, "a"),))
    outcome = ensure_master(fresh, table(live(2)), unclean=False)
    assert outcome.elected is ElectionReason.NO_MASTER
    assert (outcome.state.master_broker_id, outcome.state.master_epoch) == (2, 1)
    assert outcome.state.sync_state_set == {2}
    dead = ensure_master(group(1, {1, 2}, master_epoch=4, sss_epoch=9), table(live(2)), unclean=False)
    assert dead.elected is ElectionReason.MASTER_DEAD
    assert (dead.state.master_epoch, dead.state.sync_state_set, dead.state.sync_state_set_epoch) == (5, {2}, 10)


def test_no_candidate_leaves_the_group_without_master_keeping_its_set() -> None:
    outcome = ensure_master(group(1, {1, 2}, master_epoch=3), table(live(3)), unclean=False)
    assert outcome.elected is None
    assert outcome.state.master_broker_id == 0
    assert (outcome.state.master_epoch, outcome.state.sync_state_set) == (3, {1, 2})


@pytest.mark.parametrize(
    ("args", "code"),
    [
        ((2, 1, {1, 2}, 1), ResponseCode.CONTROLLER_INVALID_MASTER),
        ((1, 0, {1, 2}, 1), ResponseCode.CONTROLLER_FENCED_MASTER_EPOCH),
        ((1, 1, {1, 2}, 0), ResponseCode.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH),
        ((1, 1, {2}, 1), ResponseCode.CONTROLLER_INVALID_MASTER),
        ((1, 1, {1, 3}, 1), ResponseCode.CONTROLLER_INVALID_REPLICAS),
        ((1, 1, {1, 9}, 1), ResponseCode.CONTROLLER_INVALID_REPLICAS),
    ],
)
def test_alter_sync_state_set_refusals(args: tuple[int, int, set[int], int], code: int) -> None:
    master, master_epoch, new_set, sss_epoch = args
    with pytest.raises(MQError) as info:
        alter_sync_state_set(group(1, {1}), {1, 2, 9}, master, master_epoch, frozenset(new_set), sss_epoch)
    assert info.value.code == code


def test_alter_sync_state_set_bumps_the_epoch_and_manual_election_needs_a_candidate() -> None:
    grown = alter_sync_state_set(group(1, {1}), {1, 2}, 1, 1, frozenset({1, 2}), 1)
    assert (grown.sync_state_set, grown.sync_state_set_epoch) == ({1, 2}, 2)
    with pytest.raises(MQError) as still:
        manual_elect(grown, table(live(1), live(2)), None, unclean=False)
    assert still.value.code == ResponseCode.CONTROLLER_MASTER_STILL_EXIST
    with pytest.raises(MQError) as failed:
        manual_elect(grown, table(live(1), live(3)), 3, unclean=False)
    assert failed.value.code == ResponseCode.CONTROLLER_ELECT_MASTER_FAILED
    switched = manual_elect(grown, table(live(1), live(2)), 2, unclean=False)
    assert (switched.state.master_broker_id, switched.state.master_epoch, switched.elected) == (
        2,
        2,
        ElectionReason.MANUAL,
    )
