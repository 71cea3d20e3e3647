"""Runs inside the C++ client's virtualenv: sends messages, prints one JSON line per result.

Usage: cpp_produce.py NAMESRV TOPIC COUNT [--mode sync|oneway|mixed] [--start N]
           [--keep-going SECONDS] [--credentials ACCESS_KEY SECRET_KEY]
With --keep-going, send failures are reported and sending goes on until COUNT sends succeeded
or SECONDS passed (for broker restarts under load).
"""

import argparse
import os
import sys
import time

from json_lines import emit
from rocketmq.client import Message, Producer


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("namesrv")
    parser.add_argument("topic")
    parser.add_argument("count", type=int)
    parser.add_argument("--mode", default="sync", choices=["sync", "oneway", "mixed"])
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--group", default="PID_INTEROP")
    parser.add_argument("--keep-going", type=float, default=0.0)
    parser.add_argument("--size", type=int, default=0, help="pad bodies to this many bytes")
    parser.add_argument("--credentials", nargs=2, metavar=("ACCESS_KEY", "SECRET_KEY"))
    args = parser.parse_args()
    producer = Producer(args.group)
    producer.set_namesrv_addr(args.namesrv)
    if args.credentials:
        producer.set_session_credentials(*args.credentials, "ALIYUN")
    producer.start()
    deadline = time.time() + args.keep_going
    started = time.time()
    sent = failed = 0
    index = args.start
    try:
        while sent < args.count:
            message = Message(args.topic)
            message.set_keys(f"key-{index}")
            message.set_tags("TagA" if index % 2 else "TagB")
            message.set_property("index", str(index))
            body = f"body-{index}"
            message.set_body(body.ljust(args.size, "x") if args.size else body)
            oneway = args.mode == "oneway" or (args.mode == "mixed" and index % 10 == 0)
            try:
                if oneway:
                    producer.send_oneway(message)
                    emit({"index": index, "oneway": True})
                else:
                    result = producer.send_sync(message)
                    emit({"index": index, "status": int(result.status), "msg_id": result.msg_id})
                sent += 1
            except Exception as exc:  # the C++ client raises on any send failure
                failed += 1
                emit({"index": index, "error": str(exc)[:200]})
                if not args.keep_going or time.time() > deadline:
                    raise
                time.sleep(0.2)
            index += 1
    finally:
        producer.shutdown()
    elapsed = time.time() - started
    emit({"summary": True, "sent": sent, "failed": failed, "seconds": elapsed})
    return 0


if __name__ == "__main__":
    # A client object still alive at interpreter exit can hang the C++ library: leave at once.
    code = main()
    sys.stdout.flush()
    os._exit(code)
