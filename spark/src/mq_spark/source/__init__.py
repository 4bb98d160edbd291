"""The ``rocketmq`` source: ``spark.read.format("rocketmq")`` (batch) and ``spark.readStream.format("rocketmq")``.

Modules: :mod:`.options` (the reader's options), :mod:`.offsets` (queue offsets: the ``startingOffsets`` /
``endingOffsets`` JSON and the streaming checkpoint's offsets), :mod:`.schema` (the rows' columns and their Arrow
form), :mod:`.plan` (offsets resolved against the brokers, ranges cut into Spark partitions, run on the
driver's Python worker), :mod:`.pull` (one partition pulled through mq_client's PullConsumer, on an executor's
Python worker), :mod:`.reader` (the DataSourceReader / DataSourceStreamReader).
"""
