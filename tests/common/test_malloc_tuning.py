"""mq_common.malloc_tuning: buffers of a batch's size are reused instead of faulted in again on every round."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest
from mq_common.malloc_tuning import tune_malloc

# Eight 300 KB buffers at once, freed together, 200 rounds: the allocation pattern of a gateway or broker with
# several batches in flight. Prints the minor page faults of the rounds after the first.
ROUNDS_SCRIPT = """
import resource, sys
from mq_common.malloc_tuning import tune_malloc
if sys.argv[1] == "tuned":
    assert tune_malloc({})
def round_():
    held = [b"x" * 300_000 for _ in range(8)]
    del held
round_()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(200):
    round_()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _faults(mode: str) -> int:
    env = {"PATH": "/usr/bin:/bin"}  # no MALLOC_* / GLIBC_TUNABLES from the caller
    out = subprocess.run([sys.executable, "-c", ROUNDS_SCRIPT, mode], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    return int(out.stdout)


def test_tuned_malloc_reuses_batch_sized_buffers() -> None:
    if platform.libc_ver()[0] != "glibc":
        pytest.skip("glibc only")
    untuned, tuned = _faults("default"), _faults("tuned")
    assert untuned > 10_000, untuned  # glibc gives the heap top back and faults it in again every round
    assert tuned < untuned // 20, (tuned, untuned)


@pytest.mark.parametrize(
    "knob", ["MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TOP_PAD_", "GLIBC_TUNABLES"]
)
def test_an_operator_setting_of_glibc_is_left_alone(knob: str) -> None:
    assert tune_malloc({knob: "1"}) is False
