"""Sends one traced message and consumes it with a traced consumer; prints the message id."""

import sys
import threading

from pocketmq.client import ConsumeFromWhere, Message, Producer, PushConsumer

namesrv = sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1:9876"
consumed = threading.Event()
consumer = PushConsumer(
    "OrdersConsumers",
    namesrv=namesrv,
    consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    enable_msg_trace=True,
)
consumer.subscribe("Orders")
consumer.register_listener(lambda messages: consumed.set())
with Producer("OrdersProducers", namesrv=namesrv, enable_msg_trace=True) as producer:
    result = producer.send(Message("Orders", b"order 1", keys="order-1"))
with consumer:
    if not consumed.wait(30):
        sys.exit("the message was not consumed within 30 s")
sys.stdout.write(result.msg_id + "\n")
