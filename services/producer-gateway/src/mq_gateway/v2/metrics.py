"""RPC latency of the v2 API in the gateway's ``rocketmq_rpc_latency`` histogram.

Labels: protocol_type="grpc_v2", method (the RPC's name), response_code (the v2 Code name of the answer's status),
language (the x-mq-language header when it is one of RocketMQ's LanguageCode names, else OTHER: bounded). The
histogram children are looked up once per label tuple and cached (the table is bounded by the label domains).
Runs on the gateway's asyncio loop, once per RPC. Mirrors the proxy's use of
org.apache.rocketmq.remoting.metrics.RemotingMetricsManager (rocketmq_rpc_latency).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from prometheus_client import Histogram

from mq_gateway.v2.codes import Code

if TYPE_CHECKING:
    from mq_gateway.metrics import GatewayMetrics

PROTOCOL_TYPE: Final = "grpc_v2"
OTHER_LANGUAGE: Final = "OTHER"
# org.apache.rocketmq.remoting.protocol.LanguageCode (Node.js SDKs send HTTP).
LANGUAGES: Final = frozenset(
    {"JAVA", "CPP", "DOTNET", "PYTHON", "DELPHI", "ERLANG", "RUBY", "OTHER", "HTTP", "GO", "PHP", "OMS", "RUST",
     "NODE_JS"}
)  # fmt: skip


def language_label(language: str) -> str:
    """``language`` when it is a known LanguageCode name, else OTHER."""
    return language if language in LANGUAGES else OTHER_LANGUAGE


class V2RpcMetrics:
    """Observes v2 RPCs into ``metrics.rpc_latency``."""

    def __init__(self, metrics: GatewayMetrics) -> None:
        self._family = metrics.rpc_latency
        self._children: dict[tuple[str, int, str], Histogram] = {}

    def observe(self, method: str, code: int, language: str, elapsed_ms: float) -> None:
        """One RPC ``method`` answered ``code`` after ``elapsed_ms`` for a client of ``language``."""
        key = (method, code, language if language in LANGUAGES else OTHER_LANGUAGE)
        child = self._children.get(key)
        if child is None:
            name = Code.Name(code) if code in Code.values() else str(code)  # type: ignore[arg-type]
            child = self._family.child(PROTOCOL_TYPE, method, name, key[2])
            self._children[key] = child
        child.observe(elapsed_ms)
