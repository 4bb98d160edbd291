"""``python -m mq_local`` = the ``mqlocal`` console script."""

from mq_local.cli import main

main()
