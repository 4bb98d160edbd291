"""The gateway's send-path matrix: the integration tests here run once per combination of the send-path switches
a user can set (docs/performance.md, "Send paths"). One remains: ``MQ_NO_EXTENSIONS`` (C paths ``mq_gateway._wire`` and
``mq_broker.store._native`` on, or off for the Python paths); the gateway's own switches were removed once each
"off" measured slower. Under ``MQ_NO_EXTENSIONS=1`` (``make test-pure``) only the Python column runs: that target
promises no C path anywhere.
"""

from __future__ import annotations

from collections.abc import Mapping

import pytest
from mq_common.extensions import NO_EXTENSIONS_ENV, extensions_disabled

# id -> the environment every service of a cluster gets (ClusterSpec.common_env)
SEND_PATH_MATRIX: dict[str, Mapping[str, str]] = {
    "c-paths": {NO_EXTENSIONS_ENV: "0"},
    "python-paths": {NO_EXTENSIONS_ENV: "1"},
}
if extensions_disabled():
    del SEND_PATH_MATRIX["c-paths"]


@pytest.fixture(scope="module", params=list(SEND_PATH_MATRIX), ids=list(SEND_PATH_MATRIX))
def send_path_env(request: pytest.FixtureRequest) -> Mapping[str, str]:
    """One cell of the send-path matrix: the ``common_env`` of the module's cluster."""
    return SEND_PATH_MATRIX[str(request.param)]
