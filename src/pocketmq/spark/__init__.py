"""PySpark data source for pocketmq topics (needs the `spark` extra: pyspark and pyarrow).

`PocketMQDataSource` is imported on first use, so that the pure modules (`offsets`, `options`)
import, and are tested, without pyspark or pyarrow installed."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pocketmq.spark.datasource import PocketMQDataSource

__all__ = ["PocketMQDataSource"]


def __getattr__(name: str) -> object:
    if name == "PocketMQDataSource":
        from pocketmq.spark.datasource import PocketMQDataSource

        return PocketMQDataSource
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
