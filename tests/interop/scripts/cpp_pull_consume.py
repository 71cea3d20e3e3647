"""Runs inside the C++ client's virtualenv: reads every queue of a topic from offset 0.

Usage: cpp_pull_consume.py NAMESRV GROUP TOPIC; one JSON line per message, then a summary.
"""

import argparse
import os
import sys

from json_lines import emit
from rocketmq.client import PullConsumer


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("namesrv")
    parser.add_argument("group")
    parser.add_argument("topic")
    args = parser.parse_args()
    consumer = PullConsumer(args.group)
    consumer.set_namesrv_addr(args.namesrv)
    consumer.start()
    count = 0
    try:
        for message in consumer.pull(args.topic):
            count += 1
            emit(
                {
                    "msg_id": message.id,
                    "body": message.body.decode(),
                    "queue_id": message.queue_id,
                    "queue_offset": message.queue_offset,
                }
            )
    finally:
        consumer.shutdown()
    emit({"summary": True, "received": count})
    return 0


if __name__ == "__main__":
    # A client object still alive at interpreter exit can hang the C++ library: leave at once.
    code = main()
    sys.stdout.flush()
    os._exit(code)
