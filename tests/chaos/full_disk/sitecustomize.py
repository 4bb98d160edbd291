"""A disk that fills and empties on demand, for one broker process of the HA chaos rounds (test_chaos_ha.py).

Python imports ``sitecustomize`` at start-up from the first ``sys.path`` entry that has it; the test puts this folder
first on the broker's PYTHONPATH and names a flag file in CHAOS_FULL_DISK_FLAG. While that file exists, ``os.statvfs``
reports every file system of the process with no free block (f_bfree = f_bavail = 0), so the store's clean service
(mq_broker.store.disk) measures it 100 % used and sets DISK_FULL; once the file is removed the real figures come back
and the next clean round clears the flag. Nothing is written differently: only the measurement is faked, which is
what a real full partition changes first, deterministic and without root (no small file system to mount).
"""

from __future__ import annotations

import os

_FLAG = os.environ.get("CHAOS_FULL_DISK_FLAG", "")
_real_statvfs = os.statvfs


def _statvfs(path: int | str | bytes | os.PathLike[str] | os.PathLike[bytes]) -> os.statvfs_result:
    st = _real_statvfs(path)
    if not os.path.exists(_FLAG):
        return st
    full = (st.f_bsize, st.f_frsize, st.f_blocks, 0, 0, st.f_files, st.f_ffree, st.f_favail, st.f_flag, st.f_namemax)
    return os.statvfs_result(full)


if _FLAG:
    os.statvfs = _statvfs
