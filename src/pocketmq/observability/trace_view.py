"""mqadmin's `queryMsgTraceById` view of trace records: the rows and columns it prints.

The records come from `trace.decode`; this module only chooses and lays out the rows, as
RocketMQ's `QueryMsgTraceByIdSubCommand` does, so `pocketmq admin queryMsgTraceById` prints
what the real mqadmin prints for the same records.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo

from pocketmq.observability.trace import (
    JAVA_NULL,
    TraceBean,
    TraceContext,
    TraceType,
    java_hash_order,
)


@dataclass(frozen=True, slots=True)
class TraceMessage:
    """One message found on the trace topic: who sent it (born host IP) and its records."""

    born_host: str | None
    contexts: tuple[TraceContext, ...]


@dataclass(frozen=True, slots=True)
class TraceView:
    """One row of mqadmin's trace view (Java `TraceView.decodeFromTraceTransData`)."""

    trace_type: TraceType
    group_name: str
    client_host: str | None  # the trace message's born host, not a field of the record
    timestamp_ms: int
    cost_time_ms: int
    status: str  # "success" or "failed"
    bean: TraceBean


def trace_views(message: TraceMessage, msg_id: str) -> list[TraceView]:
    """Returns the rows of one trace message that concern `msg_id` (first bean's msgId only)."""
    return [
        TraceView(
            trace_type=c.trace_type,
            group_name=c.group_name,
            client_host=message.born_host,
            timestamp_ms=c.timestamp_ms,
            cost_time_ms=c.cost_time_ms,
            status="success" if c.success else "failed",
            bean=c.beans[0],
        )
        for c in message.contexts
        if c.beans and c.beans[0].msg_id == msg_id
    ]


def _java_length(text: str) -> int:
    if text.isascii():
        return len(text)
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def _left(value: str | None, width: int) -> str:
    text = JAVA_NULL if value is None else value
    return text + " " * max(0, width - _java_length(text))


def _row(cells: Sequence[str | None]) -> str:
    widths = (10, 20, 20, 20, 10, 10)
    return " ".join(_left(cell, width) for cell, width in zip(cells, widths, strict=True)) + "\n"


def _format_time(timestamp_ms: int, tz: tzinfo) -> str:
    moment = datetime.fromtimestamp(timestamp_ms // 1000, tz)
    return f"{moment.year:04d}-{moment:%m-%d %H:%M:%S}"


def format_trace_view(messages: Iterable[TraceMessage], msg_id: str, *, tz: tzinfo = UTC) -> str:
    """Returns what `mqadmin queryMsgTraceById -i msg_id` prints for these trace messages.

    Only Pub and SubAfter records are shown. Each Pub row comes with its own header and a blank
    line, in query order. SubAfter rows are grouped by consumer group, groups in Java
    `HashMap` order, rows within a group in query order, each group closed by a blank line.
    SubBefore, EndTransaction and Recall records are not printed. Nothing is sorted.

    Args:
        messages: the trace-topic messages returned by the key query, in query order.
        msg_id: the message id asked for.
        tz: the zone times are shown in; mqadmin uses the JVM's default zone.
    """
    out: list[str] = []
    consumer_views: dict[str, list[TraceView]] = {}
    for message in messages:
        for view in trace_views(message, msg_id):
            if view.trace_type is TraceType.PUB:
                out.append(
                    _row(
                        [
                            "#Type",
                            "#ProducerGroup",
                            "#ClientHost",
                            "#SendTime",
                            "#CostTimes",
                            "#Status",
                        ]
                    )
                )
                out.append(_row(_cells("Pub", view, tz)))
                out.append("\n")
            elif view.trace_type is TraceType.SUB_AFTER:
                consumer_views.setdefault(view.group_name, []).append(view)
    for group in java_hash_order(consumer_views):
        out.append(
            _row(
                ["#Type", "#ConsumerGroup", "#ClientHost", "#ConsumerTime", "#CostTimes", "#Status"]
            )
        )
        out.extend(_row(_cells("Sub", view, tz)) for view in consumer_views[group])
        out.append("\n")
    return "".join(out)


def _cells(kind: str, view: TraceView, tz: tzinfo) -> list[str | None]:
    return [
        kind,
        view.group_name,
        view.client_host,
        _format_time(view.timestamp_ms, tz),
        f"{view.cost_time_ms}ms",
        view.status,
    ]
