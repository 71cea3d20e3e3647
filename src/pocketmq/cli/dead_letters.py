"""`pocketmq admin queryDlqMessages` and `redriveDlqMessages`: a group's dead letters, and
sending them back to their topics (filtered, rate-limited, with a dry run)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from pocketmq.cli.admin_report import Report, table
from pocketmq.client.admin import AdminClient, AdminError
from pocketmq.client.dead_letters import DeadLetter, list_dead_letters, redrive
from pocketmq.client.producer.producer import Producer

REDRIVE_PRODUCER_GROUP = "TOOLS_DLQ_REDRIVE"


def _row(dead: DeadLetter) -> list[object]:
    message = dead.message
    return [
        message.queue_offset,
        dead.original_msg_id,
        dead.original_topic,
        message.tags or "",
        " ".join(message.keys),
        message.reconsume_times,
    ]


def _document(dead: DeadLetter) -> dict[str, Any]:
    message = dead.message
    return {
        "dlqOffset": message.queue_offset,
        "msgId": message.msg_id,
        "originMsgId": dead.original_msg_id,
        "originTopic": dead.original_topic,
        "tags": message.tags,
        "keys": message.keys,
        "reconsumeTimes": message.reconsume_times,
        "properties": message.user_properties,
    }


HEADERS = ["#DLQ Offset", "#Origin Message ID", "#Origin Topic", "#Tags", "#Keys", "#Tries"]


async def query_dlq_messages(admin: AdminClient, args: argparse.Namespace) -> Report:
    found = await list_dead_letters(
        admin, args.groupName, offset=args.offset, count=args.MessageNumber
    )
    if not found:
        return Report([], [f"no dead letters of group {args.groupName}"])
    return Report([_document(d) for d in found], table(HEADERS, [_row(d) for d in found]))


async def redrive_dlq_messages(admin: AdminClient, args: argparse.Namespace) -> Report:
    if args.rate is not None and args.rate <= 0:
        raise AdminError(f"--rate must be positive, got {args.rate}")
    producer = Producer(REDRIVE_PRODUCER_GROUP, namesrv=admin.namesrv_addresses)
    await producer.start()
    try:
        results = [
            result
            async for result in redrive(
                admin,
                producer,
                args.groupName,
                selected=lambda d: d.matches(key=args.key, tag=args.tag, msg_id=args.msgId),
                offset=args.offset,
                count=args.MessageNumber,
                rate_per_s=args.rate,
                dry_run=args.dryRun,
            )
        ]
    finally:
        await producer.close()
    rows = [[*_row(r.dead_letter), r.outcome, r.new_msg_id or r.error or ""] for r in results]
    documents = [
        {
            **_document(r.dead_letter),
            "outcome": r.outcome,
            "newMsgId": r.new_msg_id,
            "error": r.error,
        }
        for r in results
    ]
    resent = sum(r.outcome == "resent" for r in results)
    summary = f"{len(results)} selected, {resent} resent" + (" (dry run)" if args.dryRun else "")
    return Report(documents, [*table([*HEADERS, "#Outcome", "#New Message ID"], rows), summary])


def register(add: Callable[..., argparse.ArgumentParser]) -> None:
    """Adds the two commands with `add(name, command, help)` of the admin command set."""
    p = add("queryDlqMessages", query_dlq_messages, "list a consumer group's dead letters")
    p.add_argument("-g", "--groupName", required=True, help="consumer group name")
    p.add_argument("-o", "--offset", type=int, help="from this DLQ offset (oldest)")
    p.add_argument("-c", "--MessageNumber", type=int, default=128, help="at most (128)")

    p = add(
        "redriveDlqMessages",
        redrive_dlq_messages,
        "send a group's dead letters back to their topics",
    )
    p.add_argument("-g", "--groupName", required=True, help="consumer group name")
    p.add_argument("-k", "--key", help="only dead letters with this key")
    p.add_argument("--tag", help="only dead letters with this tag")
    p.add_argument("-i", "--msgId", help="only this message (its original or DLQ id)")
    p.add_argument("-o", "--offset", type=int, help="from this DLQ offset (oldest)")
    p.add_argument("-c", "--MessageNumber", type=int, default=128, help="look at most at (128)")
    p.add_argument("--rate", type=float, help="at most this many re-sends per second")
    p.add_argument("--dryRun", action="store_true", help="show what would be re-sent")
