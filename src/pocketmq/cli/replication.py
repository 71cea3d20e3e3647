"""`pocketmq admin haStatus`: each master's slaves, how far behind they are in bytes and time
(RocketMQ's `haStatus`, GET_BROKER_HA_STATUS)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from pocketmq.cli.admin_report import Report, table
from pocketmq.client.admin import AdminClient


async def ha_status(admin: AdminClient, args: argparse.Namespace) -> Report:
    if args.brokerAddr:
        addresses = [await admin.resolve_broker_address(args.brokerAddr)]
    else:
        addresses = await admin.broker_addresses(args.clusterName, masters_only=False)
    documents: list[dict[str, Any]] = []
    masters: list[list[object]] = []
    slaves: list[list[object]] = []
    for address in addresses:
        info = await admin.ha_status(address)
        documents.append({"brokerAddr": address, **info})
        if not info.get("master"):
            continue
        connections = info.get("haConnectionInfo", [])
        masters.append(
            [
                address,
                info.get("masterCommitLogMaxOffset", 0),
                len(connections),
                info.get("inSyncSlaveNums", 0),
            ]
        )
        slaves.extend(
            [
                address,
                c["addr"],
                c["slaveAckOffset"],
                c["diff"],
                _lag(c.get("lagMs", -1)),
                "OK" if c["inSync"] else "Fall Behind",
                c["transferFromWhere"],
            ]
            for c in connections
        )
    lines = table(
        ["#MasterAddr", "#MasterCommitLogMaxOffset", "#SlaveNum", "#InSyncSlaveNum"], masters
    )
    if slaves:
        lines.append("")
        lines.extend(
            table(
                [
                    "#MasterAddr",
                    "#SlaveAddr",
                    "#SlaveAckOffset",
                    "#Diff(bytes)",
                    "#Lag",
                    "#Status",
                    "#TransferFromWhere",
                ],
                slaves,
            )
        )
    elif masters:
        lines.append("no slave is connected")
    return Report(documents, lines)


def _lag(milliseconds: int) -> str:
    return "-" if milliseconds < 0 else f"{milliseconds / 1000:.3f} s"


def register(add: Callable[..., argparse.ArgumentParser]) -> None:
    """Adds `haStatus` with `add(name, command, help)` of the admin command set."""
    p = add("haStatus", ha_status, "show each master's slaves and their lag")
    group = p.add_mutually_exclusive_group(required=True)
    group.add_argument("-b", "--brokerAddr", help="this broker (host:port or name)")
    group.add_argument("-c", "--clusterName", help="every broker of this cluster")
