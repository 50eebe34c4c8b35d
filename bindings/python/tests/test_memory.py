"""`fetch.buffer.max.bytes` bounds the process: the peak RSS (VmHWM) of a process reading a
backlog stays within its RSS once the consumer exists plus the bound plus BOUND_SLACK, for 16 and
64 MiB bounds, with and without half of the partitions paused; confluent-kafka (librdkafka, with
`queued.max.messages.kbytes` at the same bound) reads the same topic in the same run, beside it,
for comparison.

Each reader is a process of its own (memory_reader.py): 48 partitions of 1 KB records, a backlog
of about 260 MB, `assign()` from offset 0, `consume(100)` and 20 ms of work per call, for
READ_SECONDS (pausing the even partitions after PAUSE_AT seconds in the paused cases).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Dict, List, Tuple

import confluent_kafka
import pytest

import lagless

PARTITIONS = 48
RECORDS_PER_PARTITION = 5500
RECORD_BYTES = 1000
READ_SECONDS = 7.0
PAUSE_AT = 3.0
MIB = 1 << 20
# What a lagless process may hold beyond fetch.buffer.max.bytes: the README's "Memory." bullet
# states this figure and what it covers.
BOUND_SLACK = 8 * MIB
READER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "memory_reader.py")


@pytest.fixture(scope="module")
def backlog(bootstrap: str) -> str:
    """A topic of PARTITIONS partitions holding RECORDS_PER_PARTITION records of RECORD_BYTES
    each (uncompressed, 64 KiB batches)."""
    topic = f"py-memory-{os.getpid()}"
    lagless.create_topic(bootstrap, topic, PARTITIONS)
    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 20,
            "batch.size": 65536,
            "compression.type": "none",
            "queue.buffering.max.kbytes": 262144,
        }
    )
    failed: List[str] = []

    def delivered(err, _msg) -> None:
        if err is not None:
            failed.append(str(err))

    value = os.urandom(RECORD_BYTES)
    for i in range(RECORDS_PER_PARTITION):
        for p in range(PARTITIONS):
            while True:
                try:
                    producer.produce(topic, value=value, partition=p, on_delivery=delivered)
                    break
                except BufferError:
                    producer.poll(0.05)
        producer.poll(0)
    assert producer.flush(120) == 0, "the backlog was not all written"
    assert not failed, failed[:3]
    return topic


def read(client: str, bootstrap: str, topic: str, bound: int, pause: bool) -> subprocess.Popen:
    return subprocess.Popen(
        [
            sys.executable,
            READER,
            client,
            bootstrap,
            topic,
            str(PARTITIONS),
            str(bound),
            str(PAUSE_AT if pause else 0),
            str(READ_SECONDS),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def result(client: str, proc: subprocess.Popen) -> Dict[str, int]:
    out, err = proc.communicate(timeout=READ_SECONDS + 60)
    assert proc.returncode == 0, f"{client} reader failed ({proc.returncode}): {err[-2000:]}"
    lines = out.strip().splitlines()
    assert lines, f"{client} reader printed no result: {err[-2000:]}"
    return json.loads(lines[-1])


@pytest.mark.parametrize(
    "bound,pause",
    [(16 * MIB, False), (16 * MIB, True), (64 * MIB, False), (64 * MIB, True)],
    ids=["16MiB", "16MiB-paused", "64MiB", "64MiB-paused"],
)
def test_peak_rss_stays_within_the_bound_and_its_stated_slack(
    bootstrap: str, backlog: str, bound: int, pause: bool
) -> None:
    # Both readers at once, against the same topic: the same broker and machine load.
    procs: List[Tuple[str, subprocess.Popen]] = [
        (client, read(client, bootstrap, backlog, bound, pause)) for client in ("lagless", "confluent")
    ]
    try:
        got = {client: result(client, proc) for client, proc in procs}
    finally:
        # One reader failing must not leave the other running into the next case.
        for _, proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    for client, r in got.items():
        over = (r["hwm_kib"] - r["start_kib"]) / 1024
        print(
            f"{client} bound {bound // MIB} MiB{' paused' if pause else ''}: start "
            f"{r['start_kib'] / 1024:.1f} MiB, peak {r['hwm_kib'] / 1024:.1f} MiB "
            f"({over:.1f} MiB over the start), {r['records']} records, {r['after_pause']} "
            f"after the pause ({r['from_paused']} of paused partitions)"
        )
    # Both readers read (at 100 records per 20 ms, at least a few thousand records): the
    # comparison printed above is of two clients that fetched, not of one that sat idle.
    for client, r in got.items():
        assert r["records"] >= 5000, (client, r)
        assert r["bytes"] == r["records"] * RECORD_BYTES, (client, r)
    mine = got["lagless"]
    if pause:
        # The unpaused partitions go on after the pause, and the paused ones deliver nothing
        # more: the partitions really were paused while the bound held.
        assert mine["after_pause"] >= 1000, mine
        assert mine["from_paused"] == 0, mine
    else:
        assert mine["after_pause"] == 0 and mine["from_paused"] == 0, mine
    limit_kib = mine["start_kib"] + (bound + BOUND_SLACK) // 1024
    assert mine["hwm_kib"] <= limit_kib, (
        f"peak RSS {mine['hwm_kib'] / 1024:.1f} MiB is above start "
        f"{mine['start_kib'] / 1024:.1f} MiB + bound {bound // MIB} MiB + {BOUND_SLACK // MIB} MiB "
        f"by {(mine['hwm_kib'] - limit_kib) / 1024:.1f} MiB"
    )
