"""Helpers for the pull and offset handler tests: a small real store, topics, requests."""

from __future__ import annotations

from pathlib import Path

from pocketmq.broker.topics import TopicConfig, TopicTable
from pocketmq.common.codes import RequestCode
from pocketmq.common.stored_message import StoredMessage, decode_record
from pocketmq.remoting.command import RemotingCommand
from pocketmq.runtime.clock import ManualClock
from pocketmq.store.message_store import MessageStore
from tests.unit.store.conftest import message, small_config

TOPIC = "TopicTest"
GROUP = "CID_test"
QUEUES = 4


def open_store(root: Path, clock: ManualClock | None = None) -> MessageStore:
    store = MessageStore(small_config(root), clock=clock or ManualClock())
    store.load()
    return store


def topic_table(*extra: TopicConfig) -> TopicTable:
    table = TopicTable(cluster_name="DefaultCluster", broker_name="broker-a")
    table.load(None, 0)
    table.update(TopicConfig(TOPIC, QUEUES, QUEUES), 0)
    for config in extra:
        table.update(config, 0)
    return table


def put(
    store: MessageStore,
    count: int = 1,
    *,
    queue_id: int = 0,
    tags: str | None = None,
    body_bytes: int = 8,
    topic: str = TOPIC,
) -> list[int]:
    """Stores `count` messages one by one; returns their queue offsets."""
    offsets = []
    for _ in range(count):
        body = f"m{store.get_max_offset_in_queue(topic, queue_id)}".encode().ljust(body_bytes, b".")
        result = store.put_messages_now([message(topic, body, queue_id=queue_id, tags=tags)])
        assert result.ok, result
        offsets.append(result.queue_offset)
    return offsets


def trim_oldest_commit_log_file(store: MessageStore) -> None:
    """Deletes the oldest CommitLog file and the queue entries it held, as retention does."""
    store.commit_log.files.delete_first()
    for queue in store.consume_queues.queues.values():
        queue.delete_expired(store.commit_log.min_offset)


def pull_request(
    offset: int = 0,
    *,
    queue_id: int = 0,
    topic: str = TOPIC,
    group: str = GROUP,
    max_msg_nums: int = 32,
    sys_flag: int = 0,
    commit_offset: int = 0,
    suspend_timeout_ms: int = 0,
    subscription: str | None = None,
    expression_type: str | None = None,
) -> RemotingCommand:
    """A PULL_MESSAGE request as the C++ client sends it (ext values already strings)."""
    ext = {
        "consumerGroup": group,
        "topic": topic,
        "queueId": str(queue_id),
        "queueOffset": str(offset),
        "maxMsgNums": str(max_msg_nums),
        "sysFlag": str(sys_flag),
        "commitOffset": str(commit_offset),
        "suspendTimeoutMillis": str(suspend_timeout_ms),
        "subVersion": "0",
        "AccessKey": "",
        "OnsChannel": "ALIYUN",
        "Signature": "",
    }
    if subscription is not None:
        ext["subscription"] = subscription
    if expression_type is not None:
        ext["expressionType"] = expression_type
    return RemotingCommand.request(RequestCode.PULL_MESSAGE, ext)


def decode_body(body: bytes) -> list[StoredMessage]:
    """Splits a pull body into its stored records, as clients do (TOTALSIZE by TOTALSIZE)."""
    messages = []
    position = 0
    while position < len(body):
        size = int.from_bytes(body[position : position + 4], "big")
        assert size > 0
        messages.append(decode_record(body[position : position + size]))
        position += size
    return messages
