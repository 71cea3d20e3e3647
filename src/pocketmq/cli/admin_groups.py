"""`pocketmq admin` consumer group commands: updateSubGroup, deleteSubGroup, consumerProgress,
resetOffsetByTime and skipAccumulatedMessage."""

from __future__ import annotations

import argparse
import json
import time
from datetime import datetime

from pocketmq.cli.admin_report import Report, human_time_ms, table
from pocketmq.client.admin import AdminClient, AdminError, SubscriptionGroupSettings
from pocketmq.client.admin.offset_resets import (
    ConsumerNotOnline,
    RollbackStats,
    reset_by_time,
    reset_by_time_old,
)
from pocketmq.client.message import MessageQueue
from pocketmq.common.topic_names import dlq_topic, retry_topic


async def update_sub_group(admin: AdminClient, args: argparse.Namespace) -> Report:
    settings = SubscriptionGroupSettings(
        group_name=args.groupName,
        consume_enable=args.consumeEnable,
        consume_from_min_enable=args.consumeFromMinEnable,
        consume_broadcast_enable=args.consumeBroadcastEnable,
        consume_message_orderly=args.consumeMessageOrderly,
        retry_queue_nums=args.retryQueueNums,
        retry_max_times=args.retryMaxTimes,
        broker_id=args.brokerId,
        which_broker_when_consume_slowly=args.whichBrokerWhenConsumeSlowly,
        notify_consumer_ids_changed_enable=args.notifyConsumerIdsChanged,
    )
    addresses = await admin.update_subscription_group(
        settings, cluster=args.clusterName, broker=args.brokerAddr
    )
    lines = [f"create subscription group to {address} success." for address in addresses]
    fields = ", ".join(f"{k}={json.dumps(v)}" for k, v in settings.to_json().items())
    lines.append(f"SubscriptionGroupConfig [{fields}]")
    return Report({"brokers": addresses, "subscriptionGroupConfig": settings.to_json()}, lines)


async def delete_sub_group(admin: AdminClient, args: argparse.Namespace) -> Report:
    group = args.groupName
    addresses = await admin.delete_subscription_group(
        group, cluster=args.clusterName, broker=args.brokerAddr, clean_offset=args.removeOffset
    )
    where = f" in cluster [{args.clusterName}]" if args.clusterName else ""
    lines = [
        f"delete subscription group [{group}] from broker [{address}]{where} success."
        for address in addresses
    ]
    if args.clusterName:
        # As mqadmin: the group's retry and dead-letter topics go with it.
        for topic in (retry_topic(group), dlq_topic(group)):
            try:
                await admin.delete_topic(topic, args.clusterName)
                lines.append(f"delete topic [{topic}] from cluster [{args.clusterName}] success.")
            except AdminError as exc:
                lines.append(f"topic [{topic}] not deleted: {exc}")
    return Report({"group": group, "brokers": addresses}, lines)


async def consumer_progress(admin: AdminClient, args: argparse.Namespace) -> Report:
    progress = await admin.consume_progress(args.groupName, args.topicName)
    rows = [
        [
            q.queue.topic,
            q.queue.broker_name,
            q.queue.queue_id,
            q.broker_offset,
            q.consumer_offset,
            q.diff,
            q.inflight,
            human_time_ms(q.last_timestamp_ms).partition(",")[0] or "N/A",
        ]
        for q in progress.queues
    ]
    diff_total = sum(q.diff for q in progress.queues)
    inflight_total = sum(q.inflight for q in progress.queues)
    headers = [
        "#Topic",
        "#Broker Name",
        "#QID",
        "#Broker Offset",
        "#Consumer Offset",
        "#Diff",
        "#Inflight",
        "#LastTime",
    ]
    lines = [
        *table(headers, rows),
        "",
        f"Consume TPS: {progress.consume_tps:.2f}",
        f"Consume Diff Total: {diff_total}",
        f"Consume Inflight Total: {inflight_total}",
    ]
    document = {
        "group": args.groupName,
        "offsetTable": [
            {
                "topic": q.queue.topic,
                "brokerName": q.queue.broker_name,
                "queueId": q.queue.queue_id,
                "brokerOffset": q.broker_offset,
                "consumerOffset": q.consumer_offset,
                "pullOffset": q.pull_offset,
                "lastTimestamp": q.last_timestamp_ms,
            }
            for q in progress.queues
        ],
        "consumeTps": progress.consume_tps,
        "diffTotal": diff_total,
        "inflightTotal": inflight_total,
    }
    return Report(document, lines)


# -- offset resets ----------------------------------------------------------------------------


def parse_reset_time(text: str) -> int:
    """mqadmin's `-s`: `now`, milliseconds, or local `yyyy-MM-dd#HH:mm:ss:SSS`.

    Raises:
        AdminError: none of those.
    """
    text = text.strip()
    if text == "now":
        return int(time.time() * 1000)
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        # Local time, as mqadmin's SimpleDateFormat reads it.
        moment = datetime.strptime(text, "%Y-%m-%d#%H:%M:%S:%f").astimezone()
    except ValueError:
        raise AdminError(
            f"bad timestamp {text!r}: use now, milliseconds or yyyy-MM-dd#HH:mm:ss:SSS"
        ) from None
    return int(moment.timestamp() * 1000)


async def reset_offset_by_time(admin: AdminClient, args: argparse.Namespace) -> Report:
    group, topic, text = args.groupName, args.topic, args.timestamp
    timestamp_ms = parse_reset_time(text)
    force = args.force
    try:
        offsets = await reset_by_time(
            admin, group, topic, timestamp_ms, force=force, cpp=args.cplus
        )
    except ConsumerNotOnline:
        stats = await reset_by_time_old(admin, group, topic, timestamp_ms, force=force)
        first = (
            f"reset consumer offset by specified consumerGroup[{group}], topic[{topic}], "
            f"force[{_java_bool(force)}], timestamp(string)[{text}], "
            f"timestamp(long)[{timestamp_ms}]"
        )
        return _rollback_report(first, stats)
    first = (
        f"start reset consumer offset by specified, group[{group}], topic[{topic}], "
        f"force[{_java_bool(force)}], timestamp(string)[{text}], "
        f"timestamp(long)[{timestamp_ms}]"
    )
    return _offsets_report([first], offsets)


async def skip_accumulated_message(admin: AdminClient, args: argparse.Namespace) -> Report:
    group, topic = args.groupName, args.topic
    try:
        offsets = await reset_by_time(admin, group, topic, -1, force=args.force)
    except ConsumerNotOnline:
        stats = await reset_by_time_old(admin, group, topic, -1, force=args.force)
        return _rollback_report(None, stats)
    return _offsets_report([], offsets)


def _java_bool(value: bool) -> str:
    return "true" if value else "false"


def _offsets_report(lines: list[str], offsets: dict[MessageQueue, int]) -> Report:
    # mqadmin's own columns (`%-40s  %-40d  %-40d`), so scripts reading its output work.
    lines = [*lines, f"{'#brokerName':<40}  {'#queueId':<40}  {'#offset':<40}"]
    rows = sorted(offsets.items())
    lines += [f"{q.broker_name:<40}  {q.queue_id:<40}  {o:<40}" for q, o in rows]
    document = [
        {"topic": q.topic, "brokerName": q.broker_name, "queueId": q.queue_id, "offset": o}
        for q, o in rows
    ]
    return Report({"offsetTable": document}, lines)


def _rollback_report(first: str | None, stats: list[RollbackStats]) -> Report:
    names = ["#brokerName", "#queueId", "#brokerOffset", "#consumerOffset"]
    names += ["#timestampOffset", "#resetOffset" if first else "#rollbackOffset"]
    lines = [first] if first else []
    lines.append("  ".join(f"{name:<20}" for name in names))
    for row in stats:
        cells = [row.queue.broker_name, row.queue.queue_id, row.broker_offset]
        cells += [row.consumer_offset, row.timestamp_offset, row.rollback_offset]
        lines.append("  ".join(f"{cell:<20}" for cell in cells))
    document = [
        {
            "topic": row.queue.topic,
            "brokerName": row.queue.broker_name,
            "queueId": row.queue.queue_id,
            "brokerOffset": row.broker_offset,
            "consumerOffset": row.consumer_offset,
            "timestampOffset": row.timestamp_offset,
            "rollbackOffset": row.rollback_offset,
        }
        for row in stats
    ]
    return Report({"rollbackStats": document}, lines)
