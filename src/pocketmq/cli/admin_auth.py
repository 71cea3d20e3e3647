"""`pocketmq admin` commands of ACL 2.0, with mqadmin 5's names and flags: createUser,
updateUser, deleteUser, getUser, listUser, createAcl, updateAcl, deleteAcl, getAcl, listAcl;
and pocketmq's `migrateAcl`, which turns an ACL 1.0 `plain_acl.yml` into users and ACLs.

Changes go to every broker of a cluster (`-c`), masters and slaves alike, as mqadmin sends
them, so that a slave that becomes master has them; reads ask the masters. With ACL 2.0 on, the
caller signs as a user who may (a Super user, or one allowed Update/Get on the cluster).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pocketmq.acl.accounts import load_rules
from pocketmq.acl.addresses import AclConfigError
from pocketmq.acl.migration import migrate
from pocketmq.cli.admin_report import Report
from pocketmq.client.admin import AdminClient, AdminError
from pocketmq.client.admin.auth import acl_info


def _targets(parser: argparse.ArgumentParser, what: str) -> None:
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("-b", "--brokerAddr", help=f"{what} on this broker")
    group.add_argument("-c", "--clusterName", help=f"{what} on every broker of this cluster")


def _list(text: str | None) -> list[str] | None:
    return None if text is None else [item.strip() for item in text.split(",") if item.strip()]


def register(add: Callable[..., argparse.ArgumentParser]) -> None:
    """Adds the ACL 2.0 commands with `add(name, command, help)` of the admin command set."""
    for name, command, verb in (
        ("createUser", create_user, "create"),
        ("updateUser", update_user, "update"),
    ):
        p = add(name, command, f"{verb} an ACL 2.0 user")
        _targets(p, f"{verb} the user")
        p.add_argument("-u", "--username", required=True)
        p.add_argument("-p", "--password", required=verb == "create")
        p.add_argument("-t", "--userType", help="Super or Normal (default Normal)")
        if verb == "update":
            p.add_argument("-s", "--userStatus", help="enable or disable")
    p = add("deleteUser", delete_user, "delete an ACL 2.0 user and its ACL")
    _targets(p, "delete the user")
    p.add_argument("-u", "--username", required=True)
    p = add("getUser", get_user, "show an ACL 2.0 user")
    _targets(p, "read the user")
    p.add_argument("-u", "--username", required=True)
    p = add("listUser", list_users, "list ACL 2.0 users")
    _targets(p, "list the users")
    p.add_argument("-f", "--filter", default="", help="part of the usernames shown")
    for name, command, verb in (
        ("createAcl", create_acl, "create"),
        ("updateAcl", update_acl, "update"),
    ):
        p = add(name, command, f"{verb} an ACL 2.0 ACL (merged into the subject's)")
        _targets(p, f"{verb} the ACL")
        p.add_argument("-s", "--subject", required=True, help="User:<username>")
        p.add_argument("-r", "--resources", required=True, help="e.g. Topic:orders,Group:billing")
        p.add_argument("-a", "--actions", required=True, help="e.g. Pub,Sub (or All)")
        p.add_argument("-i", "--sourceIp", help="addresses or CIDR blocks, comma-separated")
        p.add_argument("-d", "--decision", required=True, help="Allow or Deny")
    p = add("deleteAcl", delete_acl, "delete an ACL 2.0 ACL, or one resource's entries")
    _targets(p, "delete the ACL")
    p.add_argument("-s", "--subject", required=True, help="User:<username>")
    p.add_argument("-r", "--resources", help="the resource whose entries go (default: all)")
    p = add("getAcl", get_acl, "show an ACL 2.0 ACL")
    _targets(p, "read the ACL")
    p.add_argument("-s", "--subject", required=True, help="User:<username>")
    p = add("listAcl", list_acls, "list ACL 2.0 ACLs")
    _targets(p, "list the ACLs")
    p.add_argument("-s", "--subject", default="", help="part of the subjects shown")
    p.add_argument("-r", "--resource", default="", help="part of the resources shown")
    p = add("migrateAcl", migrate_acl, "create ACL 2.0 users and ACLs from an ACL 1.0 file")
    _targets(p, "create them")
    p.add_argument("-f", "--aclFile", required=True, help="a plain_acl.yml, or a folder of them")


async def _changing(admin: AdminClient, args: argparse.Namespace) -> list[str]:
    if args.brokerAddr:
        return await admin.targets(cluster=None, broker=args.brokerAddr)
    return await admin.broker_addresses(args.clusterName, masters_only=False)


async def _reading(admin: AdminClient, args: argparse.Namespace) -> list[str]:
    return await admin.targets(cluster=args.clusterName, broker=args.brokerAddr)


def _user(args: argparse.Namespace) -> dict[str, str]:
    given = {
        "password": args.password,
        "userType": args.userType,
        "userStatus": getattr(args, "userStatus", None),
    }
    return {"username": args.username, **{k: v for k, v in given.items() if v}}


async def create_user(admin: AdminClient, args: argparse.Namespace) -> Report:
    addresses = await _changing(admin, args)
    for address in addresses:
        await admin.create_user(address, _user(args))
    return Report({"brokers": addresses}, [f"create user to {a} success." for a in addresses])


async def update_user(admin: AdminClient, args: argparse.Namespace) -> Report:
    addresses = await _changing(admin, args)
    for address in addresses:
        await admin.update_user(address, _user(args))
    return Report({"brokers": addresses}, [f"update user to {a} success." for a in addresses])


async def delete_user(admin: AdminClient, args: argparse.Namespace) -> Report:
    addresses = await _changing(admin, args)
    for address in addresses:
        await admin.delete_user(address, args.username)
    return Report({"brokers": addresses}, [f"delete user from {a} success." for a in addresses])


def _user_lines(users: list[dict[str, Any]]) -> list[str]:
    # The password is RocketMQ's column too; pocketmq does not print it.
    row = "{:<32} {:<10} {:<10}"
    return [row.format("#UserName", "#UserType", "#UserStatus")] + [
        row.format(u.get("username", ""), u.get("userType", ""), u.get("userStatus", ""))
        for u in users
    ]


def _hidden(users: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in user.items() if k != "password"} for user in users]


async def get_user(admin: AdminClient, args: argparse.Namespace) -> Report:
    found = [
        user
        for a in await _reading(admin, args)
        if (user := await admin.get_user(a, args.username))
    ]
    if not found:
        raise AdminError(f"no user {args.username}")
    return Report({"users": _hidden(found[:1])}, _user_lines(found[:1]))


async def list_users(admin: AdminClient, args: argparse.Namespace) -> Report:
    users: dict[str, dict[str, Any]] = {}
    for address in await _reading(admin, args):
        for user in await admin.list_users(address, args.filter):
            users.setdefault(user.get("username", ""), user)
    listed = [users[name] for name in sorted(users)]
    return Report({"users": _hidden(listed)}, _user_lines(listed))


async def _put_acl(admin: AdminClient, args: argparse.Namespace, *, create: bool) -> Report:
    acl = acl_info(
        args.subject,
        _list(args.resources) or [],
        _list(args.actions) or [],
        _list(args.sourceIp),
        args.decision,
    )
    addresses = await _changing(admin, args)
    for address in addresses:
        await admin.put_acl(address, acl, create=create)
    verb = "create" if create else "update"
    return Report({"brokers": addresses}, [f"{verb} acl to {a} success." for a in addresses])


async def create_acl(admin: AdminClient, args: argparse.Namespace) -> Report:
    return await _put_acl(admin, args, create=True)


async def update_acl(admin: AdminClient, args: argparse.Namespace) -> Report:
    return await _put_acl(admin, args, create=False)


async def delete_acl(admin: AdminClient, args: argparse.Namespace) -> Report:
    addresses = await _changing(admin, args)
    for address in addresses:
        resources: list[str | None] = list(_list(args.resources) or []) or [None]
        for resource in resources:
            await admin.delete_acl(address, args.subject, resource)
    return Report({"brokers": addresses}, [f"delete acl from {a} success." for a in addresses])


def _acl_lines(acls: list[dict[str, Any]]) -> list[str]:
    row = "{:<24} {:<10} {:<28} {:<20} {:<18} {}"
    header = row.format(
        "#Subject", "#PolicyType", "#Resource", "#Actions", "#SourceIp", "#Decision"
    )
    return [header] + [
        row.format(
            acl.get("subject", ""),
            policy.get("policyType") or "",
            entry.get("resource", ""),
            ",".join(entry.get("actions") or []),
            ",".join(entry.get("sourceIps") or []),
            entry.get("decision", ""),
        )
        for acl in acls
        for policy in acl.get("policies") or []
        for entry in policy.get("entries") or []
    ]


async def get_acl(admin: AdminClient, args: argparse.Namespace) -> Report:
    found = [
        acl for a in await _reading(admin, args) if (acl := await admin.get_acl(a, args.subject))
    ]
    if not found:
        raise AdminError(f"no ACL for {args.subject}")
    return Report({"acls": found[:1]}, _acl_lines(found[:1]))


async def list_acls(admin: AdminClient, args: argparse.Namespace) -> Report:
    acls: dict[str, dict[str, Any]] = {}
    for address in await _reading(admin, args):
        for acl in await admin.list_acls(address, args.subject, args.resource):
            acls.setdefault(acl.get("subject", ""), acl)
    listed = [acls[subject] for subject in sorted(acls)]
    return Report({"acls": listed}, _acl_lines(listed))


async def migrate_acl(admin: AdminClient, args: argparse.Namespace) -> Report:
    try:
        rules = load_rules(Path(args.aclFile))
    except AclConfigError as exc:
        raise AdminError(str(exc)) from None
    addresses = await _changing(admin, args)
    lines = []
    for address in addresses:
        existing = {u.get("username", "") for u in await admin.list_users(address)}
        for user, acl in migrate(rules, existing_users=existing):
            await admin.create_user(address, user.to_info())
            if acl is not None:
                await admin.put_acl(address, acl.to_info(), create=True)
            lines.append(f"migrated {user.username} to {address}")
    return Report({"brokers": addresses, "migrated": lines}, lines or ["nothing to migrate"])
