"""Where a process counts: counters, histograms and gauges kept as plain dicts.

Request paths add to a dict keyed by the tuple of label values, about 0.2 µs a call;
OpenTelemetry's Python instruments cost about 9.5 µs a call on this machine (attribute sets are
hashed and locked per call), so they are not used on hot paths. Gauges are callbacks, read only
when an exporter collects. `collect()` turns the whole state into `Family` values, which the
exporters (`prometheus.py`, `otlp.py`) translate into their formats.

The state is changed and collected on the process's event loop only; exporters that run on
threads hop onto it (`MetricsHub.collect_threadsafe`).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from bisect import bisect_left
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from pocketmq.observability.catalog import Definition

log = logging.getLogger(__name__)

Labels = tuple[str, ...]
GaugeReader = Callable[[], Iterable[tuple[Labels, float]]]

CARDINALITY_LIMIT_DEFAULT = 50_000
OVERFLOW = "otel_metric_overflow"
"""The label of the series that takes every label set past the cardinality limit (as in
OpenTelemetry)."""


class Counter:
    """A monotonic sum per label set."""

    __slots__ = ("definition", "limit", "values")

    def __init__(self, definition: Definition, limit: int = CARDINALITY_LIMIT_DEFAULT) -> None:
        self.definition = definition
        self.limit = limit
        self.values: dict[Labels, float] = {}

    def add(self, labels: Labels, amount: float = 1) -> None:
        values = self.values
        if labels in values:
            values[labels] += amount
        else:
            key = _admit(values, labels, self.limit)
            values[key] = values.get(key, 0) + amount


class Histogram:
    """Bucket counts, then the sum, per label set; buckets are upper bounds, inclusive."""

    __slots__ = ("bounds", "definition", "limit", "values")

    def __init__(self, definition: Definition, limit: int = CARDINALITY_LIMIT_DEFAULT) -> None:
        self.definition = definition
        self.limit = limit
        self.bounds = definition.buckets
        self.values: dict[Labels, list[float]] = {}

    def record(self, labels: Labels, value: float) -> None:
        row = self.values.get(labels)
        if row is None:
            key = _admit(self.values, labels, self.limit)
            row = self.values.setdefault(key, [0] * (len(self.bounds) + 2))
        row[bisect_left(self.bounds, value)] += 1
        row[-1] += value


def _admit(values: Mapping[Labels, object], labels: Labels, limit: int) -> Labels:
    """`labels`, or the overflow label set once `limit` label sets exist."""
    if len(values) < limit:
        return labels
    return (OVERFLOW,)


@dataclass(frozen=True, slots=True)
class Gauge:
    definition: Definition
    read: GaugeReader


@dataclass(frozen=True, slots=True)
class Family:
    """One instrument's points at collection time, with the constant labels of its source."""

    definition: Definition
    scope: str
    constant: Mapping[str, str]
    points: Sequence[tuple[Labels, float | Sequence[float]]]
    """(label values, value); a histogram's value is its bucket counts, then the sum."""


class MetricSource:
    """One component's instruments (the broker's, the NameServer's ...) and its constant
    labels. `enabled` names the catalogue groups to serve; the others get instruments that
    count but are never collected, so callers need no checks."""

    def __init__(
        self,
        scope: str,
        constant: Mapping[str, str],
        *,
        enabled: Iterable[str] | None = None,
        limit: int = CARDINALITY_LIMIT_DEFAULT,
    ) -> None:
        self.scope = scope
        self.constant = dict(constant)
        self.enabled = None if enabled is None else frozenset(enabled)
        self.limit = limit
        self._counters: list[Counter] = []
        self._histograms: list[Histogram] = []
        self._gauges: list[Gauge] = []

    def counter(self, definition: Definition) -> Counter:
        counter = Counter(definition, self.limit)
        self._counters.append(counter)
        return counter

    def histogram(self, definition: Definition) -> Histogram:
        histogram = Histogram(definition, self.limit)
        self._histograms.append(histogram)
        return histogram

    def observe(self, definition: Definition, read: GaugeReader) -> None:
        """`read` gives the points at collection: a gauge, or a counter kept elsewhere."""
        self._gauges.append(Gauge(definition, read))

    def _serves(self, definition: Definition) -> bool:
        return self.enabled is None or definition.group in self.enabled

    def collect(self) -> list[Family]:
        families = [
            self._family(counter.definition, list(counter.values.items()))
            for counter in self._counters
            if self._serves(counter.definition)
        ]
        for histogram in self._histograms:
            if self._serves(histogram.definition):
                rows = [(labels, list(row)) for labels, row in histogram.values.items()]
                families.append(self._family(histogram.definition, rows))
        for gauge in self._gauges:
            if not self._serves(gauge.definition):
                continue
            try:
                points = list(gauge.read())
            except Exception:  # a broken gauge must not cost the scrape every other metric
                log.exception("reading gauge %s failed", gauge.definition.name)
                continue
            families.append(self._family(gauge.definition, points))
        return families

    def _family(
        self, definition: Definition, points: Sequence[tuple[Labels, float | Sequence[float]]]
    ) -> Family:
        return Family(definition, self.scope, self.constant, points)


class MetricsHub:
    """Every source of a process, collected together on its event loop."""

    def __init__(self) -> None:
        self.sources: list[MetricSource] = []
        self.started_ns = time.time_ns()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None

    def add(self, source: MetricSource) -> None:
        self.sources.append(source)

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        """Collections from other threads run on `loop` (the sources' owner)."""
        self._loop = loop
        self._loop_thread = threading.get_ident()

    def collect(self) -> list[Family]:
        return [family for source in self.sources for family in source.collect()]

    def collect_threadsafe(self, timeout_s: float = 10.0) -> list[Family]:
        """`collect()` from any thread: on the loop's own thread directly, else on the loop."""
        loop = self._loop
        if loop is None or threading.get_ident() == self._loop_thread or loop.is_closed():
            return self.collect()

        async def collect() -> list[Family]:
            return self.collect()

        return asyncio.run_coroutine_threadsafe(collect(), loop).result(timeout_s)


def labels_of(definition: Definition, values: Labels) -> dict[str, str]:
    """The label names of `definition` paired with `values` (or the overflow label)."""
    if values == (OVERFLOW,) and definition.labels != (OVERFLOW,):
        return {OVERFLOW: "true"}
    return dict(zip(definition.labels, values, strict=True))
