"""Queue allocation strategies: Java's answers on fixed inputs, and the exactly-once invariant."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pocketmq.client.consumer.rebalance import (
    DEFAULT_VIRTUAL_NODE_COUNT,
    AllocateAveragely,
    AllocateAveragelyByCircle,
    AllocateConsistentHash,
    AllocateStrategy,
    java_queue_string,
    md5_ring_hash,
    strategy_by_name,
)
from pocketmq.client.message import MessageQueue

GROUP = "please_rebalance_me"
CLIENTS = ["10.0.0.3@300", "10.0.0.1@100", "10.0.0.2@200"]


def queues_of(topic: str, brokers: Sequence[str], per_broker: int) -> list[MessageQueue]:
    return [
        MessageQueue(topic, broker, queue_id)
        for broker in brokers
        for queue_id in range(per_broker)
    ]


# 8 queues; sorted: broker-a 0..3, then broker-b 0..3.
EIGHT = queues_of("TopicTest", ["broker-a", "broker-b"], 4)
A0, A1, A2, A3, B0, B1, B2, B3 = EIGHT


def shares(
    strategy: AllocateStrategy, queues: Sequence[MessageQueue], client_ids: Sequence[str]
) -> dict[str, list[MessageQueue]]:
    """Every distinct client's share, as each client would compute it for itself."""
    return {
        client_id: strategy.allocate(GROUP, client_id, queues, client_ids)
        for client_id in dict.fromkeys(client_ids)
    }


def owners(
    strategy: AllocateStrategy, queues: Sequence[MessageQueue], client_ids: Sequence[str]
) -> dict[MessageQueue, list[str]]:
    """For every queue, the clients that claim it."""
    claimed: dict[MessageQueue, list[str]] = {queue: [] for queue in queues}
    for client_id, share in shares(strategy, queues, client_ids).items():
        for queue in share:
            claimed[queue].append(client_id)
    return claimed


ALL_STRATEGIES: list[AllocateStrategy] = [
    AllocateAveragely(),
    AllocateAveragelyByCircle(),
    AllocateConsistentHash(),
    AllocateConsistentHash(virtual_node_count=1),
]
STRATEGY_IDS = ["avg", "avg_by_circle", "consistent_hash", "consistent_hash_1_node"]


# --- Concrete examples -------------------------------------------------------------------------


def test_averagely_gives_contiguous_blocks_larger_first() -> None:
    """8 queues over 3 clients: divmod(8, 3) = (2, 2), so the first two take 3 and the last 2."""
    assert shares(AllocateAveragely(), EIGHT, CLIENTS) == {
        "10.0.0.1@100": [A0, A1, A2],
        "10.0.0.2@200": [A3, B0, B1],
        "10.0.0.3@300": [B2, B3],
    }


def test_averagely_with_more_clients_than_queues_leaves_the_last_clients_idle() -> None:
    queues = EIGHT[:2]
    clients = ["c1", "c2", "c3", "c4"]
    assert shares(AllocateAveragely(), queues, clients) == {
        "c1": [A0],
        "c2": [A1],
        "c3": [],
        "c4": [],
    }


def test_averagely_by_circle_deals_queues_in_turn() -> None:
    assert shares(AllocateAveragelyByCircle(), EIGHT, CLIENTS) == {
        "10.0.0.1@100": [A0, A3, B2],
        "10.0.0.2@200": [A1, B0, B3],
        "10.0.0.3@300": [A2, B1],
    }


def test_consistent_hash_matches_java_client() -> None:
    """Expected shares are what Java's AllocateMessageQueueConsistentHash (10 virtual nodes,
    MD5 router) computes for these inputs."""
    assert shares(AllocateConsistentHash(), EIGHT, CLIENTS) == {
        "10.0.0.1@100": [A0, A2, B0, B3],
        "10.0.0.2@200": [A1],
        "10.0.0.3@300": [A3, B1, B2],
    }


def test_consistent_hash_joining_client_takes_queues_only_from_others() -> None:
    """Java's answer after 10.0.0.4@400 joins the group above: it takes A1, A3 and B0;
    nothing else moves."""
    assert shares(AllocateConsistentHash(), EIGHT, [*CLIENTS, "10.0.0.4@400"]) == {
        "10.0.0.1@100": [A0, A2, B3],
        "10.0.0.2@200": [],
        "10.0.0.3@300": [B1, B2],
        "10.0.0.4@400": [A1, A3, B0],
    }


def test_consistent_hash_virtual_node_count_changes_the_ring_as_in_java() -> None:
    """Java's answers for two clients with 10 virtual nodes and with 1."""
    assert shares(AllocateConsistentHash(), EIGHT, ["c1", "c2"]) == {
        "c1": [A0, A3, B2, B3],
        "c2": [A1, A2, B0, B1],
    }
    assert shares(AllocateConsistentHash(virtual_node_count=1), EIGHT, ["c1", "c2"]) == {
        "c1": [A0, A2, A3, B0, B2],
        "c2": [A1, B1, B3],
    }


def test_consistent_hash_duplicated_client_gets_more_ring_points_as_in_java() -> None:
    """A client listed twice adds points c1-10 .. c1-19 on top of c1-0 .. c1-9, as Java's
    router numbers a repeated node after the points it already holds."""
    assert shares(AllocateConsistentHash(), EIGHT, ["c1", "c1", "c2"]) == {
        "c1": [A0, A2, A3, B0, B2, B3],
        "c2": [A1, B1],
    }


def test_averagely_duplicated_client_counts_at_its_first_position_as_in_java() -> None:
    """Sorted ids c1, c2, c2, c3 make four slots of two; c2 answers for the first of its two
    slots, so the queues of the second (B0, B1) stay unread until the list is clean again."""
    assert shares(AllocateAveragely(), EIGHT, ["c1", "c2", "c2", "c3"]) == {
        "c1": [A0, A1],
        "c2": [A2, A3],
        "c3": [B2, B3],
    }
    assert shares(AllocateAveragelyByCircle(), EIGHT, ["c1", "c2", "c2", "c3"]) == {
        "c1": [A0, B0],
        "c2": [A1, B1],
        "c3": [A3, B3],
    }


def test_client_ids_sort_by_utf16_code_unit_like_java() -> None:
    """U+1F600 is a surrogate pair (0xD83D ...) in Java, which sorts before U+FFFF, while
    Python's code point order puts it after."""
    queues = [MessageQueue("T", "b", 0), MessageQueue("T", "b", 1)]
    clients = ["a\uffff", "a\U0001f600"]
    assert shares(AllocateAveragely(), queues, clients) == {
        "a\uffff": [queues[1]],
        "a\U0001f600": [queues[0]],
    }


def test_queues_sort_by_topic_then_broker_then_queue_id() -> None:
    queues = [
        MessageQueue("TopicB", "broker-a", 0),
        MessageQueue("TopicA", "broker-b", 0),
        MessageQueue("TopicA", "broker-a", 10),
        MessageQueue("TopicA", "broker-a", 2),
    ]
    assert AllocateAveragely().allocate(GROUP, "c1", queues, ["c1"]) == [
        MessageQueue("TopicA", "broker-a", 2),
        MessageQueue("TopicA", "broker-a", 10),
        MessageQueue("TopicA", "broker-b", 0),
        MessageQueue("TopicB", "broker-a", 0),
    ]


def test_consistent_hash_queue_on_a_ring_point_belongs_to_that_point() -> None:
    """Java routes to the first point at or after the queue's hash (TreeMap.tailMap is
    inclusive). Queue 63657 hashes to 0x37209bfe, exactly c8345's only point; zz's point
    (0xd9d09573) is the next one clockwise."""
    queue = MessageQueue("TopicTest", "broker-a", 63657)
    assert md5_ring_hash(java_queue_string(queue)) == md5_ring_hash("c8345-0") == 0x37209BFE
    assert shares(AllocateConsistentHash(virtual_node_count=1), [queue, A0], ["c8345", "zz"]) == {
        "c8345": [queue],
        "zz": [A0],
    }


def test_md5_ring_hash_takes_first_four_digest_bytes_unsigned() -> None:
    # MD5("") = d41d8cd9..., MD5("a") = 0cc175b9...: the top bit set stays positive.
    assert md5_ring_hash("") == 0xD41D8CD9
    assert md5_ring_hash("a") == 0x0CC175B9


def test_java_queue_string_is_the_java_to_string() -> None:
    assert (
        java_queue_string(MessageQueue("TopicTest", "broker-a", 3))
        == "MessageQueue [topic=TopicTest, brokerName=broker-a, queueId=3]"
    )


# --- Edge cases --------------------------------------------------------------------------------


@pytest.mark.parametrize("strategy", ALL_STRATEGIES, ids=STRATEGY_IDS)
def test_client_missing_from_the_group_gets_nothing(strategy: AllocateStrategy) -> None:
    assert strategy.allocate(GROUP, "stranger", EIGHT, CLIENTS) == []


@pytest.mark.parametrize("strategy", ALL_STRATEGIES, ids=STRATEGY_IDS)
def test_no_client_ids_gives_nothing(strategy: AllocateStrategy) -> None:
    assert strategy.allocate(GROUP, "c1", EIGHT, []) == []


@pytest.mark.parametrize("strategy", ALL_STRATEGIES, ids=STRATEGY_IDS)
def test_no_queues_gives_nothing(strategy: AllocateStrategy) -> None:
    assert strategy.allocate(GROUP, "c1", [], ["c1", "c2"]) == []


@pytest.mark.parametrize("strategy", ALL_STRATEGIES, ids=STRATEGY_IDS)
def test_empty_current_client_id_is_rejected(strategy: AllocateStrategy) -> None:
    with pytest.raises(ValueError, match="current_client_id"):
        strategy.allocate(GROUP, "", EIGHT, ["", "c1"])


@pytest.mark.parametrize("strategy", ALL_STRATEGIES, ids=STRATEGY_IDS)
def test_duplicate_queues_count_once(strategy: AllocateStrategy) -> None:
    assert strategy.allocate(GROUP, "c1", [*EIGHT, *EIGHT], ["c1"]) == EIGHT


@pytest.mark.parametrize("count", [0, -1])
def test_consistent_hash_needs_a_virtual_node(count: int) -> None:
    with pytest.raises(ValueError, match="virtual_node_count"):
        AllocateConsistentHash(virtual_node_count=count)


# --- Lookup by name ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("AVG", AllocateAveragely()),
        ("avg", AllocateAveragely()),
        ("AVG_BY_CIRCLE", AllocateAveragelyByCircle()),
        ("Avg_By_Circle", AllocateAveragelyByCircle()),
        ("CONSISTENT_HASH", AllocateConsistentHash(DEFAULT_VIRTUAL_NODE_COUNT)),
        ("consistent_hash", AllocateConsistentHash(DEFAULT_VIRTUAL_NODE_COUNT)),
    ],
)
def test_strategy_by_name_accepts_any_case(name: str, expected: AllocateStrategy) -> None:
    strategy = strategy_by_name(name)
    assert strategy == expected
    assert strategy.name == name.upper()


@pytest.mark.parametrize("name", ["", "AVERAGE", "MACHINE_ROOM", "CONFIG"])
def test_strategy_by_name_rejects_unknown_names_listing_valid_ones(name: str) -> None:
    with pytest.raises(ValueError, match="AVG, AVG_BY_CIRCLE, CONSISTENT_HASH") as excinfo:
        strategy_by_name(name)
    assert repr(name) in str(excinfo.value)


# --- Properties --------------------------------------------------------------------------------

queue_sets = st.sets(
    st.builds(
        MessageQueue,
        topic=st.sampled_from(["TopicA", "TopicB", "%RETRY%g"]),
        broker_name=st.sampled_from(["broker-a", "broker-b", "broker-c"]),
        queue_id=st.integers(min_value=0, max_value=15),
    ),
    max_size=40,
)
client_id_lists = st.lists(st.text(min_size=1, max_size=8), min_size=1, max_size=8, unique=True)


@settings(max_examples=60, deadline=None)
@pytest.mark.parametrize("strategy", ALL_STRATEGIES, ids=STRATEGY_IDS)
@given(queues=queue_sets, client_ids=client_id_lists)
def test_every_queue_goes_to_exactly_one_client(
    strategy: AllocateStrategy, queues: set[MessageQueue], client_ids: list[str]
) -> None:
    claimed = owners(strategy, sorted(queues), client_ids)
    assert {queue: len(claimants) for queue, claimants in claimed.items()} == dict.fromkeys(
        queues, 1
    )


@settings(max_examples=40, deadline=None)
@pytest.mark.parametrize("strategy", ALL_STRATEGIES, ids=STRATEGY_IDS)
@given(queues=queue_sets, client_ids=client_id_lists, data=st.data())
def test_input_order_does_not_matter(
    strategy: AllocateStrategy,
    queues: set[MessageQueue],
    client_ids: list[str],
    data: st.DataObject,
) -> None:
    shuffled_queues = data.draw(st.permutations(sorted(queues)))
    shuffled_client_ids = data.draw(st.permutations(client_ids))
    current = data.draw(st.sampled_from(client_ids))
    expected = strategy.allocate(GROUP, current, sorted(queues), sorted(client_ids))
    assert strategy.allocate(GROUP, current, shuffled_queues, shuffled_client_ids) == expected
    assert expected == sorted(expected)


@settings(max_examples=100, deadline=None)
@given(queues=queue_sets, client_ids=client_id_lists)
def test_averagely_shares_are_contiguous_and_differ_by_at_most_one(
    queues: set[MessageQueue], client_ids: list[str]
) -> None:
    by_client = shares(AllocateAveragely(), list(queues), client_ids)
    ordered_clients = sorted(client_ids, key=lambda text: text.encode("utf-16-be"))
    sizes = [len(by_client[client]) for client in ordered_clients]
    assert max(sizes) - min(sizes) <= 1
    # Larger shares first; concatenated in client order, the shares rebuild the sorted queues.
    assert sizes == sorted(sizes, reverse=True)
    assert [queue for client in ordered_clients for queue in by_client[client]] == sorted(queues)


@settings(max_examples=100, deadline=None)
@given(queues=queue_sets, client_ids=client_id_lists)
def test_averagely_by_circle_shares_differ_by_at_most_one(
    queues: set[MessageQueue], client_ids: list[str]
) -> None:
    sizes = [
        len(share)
        for share in shares(AllocateAveragelyByCircle(), list(queues), client_ids).values()
    ]
    assert max(sizes) - min(sizes) <= 1


@settings(max_examples=60, deadline=None)
@given(
    queues=queue_sets,
    client_ids=client_id_lists,
    newcomer=st.text(min_size=1, max_size=8),
    virtual_node_count=st.integers(min_value=1, max_value=DEFAULT_VIRTUAL_NODE_COUNT),
)
def test_consistent_hash_moves_queues_only_to_a_joining_client(
    queues: set[MessageQueue], client_ids: list[str], newcomer: str, virtual_node_count: int
) -> None:
    """When a client joins, a queue either stays where it was or goes to the newcomer; read
    the other way, when a client leaves only its own queues move."""
    strategy = AllocateConsistentHash(virtual_node_count)
    if newcomer in client_ids:
        client_ids = [client for client in client_ids if client != newcomer]
    if not client_ids:
        client_ids = [newcomer + "-old"]
    before = owners(strategy, list(queues), client_ids)
    after = owners(strategy, list(queues), [*client_ids, newcomer])
    for queue in queues:
        assert after[queue] in (before[queue], [newcomer])
