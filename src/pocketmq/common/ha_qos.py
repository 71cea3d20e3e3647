"""Controller mode's replication policy per broker group (pocketmq's, after the seeds'
HAController): the QoS level the controller sets for a group, and the state its master is in.

A master moves through the states by its slaves' progress: SINGLE_MASTER (no slave), ASYNC
(slaves connected, none in sync: puts are acknowledged without them), SEMI_SYNC (a slave nearly
caught up counts for acknowledgements while it closes the gap: the master holds puts for it),
SYNC (the SyncStateSet has a slave). It falls back as slaves fail. The QoS level picks where it
may fall to: AVAILABILITY acknowledges on the master alone when no slave keeps up; NO_LOSS never
acknowledges a put that only one broker holds (puts wait, then fail, until a slave is back).
"""

from __future__ import annotations

import enum


class Qos(enum.Enum):
    AVAILABILITY = "AVAILABILITY"
    NO_LOSS = "NO_LOSS"


class HaState(enum.Enum):
    SINGLE_MASTER = "SINGLE_MASTER"
    ASYNC = "ASYNC"
    SEMI_SYNC = "SEMI_SYNC"
    SYNC = "SYNC"


class QosError(ValueError):
    """A QoS setting that cannot be read; the message names the key and the fix."""


def parse_qos(text: str, key: str) -> Qos:
    try:
        return Qos(text.strip().upper())
    except ValueError:
        raise QosError(
            f"{key}={text!r} is not a QoS level: write AVAILABILITY or NO_LOSS"
        ) from None


def parse_group_qos(text: str, key: str) -> dict[str, Qos]:
    """`broker-a:NO_LOSS;broker-b:AVAILABILITY` as a mapping."""
    levels: dict[str, Qos] = {}
    for part in text.split(";"):
        part = part.strip()
        if not part:
            continue
        name, sep, level = part.rpartition(":")
        if not sep or not name:
            raise QosError(f"{key}: {part!r} is not brokerName:LEVEL (as broker-a:NO_LOSS)")
        levels[name.strip()] = parse_qos(level, key)
    return levels
