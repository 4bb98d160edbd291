"""The publish job's script inside the pyrocketmq-spark image (/opt/pyrocketmq/jobs/publish_flights.py).

``spark-submit local:///opt/pyrocketmq/jobs/publish_flights.py --gateway <host:port> --namesrv <host:port>``
or ``python /opt/pyrocketmq/jobs/publish_flights.py ...``: runs mq_spark.jobs.publish_flights.main; its last
stdout line is the summary JSON, exit code 0 when every row was published.
"""

import sys

from mq_spark.jobs.publish_flights import main

if __name__ == "__main__":
    sys.exit(main())
