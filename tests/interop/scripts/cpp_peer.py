"""Runs inside the C++ client's virtualenv: the C++ side of the two-way client interop tests.

Usage:
  cpp_peer.py consume NAMESRV GROUP TOPIC EXPECTED TIMEOUT PROPERTY...
      A push consumer printing one JSON line per message with its id, body (hex), keys, tags
      and the named properties; stops after EXPECTED messages, when stdin closes, or TIMEOUT.
  cpp_peer.py batch NAMESRV TOPIC COUNT
      Sends COUNT messages as one batch (keys batch-i, tag TagBatch, property index=i).
Prints `{"started": true}` once ready and a summary line at the end.
"""

import os
import sys
import threading
import time

from json_lines import emit
from rocketmq.client import Message, Producer, PushConsumer


def text(value):
    return value.decode() if isinstance(value, bytes) else value


def consume(namesrv, group, topic, expected, timeout, names):
    lock = threading.Lock()
    count = [0]

    def on_message(message):
        line = {
            "msg_id": message.id,
            "body_hex": message.body.hex(),
            "keys": text(message.keys),
            "tags": text(message.tags),
            "properties": {name: text(message.get_property(name)) for name in names},
        }
        with lock:
            count[0] += 1
            emit(line)

    consumer = PushConsumer(group)
    consumer.set_namesrv_addr(namesrv)
    consumer.subscribe(topic, on_message, "*")
    consumer.start()
    emit({"started": True})
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    deadline = time.time() + timeout
    while time.time() < deadline and not stop.is_set():
        with lock:
            if count[0] >= expected:
                break
        time.sleep(0.1)
    consumer.shutdown()
    emit({"summary": True, "received": count[0]})


def batch(namesrv, topic, count):
    producer = Producer("PID_CPP_BATCH")
    producer.set_namesrv_addr(namesrv)
    producer.start()
    emit({"started": True})
    messages = []
    for index in range(count):
        message = Message(topic)
        message.set_keys(f"batch-{index}")
        message.set_tags("TagBatch")
        message.set_property("index", str(index))
        message.set_body(f"batch-body-{index}")
        messages.append(message)
    result = producer.send_batch(messages)
    producer.shutdown()
    emit({"summary": True, "status": int(result.status)})


def main():
    command, namesrv = sys.argv[1], sys.argv[2]
    if command == "consume":
        group, topic, expected, timeout = sys.argv[3:7]
        consume(namesrv, group, topic, int(expected), float(timeout), sys.argv[7:])
    else:
        topic, count = sys.argv[3:5]
        batch(namesrv, topic, int(count))
    return 0


if __name__ == "__main__":
    # A client object still alive at interpreter exit can hang the C++ library: leave at once.
    code = main()
    sys.stdout.flush()
    os._exit(code)
