#!/usr/bin/env python3
"""The librdkafka side of the interoperability tests (confluent-kafka), with the command line and
JSON lines of lagless' `lagless_tool` example and of java/InteropClient.java.

    rdkafka_client.py produce --bootstrap B --topic T --count N [--keyed] [--key-prefix P]
        [--binary] [--compression C] [--acks A] [--quiet]
    rdkafka_client.py consume --bootstrap B --topic T [--group G] [--assign-all] [--count N]
        [--timeout-ms MS] [--strategy range|cooperative-sticky] [--session-timeout-ms X]
        [--max-poll-interval-ms Y] [--commit] [--hex]

The producer partitions keys with `murmur2_random`, the Java client's partitioner (librdkafka's
default, `consistent_random`, hashes with CRC32 and places keys elsewhere).  --binary appends
`binary_tail(i)` to each value and adds a header "bin" with it.
"""

from __future__ import annotations

import argparse
import json
import signal
import struct
import sys
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition


def binary_tail(i: int) -> bytes:
    """What --binary appends to record i's value (the same bytes as InteropClient.binaryTail)."""
    return b"\x00\xff\xfe\x80" + struct.pack(">I", i & 0xFFFFFFFF)


def emit(obj) -> None:
    sys.stdout.write(json.dumps(obj, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def as_text(b: bytes | None, hex_: bool):
    if b is None:
        return None
    return b.hex() if hex_ else b.decode("utf-8", "replace")


def parts_json(parts) -> list:
    return sorted([tp.topic, tp.partition] for tp in parts)


def produce(a) -> int:
    p = Producer({
        "bootstrap.servers": a.bootstrap,
        "client.id": "interop-rdkafka-producer",
        "partitioner": "murmur2_random",
        "compression.type": a.compression,
        "acks": a.acks,
        "linger.ms": 5,
    })
    results: dict[int, tuple] = {}
    errors: list = []

    def done(i, key):
        def cb(err, msg):
            if err is not None:
                errors.append(err)
            else:
                results[i] = (msg.partition(), msg.offset(), key)
        return cb

    for i in range(a.count):
        key = f"{a.key_prefix}{i}" if a.keyed else None
        value = f"value-{i}".encode()
        headers = [("h", str(i).encode())]
        if a.binary:
            value += binary_tail(i)
            headers.append(("bin", binary_tail(i)))
        while True:
            try:
                p.produce(a.topic, value=value, key=key.encode() if key else None, headers=headers,
                          on_delivery=done(i, key))
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    left = p.flush(60)
    if left or errors or len(results) != a.count:
        print(f"rdkafka_client: {left} undelivered, errors: {errors[:3]}", file=sys.stderr)
        return 1
    per: dict[str, int] = {}
    for i in range(a.count):
        part, off, key = results[i]
        per[str(part)] = per.get(str(part), 0) + 1
        if not a.quiet:
            emit({"partition": part, "offset": off, "key": key})
    emit({"event": "produced", "count": a.count, "partitions": per})
    return 0


def consume(a) -> int:
    stop = {"flag": False}

    def on_term(_sig, _frame):
        stop["flag"] = True

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    conf = {
        "bootstrap.servers": a.bootstrap,
        "client.id": "interop-rdkafka-consumer",
        "group.id": a.group or "interop-rdkafka-unused",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        # Offsets are stored for the records printed only: a commit (on_revoke, close) must not
        # pass a record that was received but not printed.
        "enable.auto.offset.store": False,
        "enable.partition.eof": False,
    }
    if a.strategy:
        conf["partition.assignment.strategy"] = a.strategy
    if a.session_timeout_ms:
        conf["session.timeout.ms"] = a.session_timeout_ms
        conf["heartbeat.interval.ms"] = max(100, a.session_timeout_ms // 3)
    if a.max_poll_interval_ms:
        conf["max.poll.interval.ms"] = a.max_poll_interval_ms
    for kv in a.config:
        k, sep, v = kv.partition("=")
        if not sep:
            print(f"rdkafka_client: --config takes KEY=VALUE, got `{kv}`", file=sys.stderr)
            return 2
        conf[k] = v
    c = Consumer(conf)
    subscribe = a.group is not None and not a.assign_all

    def report(event, consumer, parts, leaving):
        assignment = set((tp.topic, tp.partition) for tp in consumer.assignment())
        given = set((tp.topic, tp.partition) for tp in parts)
        if leaving:
            assignment -= given
        else:
            assignment |= given  # librdkafka assigns after the callback returns
        emit({"event": event, "partitions": sorted(list(x) for x in given),
              "assignment": sorted(list(x) for x in assignment), "generation": -1})

    def on_assign(consumer, parts):
        report("assigned", consumer, parts, False)

    def on_revoke(consumer, parts):
        if a.commit and parts:
            try:
                consumer.commit(asynchronous=False)
            except KafkaException as e:
                print(f"rdkafka_client: commit in on_revoke failed: {e}", file=sys.stderr)
        report("revoked", consumer, parts, True)

    def on_lost(consumer, parts):
        report("lost", consumer, parts, True)

    if subscribe:
        c.subscribe([a.topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)
    else:
        md = c.list_topics(a.topic, timeout=30)
        parts = [TopicPartition(a.topic, p, OFFSET_BEGINNING) for p in sorted(md.topics[a.topic].partitions)]
        c.assign(parts)
        emit({"event": "assigned", "partitions": parts_json(parts), "assignment": parts_json(parts),
              "generation": -1})

    records = 0
    last = time.monotonic()
    reason = "error"
    rc = 0
    try:
        while True:
            if stop["flag"]:
                reason = "signal"
                break
            if a.count is not None and records >= a.count:
                reason = "count"
                break
            if a.timeout_ms is not None and (time.monotonic() - last) * 1000 >= a.timeout_ms:
                reason = "idle"
                break
            msgs = c.consume(num_messages=500, timeout=0.1)
            got = 0
            out = []
            nxt = {}
            rewind = {}
            for m in msgs:
                if m.error():
                    if m.error().code() != KafkaError._PARTITION_EOF:
                        print(f"rdkafka_client: {m.error()}", file=sys.stderr)
                    continue
                if a.count is not None and records + got >= a.count:
                    # Print (and commit) exactly --count records; rewind to the first one not
                    # printed, so that committing the position does not skip it.
                    rewind.setdefault((m.topic(), m.partition()), m.offset())
                    continue
                got += 1
                nxt[(m.topic(), m.partition())] = m.offset() + 1
                out.append(json.dumps({
                    "partition": m.partition(), "offset": m.offset(),
                    "key": as_text(m.key(), a.hex), "value": as_text(m.value(), a.hex),
                    "headers": {k: as_text(v, a.hex) for k, v in (m.headers() or [])},
                }, separators=(",", ":")))
            for (t, p), o in rewind.items():
                c.seek(TopicPartition(t, p, o))
            if got:
                records += got
                last = time.monotonic()
                sys.stdout.write("\n".join(out) + "\n")
                sys.stdout.flush()
                if a.group:
                    c.store_offsets(offsets=[TopicPartition(t, p, o) for (t, p), o in nxt.items()])
                if a.commit:
                    try:
                        c.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in nxt.items()],
                                 asynchronous=False)
                    except KafkaException as e:
                        print(f"rdkafka_client: commit failed: {e}", file=sys.stderr)
    except KafkaException as e:
        print(f"rdkafka_client: consume failed: {e}", file=sys.stderr)
        rc = 1
    c.close()
    emit({"event": "done", "records": records, "reason": reason})
    return rc


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=["produce", "consume"])
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--count", type=int)
    ap.add_argument("--keyed", action="store_true")
    ap.add_argument("--key-prefix", default="key-")
    ap.add_argument("--binary", action="store_true")
    ap.add_argument("--compression", default="none")
    ap.add_argument("--acks", default="all")
    ap.add_argument("--quiet", action="store_true")
    ap.add_argument("--group")
    ap.add_argument("--assign-all", action="store_true")
    ap.add_argument("--timeout-ms", type=int)
    ap.add_argument("--strategy")
    ap.add_argument("--session-timeout-ms", type=int)
    ap.add_argument("--max-poll-interval-ms", type=int)
    ap.add_argument("--commit", action="store_true")
    ap.add_argument("--hex", action="store_true")
    ap.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                    help="a librdkafka consumer setting (repeatable)")
    a = ap.parse_args()
    if a.command == "produce":
        if a.count is None:
            ap.error("produce needs --count")
        return produce(a)
    return consume(a)


if __name__ == "__main__":
    sys.exit(main())
