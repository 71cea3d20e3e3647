"""Runs inside the C++ client's virtualenv: a push consumer printing one JSON line per message.

Usage: cpp_push_consume.py NAMESRV GROUP TOPIC EXPECTED TIMEOUT [--broadcast] [--tags EXPR]
           [--credentials ACCESS_KEY SECRET_KEY]
Prints `{"started": true}` once started, then one line per message, then a summary; it stops
when EXPECTED distinct messages arrived (delivery is at least once: a redelivered message is
printed again but counted once towards EXPECTED), when stdin closes (the test stops it), or
after TIMEOUT seconds.
"""

import argparse
import os
import sys
import threading
import time

from json_lines import emit
from rocketmq.client import MessageModel, PushConsumer


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("namesrv")
    parser.add_argument("group")
    parser.add_argument("topic")
    parser.add_argument("expected", type=int)
    parser.add_argument("timeout", type=float)
    parser.add_argument("--broadcast", action="store_true")
    parser.add_argument("--tags", default="*")
    parser.add_argument("--instance", default="")
    parser.add_argument("--summary-only", action="store_true", help="no line per message")
    parser.add_argument("--credentials", nargs=2, metavar=("ACCESS_KEY", "SECRET_KEY"))
    args = parser.parse_args()
    lock = threading.Lock()
    count = [0]
    distinct = set()
    last = [0.0]

    def on_message(message):
        if args.summary_only:
            with lock:
                count[0] += 1
                distinct.add(message.id)
                last[0] = time.time()
            return
        line = {
            "msg_id": message.id,
            "body": message.body.decode(),
            "keys": message.keys.decode() if isinstance(message.keys, bytes) else message.keys,
            "tags": message.tags.decode() if isinstance(message.tags, bytes) else message.tags,
            "queue_id": message.queue_id,
            "queue_offset": message.queue_offset,
            "index": message.get_property("index").decode()
            if isinstance(message.get_property("index"), bytes)
            else message.get_property("index"),
        }
        with lock:
            count[0] += 1
            distinct.add(message.id)
        emit(line)

    model = MessageModel.BROADCASTING if args.broadcast else MessageModel.CLUSTERING
    consumer = PushConsumer(args.group, message_model=model)
    consumer.set_namesrv_addr(args.namesrv)
    if args.credentials:
        consumer.set_session_credentials(*args.credentials, "ALIYUN")
    if args.instance:
        consumer.set_instance_name(args.instance)
    consumer.subscribe(args.topic, on_message, args.tags)
    consumer.start()
    started = time.time()
    emit({"started": True})
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    deadline = time.time() + args.timeout
    while time.time() < deadline and not stop.is_set():
        with lock:
            if args.expected and len(distinct) >= args.expected:
                break
        time.sleep(0.1)
    consumer.shutdown()
    seconds = (last[0] - started) if last[0] else None
    summary = {"summary": True, "received": count[0], "distinct": len(distinct), "seconds": seconds}
    emit(summary)
    return 0


if __name__ == "__main__":
    # A client object still alive at interpreter exit can hang the C++ library: leave at once.
    code = main()
    sys.stdout.flush()
    os._exit(code)
