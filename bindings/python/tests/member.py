"""A group member in its own process, for the tests: prints its assignment changes as JSON lines
on stdout and obeys commands on stdin ("drop": lose the consumer without close(); "close";
"exit").

usage: member.py BOOTSTRAP TOPIC GROUP [CONFIG_JSON]
"""

from __future__ import annotations

import gc
import json
import queue
import sys
import threading
import time

import lagless


def say(**event: object) -> None:
    print(json.dumps(event), flush=True)


def main() -> None:
    bootstrap, topic, group = sys.argv[1:4]
    extra = json.loads(sys.argv[4]) if len(sys.argv) > 4 else {}
    commands: "queue.Queue[str]" = queue.Queue()

    def read_stdin() -> None:
        for line in sys.stdin:
            commands.put(line.strip())
        commands.put("exit")

    threading.Thread(target=read_stdin, daemon=True).start()

    def parts(tps: "list[lagless.TopicPartition]") -> "list[int]":
        return sorted(tp.partition for tp in tps)

    config = {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest"}
    config.update(extra)
    consumer: "lagless.Consumer | None" = lagless.Consumer(config)
    consumer.subscribe(
        [topic],
        on_assign=lambda c, tps: say(event="assigned", partitions=parts(tps)),
        on_revoke=lambda c, tps: say(event="revoked", partitions=parts(tps)),
        on_lost=lambda c, tps: say(event="lost", partitions=parts(tps)),
    )
    say(event="subscribed")
    while True:
        try:
            cmd = commands.get_nowait()
        except queue.Empty:
            cmd = ""
        if cmd == "drop":
            del consumer
            consumer = None
            gc.collect()
            say(event="dropped")
        elif cmd == "close" and consumer is not None:
            consumer.close()
            say(event="closed")
        elif cmd == "exit":
            return
        if consumer is not None:
            try:
                consumer.poll(0.1)
            except lagless.ClosedError:
                consumer = None
        else:
            time.sleep(0.1)


if __name__ == "__main__":
    main()
