"""Who becomes master of a group (RocketMQ's `DefaultElectPolicy`).

Candidates are the alive members of the SyncStateSet: each holds every message the group
acknowledged under `allAckInSyncStateSet`, so electing any of them loses none. Only with
`enableElectUncleanMaster` may an alive replica outside the set be chosen when no member is
alive (it may lack acknowledged messages: availability over safety, the operator's choice).

Among candidates: the old master if it is still alive (no needless switch), else the highest
epoch, then the longest CommitLog, then the best `brokerElectPriority` (smaller wins), then the
smallest broker id.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pocketmq.controller.heartbeats import LiveBroker
from pocketmq.controller.replicas import BrokerGroup


@dataclass(frozen=True, slots=True)
class Election:
    master: int | None
    why: str
    """Why no master, when `master` is None; how it was chosen otherwise."""


def elect(
    group: BrokerGroup,
    live: Callable[[int], LiveBroker | None],
    *,
    unclean: bool,
    designated: int | None = None,
    keep_old: bool = True,
) -> Election:
    """Chooses a master for `group`.

    Args:
        group: The group as replicated.
        live: A replica's latest heartbeat while it is alive, else None.
        unclean: `enableElectUncleanMaster`.
        designated: An operator's choice (`electMaster -i`): elected if it is alive and may be.
        keep_old: The old master stays when it is alive and in the set.
    """
    in_set = group.sync_state_set
    if designated is not None:
        if designated not in group.replicas:
            return Election(None, f"broker {designated} is not a replica of {group.name}")
        if live(designated) is None:
            return Election(None, f"broker {designated} of {group.name} is not alive")
        if designated not in in_set and in_set and not unclean:
            return Election(
                None,
                f"broker {designated} is not in the SyncStateSet {sorted(in_set)} of "
                f"{group.name} (enableElectUncleanMaster=false)",
            )
        return Election(designated, "designated")
    old = group.master_id
    if keep_old and old is not None and old in in_set and live(old) is not None:
        return Election(old, "the old master is alive")
    pool = [b for b in (live(i) for i in in_set) if b is not None]
    how = "from the SyncStateSet"
    if not in_set and group.master_epoch == 0:
        # A new group: nothing was acknowledged yet, every alive replica is as good.
        pool = [b for b in (live(i) for i in group.replicas) if b is not None]
        how = "from a new group"
    elif not pool and unclean:
        pool = [b for b in (live(i) for i in group.replicas) if b is not None]
        how = "unclean, outside the SyncStateSet"
    if not pool:
        return Election(
            None,
            f"no alive replica of {group.name} may become master (SyncStateSet "
            f"{sorted(in_set)}, enableElectUncleanMaster={str(unclean).lower()})",
        )
    best = min(pool, key=lambda b: (-b.epoch, -b.max_offset, b.priority, b.broker_id))
    return Election(best.broker_id, how)
