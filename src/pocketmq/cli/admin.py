"""`pocketmq admin <command>`: RocketMQ's `mqadmin` commands, with its names and flags.

Every command takes `-n host:port;host:port` (default: the `NAMESRV_ADDR` environment
variable) and `--json` (one JSON document on stdout, for scripts); without `--json` it prints
aligned tables with mqadmin's column names. A failure prints one line on stderr,
`pocketmq admin <command>: <what went wrong and what to do>`, and exits with status 1; a
command-line mistake exits with status 2, as argparse does.

This module only parses, calls `pocketmq.client.admin.AdminClient` and formats; each command is
a coroutine returning a `Report` (the JSON document and the text lines), so output is decided in
one place.
"""

from __future__ import annotations

import argparse
import base64
import json
import logging
import os
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any, Final

from pocketmq.cli import dead_letters, replication
from pocketmq.cli.admin_report import Report, key_values, table
from pocketmq.client.admin import (
    AdminClient,
    AdminError,
    FoundMessage,
    SubscriptionGroupSettings,
    TopicSettings,
    human_time_ms,
    split_namesrv_addresses,
)
from pocketmq.common.constants import PERM_INHERIT, PERM_READ, PERM_WRITE
from pocketmq.common.route_json import encode_topic_route

log = logging.getLogger("pocketmq.admin")

NAMESRV_ADDR_ENV: Final = "NAMESRV_ADDR"
RETRY_GROUP_TOPIC_PREFIX: Final = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX: Final = "%DLQ%"


Command = Callable[[AdminClient, argparse.Namespace], Awaitable[Report]]


# -- formatting --------------------------------------------------------------------------------


def perm_text(perm: int) -> str:
    """RocketMQ's `PermName.perm2String`: `RW-` for read-write, `X` for inherit."""
    return (
        ("R" if perm & PERM_READ else "-")
        + ("W" if perm & PERM_WRITE else "-")
        + ("X" if perm & PERM_INHERIT else "-")
    )


def _java_bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered not in ("true", "false"):
        raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")
    return lowered == "true"


def _message_document(found: FoundMessage) -> dict[str, Any]:
    message = found.message
    return {
        "msgId": found.msg_id,
        "offsetMsgId": found.offset_msg_id,
        "topic": message.topic,
        "brokerName": found.broker_name,
        "queueId": message.queue_id,
        "queueOffset": message.queue_offset,
        "commitLogOffset": message.physical_offset,
        "tags": found.tags,
        "keys": found.keys,
        "reconsumeTimes": message.reconsume_times,
        "bornTimestamp": message.born_timestamp,
        "storeTimestamp": message.store_timestamp,
        "bornHost": _host(message.born_host),
        "storeHost": _host(message.store_host),
        "sysFlag": message.sys_flag,
        "properties": dict(message.properties),
        "body": message.body.decode("utf-8", "replace"),
        "bodyBase64": base64.b64encode(message.body).decode("ascii"),
    }


def _host(host: tuple[str, int]) -> str:
    ip, port = host
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"


def _message_lines(found: FoundMessage) -> list[str]:
    """The block mqadmin's `queryMsgById` prints, with the body inline."""
    message = found.message
    properties = ", ".join(f"{k}={v}" for k, v in sorted(message.properties.items()))
    return key_values(
        [
            ("OffsetID:", found.offset_msg_id),
            ("Message ID:", found.msg_id),
            ("Topic:", message.topic),
            ("Broker Name:", found.broker_name),
            ("Tags:", f"[{found.tags}]" if found.tags is not None else "[null]"),
            ("Keys:", f"[{found.keys}]" if found.keys is not None else "[null]"),
            ("Queue ID:", message.queue_id),
            ("Queue Offset:", message.queue_offset),
            ("CommitLog Offset:", message.physical_offset),
            ("Reconsume Times:", message.reconsume_times),
            ("Born Timestamp:", human_time_ms(message.born_timestamp)),
            ("Store Timestamp:", human_time_ms(message.store_timestamp)),
            ("Born Host:", _host(message.born_host)),
            ("Store Host:", _host(message.store_host)),
            ("System Flag:", message.sys_flag),
            ("Properties:", "{" + properties + "}"),
            ("Message Body:", message.body.decode("utf-8", "replace")),
        ],
        separator=" ",
    )


# -- topics ------------------------------------------------------------------------------------


async def update_topic(admin: AdminClient, args: argparse.Namespace) -> Report:
    settings = TopicSettings(
        topic=args.topic,
        read_queue_nums=args.readQueueNums,
        write_queue_nums=args.writeQueueNums,
        perm=args.perm,
        order=args.order,
    )
    addresses = await admin.create_topic(settings, cluster=args.clusterName, broker=args.brokerAddr)
    # Brokers re-register at once; wait (bounded) so the next command already sees the route.
    await admin.wait_for_route(settings.topic)
    lines = [f"create topic to {address} success." for address in addresses]
    lines.append(
        f"TopicConfig [topicName={settings.topic}, readQueueNums={settings.read_queue_nums}, "
        f"writeQueueNums={settings.write_queue_nums}, perm={perm_text(settings.perm)}, "
        f"topicFilterType=SINGLE_TAG, topicSysFlag={settings.topic_sys_flag}, "
        f"order={str(settings.order).lower()}, attributes={{}}]"
    )
    return Report({"brokers": addresses, "topicConfig": settings.to_json()}, lines)


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


# -- cluster and brokers -----------------------------------------------------------------------


async def cluster_list(admin: AdminClient, args: argparse.Namespace) -> Report:
    info = await admin.cluster_info()
    clusters = [args.clusterName] if args.clusterName else sorted(info.cluster_addr_table)
    if args.clusterName and args.clusterName not in info.cluster_addr_table:
        known = ", ".join(sorted(info.cluster_addr_table)) or "none"
        raise AdminError(f"cluster {args.clusterName} not found (known clusters: {known})")
    rows: list[list[object]] = []
    brokers: list[dict[str, Any]] = []
    for cluster in clusters:
        for name in sorted(info.cluster_addr_table.get(cluster, ())):
            data = info.broker_addr_table.get(name)
            if data is None:
                continue
            for broker_id, address in sorted(data.broker_addrs.items()):
                try:
                    runtime = await admin.broker_runtime_info(address)
                except AdminError as exc:
                    log.debug("runtime info of %s: %s", address, exc)
                    runtime = {}
                version = runtime.get("brokerVersionDesc", "unreachable" if not runtime else "")
                rows.append(
                    [
                        cluster,
                        name,
                        broker_id,
                        runtime.get("brokerRole", "-"),
                        address,
                        version,
                        _first_word(runtime.get("putTps"), "0.00"),
                        _first_word(runtime.get("getTransferredTps"), "0.00"),
                        _hours_since(runtime.get("earliestMessageTimeStamp")),
                        runtime.get("commitLogDiskRatio", "-"),
                        runtime.get("brokerActive", "-"),
                    ]
                )
                brokers.append(
                    {
                        "clusterName": cluster,
                        "brokerName": name,
                        "brokerId": broker_id,
                        "addr": address,
                        "runtime": runtime,
                    }
                )
    headers = [
        "#Cluster Name",
        "#Broker Name",
        "#BID",
        "#Role",
        "#Addr",
        "#Version",
        "#InTPS(LOAD)",
        "#OutTPS(LOAD)",
        "#Hour",
        "#SPACE",
        "#ACTIVATED",
    ]
    return Report({"brokers": brokers}, table(headers, rows))


def _first_word(text: str | None, default: str) -> str:
    return text.split()[0] if text and text.split() else default


def _hours_since(timestamp_text: str | None) -> str:
    try:
        timestamp_ms = int(timestamp_text or "")
    except ValueError:
        return "-"
    if timestamp_ms <= 0:
        return "-"
    return f"{(time.time() * 1000 - timestamp_ms) / 3_600_000:.2f}"


async def named_brokers(admin: AdminClient, args: argparse.Namespace) -> list[str]:
    """The broker of `-b`, or every broker (slaves too) of the cluster of `-c`."""
    if args.brokerAddr:
        return [await admin.resolve_broker_address(args.brokerAddr)]
    return await admin.broker_addresses(args.clusterName, masters_only=False)


async def broker_status(admin: AdminClient, args: argparse.Namespace) -> Report:
    addresses = await named_brokers(admin, args)
    document: dict[str, dict[str, str]] = {}
    lines: list[str] = []
    for address in addresses:
        runtime = await admin.broker_runtime_info(address)
        document[address] = runtime
        pairs = sorted(runtime.items())
        if len(addresses) == 1:
            lines.extend(key_values(pairs))
        else:
            lines.extend(f"{address}  {line}" for line in key_values(pairs))
    return Report(document, lines)


async def get_broker_config(admin: AdminClient, args: argparse.Namespace) -> Report:
    addresses = await named_brokers(admin, args)
    document: dict[str, dict[str, str]] = {}
    lines: list[str] = []
    for address in addresses:
        settings = await admin.broker_config(address)
        document[address] = settings
        lines.append(f"============{address}============")
        lines.extend(key_values(sorted(settings.items()), separator="  =  "))
        lines.append("")
    return Report(document, lines)


async def update_broker_config(admin: AdminClient, args: argparse.Namespace) -> Report:
    addresses = await admin.targets(cluster=args.clusterName, broker=args.brokerAddr)
    for address in addresses:
        await admin.update_broker_config(address, {args.key: args.value})
    return Report(
        {"brokers": addresses, "key": args.key, "value": args.value},
        [f"update broker config success, {address}" for address in addresses],
    )


# -- consumer groups ---------------------------------------------------------------------------


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
        for topic in (RETRY_GROUP_TOPIC_PREFIX + group, DLQ_GROUP_TOPIC_PREFIX + group):
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


# -- messages ----------------------------------------------------------------------------------


async def query_msg_by_id(admin: AdminClient, args: argparse.Namespace) -> Report:
    ids = [i.strip() for i in args.msgId.split(",") if i.strip()]
    if not ids:
        raise AdminError("-i needs at least one message id")
    found = [await admin.query_message_by_id(msg_id, args.topic) for msg_id in ids]
    lines: list[str] = []
    for index, message in enumerate(found):
        if index:
            lines.append("")
        lines.extend(_message_lines(message))
    return Report([_message_document(m) for m in found], lines)


async def query_msg_by_key(admin: AdminClient, args: argparse.Namespace) -> Report:
    found = await admin.query_message_by_key(
        args.topic,
        args.msgKey,
        max_num=args.maxNum,
        begin_ms=args.beginTimestamp,
        end_ms=args.endTimestamp,
    )
    if not found:
        return Report([], [f"no message with key {args.msgKey} in topic {args.topic}"])
    rows = [
        [f.msg_id, f.broker_name, f.message.queue_id, f.message.queue_offset, f.offset_msg_id]
        for f in found
    ]
    headers = ["#Message ID", "#Broker Name", "#QID", "#Offset", "#Offset Message ID"]
    return Report([_message_document(f) for f in found], table(headers, rows))


async def query_msg_by_offset(admin: AdminClient, args: argparse.Namespace) -> Report:
    found = await admin.message_at(args.topic, args.brokerName, args.queueId, args.offset)
    return Report(_message_document(found), _message_lines(found))


async def send_message(admin: AdminClient, args: argparse.Namespace) -> Report:
    if args.qid is not None and args.broker is None:
        raise AdminError(
            "-i QUEUE_ID needs -b BROKER_NAME: a queue id only means something on one broker"
        )
    result = await admin.send_message(
        args.topic,
        args.body.encode("utf-8"),
        keys=args.key,
        tags=args.tags,
        broker_name=args.broker,
        queue_id=args.qid,
    )
    headers = ["#Broker Name", "#QID", "#Send Result", "#MsgId", "#OffsetMsgId"]
    row = [
        result.queue.broker_name,
        result.queue.queue_id,
        result.status,
        result.msg_id,
        result.offset_msg_id,
    ]
    document = {
        "brokerName": result.queue.broker_name,
        "queueId": result.queue.queue_id,
        "queueOffset": result.queue_offset,
        "sendStatus": result.status,
        "msgId": result.msg_id,
        "offsetMsgId": result.offset_msg_id,
    }
    return Report(document, table(headers, [row]))


async def consume_message(admin: AdminClient, args: argparse.Namespace) -> Report:
    if args.queueId is not None and args.brokerName is None:
        raise AdminError("-i QUEUE_ID needs -b BROKER_NAME: set the broker name before the queue")
    if args.offset is not None and args.queueId is None:
        raise AdminError("-o OFFSET needs -b BROKER_NAME and -i QUEUE_ID: set the queue first")
    found = await admin.consume(
        args.topic,
        broker_name=args.brokerName,
        queue_id=args.queueId,
        offset=args.offset,
        count=args.MessageNumber,
    )
    rows = [
        [
            f.broker_name,
            f.message.queue_id,
            f.message.queue_offset,
            f.msg_id,
            f.tags or "",
            f.keys or "",
            f.message.body.decode("utf-8", "replace"),
        ]
        for f in found
    ]
    headers = ["#Broker Name", "#QID", "#Offset", "#MsgId", "#Tags", "#Keys", "#Body"]
    lines = table(headers, rows) if found else [f"no message in topic {args.topic} to consume"]
    return Report([_message_document(f) for f in found], lines)


# -- the parser --------------------------------------------------------------------------------


def _target_options(parser: argparse.ArgumentParser, what: str, *, required: bool) -> None:
    group = parser.add_mutually_exclusive_group(required=required)
    group.add_argument("-b", "--brokerAddr", help=f"{what} on this broker (host:port or name)")
    group.add_argument("-c", "--clusterName", help=f"{what} on every master of this cluster")


def register(commands: Any) -> None:
    """Adds `admin` and its mqadmin sub-commands to the top-level sub-command set."""
    parser: argparse.ArgumentParser = commands.add_parser(
        "admin", help="administer a cluster (RocketMQ's mqadmin)"
    )
    sub = parser.add_subparsers(dest="admin_command", metavar="COMMAND", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "-n",
        "--namesrvAddr",
        help=f"NameServer addresses host:port;host:port (default: ${NAMESRV_ADDR_ENV})",
    )
    common.add_argument("--json", action="store_true", help="print one JSON document")
    common.add_argument(
        "--timeout", type=float, default=5.0, help="seconds to wait for each answer (5)"
    )

    def add(name: str, command: Command, help_text: str) -> argparse.ArgumentParser:
        child: argparse.ArgumentParser = sub.add_parser(name, parents=[common], help=help_text)
        child.set_defaults(run=run, command=command)
        return child

    p = add("updateTopic", update_topic, "update or create a topic")
    _target_options(p, "create the topic", required=True)
    p.add_argument("-t", "--topic", required=True, help="topic name")
    p.add_argument("-r", "--readQueueNums", type=int, default=8, help="read queues (8)")
    p.add_argument("-w", "--writeQueueNums", type=int, default=8, help="write queues (8)")
    p.add_argument("-p", "--perm", type=int, default=6, help="2 write, 4 read, 6 both (6)")
    p.add_argument("-o", "--order", type=_java_bool, default=False, help="ordered (true|false)")

    p = add("deleteTopic", delete_topic, "delete a topic from brokers and NameServers")
    p.add_argument("-t", "--topic", required=True, help="topic name")
    p.add_argument("-c", "--clusterName", required=True, help="delete from this cluster")

    add("topicList", topic_list, "list every topic the NameServer knows")

    p = add("topicRoute", topic_route, "show a topic's route")
    p.add_argument("-t", "--topic", required=True, help="topic name")
    p.add_argument("-l", "--list", action="store_true", help="(accepted; tables are the default)")

    p = add("topicStatus", topic_status, "show every queue's offsets of a topic")
    p.add_argument("-t", "--topic", required=True, help="topic name")

    p = add("clusterList", cluster_list, "list clusters and brokers")
    p.add_argument("-c", "--clusterName", help="only this cluster")

    p = add("brokerStatus", broker_status, "show a broker's runtime figures")
    _target_options(p, "show", required=True)

    p = add("updateSubGroup", update_sub_group, "update or create a subscription group")
    _target_options(p, "create the group", required=True)
    p.add_argument("-g", "--groupName", required=True, help="consumer group name")
    p.add_argument("-s", "--consumeEnable", type=_java_bool, default=True, help="(true)")
    p.add_argument("-m", "--consumeFromMinEnable", type=_java_bool, default=False, help="(false)")
    p.add_argument("-d", "--consumeBroadcastEnable", type=_java_bool, default=False, help="(false)")
    p.add_argument("-o", "--consumeMessageOrderly", type=_java_bool, default=False, help="(false)")
    p.add_argument("-q", "--retryQueueNums", type=int, default=1, help="(1)")
    p.add_argument("-r", "--retryMaxTimes", type=int, default=16, help="(16)")
    p.add_argument("-i", "--brokerId", type=int, default=0, help="consume from (0)")
    p.add_argument("-w", "--whichBrokerWhenConsumeSlowly", type=int, default=1, help="(1)")
    p.add_argument("-a", "--notifyConsumerIdsChanged", type=_java_bool, default=True, help="(true)")

    p = add("deleteSubGroup", delete_sub_group, "delete a subscription group")
    _target_options(p, "delete the group", required=True)
    p.add_argument("-g", "--groupName", required=True, help="consumer group name")
    p.add_argument(
        "-r", "--removeOffset", type=_java_bool, default=False, help="also its offsets (false)"
    )

    p = add("consumerProgress", consumer_progress, "show a consumer group's progress")
    p.add_argument("-g", "--groupName", required=True, help="consumer group name")
    p.add_argument("-t", "--topicName", help="only this topic")

    p = add("queryMsgById", query_msg_by_id, "show messages by offset or client message id")
    p.add_argument("-i", "--msgId", required=True, help="message id(s), comma-separated")
    p.add_argument("-t", "--topic", help="topic (needed for client message ids, UNIQ_KEY)")

    p = add("queryMsgByKey", query_msg_by_key, "find messages by key")
    p.add_argument("-t", "--topic", required=True, help="topic name")
    p.add_argument("-k", "--msgKey", required=True, help="message key")
    p.add_argument("-b", "--beginTimestamp", type=int, default=0, help="from (ms, 0)")
    p.add_argument("-e", "--endTimestamp", type=int, default=(1 << 63) - 1, help="to (ms)")
    p.add_argument("-m", "--maxNum", type=int, default=64, help="at most (64)")

    p = add("queryMsgByOffset", query_msg_by_offset, "show the message at a queue offset")
    p.add_argument("-t", "--topic", required=True, help="topic name")
    p.add_argument("-b", "--brokerName", required=True, help="broker name")
    p.add_argument("-i", "--queueId", type=int, required=True, help="queue id")
    p.add_argument("-o", "--offset", type=int, required=True, help="queue offset")

    p = add("sendMessage", send_message, "send one message")
    p.add_argument("-t", "--topic", required=True, help="topic name")
    p.add_argument("-p", "--body", required=True, help="message body (UTF-8 text)")
    p.add_argument("-k", "--key", help="message keys")
    p.add_argument("-c", "--tags", help="message tags")
    p.add_argument("-b", "--broker", help="send to this broker (name)")
    p.add_argument("-i", "--qid", type=int, help="send to this queue (needs -b)")

    p = add("consumeMessage", consume_message, "read messages without committing")
    p.add_argument("-t", "--topic", required=True, help="topic name")
    p.add_argument("-b", "--brokerName", help="only this broker")
    p.add_argument("-i", "--queueId", type=int, help="only this queue (needs -b)")
    p.add_argument("-o", "--offset", type=int, help="from this offset (needs -i)")
    p.add_argument("-c", "--MessageNumber", type=int, default=128, help="at most (128)")

    p = add("getBrokerConfig", get_broker_config, "show broker settings")
    _target_options(p, "show", required=True)

    p = add("updateBrokerConfig", update_broker_config, "change a running broker's setting")
    _target_options(p, "change", required=True)
    p.add_argument("-k", "--key", required=True, help="config key")
    p.add_argument("-v", "--value", required=True, help="config value")

    dead_letters.register(add)
    replication.register(add)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Runs one admin command; prints its report, or one error line (status 1)."""
    from pocketmq.runtime import event_loop

    name = args.admin_command
    try:
        report = event_loop.run(_execute(args))
    except AdminError as exc:
        sys.stderr.write(f"pocketmq admin {name}: {exc}\n")
        return 1
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # a bug must still end in one line, not a traceback
        log.debug("pocketmq admin %s failed", name, exc_info=True)
        sys.stderr.write(
            f"pocketmq admin {name}: internal error: {type(exc).__name__}: {exc} "
            "(--log-level DEBUG shows the traceback)\n"
        )
        return 1
    if args.json:
        sys.stdout.write(json.dumps(report.document, indent=2, ensure_ascii=False) + "\n")
    else:
        sys.stdout.write("".join(line + "\n" for line in report.lines))
    sys.stdout.flush()
    return 0


async def _execute(args: argparse.Namespace) -> Report:
    addresses = split_namesrv_addresses(args.namesrvAddr or os.environ.get(NAMESRV_ADDR_ENV))
    async with AdminClient(addresses, timeout_s=args.timeout) as admin:
        command: Command = args.command
        return await command(admin, args)
