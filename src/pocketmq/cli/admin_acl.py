"""`pocketmq admin` commands of ACL 1.0, with mqadmin 4.9's names and flags: updateAclConfig,
deleteAclConfig, updateGlobalWhiteAddr, clusterAclConfigVersion.

They change or read the `plain_acl.yml` of each broker named (`-b`) or of every broker of a
cluster (`-c`); the caller needs an admin account once ACL is on (`--accessKey/--secretKey`
or mqadmin's tools.yml). A secret key given here is sent to the broker and never printed.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
from collections.abc import Callable

from pocketmq.cli.admin_report import Report
from pocketmq.client.admin import AdminClient


def _targets_options(parser: argparse.ArgumentParser, what: str) -> None:
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("-b", "--brokerAddr", help=f"{what} on this broker")
    group.add_argument("-c", "--clusterName", help=f"{what} on every broker of this cluster")


def register(add: Callable[..., argparse.ArgumentParser]) -> None:
    """Adds the ACL commands with `add(name, command, help)` of the admin command set."""
    p = add(
        "updateAclConfig", update_acl_config, "create or update an ACL account", names_accounts=True
    )
    _targets_options(p, "update the account")
    p.add_argument("-a", "--accessKey", dest="account", required=True, help="the account's key")
    p.add_argument("-s", "--secretKey", dest="secret", help="its secret key (new accounts)")
    p.add_argument("-w", "--whiteRemoteAddress", help="addresses it may use without signing")
    p.add_argument("-i", "--defaultTopicPerm", help="DENY, PUB, SUB or PUB|SUB")
    p.add_argument("-u", "--defaultGroupPerm", help="DENY, PUB, SUB or PUB|SUB")
    p.add_argument("-t", "--topicPerms", help="e.g. topicA=DENY,topicB=PUB|SUB")
    p.add_argument("-g", "--groupPerms", help="e.g. groupA=SUB,groupB=DENY")
    p.add_argument("-m", "--admin", choices=("true", "false"), help="an admin account")
    p = add("deleteAclConfig", delete_acl_config, "delete an ACL account", names_accounts=True)
    _targets_options(p, "delete the account")
    p.add_argument("-a", "--accessKey", dest="account", required=True, help="the account's key")
    p = add(
        "updateGlobalWhiteAddr",
        update_global_white,
        "set the ACL global whitelist",
        names_accounts=True,
    )
    _targets_options(p, "set the whitelist")
    p.add_argument(
        "-g", "--globalWhiteRemoteAddresses", required=True, help="e.g. 10.10.103.*,192.168.0.*"
    )
    p.add_argument("-p", "--aclFileFullPath", help="the rules file to change (default: the main)")
    p = add(
        "clusterAclConfigVersion",
        cluster_acl_version,
        "ACL rules versions per broker",
        names_accounts=True,
    )
    _targets_options(p, "read the versions")


async def update_acl_config(admin: AdminClient, args: argparse.Namespace) -> Report:
    given = {
        "secretKey": args.secret,
        "whiteRemoteAddress": args.whiteRemoteAddress,
        "defaultTopicPerm": args.defaultTopicPerm,
        "defaultGroupPerm": args.defaultGroupPerm,
        "topicPerms": args.topicPerms,
        "groupPerms": args.groupPerms,
    }
    fields = {"accessKey": args.account, "admin": args.admin or "false"}
    fields.update({key: value for key, value in given.items() if value is not None})
    addresses = await admin.targets(cluster=args.clusterName, broker=args.brokerAddr)
    for address in addresses:
        await admin.update_acl_account(address, fields)
    return Report(
        {"brokers": addresses, "accessKey": args.account},
        [f"create or update plain access config to {address} success." for address in addresses],
    )


async def delete_acl_config(admin: AdminClient, args: argparse.Namespace) -> Report:
    addresses = await admin.targets(cluster=args.clusterName, broker=args.brokerAddr)
    for address in addresses:
        await admin.delete_acl_account(address, args.account)
    return Report(
        {"brokers": addresses, "accessKey": args.account},
        [f"delete plain access config account from {address} success." for address in addresses],
    )


async def update_global_white(admin: AdminClient, args: argparse.Namespace) -> Report:
    patterns = args.globalWhiteRemoteAddresses
    addresses = await admin.targets(cluster=args.clusterName, broker=args.brokerAddr)
    for address in addresses:
        await admin.update_global_white_addresses(address, patterns, args.aclFileFullPath)
    return Report(
        {"brokers": addresses, "globalWhiteAddrs": patterns},
        [f"update global white remote addresses to {address} success." for address in addresses],
    )


async def cluster_acl_version(admin: AdminClient, args: argparse.Namespace) -> Report:
    addresses = await admin.targets(cluster=args.clusterName, broker=args.brokerAddr)
    versions = [version for address in addresses for version in await admin.acl_versions(address)]
    header = (
        f"{'#Cluster Name':<16}  {'#Broker Name':<22}  {'#Broker Addr':<22}  "
        f"{'#AclFilePath':<20}  {'#AclConfigVersionNum':<22}  #AclLastUpdateTime"
    )
    lines = [header] + [
        f"{v.cluster_name:<16}  {v.broker_name:<22}  {v.broker_addr:<22}  "
        f"{v.path:<20}  {v.counter!s:<22}  {_when(v.timestamp_ms)}"
        for v in versions
    ]
    return Report({"versions": [dataclasses.asdict(v) for v in versions]}, lines)


def _when(timestamp_ms: int) -> str:
    moment = datetime.datetime.fromtimestamp(timestamp_ms / 1000).astimezone()
    return moment.strftime("%Y-%m-%d %H:%M:%S")
