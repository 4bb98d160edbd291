"""Extension points around each send attempt. Mirrors org.apache.rocketmq.client.hook.{CheckForbiddenHook,
SendMessageHook} as called by DefaultMQProducerImpl#sendKernelImpl.

Hooks run synchronously on the producer's asyncio loop, once per attempt and message (batch sends too), so
they must be quick and must not block.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from mq_common.errors import MQError

from mq_client.producer.message import Message
from mq_client.producer.send_result import CommunicationMode, SendResult
from mq_client.route import MessageQueue


@dataclass(frozen=True, slots=True)
class SendMessageContext:
    """What an attempt is about to do. Mirrors SendMessageContext / CheckForbiddenContext.

    ``msg_id`` is the UNIQ_KEY; ``broker_addr`` the master address the attempt goes to.
    """

    producer_group: str
    message: Message
    msg_id: str
    message_queue: MessageQueue
    broker_addr: str
    communication_mode: CommunicationMode


class CheckForbiddenHook(Protocol):
    """Refuses a send by raising an MQError (an MQClientError is not retried). Mirrors CheckForbiddenHook."""

    def check_forbidden(self, context: SendMessageContext) -> None: ...


class SendMessageHook(Protocol):
    """Called before each attempt and after it with its result or error. Mirrors SendMessageHook."""

    def send_message_before(self, context: SendMessageContext) -> None: ...

    def send_message_after(
        self, context: SendMessageContext, result: SendResult | None, error: MQError | None
    ) -> None: ...


@dataclass(frozen=True, slots=True)
class ProducerHooks:
    """The hooks of one producer, in call order."""

    check_forbidden: tuple[CheckForbiddenHook, ...] = field(default=())
    send_message: tuple[SendMessageHook, ...] = field(default=())

    def __bool__(self) -> bool:
        return bool(self.check_forbidden or self.send_message)
