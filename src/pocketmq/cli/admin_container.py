"""`pocketmq admin addBroker` and `removeBroker`: mqadmin's commands that start a broker in a
running broker container and stop one there (see `pocketmq.container`).

They talk to the container's own port (`-c host:port`, 10811 by default), never to a
NameServer. As with mqadmin, `addBroker -b` names a file on the container's machine.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Final

from pocketmq.cli.admin_report import Report
from pocketmq.client.admin import AdminClient, AdminError
from pocketmq.client.admin.errors import check
from pocketmq.client.errors import ConnectionFailedError, RequestTimeoutError
from pocketmq.common.codes import RequestCode
from pocketmq.remoting.command import RemotingCommand

# Adding a broker recovers its store and removing one persists its tables: slower than a query.
CONTAINER_TIMEOUT_S_MIN: Final = 30.0


async def _ask_container(
    admin: AdminClient, address: str, code: int, fields: dict[str, str], what: str
) -> None:
    timeout_s = max(admin.timeout_s, CONTAINER_TIMEOUT_S_MIN)
    try:
        response: RemotingCommand = await admin.instance.invoke(
            address, code, fields, timeout_s=timeout_s
        )
    except RequestTimeoutError:
        raise AdminError(
            f"broker container {address} did not answer {what} within {timeout_s:g} s; "
            "see its log (a broker may still be starting or stopping)"
        ) from None
    except ConnectionFailedError as exc:
        raise AdminError(
            f"cannot reach broker container {address} for {what}: {exc}; -c takes the "
            "container's listenPort (10811 by default), not a broker's"
        ) from None
    check(response, what, f"broker container {address}")


async def add_broker(admin: AdminClient, args: argparse.Namespace) -> Report:
    address = args.brokerContainerAddr.strip()
    path = args.brokerConfigPath.strip()
    await _ask_container(admin, address, RequestCode.ADD_BROKER, {"configPath": path}, "addBroker")
    return Report(
        {"brokerContainerAddr": address, "brokerConfigPath": path},
        [f"add broker to {address} success"],
    )


def _broker_identity(text: str) -> tuple[str, str, int]:
    parts = [part.strip() for part in text.split(":")]
    if len(parts) != 3 or not parts[0] or not parts[1]:
        raise argparse.ArgumentTypeError(f"expected clusterName:brokerName:brokerId, got {text!r}")
    try:
        broker_id = int(parts[2])
    except ValueError:
        raise argparse.ArgumentTypeError(f"brokerId {parts[2]!r} is not a whole number") from None
    if broker_id < 0:
        raise argparse.ArgumentTypeError("brokerId can't be negative")
    return parts[0], parts[1], broker_id


async def remove_broker(admin: AdminClient, args: argparse.Namespace) -> Report:
    address = args.brokerContainerAddr.strip()
    cluster, name, broker_id = args.brokerIdentity
    fields = {"brokerClusterName": cluster, "brokerName": name, "brokerId": str(broker_id)}
    await _ask_container(admin, address, RequestCode.REMOVE_BROKER, fields, "removeBroker")
    return Report(
        {"brokerContainerAddr": address, **fields}, [f"remove broker from {address} success"]
    )


def register(add: Callable[..., argparse.ArgumentParser]) -> None:
    """Adds the container commands with `add(name, command, help)` of the admin command set."""
    p = add("addBroker", add_broker, "start a broker in a broker container")
    p.add_argument("-c", "--brokerContainerAddr", required=True, help="the container (host:port)")
    p.add_argument(
        "-b",
        "--brokerConfigPath",
        required=True,
        help="the broker's properties file, a path on the container's machine",
    )
    p = add("removeBroker", remove_broker, "stop a broker in a broker container")
    p.add_argument("-c", "--brokerContainerAddr", required=True, help="the container (host:port)")
    p.add_argument(
        "-b",
        "--brokerIdentity",
        required=True,
        type=_broker_identity,
        help="clusterName:brokerName:brokerId (the dLegerSelfId's number for DLedger)",
    )
