"""Quick gateway throughput check, coalescing off vs on (not a test; run by hand):

    uv run --frozen python tests/gateway/coalesce_throughput.py [--seconds 5]

For each setting it starts a LocalCluster (ASYNC_FLUSH, 2 brokers, auto-create) on 127.0.0.1, then runs
(a) single Sends of 1 KiB from 64 concurrent clients and (b) SendBatch(100) of 1 KiB from 4 clients, each for
a bounded time, and prints msgs/s and p50/p99 call latency.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from mq.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from mq_common.channels import ChannelPool
from mq_local.cluster import ClusterSpec, LocalCluster
from mq_local.ports import PortLayout

BODY = b"x" * 1024


async def load(addr: str, clients: int, batch: int, seconds: float) -> tuple[float, float, float, int]:
    pool = ChannelPool()
    stub = gateway_pb2_grpc.ProducerGatewayStub(pool.get(addr))
    msg = gateway_pb2.Message(topic="CoalesceBench", body=BODY)
    warm = await stub.Send(gateway_pb2.SendRequest(message=msg), timeout=10)
    assert warm.result.code == 0, warm.result.remark
    latencies: list[float] = []
    failed = 0
    sent = 0
    deadline = time.monotonic() + seconds

    async def client() -> None:
        nonlocal failed, sent
        while time.monotonic() < deadline:
            t0 = time.perf_counter()
            if batch == 1:
                codes = [(await stub.Send(gateway_pb2.SendRequest(message=msg), timeout=10)).result.code]
            else:
                req = gateway_pb2.SendBatchRequest(messages=[msg] * batch)
                codes = [r.code for r in (await stub.SendBatch(req, timeout=10)).results]
            latencies.append((time.perf_counter() - t0) * 1000)
            sent += len(codes)
            failed += sum(1 for c in codes if c != 0)

    begin = time.monotonic()
    await asyncio.gather(*(client() for _ in range(clients)))
    elapsed = time.monotonic() - begin
    await pool.close()
    q = statistics.quantiles(latencies, n=100)
    return sent / elapsed, q[49], q[98], failed


def run(coalesce: bool, seconds: float) -> list[str]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        spec = ClusterSpec(
            data_dir=Path(tmp),
            ports=PortLayout.free(2),
            flush_disk_type="ASYNC_FLUSH",
            auto_create_topic_enable=True,
            gateway_env={"MQ_GATEWAY_COALESCE_ENABLE": str(coalesce).lower()},
            log_level="WARNING",
            start_wait_s=60.0,
        )
        with LocalCluster(spec) as cluster:
            for name, clients, batch in (("Send x64", 64, 1), ("SendBatch(100) x4", 4, 100)):
                rate, p50, p99, failed = asyncio.run(load(cluster.gateway_addr, clients, batch, seconds))
                rows.append(
                    f"{'on ' if coalesce else 'off'}  {name:<18} {rate:>9.0f} msgs/s  p50 {p50:6.1f} ms  "
                    f"p99 {p99:6.1f} ms  failed {failed}"
                )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args()
    for coalesce in (False, True):
        for row in run(coalesce, args.seconds):
            print(row, flush=True)


if __name__ == "__main__":
    main()
