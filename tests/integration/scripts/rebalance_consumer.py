"""A push consumer process for the rebalance redelivery test.

Usage: rebalance_consumer.py NAMESRV GROUP TOPIC OUTPUT_FILE NAME

Reads TOPIC from its first offset with a listener taking about 5 ms a call, and appends one
line per received message to OUTPUT_FILE, `<queue id> <queue offset> <monotonic ns> <msg id>`,
written to the OS before the listener returns (so before the offset can be committed). Prints
"ready" once started and closes gracefully (committing offsets) on SIGTERM.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

from pocketmq.client import ConsumeFromWhere, MessageExt, PushConsumer

LISTENER_S = 0.005
BATCH = 4


def main() -> int:
    namesrv, group, topic, output, name = sys.argv[1:6]
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    descriptor = os.open(output, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    lock = threading.Lock()

    def listener(messages: list[MessageExt]) -> None:
        time.sleep(LISTENER_S)
        now = time.monotonic_ns()
        lines = "".join(
            f"{m.queue.queue_id} {m.queue_offset} {now} {m.msg_id}\n" for m in messages
        ).encode()
        with lock:
            os.write(descriptor, lines)

    consumer = PushConsumer(
        group,
        namesrv=namesrv,
        instance_name=name,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        consume_batch_max_size=BATCH,
        persist_interval_s=0.5,
    )
    consumer.subscribe(topic)
    consumer.register_listener(listener)
    consumer.start()
    print("ready", flush=True)
    stop.wait()
    consumer.close()
    os.close(descriptor)
    return 0


if __name__ == "__main__":
    sys.exit(main())
