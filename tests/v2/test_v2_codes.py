"""The ResponseCode -> v2 Code table (mq_gateway.v2.codes) and the statuses exceptions become."""

from __future__ import annotations

from apache.rocketmq.v2 import definition_pb2
from mq_common.errors import MQBrokerError, RemotingTimeoutError, TopicNotExistError
from mq_common.response_code import ResponseCode
from mq_gateway.v2.codes import RECEIPT_HANDLE_OVERRIDES, V2Error, ok_status, status_of, v2_code_for

Code = definition_pb2.Code


def test_every_response_code_maps_to_a_v2_code() -> None:
    known = set(Code.values())
    for member in ResponseCode:
        code = v2_code_for(member)
        assert code in known, member
        assert code != Code.CODE_UNSPECIFIED, member
    assert v2_code_for(987_654) == Code.INTERNAL_SERVER_ERROR


def test_the_proxys_own_mappings() -> None:
    # ResponseBuilder#RESPONSE_CODE_MAPPING and the send-status mapping of SendMessageActivity
    assert v2_code_for(ResponseCode.SUCCESS) == Code.OK
    assert v2_code_for(ResponseCode.SYSTEM_BUSY) == Code.TOO_MANY_REQUESTS
    assert v2_code_for(ResponseCode.REQUEST_CODE_NOT_SUPPORTED) == Code.NOT_IMPLEMENTED
    assert v2_code_for(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST) == Code.CONSUMER_GROUP_NOT_FOUND
    assert v2_code_for(ResponseCode.FLUSH_DISK_TIMEOUT) == Code.MASTER_PERSISTENCE_TIMEOUT
    assert v2_code_for(ResponseCode.FLUSH_SLAVE_TIMEOUT) == Code.SLAVE_PERSISTENCE_TIMEOUT
    assert v2_code_for(ResponseCode.SLAVE_NOT_AVAILABLE) == Code.HA_NOT_AVAILABLE
    assert v2_code_for(ResponseCode.TOPIC_NOT_EXIST) == Code.TOPIC_NOT_FOUND
    assert v2_code_for(ResponseCode.NO_PERMISSION) == Code.FORBIDDEN
    assert v2_code_for(ResponseCode.SYSTEM_ERROR) == Code.INTERNAL_SERVER_ERROR
    assert v2_code_for(ResponseCode.NO_MESSAGE, RECEIPT_HANDLE_OVERRIDES) == Code.INVALID_RECEIPT_HANDLE


def test_statuses_of_exceptions() -> None:
    assert status_of(V2Error(Code.ILLEGAL_TOPIC, "bad")) == definition_pb2.Status(
        code=Code.ILLEGAL_TOPIC, message="bad"
    )
    assert status_of(TopicNotExistError("no route")).code == Code.TOPIC_NOT_FOUND
    assert status_of(MQBrokerError("busy", ResponseCode.SYSTEM_BUSY)).code == Code.TOO_MANY_REQUESTS
    assert status_of(RemotingTimeoutError("slow")).code == Code.PROXY_TIMEOUT
    unexpected = status_of(KeyError("x"))
    assert unexpected.code == Code.INTERNAL_SERVER_ERROR
    assert "internal error" in unexpected.message
    assert "KeyError" not in unexpected.message  # the exception goes to the log, never to the client
    assert ok_status().code == Code.OK
