"""The state-version rule of RegisterBroker conflicts (one broker id, two addresses), in plaintext too: a forged
jump such as 2^63-1 neither takes a live broker's id nor locks the real broker out."""

from __future__ import annotations

import pytest
from mq_common.errors import InvalidParameterError
from mq_common.protocol import DataVersion
from mq_namesrv.route_info_manager import MAX_STATE_VERSION_STEP, RouteInfoManager

from tests.namesrv.test_namesrv_route_info_manager import FakeClock, reg

REAL = "127.0.0.1:10911"
STRANGER = "127.0.0.66:10911"
HUGE = 2**63 - 1


@pytest.fixture
def manager() -> RouteInfoManager:
    return RouteInfoManager(FakeClock())


def holder(manager: RouteInfoManager) -> str:
    return manager.pickup_topic_route_data("TopicA").broker_datas[0].broker_addrs[0]


def version(state: int) -> DataVersion:
    return DataVersion(state, 1, 1)


def test_a_forged_huge_state_version_does_not_take_a_live_broker_id(manager: RouteInfoManager) -> None:
    manager.register_broker(reg(broker_addr=REAL, version=version(0)))
    manager.register_broker(reg(broker_addr=STRANGER, version=version(HUGE)))
    assert holder(manager) == REAL
    manager.register_broker(reg(broker_addr=REAL, version=version(0)))  # the real broker's heartbeat still counts
    assert holder(manager) == REAL
    assert STRANGER not in manager.get_all_cluster_info().broker_live_table


def test_an_impostor_that_registered_first_with_a_huge_version_loses_at_the_real_heartbeat(
    manager: RouteInfoManager,
) -> None:
    manager.register_broker(reg(broker_addr=STRANGER, version=version(HUGE)))
    assert holder(manager) == STRANGER
    manager.register_broker(reg(broker_addr=REAL, version=version(0)))
    assert holder(manager) == REAL
    manager.register_broker(reg(broker_addr=STRANGER, version=version(HUGE)))  # and cannot jump back
    assert holder(manager) == REAL


def test_a_new_master_epoch_within_the_step_still_takes_over(manager: RouteInfoManager) -> None:
    manager.register_broker(reg(broker_addr=REAL, version=version(7)))
    manager.register_broker(reg(broker_addr=STRANGER, version=version(7 + MAX_STATE_VERSION_STEP)))
    assert holder(manager) == STRANGER
    # The deposed master (lower epoch, within the step) is ignored, as RocketMQ does.
    manager.register_broker(reg(broker_addr=REAL, version=version(7)))
    assert holder(manager) == STRANGER


def test_just_past_the_step_is_refused(manager: RouteInfoManager) -> None:
    manager.register_broker(reg(broker_addr=REAL, version=version(7)))
    manager.register_broker(reg(broker_addr=STRANGER, version=version(8 + MAX_STATE_VERSION_STEP)))
    assert holder(manager) == REAL


def test_an_equal_version_from_a_new_address_takes_over_as_in_rocketmq(manager: RouteInfoManager) -> None:
    manager.register_broker(reg(broker_addr=REAL, version=version(0)))
    manager.register_broker(reg(broker_addr=STRANGER, version=version(0)))
    assert holder(manager) == STRANGER


def test_a_negative_state_version_is_invalid(manager: RouteInfoManager) -> None:
    with pytest.raises(InvalidParameterError, match="stateVersion"):
        manager.register_broker(reg(broker_addr=STRANGER, version=version(-1)))
