"""The example Grafana dashboard and Prometheus alert rules only use metrics pocketmq serves.

Every PromQL expression in `examples/grafana/pocketmq-dashboard.json` (panel targets and
template variables) and `examples/prometheus/alerts.yml` is tokenised; each metric name must be
some catalog `Definition`'s Prometheus name (histograms: with `_bucket`, `_sum` or `_count`), or
`up`, and each label it is matched or grouped on must be one that metric carries.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from pocketmq.observability.catalog import ALL, Kind

ROOT = Path(__file__).resolve().parents[3]
DASHBOARD = ROOT / "examples" / "grafana" / "pocketmq-dashboard.json"
ALERTS = ROOT / "examples" / "prometheus" / "alerts.yml"
PROMETHEUS = ROOT / "examples" / "prometheus" / "prometheus.yml"

CONSTANT_LABELS = frozenset({"cluster", "node_type", "node_id", "otel_scope_name"})
"""Labels every pocketmq series carries besides its Definition's."""
TARGET_LABELS = frozenset({"job", "instance"})
"""Labels Prometheus gives the `up` series of a scrape target."""

KEYWORDS = frozenset(
    {
        # binary operators, modifiers and literals
        "and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring",
        "group_left", "group_right", "inf", "nan", "atan2", "start", "end",
        # aggregations
        "sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values",
        "bottomk", "topk", "quantile", "limitk", "limit_ratio",
        # functions
        "abs", "absent", "absent_over_time", "ceil", "changes", "clamp", "clamp_max",
        "clamp_min", "day_of_month", "day_of_week", "day_of_year", "days_in_month", "delta",
        "deriv", "exp", "floor", "histogram_quantile", "histogram_count", "histogram_sum",
        "histogram_fraction", "holt_winters", "hour", "idelta", "increase", "irate",
        "label_join", "label_replace", "ln", "log2", "log10", "minute", "month",
        "predict_linear", "rate", "resets", "round", "scalar", "sgn", "sort", "sort_desc",
        "sqrt", "time", "timestamp", "vector", "year", "avg_over_time", "min_over_time",
        "max_over_time", "sum_over_time", "count_over_time", "quantile_over_time",
        "stddev_over_time", "stdvar_over_time", "last_over_time", "present_over_time",
        # grafana
        "label_values", "le",
    }
)  # fmt: skip

_GRAFANA_VARIABLE = re.compile(r"\$\{[^}]*\}|\$\w+|\[\[\w+\]\]")
_SELECTOR = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)?\s*\{([^}]*)\}")
_MATCHER = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"')
_RANGE = re.compile(r"\[[^\]]*\]")
_OFFSET = re.compile(r"\boffset\s+-?\w+")
_GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)")
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'')
_IDENTIFIER = re.compile(r"(?<![a-zA-Z0-9_:.])([a-zA-Z_:][a-zA-Z0-9_:]*)(?![a-zA-Z0-9_:]|\s*\()")


@dataclass(frozen=True)
class Usage:
    """What one expression uses: metric names, `{...}` labels per metric, grouping labels."""

    metrics: frozenset[str]
    matchers: tuple[tuple[str, str], ...]
    """(metric, label) for every label matched in a selector."""
    grouping: frozenset[str]
    """Labels named in by/without/on/ignoring/group_left/group_right."""


def parse(expr: str) -> Usage:
    """Tokenise a PromQL expression (Grafana variables allowed) into what it uses."""
    text = _GRAFANA_VARIABLE.sub("x", expr)
    matchers: list[tuple[str, str]] = []
    for match in _SELECTOR.finditer(text):
        metric = match.group(1) or ""
        inside = match.group(2)
        if not metric:
            name = re.search(r'__name__\s*=\s*"([^"]+)"', inside)
            metric = name.group(1) if name else "{...} without a metric name"
        for label, _op, _value in _MATCHER.findall(inside):
            if label != "__name__":
                matchers.append((metric, label))
        if _MATCHER.sub("", inside).replace(",", "").strip():
            matchers.append((metric, f"unparsed matcher {inside!r}"))
    text = _SELECTOR.sub(lambda m: f" {m.group(1) or ''} ", text)
    text = _RANGE.sub(" ", text)
    text = _OFFSET.sub(" ", text)
    grouping: set[str] = set()
    for _keyword, labels in _GROUPING.findall(text):
        grouping.update(label.strip() for label in labels.split(",") if label.strip())
    text = _GROUPING.sub(" ", text)
    text = re.sub(r"\b(group_left|group_right)\b", " ", text)
    text = _STRING.sub(" ", text)
    metrics = {m for m in _IDENTIFIER.findall(text) if m.lower() not in KEYWORDS}
    metrics.update(metric for metric, _label in matchers)
    return Usage(frozenset(metrics), tuple(matchers), frozenset(grouping))


def served_labels() -> dict[str, frozenset[str]]:
    """Every name pocketmq serves, with the labels its series carry."""
    served: dict[str, frozenset[str]] = {"up": TARGET_LABELS}
    for definition in ALL:
        labels = CONSTANT_LABELS | set(definition.labels)
        name = definition.exposition_name
        if definition.kind is Kind.HISTOGRAM:
            served[name + "_bucket"] = labels | {"le"}
            served[name + "_sum"] = labels
            served[name + "_count"] = labels
        else:
            served[name] = labels
    return served


SERVED = served_labels()


def problems(expr: str) -> list[str]:
    """What is wrong with one expression; empty if every metric and label is served."""
    usage = parse(expr)
    found = [f"unknown metric {metric!r}" for metric in sorted(usage.metrics - SERVED.keys())]
    found += [
        f"label {label!r} is not on {metric!r} (it has {sorted(SERVED[metric])})"
        for metric, label in usage.matchers
        if metric in SERVED and label not in SERVED[metric]
    ]
    found += [
        f"grouping label {label!r} is not on {metric!r}"
        for label in sorted(usage.grouping)
        for metric in sorted(usage.metrics & SERVED.keys())
        if label not in SERVED[metric]
    ]
    if not usage.metrics:
        found.append("no metric found in the expression")
    return found


# -- what the files hold ------------------------------------------------------------------------
def load_dashboard() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text(encoding="utf-8"))


def load_alerts() -> dict[str, Any]:
    return yaml.safe_load(ALERTS.read_text(encoding="utf-8"))


def all_panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    """Every panel, including those inside collapsed rows."""
    found = []
    for panel in dashboard["panels"]:
        found.append(panel)
        found.extend(panel.get("panels", []))
    return found


def dashboard_queries() -> list[tuple[str, str]]:
    dashboard = load_dashboard()
    queries = []
    for panel in all_panels(dashboard):
        if panel["type"] == "row":
            continue
        for target in panel.get("targets", []):
            where = f"panel {panel['id']} {panel['title']!r} target {target.get('refId')}"
            queries.append((where, target.get("expr", "")))
    for variable in dashboard["templating"]["list"]:
        if variable["type"] != "query":
            continue
        query = variable["query"]
        query = query["query"] if isinstance(query, dict) else query
        match = re.fullmatch(r"\s*label_values\((.*),\s*([a-zA-Z_]\w*)\s*\)\s*", query)
        assert match, f"variable {variable['name']!r}: expected label_values(metric, label)"
        selector, label = match.groups()
        metric = parse(selector).metrics
        queries.append((f"variable {variable['name']!r}", f"sum by ({label}) ({selector})"))
        assert len(metric) == 1, f"variable {variable['name']!r}: one metric, got {metric}"
    return queries


def alert_queries() -> list[tuple[str, str]]:
    return [
        (f"rule {rule.get('alert') or rule.get('record')!r}", rule["expr"])
        for group in load_alerts()["groups"]
        for rule in group["rules"]
    ]


QUERIES = [("dashboard " + where, expr) for where, expr in dashboard_queries()] + [
    ("alerts.yml " + where, expr) for where, expr in alert_queries()
]


# -- the tokeniser ------------------------------------------------------------------------------
def test_parse_strips_selectors_ranges_and_grouping() -> None:
    usage = parse(
        "histogram_quantile(0.99, sum by (le, topic) (rate(rocketmq_message_size_bucket{"
        'cluster=~"$cluster",topic=~"$topic"}[$__rate_interval]))) / on (cluster) group_left '
        "(node_id) sum without (le) (rocketmq_topic_number offset 5m) > 1e3"
    )
    assert usage.metrics == {"rocketmq_message_size_bucket", "rocketmq_topic_number"}
    assert set(usage.matchers) == {
        ("rocketmq_message_size_bucket", "cluster"),
        ("rocketmq_message_size_bucket", "topic"),
    }
    assert usage.grouping == {"le", "topic", "cluster", "node_id"}


def test_a_typo_in_a_metric_or_label_is_reported() -> None:
    assert problems("sum(rate(rocketmq_messages_in_totl[5m]))") == [
        "unknown metric 'rocketmq_messages_in_totl'"
    ]
    assert problems('rocketmq_consumer_lag_messages{consumer_grup="g"}')[0].startswith(
        "label 'consumer_grup' is not on 'rocketmq_consumer_lag_messages'"
    )
    assert problems("sum by (replica) (rocketmq_storage_size_bytes)") == [
        "grouping label 'replica' is not on 'rocketmq_storage_size_bytes'"
    ]
    assert problems("rocketmq_rpc_latency_bucket") == [
        "unknown metric 'rocketmq_rpc_latency_bucket'"
    ]
    assert problems('up{job="pocketmq-broker"} == 0') == []


# -- the files ----------------------------------------------------------------------------------
@pytest.mark.parametrize(("where", "expr"), QUERIES, ids=[where for where, _ in QUERIES])
def test_every_expression_uses_served_metrics_and_labels(where: str, expr: str) -> None:
    found = problems(expr)
    assert not found, f"{where}: " + "; ".join(found) + f"\n  expr: {expr}"


def test_dashboard_shape() -> None:
    dashboard = load_dashboard()
    assert dashboard["schemaVersion"] >= 36
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert {"cluster", "node_id", "topic", "consumer_group"} <= variables.keys()
    assert variables.get("datasource", {}).get("type") == "datasource" or any(
        i.get("type") == "datasource" for i in dashboard.get("__inputs", [])
    ), "needs a datasource template variable or a ${DS_...} input"

    panels = all_panels(dashboard)
    ids = [panel["id"] for panel in panels]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    assert not duplicates, f"panel ids used more than once: {duplicates}"

    for panel in panels:
        if panel["type"] == "row":
            continue
        name = f"panel {panel['id']} {panel.get('title')!r}"
        assert panel.get("datasource"), f"{name} has no datasource"
        assert panel.get("targets"), f"{name} has no targets"
        for target in panel["targets"]:
            assert target.get("expr", "").strip(), f"{name} target {target.get('refId')} is empty"
            assert target.get("refId"), f"{name} has a target without refId"
        assert {"x", "y", "w", "h"} <= panel.get("gridPos", {}).keys(), f"{name} has no gridPos"

    rows = [panel["title"] for panel in panels if panel["type"] == "row"]
    for title in (
        "Overview",
        "Throughput",
        "Latency",
        "Consumers",
        "Storage",
        "Replication & consensus",
        "Durability",
        "Transactions",
        "Timer",
    ):
        assert title in rows, f"dashboard has no {title!r} row"


def test_alert_rules_shape() -> None:
    rules = [rule for group in load_alerts()["groups"] for rule in group["rules"]]
    assert rules
    names = [rule["alert"] for rule in rules]
    assert len(names) == len(set(names)), f"alert names repeat: {names}"
    for rule in rules:
        name = f"rule {rule['alert']!r}"
        assert rule.get("for"), f"{name} has no 'for:'"
        assert rule.get("labels", {}).get("severity") in {"critical", "warning", "info"}, name
        annotations = rule.get("annotations", {})
        assert annotations.get("summary"), f"{name} has no summary"
        assert annotations.get("description"), f"{name} has no description"


def test_prometheus_config_scrapes_the_broker_and_loads_the_rules() -> None:
    config = yaml.safe_load(PROMETHEUS.read_text(encoding="utf-8"))
    assert "alerts.yml" in config["rule_files"]
    targets = [
        target
        for job in config["scrape_configs"]
        for static in job.get("static_configs", [])
        for target in static["targets"]
    ]
    assert "127.0.0.1:5557" in targets
