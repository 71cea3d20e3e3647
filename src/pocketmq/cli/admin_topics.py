"""`pocketmq admin` topic commands: updateTopic, deleteTopic, topicList, topicRoute and
topicStatus, printed as mqadmin prints them."""

from __future__ import annotations

import argparse
import json

from pocketmq.cli.admin_report import Report, human_time_ms, table
from pocketmq.client.admin import AdminClient, TopicSettings
from pocketmq.common.constants import PERM_INHERIT, PERM_READ, PERM_WRITE
from pocketmq.common.route_json import encode_topic_route


def perm_text(perm: int) -> str:
    """RocketMQ's `PermName.perm2String`: `RW-` for read-write, `X` for inherit."""
    return (
        ("R" if perm & PERM_READ else "-")
        + ("W" if perm & PERM_WRITE else "-")
        + ("X" if perm & PERM_INHERIT else "-")
    )


async def update_topic(admin: AdminClient, args: argparse.Namespace) -> Report:
    settings = TopicSettings(
        topic=args.topic,
        read_queue_nums=args.readQueueNums,
        write_queue_nums=args.writeQueueNums,
        perm=args.perm,
        order=args.order,
        attributes=args.attributes or "",
    )
    addresses = await admin.create_topic(
        settings, cluster=args.clusterName, broker=args.brokerAddr, force=args.force
    )
    # Brokers re-register at once; wait (bounded) so the next command already sees the route.
    await admin.wait_for_route(settings.topic)
    lines = [f"create topic to {address} success." for address in addresses]
    lines.append(
        f"TopicConfig [topicName={settings.topic}, readQueueNums={settings.read_queue_nums}, "
        f"writeQueueNums={settings.write_queue_nums}, perm={perm_text(settings.perm)}, "
        f"topicFilterType=SINGLE_TAG, topicSysFlag={settings.topic_sys_flag}, "
        f"order={str(settings.order).lower()}, attributes={{{_attributes_shown(settings)}}}]"
    )
    return Report({"brokers": addresses, "topicConfig": settings.to_json()}, lines)


def _attributes_shown(settings: TopicSettings) -> str:
    parts = [p.strip()[1:] for p in settings.attributes.split(",") if p.strip().startswith("+")]
    return ", ".join(parts)


async def delete_topic(admin: AdminClient, args: argparse.Namespace) -> Report:
    addresses = await admin.delete_topic(args.topic, args.clusterName)
    return Report(
        {"topic": args.topic, "cluster": args.clusterName, "brokers": addresses},
        [
            f"delete topic [{args.topic}] from cluster [{args.clusterName}] success.",
            f"delete topic [{args.topic}] from NameServer success.",
        ],
    )


async def topic_list(admin: AdminClient, args: argparse.Namespace) -> Report:
    topics = await admin.topic_list()
    return Report({"topicList": topics}, topics)


async def topic_route(admin: AdminClient, args: argparse.Namespace) -> Report:
    route = await admin.topic_route(args.topic)
    document = json.loads(encode_topic_route(route, standard_json=True))
    queues = {q.broker_name: q for q in route.queue_datas}
    rows: list[list[object]] = []
    total_read = total_write = 0
    for data in sorted(route.broker_datas, key=lambda d: d.broker_name):
        queue = queues.get(data.broker_name)
        read = queue.read_queue_nums if queue else 0
        write = queue.write_queue_nums if queue else 0
        total_read += read
        total_write += write
        addresses = ", ".join(f"{i}={a}" for i, a in sorted(data.broker_addrs.items()))
        rows.append(
            [
                data.cluster,
                data.broker_name,
                "{" + addresses + "}",
                read,
                write,
                queue.perm if queue else "",
            ]
        )
    rows.append(["Total:", len(queues), "", total_read, total_write, ""])
    headers = ["#ClusterName", "#BrokerName", "#BrokerAddrs", "#ReadQueue", "#WriteQueue", "#Perm"]
    return Report(document, table(headers, rows))


async def topic_status(admin: AdminClient, args: argparse.Namespace) -> Report:
    stats = await admin.topic_stats(args.topic)
    rows = [
        [
            q.queue.broker_name,
            q.queue.queue_id,
            q.min_offset,
            q.max_offset,
            human_time_ms(q.last_update_timestamp_ms),
        ]
        for q in stats.queues
    ]
    headers = ["#Broker Name", "#QID", "#Min Offset", "#Max Offset", "#Last Updated"]
    document = {
        "topic": args.topic,
        "offsetTable": [
            {
                "brokerName": q.queue.broker_name,
                "queueId": q.queue.queue_id,
                "minOffset": q.min_offset,
                "maxOffset": q.max_offset,
                "lastUpdateTimestamp": q.last_update_timestamp_ms,
            }
            for q in stats.queues
        ],
        "topicPutTps": stats.put_tps,
    }
    lines = [*table(headers, rows), "", f"Topic Put TPS: {stats.put_tps}"]
    return Report(document, lines)
