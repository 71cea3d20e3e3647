"""Reading a `/metrics` endpoint in tests: scrape, pick series by labels, wait for a value."""

from __future__ import annotations

import urllib.request
from collections.abc import Callable
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

from pocketmq.testing import wait_until

SCRAPE_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Scrape:
    """One scrape: its text, families by name (name -> type) and samples."""

    text: str
    types: dict[str, str]
    samples: list[tuple[str, dict[str, str], float]]

    def value(self, name: str, **labels: str) -> float | None:
        """The sum of the samples named `name` whose labels include `labels`; None if none."""
        found = [
            value
            for sample, sample_labels, value in self.samples
            if sample == name and all(sample_labels.get(k) == v for k, v in labels.items())
        ]
        return sum(found) if found else None

    def label_names(self, family: str) -> set[str]:
        """Every label name the family's series carry (without `le`)."""
        return {
            label
            for sample, labels, _ in self.samples
            if sample == family or sample.removeprefix(family) in ("_bucket", "_count", "_sum")
            for label in labels
            if label != "le"
        }


def scrape(address: str) -> Scrape:
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=SCRAPE_TIMEOUT_S) as answer:
        assert answer.status == 200
        text = answer.read().decode()
    types: dict[str, str] = {}
    samples: list[tuple[str, dict[str, str], float]] = []
    for family in text_string_to_metric_families(text):
        # The parser drops `_total` from counter family names; keep the served name.
        name = family.name + "_total" if family.type == "counter" else family.name
        types[name] = family.type
        samples.extend((s.name, dict(s.labels), s.value) for s in family.samples)
    return Scrape(text, types, samples)


def wait_for_value(
    address: str,
    name: str,
    check: Callable[[float | None], bool],
    what: str,
    *,
    timeout_s: float = 30.0,
    **labels: str,
) -> Scrape:
    """Scrapes until `check(value)` holds for the series; returns that scrape."""

    def scraped() -> Scrape | None:
        found = scrape(address)
        return found if check(found.value(name, **labels)) else None

    return wait_until(
        scraped,
        what,
        timeout_s=timeout_s,
        poll_s=0.2,
        describe=lambda: scrape(address).value(name, **labels),
    )
