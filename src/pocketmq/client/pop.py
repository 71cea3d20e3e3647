"""POP consumption over remoting: pop messages from a broker, ack them, change how long they
stay invisible (what the 5.x proxy and RocketMQ's `MQClientAPIImpl` send for a SimpleConsumer).

A popped message's receipt handle (`extraInfo`) is built from the response header as RocketMQ's
client builds it; a message from the group's retry topic carries its own in POP_CK.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from pocketmq.common.codes import RequestCode, ResponseCode
from pocketmq.common.stored_message import StoredMessage, decode_records
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.transport import RemotingClient

PROPERTY_POP_CK: Final = "POP_CK"
RETRY_TOPIC_PREFIX: Final = "%RETRY%"


class PopError(Exception):
    """The broker refused a pop, an ack or a change; `code` and `remark` are its answer."""

    def __init__(self, code: int, remark: str | None) -> None:
        super().__init__(f"{code}: {remark}")
        self.code = code
        self.remark = remark or ""


@dataclass(frozen=True, slots=True)
class PoppedMessage:
    message: StoredMessage
    handle: str
    """The receipt handle (`extraInfo`): ack or change it at the broker that popped it."""


def _retry_name(flag: str, group: str, topic: str) -> str:
    return f"{RETRY_TOPIC_PREFIX}{group}{'+' if flag == '2' else '_'}{topic}"


@dataclass(frozen=True, slots=True)
class PopResult:
    messages: list[PoppedMessage]
    pop_time: int = 0
    invisible_time: int = 0
    rest: int = 0


class PopClient:
    """Pops, acks and changes invisible times at brokers, over one `RemotingClient`."""

    def __init__(
        self, client: RemotingClient, group: str, *, broker_name: str = "", timeout_s: float = 5.0
    ) -> None:
        self._client = client
        self.group = group
        self.broker_name = broker_name
        self.timeout_s = timeout_s

    async def pop(
        self,
        address: str,
        topic: str,
        *,
        max_nums: int = 16,
        invisible_ms: int = 30_000,
        poll_ms: int = 0,
        queue_id: int = -1,
        expression: str = "*",
        order: bool = False,
        init_max: bool = False,
    ) -> PopResult:
        """Pops from one broker; an empty result when nothing came within `poll_ms`."""
        request = RemotingCommand.request(
            RequestCode.POP_MESSAGE,
            {
                "consumerGroup": self.group,
                "topic": topic,
                "queueId": str(queue_id),
                "maxMsgNums": str(max_nums),
                "invisibleTime": str(invisible_ms),
                "pollTime": str(poll_ms),
                "bornTime": "0",
                "initMode": "1" if init_max else "0",
                "expType": "TAG",
                "exp": expression,
                "order": "true" if order else "false",
            },
        )
        response = await self._client.invoke(address, request, self.timeout_s + poll_ms / 1000)
        if response.code in (ResponseCode.POLLING_TIMEOUT, ResponseCode.PULL_NOT_FOUND):
            return PopResult([])
        if response.code != ResponseCode.SUCCESS:
            raise PopError(response.code, response.remark)
        fields = response.ext_fields
        pop_time = int(fields["popTime"])
        invisible_time = int(fields["invisibleTime"])
        revive_qid = int(fields["reviveQid"])
        starts = _info(fields.get("startOffsetInfo", ""))
        messages = []
        for message in decode_records(response.body or b""):
            handle = message.properties.get(PROPERTY_POP_CK)
            if not handle:
                flag = "1" if message.topic.startswith(RETRY_TOPIC_PREFIX) else "0"
                start = starts.get(f"{flag}@{message.queue_id}", message.queue_offset)
                handle = (
                    f"{start} {pop_time} {invisible_time} {revive_qid} {flag} "
                    f"{self.broker_name} {message.queue_id} {message.queue_offset}"
                )
            messages.append(PoppedMessage(message, handle))
        return PopResult(messages, pop_time, invisible_time, int(fields.get("restNum", "0")))

    async def ack(self, address: str, topic: str, handle: str) -> None:
        """Acks one message (`topic` as subscribed); raises PopError when refused."""
        fields = handle.split(" ")
        request = RemotingCommand.request(
            RequestCode.ACK_MESSAGE,
            {
                "consumerGroup": self.group,
                "topic": self._real_topic(fields, topic),
                "queueId": fields[6],
                "extraInfo": handle,
                "offset": fields[7],
            },
        )
        response = await self._client.invoke(address, request, self.timeout_s)
        if response.code != ResponseCode.SUCCESS:
            raise PopError(response.code, response.remark)

    async def change_invisible_time(
        self, address: str, topic: str, handle: str, invisible_ms: int
    ) -> str:
        """Makes a message visible again `invisible_ms` from now; returns its new handle."""
        fields = handle.split(" ")
        request = RemotingCommand.request(
            RequestCode.CHANGE_MESSAGE_INVISIBLETIME,
            {
                "consumerGroup": self.group,
                "topic": self._real_topic(fields, topic),
                "queueId": fields[6],
                "extraInfo": handle,
                "offset": fields[7],
                "invisibleTime": str(invisible_ms),
            },
        )
        response = await self._client.invoke(address, request, self.timeout_s)
        if response.code != ResponseCode.SUCCESS:
            raise PopError(response.code, response.remark)
        answer = response.ext_fields
        return (
            f"{fields[7]} {answer['popTime']} {answer['invisibleTime']} {answer['reviveQid']} "
            f"{fields[4]} {fields[5]} {fields[6]} {fields[7]}"
        )

    def _real_topic(self, fields: list[str], topic: str) -> str:
        flag = fields[4] if len(fields) > 4 else "0"
        return topic if flag == "0" else _retry_name(flag, self.group, topic)


def _info(text: str) -> dict[str, int]:
    """`startOffsetInfo` as `flag@queueId` -> start offset."""
    table = {}
    for entry in filter(None, text.split(";")):
        flag, queue_id, value = entry.split(" ")
        table[f"{flag}@{queue_id}"] = int(value)
    return table
