"""`pocketmq admin` commands for controller mode, with mqadmin's names, flags and output:
getControllerMetaData, getSyncStateSet, getBrokerEpoch, electMaster, cleanBrokerMetadata,
getControllerConfig and updateControllerConfig.

The text is what mqadmin's printf calls print, line for line (tab-separated `#Name\\tvalue`
lines and the blank lines between them), so scripts written against mqadmin read it alike;
`--json` gives the same facts as one document.

Where pocketmq differs on purpose: getSyncStateSet and getBrokerEpoch print once (mqadmin's
`-i` repeats forever; a shell loop does that); the commands that go to the controller leader
ask the controllers of `-a a;b;c` in turn until one names the leader (mqadmin asks only the
first); a broker group the controller does not know is an error rather than empty output.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from pocketmq.cli.admin_report import Report
from pocketmq.client.admin import AdminClient, AdminError


def _addresses(text: str) -> list[str]:
    """`a;b;c` as a list (the separator of mqadmin's `-a`)."""
    addresses = [part.strip() for part in text.split(";") if part.strip()]
    if not addresses:
        raise AdminError("name a controller: -a host:port (several as host:port;host:port)")
    return addresses


def _java(value: object) -> str:
    """A value as Java's `%s`/`%d` prints it; a missing one is `null`."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


async def _leader(admin: AdminClient, controllers: list[str]) -> str:
    """The controller leader's address, from the first of `controllers` that names one."""
    problems = []
    for address in controllers:
        try:
            return await admin.controller_leader(address)
        except AdminError as exc:
            problems.append(str(exc))
    raise AdminError("no controller named a leader: " + "; ".join(problems))


async def get_controller_metadata(admin: AdminClient, args: argparse.Namespace) -> Report:
    address = _addresses(args.controllerAddress)[0]
    fields = await admin.controller_metadata(address)
    peers = [peer for peer in fields.get("peers", "").split(";") if peer]
    lines = [
        "",
        f"#ControllerGroup\t{_java(fields.get('group'))}",
        f"#ControllerLeaderId\t{_java(fields.get('controllerLeaderId'))}",
        f"#ControllerLeaderAddress\t{_java(fields.get('controllerLeaderAddress'))}",
        *(f"#Peer:\t{peer}" for peer in peers),
    ]
    document = {
        "controllerAddress": address,
        "group": fields.get("group"),
        "controllerLeaderId": fields.get("controllerLeaderId"),
        "controllerLeaderAddress": fields.get("controllerLeaderAddress"),
        "isLeader": fields.get("isLeader", "false").lower() == "true",
        "peers": peers,
    }
    return Report(document, lines)


async def _broker_names(admin: AdminClient, cluster: str) -> list[str]:
    info = await admin.cluster_info()
    names = info.cluster_addr_table.get(cluster)
    if not names:
        known = ", ".join(sorted(info.cluster_addr_table)) or "none"
        raise AdminError(f"cluster {cluster} not found (known clusters: {known}); see clusterList")
    return sorted(names)


def _replica(member: dict[str, Any]) -> str:
    """Java's `ReplicaIdentity.toString()`."""
    return (
        f"ReplicaIdentity{{brokerName='{_java(member.get('brokerName'))}', "
        f"brokerId={_java(member.get('brokerId'))}, "
        f"brokerAddress='{_java(member.get('brokerAddress'))}', "
        f"alive={_java(member.get('alive'))}}}"
    )


async def get_sync_state_set(admin: AdminClient, args: argparse.Namespace) -> Report:
    if args.brokerName:
        names = [args.brokerName.strip()]
    else:
        names = await _broker_names(admin, args.clusterName.strip())
    leader = await _leader(admin, _addresses(args.controllerAddress))
    table = await admin.sync_state_data(leader, names)
    if not table:
        raise AdminError(
            f"the controller knows no broker group {', '.join(names)}; its brokers register "
            "with enableControllerMode=true"
        )
    lines: list[str] = []
    for name, info in table.items():
        in_sync = info.get("inSyncReplicas", [])
        lines += [
            "",
            f"#brokerName\t{name}",
            f"#MasterBrokerId\t{_java(info.get('masterBrokerId'))}",
            f"#MasterAddr\t{_java(info.get('masterAddress'))}",
            f"#MasterEpoch\t{_java(info.get('masterEpoch'))}",
            f"#SyncStateSetEpoch\t{_java(info.get('syncStateSetEpoch'))}",
            f"#SyncStateSetNums\t{len(in_sync)}",
        ]
        for member in in_sync:
            lines += ["", f"InSyncReplica:\t{_replica(member)}"]
        for member in info.get("notInSyncReplicas", []):
            lines += ["", f"NotInSyncReplica:\t{_replica(member)}"]
        if info.get("haQos"):
            # pocketmq's own lines, after mqadmin's: the QoS level and the master's state.
            lines += ["", f"#HaQos\t{info['haQos']}", f"#HaState\t{info.get('haState') or '-'}"]
    return Report(table, lines)


async def _group_addresses(admin: AdminClient, broker_name: str) -> list[str]:
    info = await admin.cluster_info()
    data = info.broker_addr_table.get(broker_name)
    if data is None:
        known = ", ".join(sorted(info.broker_addr_table)) or "none"
        raise AdminError(
            f"broker {broker_name} not found (known brokers: {known}); see clusterList"
        )
    return [address for _, address in sorted(data.broker_addrs.items())]


def _epoch(entry: dict[str, Any]) -> str:
    """Java's `EpochEntry.toString()`."""
    return (
        f"EpochEntry{{epoch={_java(entry.get('epoch'))}, "
        f"startOffset={_java(entry.get('startOffset'))}, "
        f"endOffset={_java(entry.get('endOffset'))}}}"
    )


async def get_broker_epoch(admin: AdminClient, args: argparse.Namespace) -> Report:
    if args.brokerName:
        addresses = await _group_addresses(admin, args.brokerName.strip())
    else:
        addresses = await admin.broker_addresses(args.clusterName.strip(), masters_only=False)
    documents: list[dict[str, Any]] = []
    lines: list[str] = []
    for address in addresses:
        cache = await admin.broker_epochs(address)
        epochs = [dict(entry) for entry in cache.get("epochList", [])]
        if epochs:
            # RocketMQ's cache leaves the last epoch open; mqadmin closes it at the CommitLog end.
            epochs[-1]["endOffset"] = cache.get("maxOffset")
        documents.append({"brokerAddr": address, **cache, "epochList": epochs})
        lines += [
            "",
            f"#clusterName\t{_java(cache.get('clusterName'))}",
            f"#brokerName\t{_java(cache.get('brokerName'))}",
            f"#brokerAddr\t{address}",
            f"#brokerId\t{_java(cache.get('brokerId'))}",
            *(f"#Epoch: {_epoch(entry)}" for entry in epochs),
        ]
    return Report(documents, lines)


async def elect_master(admin: AdminClient, args: argparse.Namespace) -> Report:
    leader = await _leader(admin, _addresses(args.controllerAddress))
    fields, body = await admin.elect_master(
        leader, args.clusterName, args.brokerName, args.brokerId
    )
    lines = [
        "",
        f"#ClusterName\t{args.clusterName}",
        f"#BrokerName\t{args.brokerName}",
        f"#BrokerMasterAddr\t{_java(fields.get('masterAddress'))}",
        f"#MasterEpoch\t{_java(fields.get('masterEpoch'))}",
        f"#SyncStateSetEpoch\t{_java(fields.get('syncStateSetEpoch'))}",
    ]
    # mqadmin reads the body as a BrokerMemberGroup; a controller sends ElectMasterResponseBody,
    # whose members sit one level down, so mqadmin prints no #Broker line. So do we, unless a
    # controller sends the flat form.
    members = body.get("brokerAddrs") or {}
    lines += [f"\t#Broker\t{broker_id}\t{address}" for broker_id, address in members.items()]
    document = {
        "clusterName": args.clusterName,
        "brokerName": args.brokerName,
        "masterBrokerId": _int_or_none(fields.get("masterBrokerId")),
        "masterAddress": fields.get("masterAddress"),
        "masterEpoch": _int_or_none(fields.get("masterEpoch")),
        "syncStateSetEpoch": _int_or_none(fields.get("syncStateSetEpoch")),
        "body": body,
    }
    return Report(document, lines)


def _int_or_none(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def _broker_ids(text: str | None) -> list[int] | None:
    if not text:
        return None
    try:
        return [int(part) for part in text.split(";") if part.strip()] or None
    except ValueError:
        raise AdminError(f"-b {text!r}: broker ids separated by ';', such as 1;2;3") from None


async def clean_broker_metadata(admin: AdminClient, args: argparse.Namespace) -> Report:
    cluster = (args.clusterName or "").strip()
    if not args.cleanLivingBroker and not cluster:
        raise AdminError("without -l (cleanLivingBroker) name the cluster: -c CLUSTER")
    ids = _broker_ids(args.brokerControllerIdsToClean)
    leader = await _leader(admin, _addresses(args.controllerAddress))
    await admin.clean_broker_metadata(
        leader, cluster, args.brokerName, ids, clean_living=args.cleanLivingBroker
    )
    document = {
        "clusterName": cluster or None,
        "brokerName": args.brokerName,
        "brokerControllerIdsToClean": ids,
        "cleanLivingBroker": args.cleanLivingBroker,
    }
    return Report(document, [f"clear broker {args.brokerName} metadata from controller success! "])


async def get_controller_config(admin: AdminClient, args: argparse.Namespace) -> Report:
    document: dict[str, dict[str, str]] = {}
    lines: list[str] = []
    for address in _addresses(args.controllerAddress):
        settings = await admin.controller_config(address)
        document[address] = settings
        lines.append(f"============{address}============")
        lines += [f"{key:<50}=  {value}" for key, value in settings.items()]
    return Report(document, lines)


async def update_controller_config(admin: AdminClient, args: argparse.Namespace) -> Report:
    addresses = _addresses(args.controllerAddress)
    key, value = args.key.strip(), args.value.strip()
    for address in addresses:
        await admin.update_controller_config(address, {key: value})
    document = {"controllers": addresses, "key": key, "value": value}
    lines = [f"update controller config success![{', '.join(addresses)}]", f"{key} : {value}"]
    return Report(document, lines)


def register(add: Callable[..., argparse.ArgumentParser]) -> None:
    """Adds the controller-mode commands with `add(name, command, help)` of the admin set."""
    controller_help = "controller address host:port (several: host:port;host:port)"

    p = add(
        "getControllerMetaData", get_controller_metadata, "show a controller's group and leader"
    )
    p.add_argument("-a", "--controllerAddress", required=True, help="controller address host:port")

    p = add(
        "getSyncStateSet",
        get_sync_state_set,
        "show each broker group's master, epochs and SyncStateSet (prints once; mqadmin's -i "
        "repeats, pocketmq has no -i)",
    )
    p.add_argument("-a", "--controllerAddress", required=True, help=controller_help)
    group = p.add_mutually_exclusive_group(required=True)
    group.add_argument("-b", "--brokerName", help="this broker group")
    group.add_argument("-c", "--clusterName", help="every broker group of this cluster")

    p = add(
        "getBrokerEpoch",
        get_broker_epoch,
        "show each controller-mode broker's epochs (prints once; pocketmq has no -i)",
    )
    group = p.add_mutually_exclusive_group(required=True)
    group.add_argument("-b", "--brokerName", help="every broker of this group")
    group.add_argument("-c", "--clusterName", help="every broker of this cluster")

    p = add("electMaster", elect_master, "make a named broker the master of its group")
    p.add_argument("-a", "--controllerAddress", required=True, help=controller_help)
    # "-b" and "-bn" are distinct option strings: argparse matches a whole word exactly first.
    p.add_argument("-b", "--brokerId", type=int, required=True, help="the broker id to elect")
    p.add_argument("-bn", "--brokerName", required=True, help="broker group name")
    p.add_argument("-c", "--clusterName", required=True, help="cluster name")

    p = add(
        "cleanBrokerMetadata",
        clean_broker_metadata,
        "make the controller forget brokers of a group",
    )
    p.add_argument("-a", "--controllerAddress", required=True, help=controller_help)
    p.add_argument(
        "-b",
        "--brokerControllerIdsToClean",
        help="broker ids to forget, 1;2;3 (default: the whole group)",
    )
    p.add_argument("-bn", "--brokerName", required=True, help="broker group name")
    p.add_argument("-c", "--clusterName", help="cluster name (required without -l)")
    p.add_argument(
        "-l",
        "--cleanLivingBroker",
        action="store_true",
        help="also forget brokers that are still alive",
    )

    p = add("getControllerConfig", get_controller_config, "show each controller's settings")
    p.add_argument("-a", "--controllerAddress", required=True, help=controller_help)

    p = add(
        "updateControllerConfig",
        update_controller_config,
        "change a setting on each controller",
    )
    p.add_argument("-a", "--controllerAddress", required=True, help=controller_help)
    p.add_argument("-k", "--key", required=True, help="config key")
    p.add_argument("-v", "--value", required=True, help="config value")
