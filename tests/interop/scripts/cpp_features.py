"""Runs inside the C++ client's virtualenv: RocketMQ message features from the C++ side.

Usage:
  cpp_features.py ordered NAMESRV TOPIC KEYS PER_KEY [--pause-ms N]
      Sends PER_KEY messages for each of KEYS sharding keys, interleaved, with `send_orderly`
      (queue = key % queue count), N ms apart; body `k<key>-<seq>`, keys `k<key>`.
  cpp_features.py send NAMESRV TOPIC COUNT [--delay-level N] [--tags A,B,...] [--start N]
      Sends COUNT messages one by one (body `m-<i>` from i = N, tags taken in turn from
      --tags), each line giving the id, the tag and the wall-clock send time; keys = body.
  cpp_features.py consume NAMESRV GROUP TOPIC EXPRESSION [--orderly] [--fail-times N]
      A push consumer of TOPIC with a tag EXPRESSION; it fails (RECONSUME_LATER) a delivery
      while the message's reconsume count is below N. One line per delivery with the body,
      queue, reconsume count, born time and receive time; stops when stdin closes.
Prints `{"started": true}` once ready and a summary line at the end.
"""

import os
import sys
import time

from json_lines import emit
from rocketmq.client import Message, Producer, PushConsumer


def text(value):
    return value.decode() if isinstance(value, bytes) else value


def option(name, default):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


def started_producer(group, namesrv):
    producer = Producer(group)
    producer.set_namesrv_addr(namesrv)
    producer.start()
    emit({"started": True})
    return producer


def ordered(namesrv, topic, keys, per_key, pause_s):
    producer = started_producer("PID_CPP_ORDERED", namesrv)
    failed = 0
    for seq in range(per_key):
        for key in range(keys):
            message = Message(topic)
            message.set_keys(f"k{key}")
            message.set_body(f"k{key}-{seq}")
            try:
                producer.send_orderly(message, key)
                time.sleep(pause_s)
            except Exception as error:
                failed += 1
                emit({"error": str(error)})
    producer.shutdown()
    emit({"summary": True, "sent": keys * per_key - failed})


def send(namesrv, topic, count, delay_level, tags, start):
    producer = started_producer("PID_CPP_FEATURES", namesrv)
    for index in range(start, start + count):
        message = Message(topic)
        tag = tags[index % len(tags)]
        message.set_tags(tag)
        message.set_keys(f"m-{index}")
        message.set_body(f"m-{index}")
        if delay_level:
            message.set_delay_time_level(delay_level)
        sent_at = time.time()
        result = producer.send_sync(message)
        line = {"msg_id": result.msg_id, "index": index, "tag": tag, "sent_at": sent_at}
        emit(line)
    producer.shutdown()
    emit({"summary": True, "sent": count})


def consume(namesrv, group, topic, expression, orderly, fail_times):
    def on_message(message):
        line = {
            "body": text(message.body),
            "tags": text(message.tags),
            "queue_id": message.queue_id,
            "queue_offset": message.queue_offset,
            "reconsume_times": message.reconsume_times,
            "born_ms": message.born_timestamp,
            "received_at": time.time(),
        }
        emit(line)
        if message.reconsume_times < fail_times:
            raise RuntimeError("failing on purpose")

    consumer = PushConsumer(group, orderly=orderly)
    consumer.set_namesrv_addr(namesrv)
    consumer.subscribe(topic, on_message, expression)
    consumer.start()
    emit({"started": True})
    sys.stdin.read()  # until the test closes it
    consumer.shutdown()
    emit({"summary": True})


def main():
    command, namesrv = sys.argv[1], sys.argv[2]
    if command == "ordered":
        pause_s = float(option("--pause-ms", "0")) / 1000
        ordered(namesrv, sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), pause_s)
    elif command == "send":
        tags = option("--tags", "TagA").split(",")
        delay_level = int(option("--delay-level", "0"))
        start = int(option("--start", "0"))
        send(namesrv, sys.argv[3], int(sys.argv[4]), delay_level, tags, start)
    else:
        group, topic, expression = sys.argv[3:6]
        fail_times = int(option("--fail-times", "0"))
        consume(namesrv, group, topic, expression, "--orderly" in sys.argv, fail_times)
    return 0


if __name__ == "__main__":
    # A client object still alive at interpreter exit can hang the C++ library: leave at once.
    code = main()
    sys.stdout.flush()
    os._exit(code)
