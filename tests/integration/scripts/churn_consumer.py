"""A push consumer process for the rebalance churn test.

Usage: churn_consumer.py NAMESRV GROUP TOPIC OUTPUT_FILE NAME

Appends every received message id to OUTPUT_FILE (one per line, written to the OS before the
listener returns, so a SIGKILL loses nothing that was acknowledged), prints "ready" once
started, and closes gracefully (committing offsets) on SIGTERM.
"""

from __future__ import annotations

import os
import signal
import sys
import threading

from pocketmq.client import MessageExt, PushConsumer


def main() -> int:
    namesrv, group, topic, output, name = sys.argv[1:6]
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    descriptor = os.open(output, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    lock = threading.Lock()

    def listener(messages: list[MessageExt]) -> None:
        lines = "".join(f"{m.msg_id}\n" for m in messages).encode()
        with lock:
            os.write(descriptor, lines)

    consumer = PushConsumer(group, namesrv=namesrv, instance_name=name, consume_thread_count=4)
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
