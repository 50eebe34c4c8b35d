"""The README's Python example: produce keyed records, consume them in a group with a rebalance
listener that commits before partitions move, and print a summary.

    LAGLESS_BOOTSTRAP=127.0.0.1:9092 python3 examples/python/demo.py
"""
import collections
import os
import sys
import time

import lagless

bootstrap = os.environ.get("LAGLESS_BOOTSTRAP", "127.0.0.1:9092")
topic = f"demo-py-{os.getpid()}"
lagless.create_topic(bootstrap, topic, partitions=3)

with lagless.Producer({"bootstrap.servers": bootstrap, "compression.type": "zstd"}) as producer:
    for i in range(1000):
        producer.produce(topic, value=f"order {i}".encode(), key=f"customer-{i % 17}".encode())
    producer.flush(30)


class CommitOnRevoke(lagless.RebalanceListener):
    def on_partitions_assigned(self, consumer, partitions):
        print("assigned:", ", ".join(f"{p.topic}-{p.partition}" for p in partitions))

    def on_partitions_revoked(self, consumer, partitions):
        consumer.commit()  # runs on this thread, inside poll()/consume()/close()


counts: "collections.Counter[int]" = collections.Counter()
config = {"bootstrap.servers": bootstrap, "group.id": "demo-py", "auto.offset.reset": "earliest",
          "enable.auto.commit": False}
with lagless.Consumer(config) as consumer:
    consumer.subscribe([topic], CommitOnRevoke())
    deadline = time.monotonic() + 60
    while sum(counts.values()) < 1000 and time.monotonic() < deadline:
        for msg in consumer.consume(500, timeout=1.0):
            counts[msg.partition] += 1
        consumer.commit(asynchronous=True)
    consumer.commit()

print(f"consumed {sum(counts.values())} records:", dict(sorted(counts.items())))
sys.exit(0 if sum(counts.values()) == 1000 else 1)
