"""Queue allocation for clustering consumers: which client of a group reads which queues.

Every client of a consumer group runs the same strategy on the same inputs (all queues of the
topic, all client ids the broker reports for the group) and keeps only its own share. Clients
never negotiate: the division works because a strategy is a deterministic function of its
inputs, which it sorts itself, so the order they arrive in does not matter.

Invariant: for one set of queues and one list of distinct client ids, the shares that
`allocate` returns for each of those clients are disjoint and together hold every queue, so
each queue is read by exactly one client. Clients whose views differ for a moment (one saw a
newcomer, another did not yet) can overlap or leave gaps; the next rebalance settles that, and
queue locks guard ordered consumption meanwhile. Neither is this module's business.

The strategies give the same answers as RocketMQ's Java client, so pocketmq and Java consumers
can share a group:

- `AllocateAveragely` ("AVG"): contiguous blocks of the sorted queues, the first clients take
  one more when the queues do not divide evenly.
- `AllocateAveragelyByCircle` ("AVG_BY_CIRCLE"): queues dealt out in turn, like cards.
- `AllocateConsistentHash` ("CONSISTENT_HASH"): a hash ring of virtual nodes per client; when
  a client joins or leaves, only the queues next to its nodes move.

To agree with Java bit for bit, queues and client ids sort as Java's `compareTo` does (strings
by UTF-16 code unit), and client ids are used as given, duplicates included: the broker can
list one client twice while it reconnects, and then every client must still compute the same
thing. Queues are a set in Java, so duplicates among them are dropped.

Not here: fetching routes and client ids, locking queues, acting on the result, and the
machine-room and fixed-list strategies. Pure: no I/O, no clock, no randomness.
"""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import ClassVar, Final, Protocol

from pocketmq.client.message import MessageQueue

DEFAULT_VIRTUAL_NODE_COUNT: Final = 10
"""Virtual nodes per client on the consistent-hash ring (Java's default)."""


class AllocateStrategy(Protocol):
    """Decides one client's share of a topic's queues (`AllocateMessageQueueStrategy`)."""

    @property
    def name(self) -> str:
        """The strategy's name as RocketMQ reports it (`AVG`, `CONSISTENT_HASH`, ...)."""
        ...

    def allocate(
        self,
        group: str,
        current_client_id: str,
        queues: Sequence[MessageQueue],
        client_ids: Sequence[str],
    ) -> list[MessageQueue]:
        """The queues `current_client_id` reads.

        Args:
            group: The consumer group; no strategy here uses it beyond the signature.
            current_client_id: The client asking.
            queues: Every queue of the topic, in any order.
            client_ids: Every client id of the group, in any order.

        Returns:
            This client's queues in sorted order; empty when there are no queues or when
            `current_client_id` is not among `client_ids` (the caller logs that).

        Raises:
            ValueError: `current_client_id` is empty.
        """
        ...


def _java_string_key(text: str) -> bytes:
    # Big-endian UTF-16 bytes compare as java.lang.String.compareTo compares: code unit by
    # code unit, shorter prefix first. Python's own order differs above U+FFFF.
    return text.encode("utf-16-be", "surrogatepass")


def _java_queue_key(queue: MessageQueue) -> tuple[bytes, bytes, int]:
    return (_java_string_key(queue.topic), _java_string_key(queue.broker_name), queue.queue_id)


def _sorted_inputs(
    current_client_id: str, queues: Iterable[MessageQueue], client_ids: Iterable[str]
) -> tuple[list[MessageQueue], list[str]] | None:
    """Sorted queues and client ids, or None when this client gets nothing at all."""
    if not current_client_id:
        raise ValueError("current_client_id is empty")
    sorted_queues = sorted(set(queues), key=_java_queue_key)
    sorted_client_ids = sorted(client_ids, key=_java_string_key)
    if not sorted_queues or current_client_id not in sorted_client_ids:
        return None
    return sorted_queues, sorted_client_ids


def java_queue_string(queue: MessageQueue) -> str:
    """`queue` as Java's `MessageQueue.toString()` renders it: the consistent-hash key.

    Example: ``MessageQueue [topic=T, brokerName=broker-a, queueId=3]``.
    """
    return (
        f"MessageQueue [topic={queue.topic}, brokerName={queue.broker_name}, "
        f"queueId={queue.queue_id}]"
    )


def md5_ring_hash(key: str) -> int:
    """Java's `ConsistentHashRouter.MD5Hash`: the first 4 bytes of MD5(UTF-8), big-endian.

    The result is unsigned, 0 to 2**32 - 1. Unpaired surrogates encode as ``?`` as Java's
    `String.getBytes(UTF_8)` does.
    """
    digest = hashlib.md5(key.encode("utf-8", "replace"), usedforsecurity=False).digest()
    return int.from_bytes(digest[:4], "big")


@dataclass(frozen=True, slots=True)
class AllocateAveragely:
    """Contiguous blocks of the sorted queues (`AllocateMessageQueueAveragely`).

    With n queues and m clients, q, r = divmod(n, m): the first r clients take q + 1 queues
    each and the others q, in sorted order, so 8 queues over 3 clients split 3, 3, 2.
    """

    name: ClassVar[str] = "AVG"

    def allocate(
        self,
        group: str,
        current_client_id: str,
        queues: Sequence[MessageQueue],
        client_ids: Sequence[str],
    ) -> list[MessageQueue]:
        """See `AllocateStrategy.allocate`."""
        inputs = _sorted_inputs(current_client_id, queues, client_ids)
        if inputs is None:
            return []
        sorted_queues, sorted_client_ids = inputs
        # Java uses indexOf: with a duplicated id, the first position counts.
        index = sorted_client_ids.index(current_client_id)
        share, extra = divmod(len(sorted_queues), len(sorted_client_ids))
        if index < extra:
            start, count = index * (share + 1), share + 1
        else:
            start, count = index * share + extra, share
        return sorted_queues[start : start + count]


@dataclass(frozen=True, slots=True)
class AllocateAveragelyByCircle:
    """Queues dealt out in turn (`AllocateMessageQueueAveragelyByCircle`).

    Client i (in sorted order) of m takes sorted queues i, i + m, i + 2m, ...
    """

    name: ClassVar[str] = "AVG_BY_CIRCLE"

    def allocate(
        self,
        group: str,
        current_client_id: str,
        queues: Sequence[MessageQueue],
        client_ids: Sequence[str],
    ) -> list[MessageQueue]:
        """See `AllocateStrategy.allocate`."""
        inputs = _sorted_inputs(current_client_id, queues, client_ids)
        if inputs is None:
            return []
        sorted_queues, sorted_client_ids = inputs
        index = sorted_client_ids.index(current_client_id)
        return sorted_queues[index :: len(sorted_client_ids)]


@dataclass(frozen=True, slots=True)
class AllocateConsistentHash:
    """A hash ring of clients (`AllocateMessageQueueConsistentHash` with its MD5 router).

    Each client puts `virtual_node_count` points on a ring of 32-bit hashes, point k at
    `md5_ring_hash(f"{client_id}-{k}")`. A queue hashes `java_queue_string(queue)` and belongs
    to the client owning the first point at or after that hash, wrapping round to the lowest
    point. Points are placed client by client in sorted order; when two collide the later one
    keeps the slot, as in Java's TreeMap.

    Attributes:
        virtual_node_count: Points per client. Java accepts 0, which leaves every queue
            unread; here it must be at least 1.
    """

    virtual_node_count: int = DEFAULT_VIRTUAL_NODE_COUNT
    name: ClassVar[str] = "CONSISTENT_HASH"

    def __post_init__(self) -> None:
        if self.virtual_node_count < 1:
            raise ValueError(f"virtual_node_count must be >= 1, got {self.virtual_node_count}")

    def allocate(
        self,
        group: str,
        current_client_id: str,
        queues: Sequence[MessageQueue],
        client_ids: Sequence[str],
    ) -> list[MessageQueue]:
        """See `AllocateStrategy.allocate`."""
        inputs = _sorted_inputs(current_client_id, queues, client_ids)
        if inputs is None:
            return []
        sorted_queues, sorted_client_ids = inputs
        points, owners = self._ring(sorted_client_ids)
        result: list[MessageQueue] = []
        for queue in sorted_queues:
            slot = bisect.bisect_left(points, md5_ring_hash(java_queue_string(queue)))
            if owners[slot % len(points)] == current_client_id:
                result.append(queue)
        return result

    def _ring(self, sorted_client_ids: Sequence[str]) -> tuple[list[int], list[str]]:
        """The ring as parallel lists: point hashes ascending, and the client owning each."""
        ring: dict[int, str] = {}
        seen: set[str] = set()
        for client_id in sorted_client_ids:
            # Java numbers a repeated client's points after those it still holds on the ring
            # (a collision may have taken some), so a duplicate adds new points, not the same.
            first = 0
            if client_id in seen:
                first = sum(1 for owner in ring.values() if owner == client_id)
            seen.add(client_id)
            for index in range(first, first + self.virtual_node_count):
                ring[md5_ring_hash(f"{client_id}-{index}")] = client_id
        points = sorted(ring)
        return points, [ring[point] for point in points]


_STRATEGIES: Final[dict[str, type[AllocateStrategy]]] = {
    AllocateAveragely.name: AllocateAveragely,
    AllocateAveragelyByCircle.name: AllocateAveragelyByCircle,
    AllocateConsistentHash.name: AllocateConsistentHash,
}


def strategy_by_name(name: str) -> AllocateStrategy:
    """A new strategy with default settings, chosen by its RocketMQ name.

    Args:
        name: "AVG", "AVG_BY_CIRCLE" or "CONSISTENT_HASH", in any case.

    Returns:
        The strategy; consistent hash gets `DEFAULT_VIRTUAL_NODE_COUNT` virtual nodes.

    Raises:
        ValueError: `name` is none of those; the message lists the valid names.
    """
    strategy_type = _STRATEGIES.get(name.upper())
    if strategy_type is None:
        raise ValueError(
            f"unknown allocate strategy {name!r}: expected one of {', '.join(_STRATEGIES)}"
        )
    return strategy_type()
