"""`pocketmq admin <command>`: RocketMQ's `mqadmin` commands, with its names and flags.

Every command takes `-n host:port;host:port` (default: the `NAMESRV_ADDR` environment
variable) and `--json` (one JSON document on stdout, for scripts); without `--json` it prints
aligned tables with mqadmin's column names. A failure prints one line on stderr,
`pocketmq admin <command>: <what went wrong and what to do>`, and exits with status 1; a
command-line mistake exits with status 2, as argparse does. An mqadmin command that pocketmq
does not have yet says so (`pocketmq admin: <command> is not supported yet`, status 2).

This module owns the parser and the dispatch; the commands live by group (`admin_topics`,
`admin_brokers`, `admin_groups`, `admin_messages`, `dead_letters`, `replication`). Each is a
coroutine taking a `pocketmq.client.admin.AdminClient` and returning a `Report` (the JSON
document and the text lines), so output is decided in one place.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, Final

from pocketmq.cli import (
    admin_acl,
    admin_auth,
    admin_brokers,
    admin_container,
    admin_controller,
    admin_dledger,
    admin_groups,
    admin_messages,
    admin_topics,
    dead_letters,
    replication,
)
from pocketmq.cli.admin_report import Report
from pocketmq.cli.mqadmin_commands import MQADMIN_COMMANDS
from pocketmq.client.admin import AdminClient, AdminError
from pocketmq.client.credentials import SessionCredentials, tools_yml_credentials
from pocketmq.common.config import ConfigError
from pocketmq.observability.trace import TRACE_TOPIC_DEFAULT
from pocketmq.remoting.tls import TlsConfig

log = logging.getLogger("pocketmq.admin")

NAMESRV_ADDR_ENV: Final = "NAMESRV_ADDR"


Command = Callable[[AdminClient, argparse.Namespace], Awaitable[Report]]


def split_namesrv_addresses(text: str | None) -> list[str]:
    """`host:port;host:port` (RocketMQ's separator; commas accepted too) as a list."""
    return [part.strip() for part in (text or "").replace(",", ";").split(";") if part.strip()]


def _java_bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered not in ("true", "false"):
        raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")
    return lowered == "true"


# -- the parser --------------------------------------------------------------------------------


def check_command_name(words: Sequence[str]) -> str | None:
    """The one line for a command-line `pocketmq admin <words>` whose command pocketmq lacks.

    argparse would list every command as if the operator had made a typo; an mqadmin command
    is "not supported yet", any other word is an unknown command. None when the command exists
    (or is absent, or is an option such as `-h`): argparse then handles the line.
    """
    if not words or words[0].startswith("-") or words[0] in _command_names():
        return None
    name = words[0]
    if name in MQADMIN_COMMANDS:
        return f"pocketmq admin: {name} is not supported yet"
    return f"pocketmq admin: unknown command {name!r} (pocketmq admin --help lists the commands)"


def _command_names() -> set[str]:
    return register(argparse.ArgumentParser(add_help=False).add_subparsers())


def _target_options(parser: argparse.ArgumentParser, what: str, *, required: bool) -> None:
    group = parser.add_mutually_exclusive_group(required=required)
    group.add_argument("-b", "--brokerAddr", help=f"{what} on this broker (host:port or name)")
    group.add_argument("-c", "--clusterName", help=f"{what} on every master of this cluster")


def register(commands: Any) -> set[str]:
    """Adds `admin` and its mqadmin sub-commands to the top-level sub-command set.

    Returns:
        The names of the sub-commands.
    """
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
        "--tls",
        action="store_true",
        help="connect with TLS (tls.client.* keys from tls.config.file, as mqadmin's -D)",
    )
    signed = argparse.ArgumentParser(add_help=False)
    signed.add_argument(
        "--accessKey",
        dest="auth_access_key",
        help="ACL access key (default: accessKey of $ROCKETMQ_HOME/conf/tools.yml)",
    )
    signed.add_argument(
        "--secretKey", dest="auth_secret_key", help="ACL secret key (default: from tools.yml)"
    )
    # The ACL commands' -a/--accessKey name the account they change (as mqadmin's do).
    signed_acl = argparse.ArgumentParser(add_help=False)
    signed_acl.add_argument(
        "--authAccessKey", dest="auth_access_key", help="the admin account's access key"
    )
    signed_acl.add_argument(
        "--authSecretKey", dest="auth_secret_key", help="the admin account's secret key"
    )
    common.add_argument(
        "--timeout", type=float, default=5.0, help="seconds to wait for each answer (5)"
    )

    names: set[str] = set()

    def add(
        name: str, command: Command, help_text: str, *, names_accounts: bool = False
    ) -> argparse.ArgumentParser:
        names.add(name)
        parents = [common, signed_acl if names_accounts else signed]
        child: argparse.ArgumentParser = sub.add_parser(name, parents=parents, help=help_text)
        child.set_defaults(run=run, command=command)
        return child

    p = add("updateTopic", admin_topics.update_topic, "update or create a topic")
    _target_options(p, "create the topic", required=True)
    p.add_argument("-t", "--topic", required=True, help="topic name")
    p.add_argument("-r", "--readQueueNums", type=int, default=8, help="read queues (8)")
    p.add_argument("-w", "--writeQueueNums", type=int, default=8, help="write queues (8)")
    p.add_argument("-p", "--perm", type=int, default=6, help="2 write, 4 read, 6 both (6)")
    p.add_argument("-o", "--order", type=_java_bool, default=False, help="ordered (true|false)")
    p.add_argument(
        "-a", "--attributes", help="attribute changes, e.g. +message.type=FIFO (5.x clients)"
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="also change a system topic such as TBW102 (refused without it)",
    )

    p = add("deleteTopic", admin_topics.delete_topic, "delete a topic from brokers and NameServers")
    p.add_argument("-t", "--topic", required=True, help="topic name")
    p.add_argument("-c", "--clusterName", required=True, help="delete from this cluster")

    add("topicList", admin_topics.topic_list, "list every topic the NameServer knows")

    p = add("topicRoute", admin_topics.topic_route, "show a topic's route")
    p.add_argument("-t", "--topic", required=True, help="topic name")
    p.add_argument("-l", "--list", action="store_true", help="(accepted; tables are the default)")

    p = add("topicStatus", admin_topics.topic_status, "show every queue's offsets of a topic")
    p.add_argument("-t", "--topic", required=True, help="topic name")

    p = add("clusterList", admin_brokers.cluster_list, "list clusters and brokers")
    p.add_argument("-c", "--clusterName", help="only this cluster")

    p = add("brokerStatus", admin_brokers.broker_status, "show a broker's runtime figures")
    _target_options(p, "show", required=True)

    p = add(
        "updateSubGroup", admin_groups.update_sub_group, "update or create a subscription group"
    )
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

    p = add("deleteSubGroup", admin_groups.delete_sub_group, "delete a subscription group")
    _target_options(p, "delete the group", required=True)
    p.add_argument("-g", "--groupName", required=True, help="consumer group name")
    p.add_argument(
        "-r", "--removeOffset", type=_java_bool, default=False, help="also its offsets (false)"
    )

    p = add("consumerProgress", admin_groups.consumer_progress, "show a consumer group's progress")
    p.add_argument("-g", "--groupName", required=True, help="consumer group name")
    p.add_argument("-t", "--topicName", help="only this topic")

    p = add(
        "resetOffsetByTime",
        admin_groups.reset_offset_by_time,
        "move a consumer group's offsets to a point in time",
    )
    p.add_argument("-g", "--groupName", required=True, help="consumer group name")
    p.add_argument("-t", "--topic", required=True, help="topic name")
    p.add_argument(
        "-s", "--timestamp", required=True, help="now, millis or yyyy-MM-dd#HH:mm:ss:SSS"
    )
    p.add_argument("-f", "--force", type=_java_bool, default=True, help="(true)")
    p.add_argument("-c", "--cplus", action="store_true", help="accepted, as mqadmin does")

    p = add(
        "skipAccumulatedMessage",
        admin_groups.skip_accumulated_message,
        "move a consumer group's offsets to the end",
    )
    p.add_argument("-g", "--groupName", required=True, help="consumer group name")
    p.add_argument("-t", "--topic", required=True, help="topic name")
    p.add_argument("-f", "--force", type=_java_bool, default=True, help="(true)")

    p = add(
        "queryMsgById",
        admin_messages.query_msg_by_id,
        "show messages by offset or client message id",
    )
    p.add_argument("-i", "--msgId", required=True, help="message id(s), comma-separated")
    p.add_argument("-t", "--topic", help="topic (needed for client message ids, UNIQ_KEY)")

    p = add("queryMsgByKey", admin_messages.query_msg_by_key, "find messages by key")
    p.add_argument("-t", "--topic", required=True, help="topic name")
    p.add_argument("-k", "--msgKey", required=True, help="message key")
    p.add_argument("-b", "--beginTimestamp", type=int, default=0, help="from (ms, 0)")
    p.add_argument("-e", "--endTimestamp", type=int, default=(1 << 63) - 1, help="to (ms)")
    p.add_argument("-m", "--maxNum", type=int, default=64, help="at most (64)")

    p = add("queryMsgTraceById", admin_messages.query_msg_trace_by_id, "show a message's trace")
    p.add_argument("-i", "--msgId", required=True, help="message id (UNIQ_KEY)")
    p.add_argument(
        "-t", "--traceTopic", default=TRACE_TOPIC_DEFAULT, help="trace topic (RMQ_SYS_TRACE_TOPIC)"
    )
    p.add_argument("-b", "--beginTimestamp", type=int, default=0, help="from (ms, 0)")
    p.add_argument("-e", "--endTimestamp", type=int, default=(1 << 63) - 1, help="to (ms)")
    p.add_argument("-c", "--maxNum", type=int, default=64, help="at most (64)")

    p = add(
        "queryMsgByOffset", admin_messages.query_msg_by_offset, "show the message at a queue offset"
    )
    p.add_argument("-t", "--topic", required=True, help="topic name")
    p.add_argument("-b", "--brokerName", required=True, help="broker name")
    p.add_argument("-i", "--queueId", type=int, required=True, help="queue id")
    p.add_argument("-o", "--offset", type=int, required=True, help="queue offset")

    p = add("sendMessage", admin_messages.send_message, "send one message")
    p.add_argument("-t", "--topic", required=True, help="topic name")
    p.add_argument("-p", "--body", required=True, help="message body (UTF-8 text)")
    p.add_argument("-k", "--key", help="message keys")
    p.add_argument("-c", "--tags", help="message tags")
    p.add_argument("-b", "--broker", help="send to this broker (name)")
    p.add_argument("-i", "--qid", type=int, help="send to this queue (needs -b)")

    p = add("consumeMessage", admin_messages.consume_message, "read messages without committing")
    p.add_argument("-t", "--topic", required=True, help="topic name")
    p.add_argument("-b", "--brokerName", help="only this broker")
    p.add_argument("-i", "--queueId", type=int, help="only this queue (needs -b)")
    p.add_argument("-o", "--offset", type=int, help="from this offset (needs -i)")
    p.add_argument("-c", "--MessageNumber", type=int, default=128, help="at most (128)")

    p = add("getBrokerConfig", admin_brokers.get_broker_config, "show broker settings")
    _target_options(p, "show", required=True)

    p = add(
        "updateBrokerConfig",
        admin_brokers.update_broker_config,
        "change a running broker's setting",
    )
    _target_options(p, "change", required=True)
    p.add_argument("-k", "--key", required=True, help="config key")
    p.add_argument("-v", "--value", required=True, help="config value")

    dead_letters.register(add)
    replication.register(add)
    admin_dledger.register(add)
    admin_controller.register(add)
    admin_container.register(add)
    admin_acl.register(add)
    admin_auth.register(add)
    parser.set_defaults(run=run)
    return names


def run(args: argparse.Namespace) -> int:
    """Runs one admin command; prints its report, or one error line (status 1)."""
    from pocketmq.runtime import event_loop

    name = args.admin_command
    try:
        report = event_loop.run(_execute(args))
    except (AdminError, ConfigError) as exc:
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


def admin_credentials(access_key: str | None, secret_key: str | None) -> SessionCredentials | None:
    """The account admin requests are signed with: the flags, else mqadmin's tools.yml.

    Raises:
        AdminError: one flag without the other, or a tools.yml that cannot be read.
    """
    if access_key or secret_key:
        if not (access_key and secret_key):
            raise AdminError("an access key and a secret key go together: pass both")
        return SessionCredentials(access_key, secret_key)
    home = os.environ.get("ROCKETMQ_HOME")
    if not home:
        return None
    try:
        return tools_yml_credentials(Path(home) / "conf" / "tools.yml")
    except ValueError as exc:
        raise AdminError(str(exc)) from None


async def _execute(args: argparse.Namespace) -> Report:
    addresses = split_namesrv_addresses(args.namesrvAddr or os.environ.get(NAMESRV_ADDR_ENV))
    tls = TlsConfig.from_properties({}) if args.tls else None
    credentials = admin_credentials(args.auth_access_key, args.auth_secret_key)
    async with AdminClient(
        addresses, timeout_s=args.timeout, tls=tls, credentials=credentials
    ) as admin:
        command: Command = args.command
        return await command(admin, args)
