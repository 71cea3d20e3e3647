"""The real mqadmin (`rocketmq-tools` 5.5.0) as a conformance driver: the command lines an
operator types, run in one JVM against one server, each answer reduced to what must not differ
between Apache RocketMQ and pocketmq.

An answer becomes `{"outcome": ..., "lines": [...]}`: the outcome is `ok` or the response code
and remark of the exception mqadmin printed; the lines are the output with addresses, times,
message ids, client ids and rates replaced by placeholders, and, where a command lists the whole
cluster, only the lines that name what the scenario created (the servers' own system topics
differ, see docs/compatibility.md).
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.conformance.reference import CLIENT_JVM, with_launchers

TOPIC = "AdminTopic"
GROUP = "AdminGroup"
MESSAGES = 8


# -- the command lines ---------------------------------------------------------------------------

# Each: the words after `mqadmin`, with {ns}, {broker}, {topic}, {group} filled in, and which
# lines of the answer are compared (see `_keep`).
COMMANDS: list[tuple[str, str]] = [
    ("updateTopic -n {ns} -c DefaultCluster -t {topic}2 -r 4 -w 4", "all"),
    ("updateSubGroup -n {ns} -c DefaultCluster -g {group}2", "all"),
    ("topicRoute -n {ns} -t {topic}", "all"),
    ("topicStatus -n {ns} -t {topic}", "all"),
    ("topicClusterList -n {ns} -t {topic}", "all"),
    ("topicList -n {ns}", "named"),
    ("topicList -n {ns} -c", "named"),
    ("clusterList -n {ns}", "header"),
    ("brokerStatus -n {ns} -b {broker}", "none"),
    ("getBrokerConfig -n {ns} -b {broker}", "none"),
    ("getNamesrvConfig -n {ns}", "none"),
    ("consumerProgress -n {ns}", "named"),
    ("consumerProgress -n {ns} -g {group}", "all"),
    ("consumerConnection -n {ns} -g {group}", "all"),
    ("producerConnection -n {ns} -g {group}Producer -t {topic}", "all"),
    ("consumerStatus -n {ns} -g {group}", "none"),
    ("getConsumerConfig -n {ns} -g {group}", "all"),
    ("statsAll -n {ns} -t {topic}", "named"),
    ("queryMsgByKey -n {ns} -t {topic} -k key-3", "count"),
    ("queryMsgByOffset -n {ns} -t {topic} -b broker-a -i 0 -o 0", "message"),
    ("queryMsgById -n {ns} -t {topic} -i {{offsetMsgId}}", "message-only"),
    ("queryMsgByUniqueKey -n {ns} -t {topic} -i {{msgId}}", "message-only"),
    ("printMsg -n {ns} -t {topic}", "bodies"),
    ("printMsgByQueue -n {ns} -t {topic} -a broker-a -i 0", "bodies"),
    ("brokerConsumeStats -n {ns} -b {broker}", "named"),
    ("checkMsgSendRT -n {ns} -t {topic} -a 3 -s 16", "header"),
    ("sendMessage -n {ns} -t {topic}2 -p hello -k key-x -c TagA", "header"),
    ("consumeMessage -n {ns} -t {topic} -b broker-a -i 0 -o 0 -c 1", "header"),
    ("allocateMQ -n {ns} -t {topic} -i 127.0.0.1@1,127.0.0.1@2", "all"),
    ("queryCq -n {ns} -t {topic} -q 0 -i 0 -c 2", "all"),
    ("updateKvConfig -n {ns} -s ORDER_TOPIC_CONFIG -k {topic} -v broker-a:4", "all"),
    ("deleteKvConfig -n {ns} -s ORDER_TOPIC_CONFIG -k {topic}", "all"),
    ("updateBrokerConfig -n {ns} -b {broker} -k syncFlushTimeout -v 5000", "all"),
    ("updateTopicPerm -n {ns} -b {broker} -t {topic}2 -p 4", "all"),
    ("wipeWritePerm -n {ns} -b broker-a", "all"),
    ("addWritePerm -n {ns} -b broker-a", "all"),
    ("cleanExpiredCQ -n {ns} -c DefaultCluster", "all"),
    ("haStatus -n {ns} -c DefaultCluster", "header"),
    ("resetOffsetByTime -n {ns} -g {group} -t {topic} -s 0", "all"),
    ("skipAccumulatedMessage -n {ns} -g {group} -t {topic}", "all"),
    ("cloneGroupOffset -n {ns} -s {group} -d {group}2 -t {topic}", "all"),
    ("deleteSubGroup -n {ns} -c DefaultCluster -g {group}2", "all"),
    ("deleteTopic -n {ns} -c DefaultCluster -t {topic}2", "all"),
    ("noSuchCommand -n {ns}", "all"),
]


def command_lines(namesrv: str, broker: str) -> list[str]:
    names = {"ns": namesrv, "broker": broker, "topic": TOPIC, "group": GROUP}
    return [command.format(**names) for command, _ in COMMANDS]


def run_mqadmin(classpath: str, namesrv: str, broker: str, work: Path) -> list[dict[str, str]]:
    """Starts the scenario's clients, runs every command line; their raw answers in order."""
    work.mkdir(parents=True, exist_ok=True)
    commands = work / "commands.tsv"
    commands.write_text(
        "\n".join(line.replace(" ", "\t") for line in command_lines(namesrv, broker))
    )
    command = [
        "java",
        *CLIENT_JVM,
        f"-Duser.home={work}",
        f"-Drocketmq.client.logRoot={work / 'logs'}",
        "-cp",
        with_launchers(classpath),
        "QuickShutdowns",
        "AdminBatch",
        namesrv,
        TOPIC,
        GROUP,
        str(MESSAGES),
        str(commands),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=work)
    lines = [line for line in done.stdout.splitlines() if line.startswith("[")]
    if done.returncode or not lines:
        raise AssertionError(
            f"AdminBatch against {namesrv} exited {done.returncode}:\n{done.stderr[-3000:]}"
        )
    answers: list[dict[str, str]] = json.loads(lines[-1])
    return answers


# -- what is compared ----------------------------------------------------------------------------

_VOLATILE: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"\d+\.\d+\.\d+\.\d+@[\w.-]+(#[\w.#-]+)?"), "<client-id>"),
    (re.compile(r"/?127\.0\.0\.1:\d+"), "<addr>"),
    (re.compile(r"\b[0-9A-F]{32}\b|\b[0-9A-F]{56}\b"), "<msg-id>"),
    (re.compile(r"\d{4}-\d\d-\d\d[ #]\d\d:\d\d:\d\d([,:.]\d+)?"), "<time>"),
    (re.compile(r"\b1[6-9]\d{11}\b"), "<millis>"),
    (re.compile(r"\b\d+\.\d+\b"), "<rate>"),
    # Where a message lies in the CommitLog, and how many topics a NameServer holds, depend on
    # what else each server stores (RocketMQ's broker adds three properties to every message).
    (re.compile(r"physicOffset=\d+, physicSize=\d+"), "physicOffset=<n>, physicSize=<n>"),
    (re.compile(r"\] OK, \d+"), "] OK, <n>"),
    (re.compile(r"[ \t]+"), " "),
]


def normalise(text: str) -> str:
    for pattern, placeholder in _VOLATILE:
        text = pattern.sub(placeholder, text)
    return text.strip()


_CAUSE = re.compile(r"CODE: (-?\d+)\s+DESC: ([^\n]*)")


def outcome(answer: dict[str, str]) -> str:
    """`ok`, or the response code of the exception mqadmin printed (the remark is compared
    separately where the code alone does not say enough)."""
    found = _CAUSE.search(answer["stderr"]) or _CAUSE.search(answer["stdout"])
    if found:
        return f"code {found.group(1)}"
    if "Exception" in answer["stderr"]:
        first = next(line for line in answer["stderr"].splitlines() if "Exception" in line)
        return normalise(first.split(":")[0])
    return "ok"


def _named(line: str) -> bool:
    return TOPIC in line or GROUP in line or line.startswith("#")


# Not the keys: which message lands first in queue 0 depends on the producer's random start.
_MESSAGE_FIELDS = ("Topic:", "Tags:", "Queue ID:", "Queue Offset:", "Reconsume Times:")

# What a message is, without where it went.
_WHAT_FIELDS = ("Topic:", "Tags:", "Keys:")

_KEEP: dict[str, Callable[[list[str]], list[str]]] = {
    "all": lambda lines: lines,
    "none": lambda lines: [],
    "header": lambda lines: lines[:1],
    "count": lambda lines: [f"{len(lines) - 1} rows"],
    "named": lambda lines: [line for line in lines if _named(line)],
    "message": lambda lines: [line for line in lines if line.startswith(_MESSAGE_FIELDS)],
    "message-only": lambda lines: [line for line in lines if line.startswith(_WHAT_FIELDS)],
    "bodies": lambda lines: sorted(
        line.split(" BODY: ")[-1] for line in lines if " BODY: " in line
    ),
}


def transcript(answers: list[dict[str, str]]) -> dict[str, Any]:
    """The comparable part of each answer, keyed by its command line (placeholders kept)."""
    reduced: dict[str, Any] = {}
    for (template, keep), answer in zip(COMMANDS, answers, strict=True):
        lines = [
            normalise(line)
            for line in answer["stdout"].splitlines()
            if line.strip() and "|-" not in line
        ]
        reduced[template] = {"outcome": outcome(answer), "lines": _KEEP[keep](lines)}
    return reduced
