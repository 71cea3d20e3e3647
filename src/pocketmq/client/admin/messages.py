"""Admin operations on messages: find them (by key, client id or offset id), read queues
without committing (as group TOOLS_CONSUMER), and send one (`sendMessage`).

Reads use the consumer's PULL_MESSAGE header and never hold a pull at the broker; sends use the
producer's SEND_MESSAGE_V2 header, unique ids and answer reading, so a message sent here is
indistinguishable from a producer's. Index lookups (QUERY_MESSAGE) match key hashes, so every
hit is checked again here, as RocketMQ clients do.
"""

from __future__ import annotations

from typing import Final

from pocketmq.client.admin.decoders import decode_messages, ext_int
from pocketmq.client.admin.errors import AdminError, check
from pocketmq.client.admin.lookups import (
    AdminLookups,
    master_in_route,
    queue_data_of,
)
from pocketmq.client.admin.values import FoundMessage, PullBatch, RawPull
from pocketmq.client.consumer.pull_request import pull_header
from pocketmq.client.errors import MessageError, RocketMQError
from pocketmq.client.message import Message, MessageQueue, SendResult, UniqueIdGenerator
from pocketmq.client.producer.wire import AUTO_CREATE_TOPIC, prepare_message, read_send_response
from pocketmq.common.codes import RequestCode, ResponseCode
from pocketmq.common.constants import (
    KEY_SEPARATOR,
    PERM_WRITE,
    PROPERTY_KEYS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
)
from pocketmq.common.message_id import MessageIdError, decode_offset_msg_id
from pocketmq.common.route import MASTER_ID, TopicRouteData
from pocketmq.common.stored_message import StoredMessage
from pocketmq.common.subscription import SubscriptionData

AUTO_CREATE_QUEUE_NUMS: Final = 4
"""Queues a topic created on first send gets (a producer's `defaultTopicQueueNums`)."""
TOOLS_CONSUMER_GROUP: Final = "TOOLS_CONSUMER"
"""The group mqadmin pulls with (`MixAll.TOOLS_CONSUMER_GROUP`)."""
ADMIN_PRODUCER_GROUP: Final = "TOOLS_PRODUCER"
QUERY_MAX_NUM_DEFAULT: Final = 64
PULL_BATCH_MAX: Final = 32
TIMESTAMP_MAX_MS: Final = (1 << 63) - 1
_NEVER_COMPRESS_BYTES: Final = 1 << 62
"""mqadmin sends bodies as given: the tools that read them back show stored bytes as they are."""
_PULL_CODES: Final = frozenset(
    {
        ResponseCode.SUCCESS,
        ResponseCode.PULL_NOT_FOUND,
        ResponseCode.PULL_RETRY_IMMEDIATELY,
        ResponseCode.PULL_OFFSET_MOVED,
    }
)


class MessageAdmin(AdminLookups):
    """Finding, reading and sending messages."""

    _ids: UniqueIdGenerator | None = None

    async def query_message_by_key(
        self,
        topic: str,
        key: str,
        *,
        max_num: int = QUERY_MAX_NUM_DEFAULT,
        begin_ms: int = 0,
        end_ms: int = TIMESTAMP_MAX_MS,
        unique_key: bool = False,
    ) -> list[FoundMessage]:
        """Messages of `topic` whose KEYS (or, with `unique_key`, UNIQ_KEY) hold `key`.

        Every master serving the topic is asked (QUERY_MESSAGE, through the broker's index);
        index hits are hashes, so messages are checked again here, as RocketMQ clients do.
        """
        route = await self.topic_route(topic)
        ext = {
            "topic": topic,
            "key": key,
            "maxNum": str(max_num),
            "beginTimestamp": str(begin_ms),
            "endTimestamp": str(end_ms),
        }
        if unique_key:
            ext["_UNIQUE_KEY_QUERY"] = "true"
        found: list[FoundMessage] = []
        for data in sorted(route.broker_datas, key=lambda d: d.broker_name):
            address = data.broker_addrs.get(MASTER_ID)
            if address is None:
                continue
            response = await self._broker(
                address, RequestCode.QUERY_MESSAGE, ext, what="message query"
            )
            if response.code == ResponseCode.QUERY_NOT_FOUND:
                continue
            check(response, "message query", f"broker {address}")
            found.extend(
                FoundMessage(data.broker_name, message)
                for message in decode_messages(response.body, address)
                if message.topic == topic and _matches(message, key, unique_key)
            )
        found.sort(key=lambda f: (f.message.store_timestamp, f.broker_name, f.message.queue_id))
        return found[:max_num]

    async def view_message(self, offset_msg_id: str) -> FoundMessage:
        """The message an offset message id points at (VIEW_MESSAGE_BY_ID on its broker).

        Raises:
            AdminError: not an offset message id, or the broker has no such message.
        """
        try:
            (ip, port), offset = decode_offset_msg_id(offset_msg_id)
        except MessageIdError as exc:
            raise AdminError(f"{offset_msg_id} is not an offset message id: {exc}") from None
        address = f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"
        response = await self._broker(
            address, RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(offset)}, what="message view"
        )
        check(response, f"view of message {offset_msg_id}", f"broker {address}")
        messages = decode_messages(response.body, address)
        if not messages:
            raise AdminError(f"broker {address} has no message at CommitLog offset {offset}")
        return FoundMessage(await self._broker_name_of(address), messages[0])

    async def query_message_by_id(self, msg_id: str, topic: str | None = None) -> FoundMessage:
        """Finds a message by offset message id, or by client message id (UNIQ_KEY) in `topic`.

        An id that decodes to a broker the NameServers know is viewed there; otherwise, with a
        topic, it is looked up as a UNIQ_KEY through the index.

        Raises:
            AdminError: nothing found; the message says whether a topic would help.
        """
        known: set[str] = set()
        with_address: str | None = None
        try:
            (ip, port), _ = decode_offset_msg_id(msg_id)
            with_address = f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"
            info = await self.cluster_info()
            known = {a for d in info.broker_addr_table.values() for a in d.broker_addrs.values()}
        except MessageIdError:
            pass
        if with_address is not None and with_address in known:
            try:
                return await self.view_message(msg_id)
            except AdminError:
                if not topic:
                    raise
        if not topic:
            if with_address is None:
                raise AdminError(
                    f"{msg_id} is not an offset message id: to look it up as a client message "
                    "id (UNIQ_KEY), pass -t TOPIC"
                )
            raise AdminError(
                f"{msg_id} decodes to broker {with_address}, which no NameServer knows: if it "
                "is a client message id (UNIQ_KEY), pass -t TOPIC"
            )
        found = await self.query_message_by_key(topic, msg_id, max_num=1, unique_key=True)
        if not found:
            raise AdminError(f"no message with id {msg_id} in topic {topic}")
        return found[0]

    async def pull(
        self, address: str, topic: str, queue_id: int, offset: int, max_nums: int
    ) -> PullBatch:
        """One PULL_MESSAGE as group TOOLS_CONSUMER, subscription `*`, never held."""
        raw = await self.pull_raw(address, topic, queue_id, offset, max_nums)
        return PullBatch(
            decode_messages(raw.records, address) if raw.records else [],
            raw.next_begin_offset,
            raw.min_offset,
            raw.max_offset,
        )

    async def pull_raw(
        self, address: str, topic: str, queue_id: int, offset: int, max_nums: int
    ) -> RawPull:
        """`pull` without decoding: the stored records as the broker sent them, for readers
        that decode only what they need (the Spark connector builds Arrow columns from them)."""
        # The header names no broker: the address alone says which broker's queue is read.
        queue = MessageQueue(topic, "", queue_id)
        header = pull_header(
            TOOLS_CONSUMER_GROUP, queue, offset, SubscriptionData(topic), max_nums=max_nums
        )
        response = await self._broker(address, RequestCode.PULL_MESSAGE, header, what="pull")
        if response.code not in _PULL_CODES:
            check(response, "pull", f"broker {address}")
        return RawPull(
            response.body if response.code == ResponseCode.SUCCESS else b"",
            ext_int(response, "nextBeginOffset", address, offset),
            ext_int(response, "minOffset", address, 0),
            ext_int(response, "maxOffset", address, 0),
        )

    async def message_at(
        self, topic: str, broker_name: str, queue_id: int, offset: int
    ) -> FoundMessage:
        """The message at one queue offset.

        Raises:
            AdminError: no such broker in the topic's route, or no message there (the message
                gives the queue's bounds).
        """
        route = await self.topic_route(topic)
        address = master_in_route(route, broker_name, topic)
        batch = await self.pull(address, topic, queue_id, offset, 1)
        if not batch.messages or batch.messages[0].queue_offset != offset:
            raise AdminError(
                f"no message at offset {offset} of {topic} queue {queue_id} on {broker_name}: "
                f"the queue holds offsets {batch.min_offset} to {batch.max_offset - 1}"
                if batch.max_offset > batch.min_offset
                else f"no message at offset {offset}: {topic} queue {queue_id} on "
                f"{broker_name} is empty"
            )
        return FoundMessage(broker_name, batch.messages[0])

    async def consume(
        self,
        topic: str,
        *,
        broker_name: str | None = None,
        queue_id: int | None = None,
        offset: int | None = None,
        count: int = 128,
    ) -> list[FoundMessage]:
        """Reads up to `count` messages without committing anything, oldest first per queue.

        Queues are the topic's (or one broker's, or one queue's); each is read from
        `max(offset, min offset)` (its min offset without `offset`) up to its max offset.
        """
        if count <= 0:
            raise AdminError(f"the message count must be positive, got {count}")
        route = await self.topic_route(topic)
        queues: list[tuple[str, str, int]] = []
        for data in sorted(route.broker_datas, key=lambda d: d.broker_name):
            if broker_name is not None and data.broker_name != broker_name:
                continue
            address = data.broker_addrs.get(MASTER_ID)
            queue_data = queue_data_of(route, data.broker_name)
            if address is None or queue_data is None:
                continue
            queues.extend(
                (data.broker_name, address, qid)
                for qid in range(queue_data.read_queue_nums)
                if queue_id is None or qid == queue_id
            )
        if broker_name is not None and not queues:
            master_in_route(route, broker_name, topic)  # raises naming the known brokers
            raise AdminError(f"queue {queue_id} does not exist on {broker_name} for {topic}")
        found: list[FoundMessage] = []
        for name, address, qid in queues:
            start = max(offset or 0, await self.min_offset(address, topic, qid))
            end = await self.max_offset(address, topic, qid)
            position = start
            for _ in range(count + 8):  # every pull advances, or the queue ends
                if position >= end or len(found) >= count:
                    break
                wanted = min(PULL_BATCH_MAX, count - len(found), end - position)
                batch = await self.pull(address, topic, qid, position, wanted)
                found.extend(FoundMessage(name, m) for m in batch.messages[:wanted])
                if batch.next_begin_offset <= position:
                    break
                position = batch.next_begin_offset
            if len(found) >= count:
                break
        return found[:count]

    async def send_message(
        self,
        topic: str,
        body: bytes,
        *,
        keys: str | None = None,
        tags: str | None = None,
        broker_name: str | None = None,
        queue_id: int | None = None,
    ) -> SendResult:
        """Sends one message (SEND_MESSAGE_V2), waiting until it is stored.

        A topic without a route is sent through `TBW102`, as producers do, so a broker with
        `autoCreateTopicEnable` creates it.

        Raises:
            AdminError: no writable queue, a bad topic, body, key or tag, or the broker refused.
        """
        queue_nums_max: int | None = None
        try:
            route = await self.topic_route(topic)
        except AdminError as exc:
            if exc.code != ResponseCode.TOPIC_NOT_EXIST:
                raise
            try:
                route = await self.topic_route(AUTO_CREATE_TOPIC)
            except AdminError:
                raise exc from None
            # The broker creates the topic with this many queues (`defaultTopicQueueNums`).
            queue_nums_max = AUTO_CREATE_QUEUE_NUMS
        candidates = _writable_queues(route, broker_name, queue_id, queue_nums_max)
        if not candidates:
            where = f" on broker {broker_name}" if broker_name else ""
            which = f" queue {queue_id}" if queue_id is not None else ""
            raise AdminError(
                f"topic {topic} has no writable{which} queue{where}: check it with topicRoute "
                f"-t {topic}"
            )
        name, address, qid = self.instance.rng.choice(candidates)
        queue = MessageQueue(topic, name, qid)
        now_ms = self.instance.clock.now_ms()
        try:
            prepared = prepare_message(
                Message(topic, body, tags=tags, keys=keys),
                self._unique_ids(),
                now_ms,
                compress_over_bytes=_NEVER_COMPRESS_BYTES,
            )
        except MessageError as exc:
            raise AdminError(f"cannot send: {exc}", exc.code) from None
        header = prepared.header(ADMIN_PRODUCER_GROUP, queue, now_ms, AUTO_CREATE_QUEUE_NUMS)
        response = await self._broker(
            address, RequestCode.SEND_MESSAGE_V2, header, prepared.body, what="send"
        )
        try:
            return read_send_response(response, prepared, queue, f"send to broker {address}")
        except RocketMQError:
            check(response, "send", f"broker {address}")  # raises with the admin wording
            raise

    def _unique_ids(self) -> UniqueIdGenerator:
        if self._ids is None:
            self._ids = UniqueIdGenerator(self.instance.ip, self.instance.rng.getrandbits(32))
        return self._ids


def _writable_queues(
    route: TopicRouteData,
    broker_name: str | None,
    queue_id: int | None,
    queue_nums_max: int | None = None,
) -> list[tuple[str, str, int]]:
    candidates: list[tuple[str, str, int]] = []
    for queue_data in sorted(route.queue_datas, key=lambda q: q.broker_name):
        if broker_name is not None and queue_data.broker_name != broker_name:
            continue
        if not queue_data.perm & PERM_WRITE:
            continue
        name = queue_data.broker_name
        data = next((d for d in route.broker_datas if d.broker_name == name), None)
        address = data.broker_addrs.get(MASTER_ID) if data else None
        if address is None:
            continue
        candidates.extend(
            (name, address, qid)
            for qid in range(min(queue_data.write_queue_nums, queue_nums_max or 1 << 31))
            if queue_id is None or qid == queue_id
        )
    return candidates


def _matches(message: StoredMessage, key: str, unique_key: bool) -> bool:
    if unique_key:
        return message.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) == key
    keys = message.properties.get(PROPERTY_KEYS, "")
    return key in keys.split(KEY_SEPARATOR)
