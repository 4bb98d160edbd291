"""Extension points around each send attempt. Mirrors org.apache.rocketmq.client.hook.{CheckForbiddenHook,
SendMessageHook} as called by DefaultMQProducerImpl#sendKernelImpl (#executeCheckForbiddenHook,
#executeSendMessageHookBefore / #executeSendMessageHookAfter).

Hooks run synchronously on the producer's asyncio loop, once per attempt and message (batch sends too), after
the route lookup and queue selection, so they must be quick and must not block. A check-forbidden hook
refuses the attempt by raising an MQError (not retried unless the error is retriable); an exception from a
before/after send hook is logged and ignored, as RocketMQ does, so a broken metrics plugin never fails sends.

Plugins: any object with the methods of :class:`CheckForbiddenHook` and/or :class:`SendMessageHook`;
:func:`load_hook` builds one from ``"package.module:factory"`` (a class or a function of no arguments).
:class:`TopicAccessList` is the stock check-forbidden hook (a topic allow / deny list).
"""

from __future__ import annotations

import fnmatch
import importlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from mq_common.errors import MQError, NoPermissionError
from mq_common.logging import get_logger
from mq_common.protocol import MessageQueue

from mq_client.producer.message import Message
from mq_client.producer.send_result import CommunicationMode, SendResult

log = get_logger("mq_client.producer.hooks")


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


@runtime_checkable
class CheckForbiddenHook(Protocol):
    """Refuses a send by raising an MQError (an MQClientError is not retried). Mirrors CheckForbiddenHook."""

    def check_forbidden(self, context: SendMessageContext) -> None: ...


@runtime_checkable
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

    @classmethod
    def of(cls, plugins: Iterable[object]) -> ProducerHooks:
        """Sort ``plugins`` into the two kinds by the methods they have (an object may be both).
        Raises TypeError for an object that is neither."""
        forbidden: list[CheckForbiddenHook] = []
        send: list[SendMessageHook] = []
        for plugin in plugins:
            if not isinstance(plugin, (CheckForbiddenHook, SendMessageHook)):
                raise TypeError(f"{plugin!r} is neither a CheckForbiddenHook nor a SendMessageHook")
            if isinstance(plugin, CheckForbiddenHook):
                forbidden.append(plugin)
            if isinstance(plugin, SendMessageHook):
                send.append(plugin)
        return cls(tuple(forbidden), tuple(send))

    def run_check_forbidden(self, context: SendMessageContext) -> None:
        """Every check-forbidden hook in order; the first MQError raised refuses the attempt."""
        for hook in self.check_forbidden:
            hook.check_forbidden(context)

    def run_before(self, context: SendMessageContext) -> None:
        """Every send_message_before; exceptions are logged and ignored."""
        for hook in self.send_message:
            try:
                hook.send_message_before(context)
            except Exception:
                log.warning("send_message_hook_failed", hook=type(hook).__name__, phase="before", exc_info=True)

    def run_after(self, context: SendMessageContext, result: SendResult | None, error: MQError | None) -> None:
        """Every send_message_after; exceptions are logged and ignored."""
        for hook in self.send_message:
            try:
                hook.send_message_after(context, result, error)
            except Exception:
                log.warning("send_message_hook_failed", hook=type(hook).__name__, phase="after", exc_info=True)


class TopicAccessList:
    """A check-forbidden hook that lets a send through only if its topic matches ``allow`` (empty: every
    topic) and does not match ``deny``. Patterns are shell-style (``orders-*``, ``*_DLQ``), case-sensitive.

    Raises NoPermissionError (NO_PERMISSION, 16): "Sending message to topic[T] is forbidden: the topic is in
    the deny list" / "...: the topic is not in the allow list".
    """

    __slots__ = ("allow", "deny")

    def __init__(self, allow: Iterable[str] = (), deny: Iterable[str] = ()) -> None:
        self.allow = tuple(allow)
        self.deny = tuple(deny)

    def refusal(self, topic: str) -> str | None:
        """Why ``topic`` is forbidden, or None when it may be sent to."""
        if any(fnmatch.fnmatchcase(topic, p) for p in self.deny):
            return f"Sending message to topic[{topic}] is forbidden: the topic is in the deny list"
        if self.allow and not any(fnmatch.fnmatchcase(topic, p) for p in self.allow):
            return f"Sending message to topic[{topic}] is forbidden: the topic is not in the allow list"
        return None

    def check_forbidden(self, context: SendMessageContext) -> None:
        remark = self.refusal(context.message.topic)
        if remark is not None:
            raise NoPermissionError(remark)


def load_hook(spec: str) -> object:
    """Build a plugin from ``"package.module:factory"`` (called with no arguments).

    Raises ValueError for a malformed spec, ImportError / AttributeError when it does not resolve."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"hook plugin must be 'package.module:factory', got {spec!r}")
    factory = getattr(importlib.import_module(module_name), attr)
    return factory()
