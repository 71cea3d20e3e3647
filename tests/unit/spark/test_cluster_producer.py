"""The connector's producer: a start that failed (NameServer down for a moment) is tried again
by the next send, since Spark reuses a worker process for later tasks."""

from __future__ import annotations

import pytest

pytest.importorskip("pyarrow")

from pocketmq.spark import cluster as cluster_module
from pocketmq.spark.cluster import Cluster


class FlakyProducer:
    starts = 0

    def __init__(self, group: str, *, namesrv: str, **connection: object) -> None:
        self.group = group

    async def start(self) -> None:
        FlakyProducer.starts += 1
        if FlakyProducer.starts == 1:
            raise ConnectionError("no NameServer answers")


def test_a_failed_producer_start_is_tried_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cluster_module, "Producer", FlakyProducer)
    cluster = Cluster("127.0.0.1:1")
    with pytest.raises(ConnectionError):
        cluster.run(cluster._started_producer())
    assert isinstance(cluster.run(cluster._started_producer()), FlakyProducer)
    assert FlakyProducer.starts == 2
    cluster.run(cluster._started_producer())
    assert FlakyProducer.starts == 2, "a started producer is kept"
