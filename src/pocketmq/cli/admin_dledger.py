"""`pocketmq admin dledgerStatus` and `dledgerTransferLeader`: a DLedger group's leader, term,
commit index and each replica's match index and lag, and a leadership hand-over to a named
replica (RocketMQ's preferred leader, on demand). RocketMQ's mqadmin has no such commands; the
names follow its style."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from pocketmq.cli.admin_report import Report, table
from pocketmq.client.admin import AdminClient, AdminError


async def dledger_status(admin: AdminClient, args: argparse.Namespace) -> Report:
    if args.brokerAddr:
        addresses = [await admin.resolve_broker_address(args.brokerAddr)]
    else:
        addresses = await admin.broker_addresses(args.clusterName, masters_only=False)
    documents: list[dict[str, Any]] = []
    replicas: list[list[object]] = []
    peers: list[list[object]] = []
    for address in addresses:
        try:
            info = await admin.ha_status(address)
        except AdminError as exc:
            replicas.append(["-", "-", address, f"unreachable: {exc}", "-", "-", "-", "-"])
            continue
        if "selfId" not in info:
            continue  # not a DLedger replica
        documents.append({"brokerAddr": address, **info})
        replicas.append(
            [
                info["group"],
                info["selfId"],
                address,
                "MASTER" if info.get("master") else info.get("role", "-").upper(),
                info.get("term", 0),
                info.get("leader") or "-",
                info.get("commitIndex", 0),
                info.get("appliedIndex", 0),
            ]
        )
        if info.get("master"):
            peers.extend(
                [info["group"], name, peer["address"], peer.get("matchIndex", "-"),
                 peer.get("lag", "-")]
                for name, peer in sorted(info.get("peers", {}).items())
            )  # fmt: skip
    if not documents and not args.brokerAddr:
        raise AdminError(f"no broker of cluster {args.clusterName} runs in DLedger mode")
    lines = table(
        ["#Group", "#Replica", "#Addr", "#Role", "#Term", "#Leader", "#Commit", "#Applied"],
        replicas,
    )
    if peers:
        lines.append("")
        lines.extend(table(["#Group", "#Peer", "#DLedgerAddr", "#MatchIndex", "#Lag"], peers))
    return Report(documents, lines)


async def dledger_transfer_leader(admin: AdminClient, args: argparse.Namespace) -> Report:
    address = await admin.resolve_broker_address(args.brokerAddr)
    answer = await admin.dledger_transfer_leader(address, args.to)
    return Report({"brokerAddr": address, "to": args.to, "answer": answer}, [answer])


def register(add: Callable[..., argparse.ArgumentParser]) -> None:
    """Adds the DLedger commands with `add(name, command, help)` of the admin command set."""
    p = add("dledgerStatus", dledger_status, "show each DLedger group's leader, term and lag")
    group = p.add_mutually_exclusive_group(required=True)
    group.add_argument("-b", "--brokerAddr", help="this replica (host:port)")
    group.add_argument("-c", "--clusterName", help="every replica of this cluster")
    p = add(
        "dledgerTransferLeader",
        dledger_transfer_leader,
        "hand a DLedger group's leadership to a named replica",
    )
    p.add_argument("-b", "--brokerAddr", required=True, help="the group's master (host:port)")
    p.add_argument("-t", "--to", required=True, help="the replica to lead (its dLegerSelfId)")
