"""`pocketmq admin` cluster and broker commands: clusterList, brokerStatus, getBrokerConfig
and updateBrokerConfig."""

from __future__ import annotations

import argparse
import logging
import time
from typing import Any

from pocketmq.cli.admin_report import Report, key_values, table
from pocketmq.client.admin import AdminClient, AdminError

log = logging.getLogger("pocketmq.admin")


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
