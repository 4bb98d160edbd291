"""The open-files limit of a service, raised to what the system allows.

A broker keeps one descriptor per CommitLog, ConsumeQueue and index file it has mapped, plus one per client
connection. Many systems start processes with a soft limit of 1,024 open files and a far higher hard limit
(systemd: 524,288): a broker of small files, or one with many queues, would fail to create its next file
(CREATE_MAPPED_FILE_FAILED, EMFILE) long before the hard limit. RocketMQ's deployment guide asks operators for
``ulimit -n 655350``; a service here raises its own soft limit to the hard limit at start-up, which needs no
privilege. Call once, at start-up, on the main thread.
"""

from __future__ import annotations

import resource


def raise_open_files_limit() -> int:
    """Set RLIMIT_NOFILE's soft limit to its hard limit and return the soft limit now in force.

    A hard limit of RLIM_INFINITY is left as the soft limit already is when it cannot be applied (some kernels
    refuse an infinite NOFILE); an OSError/ValueError from setrlimit leaves the limit unchanged.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (OSError, ValueError):
            return soft
        return hard
    return soft
