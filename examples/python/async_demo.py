"""The README's asyncio example: produce 1000 keyed records with lagless.aio.Producer, consume
them in a group with lagless.aio.Consumer and a coroutine listener that commits before
partitions move; exit non-zero if any record is missing.

    LAGLESS_BOOTSTRAP=127.0.0.1:9092 python3 examples/python/async_demo.py
"""
import asyncio
import os
import sys
import time
from typing import List, Set, Tuple

import lagless
import lagless.aio

N = 1000


class CommitOnRevoke(lagless.aio.RebalanceListener):
    async def on_partitions_assigned(self, consumer: lagless.aio.Consumer, partitions: List[lagless.TopicPartition]) -> None:
        print("assigned:", ", ".join(f"{p.topic}-{p.partition}" for p in partitions))

    async def on_partitions_revoked(self, consumer: lagless.aio.Consumer, partitions: List[lagless.TopicPartition]) -> None:
        await consumer.commit()  # inside the consume() that brought the change


async def main() -> int:
    bootstrap = os.environ.get("LAGLESS_BOOTSTRAP", "127.0.0.1:9092")
    topic = f"demo-aio-{os.getpid()}"
    lagless.create_topic(bootstrap, topic, partitions=3)

    async with lagless.aio.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5}) as producer:
        # Each send() returns (partition, offset) once the broker has the record.
        sends = [producer.send(topic, value=f"order {i}", key=f"customer-{i % 17}") for i in range(N)]
        delivered = await asyncio.gather(*sends)
    print(f"produced {len(delivered)} records")

    seen: Set[Tuple[int, int]] = set()
    config = {"bootstrap.servers": bootstrap, "group.id": f"demo-aio-{os.getpid()}",
              "auto.offset.reset": "earliest", "enable.auto.commit": False}
    async with lagless.aio.Consumer(config) as consumer:
        consumer.subscribe([topic], CommitOnRevoke())
        deadline = time.monotonic() + 60
        while len(seen) < N and time.monotonic() < deadline:
            for msg in await consumer.consume(500, timeout=1.0):
                seen.add((msg.partition, msg.offset))
        await consumer.commit()

    missing = set(delivered) - seen
    print(f"consumed {len(seen)} records, {len(missing)} missing")
    return 0 if not missing and len(seen) == N else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
