"""One reader of a backlog in a process of its own, for the memory tests (test_memory.py) and the
bench's memory row: creates a consumer of CLIENT (lagless or confluent-kafka), assigns every
partition of TOPIC from offset 0, takes `consume(100)` and works 20 ms per call for SECONDS
(pausing the even partitions after PAUSE_AT seconds when PAUSE_AT > 0), then prints one JSON line:

    {"start_kib": ..., "hwm_kib": ..., "records": ..., "after_pause": ..., "from_paused": ...,
     "bytes": ...}

`start_kib` is the process' peak RSS (VmHWM in /proc/self/status) once the consumer exists and
before it fetches; `hwm_kib` its peak RSS at the end; `after_pause` the records of unpaused
partitions read after the pause, `from_paused` those of paused partitions read after it (none,
for a client that honours the pause). BOUND is the prefetch bound in bytes: lagless'
`fetch.buffer.max.bytes`, librdkafka's `queued.max.messages.kbytes` (its bound on the prefetch
queue of a consumer, in KiB).

    python memory_reader.py CLIENT BOOTSTRAP TOPIC PARTITIONS BOUND PAUSE_AT SECONDS
"""

from __future__ import annotations

import json
import sys
import time


def vm_hwm_kib() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise RuntimeError("no VmHWM in /proc/self/status")


def main() -> None:
    client, bootstrap, topic = sys.argv[1], sys.argv[2], sys.argv[3]
    partitions, bound = int(sys.argv[4]), int(sys.argv[5])
    pause_at, seconds = float(sys.argv[6]), float(sys.argv[7])
    config = {
        "bootstrap.servers": bootstrap,
        "group.id": "memory-reader",
        "enable.auto.commit": False,
    }
    if client == "lagless":
        import lagless as kafka

        config["fetch.buffer.max.bytes"] = bound
    elif client == "confluent":
        import confluent_kafka as kafka

        config["queued.max.messages.kbytes"] = bound // 1024
    else:
        raise SystemExit(f"unknown client {client}")
    consumer = kafka.Consumer(config)
    start = vm_hwm_kib()
    tps = [kafka.TopicPartition(topic, p, 0) for p in range(partitions)]
    consumer.assign(tps)
    paused = False
    records = after_pause = from_paused = size = 0
    began = time.monotonic()
    while True:
        elapsed = time.monotonic() - began
        if elapsed >= seconds:
            break
        if pause_at > 0 and not paused and elapsed >= pause_at:
            consumer.pause([kafka.TopicPartition(topic, p) for p in range(0, partitions, 2)])
            paused = True
        for m in consumer.consume(100, timeout=1.0):
            if client == "confluent":
                if m.error():
                    raise SystemExit(f"{client}: {m.error()}")
                value, partition = m.value(), m.partition()
            else:
                value, partition = m.value, m.partition
            records += 1
            size += len(value)
            if paused and partition % 2 == 1:
                after_pause += 1
            elif paused:
                from_paused += 1
        time.sleep(0.02)
    hwm = vm_hwm_kib()
    consumer.close()
    print(
        json.dumps(
            {
                "client": client,
                "start_kib": start,
                "hwm_kib": hwm,
                "records": records,
                "after_pause": after_pause,
                "from_paused": from_paused,
                "bytes": size,
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
