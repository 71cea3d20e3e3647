"""Fixtures for store tests: small files, a manual clock, a store factory."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pocketmq.common.properties import encode_properties
from pocketmq.runtime.clock import ManualClock
from pocketmq.store.api import MessageToStore
from pocketmq.store.config import MessageStoreConfig
from pocketmq.store.message_store import MessageStore

COMMIT_LOG_FILE_SIZE = 64 * 1024
QUEUE_FILE_SIZE = 20 * 50


def small_config(root: Path, **overrides: object) -> MessageStoreConfig:
    """A store configuration with tiny files, so roll-over happens after a few messages."""
    config = MessageStoreConfig(
        store_path_root_dir=str(root),
        mapped_file_size_commit_log=COMMIT_LOG_FILE_SIZE,
        mapped_file_size_consume_queue=QUEUE_FILE_SIZE,
        max_hash_slot_num=64,
        max_index_num=200,
    )
    for name, value in overrides.items():
        setattr(config, name, value)
    return config


def message(
    topic: str = "TopicTest",
    body: bytes = b"hello",
    *,
    queue_id: int = 0,
    tags: str | None = None,
    keys: str | None = None,
    uniq_key: str | None = None,
) -> MessageToStore:
    properties = encode_properties({"TAGS": tags, "KEYS": keys, "UNIQ_KEY": uniq_key})
    return MessageToStore(
        topic=topic,
        body=body,
        properties=properties,
        queue_id=queue_id,
        born_timestamp=1_700_000_000_000,
        born_host=("10.0.0.1", 5555),
    )


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def open_store(tmp_path: Path, clock: ManualClock) -> Iterator[Callable[..., MessageStore]]:
    """Opens (and recovers) a store on `tmp_path`; every store opened is closed at the end."""
    opened: list[MessageStore] = []

    def factory(**overrides: object) -> MessageStore:
        store = MessageStore(small_config(tmp_path / "store", **overrides), clock=clock)
        store.load()
        opened.append(store)
        return store

    yield factory
    for store in opened:
        store.close()
