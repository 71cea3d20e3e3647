"""A latency histogram for benchmarks: microsecond buckets up to 1 ms, then 1% wide ones, so
percentiles stay within 1% however many samples arrive, in constant memory."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

_LINEAR_US = 1000
_GROWTH = math.log(1.01)


def _bucket(micros: float) -> int:
    if micros < _LINEAR_US:
        return max(0, int(micros))
    return _LINEAR_US + int(math.log(micros / _LINEAR_US) / _GROWTH)


def _bucket_value(index: int) -> float:
    if index < _LINEAR_US:
        return float(index)
    return _LINEAR_US * math.exp((index - _LINEAR_US) * _GROWTH)


@dataclass
class LatencyHistogram:
    """Samples in microseconds; `merge` and `reset` support per-interval lines."""

    counts: dict[int, int] = field(default_factory=dict)
    count: int = 0
    total_us: float = 0.0
    max_us: float = 0.0

    def record(self, micros: float) -> None:
        index = _bucket(micros)
        self.counts[index] = self.counts.get(index, 0) + 1
        self.count += 1
        self.total_us += micros
        if micros > self.max_us:
            self.max_us = micros

    def merge(self, other: LatencyHistogram) -> None:
        for index, n in other.counts.items():
            self.counts[index] = self.counts.get(index, 0) + n
        self.count += other.count
        self.total_us += other.total_us
        self.max_us = max(self.max_us, other.max_us)

    def reset(self) -> None:
        self.counts.clear()
        self.count = 0
        self.total_us = 0.0
        self.max_us = 0.0

    @property
    def mean_us(self) -> float:
        return self.total_us / self.count if self.count else 0.0

    def percentile(self, fraction: float) -> float:
        """The value at `fraction` (0.5, 0.99, 0.999) of the samples, within 1%."""
        if not self.count:
            return 0.0
        rank = max(1, math.ceil(fraction * self.count))
        seen = 0
        for index in sorted(self.counts):
            seen += self.counts[index]
            if seen >= rank:
                return min(_bucket_value(index), self.max_us)
        return self.max_us

    def summary(self) -> dict[str, float]:
        """count, mean, p50, p99, p99.9 and max, in microseconds."""
        return {
            "count": self.count,
            "mean_us": round(self.mean_us, 1),
            "p50_us": round(self.percentile(0.5), 1),
            "p99_us": round(self.percentile(0.99), 1),
            "p999_us": round(self.percentile(0.999), 1),
            "max_us": round(self.max_us, 1),
        }
