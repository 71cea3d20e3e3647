"""`pocketmq admin` consumer group commands: updateSubGroup, deleteSubGroup and
consumerProgress."""

from __future__ import annotations

import argparse
import json

from pocketmq.cli.admin_report import Report, human_time_ms, table
from pocketmq.client.admin import AdminClient, AdminError, SubscriptionGroupSettings
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
