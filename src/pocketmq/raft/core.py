"""The Raft consensus core: messages, ticks and proposals in; what to persist, send and apply out.

No I/O, no clock, no global randomness: the driver calls `tick()` at a fixed interval, `step()`
with each message received, `propose()` / `read_index()` / `transfer_leadership()` for its
clients, then takes `ready()`, persists, sends, applies, and calls `advance()`.

Beyond the Raft paper: pre-vote and check-quorum (Ongaro's thesis §9.6: a node cut off and
rejoined cannot depose a healthy leader), fast backtracking of rejected appends, pipelined and
batched appends, leadership transfer (§3.10), read-index reads (§6.4) and snapshots (§5).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum

from pocketmq.raft.log import RaftLog
from pocketmq.raft.messages import (
    Entry,
    EntryKind,
    HardState,
    Message,
    MessageType,
    ReadState,
    Ready,
    Snapshot,
)
from pocketmq.raft.progress import Progress, ProgressState, committed_index, majority, tally
from pocketmq.raft.read_index import ReadIndexQueue

TRANSFER = b"transfer"
"""Context of a vote a leadership transfer started: voters ignore their leader lease for it."""


class Role(Enum):
    FOLLOWER = "follower"
    PRE_CANDIDATE = "pre-candidate"
    CANDIDATE = "candidate"
    LEADER = "leader"


@dataclass(frozen=True, slots=True)
class RaftConfig:
    election_ticks: int = 10
    """Ticks without a leader before a follower campaigns (randomized up to twice that)."""
    heartbeat_ticks: int = 1
    max_entries_per_append: int = 512
    max_bytes_per_append: int = 1 << 20
    max_inflight: int = 64
    """Unanswered appends a leader keeps in flight to one follower."""
    pre_vote: bool = True
    check_quorum: bool = True


class Raft:
    """One node's Raft state. Not thread-safe; one driver owns it."""

    def __init__(
        self,
        node_id: int,
        voters: Sequence[int],
        config: RaftConfig,
        rng: random.Random,
        *,
        hard_state: HardState | None = None,
        snapshot: Snapshot | None = None,
        entries: Sequence[Entry] = (),
    ) -> None:
        assert node_id in voters, (node_id, voters)
        assert 0 not in voters, "node ids start at 1"
        hard_state = hard_state or HardState()
        self.id = node_id
        self.voters = tuple(sorted(voters))
        self.config = config
        self._rng = rng
        self.log = RaftLog(snapshot or Snapshot(), list(entries), hard_state.commit)
        self.term = hard_state.term
        self.vote = hard_state.vote
        self._saved = HardState(self.term, self.vote, self.log.committed)
        self.leader = 0
        self.role = Role.FOLLOWER
        self.progress: dict[int, Progress] = {}
        self._votes: dict[int, bool] = {}
        self._elapsed = 0
        self._heartbeat_elapsed = 0
        self._timeout = config.election_ticks
        self.transferee = 0
        self._messages: list[Message] = []
        self._read_states: list[ReadState] = []
        self._reads = ReadIndexQueue()
        self._unsent = False
        self._step: Callable[[Message], None] = self._step_follower
        self._tick: Callable[[], None] = self._tick_election
        self.become_follower(self.term, 0)

    # -- the driver's interface ------------------------------------------------------------
    def tick(self) -> None:
        self._tick()

    def step(self, m: Message) -> None:
        """Takes one message from another node."""
        if m.term > self.term:
            if m.type in (MessageType.VOTE, MessageType.PRE_VOTE):
                in_lease = (
                    self.config.check_quorum
                    and self.leader != 0
                    and self._elapsed < self.config.election_ticks
                )
                if in_lease and m.context != TRANSFER:
                    return  # a leader was heard from lately: it is not gone
            if m.type is MessageType.PRE_VOTE:
                pass  # a pre-vote never changes anyone's term
            elif m.type is MessageType.PRE_VOTE_RESPONSE and not m.reject:
                pass  # it carries the term we would campaign in, not the voter's
            elif m.type in (MessageType.APPEND, MessageType.HEARTBEAT, MessageType.SNAPSHOT):
                self.become_follower(m.term, m.src)
            else:
                self.become_follower(m.term, 0)
        elif m.term < self.term:
            if m.type in (MessageType.APPEND, MessageType.HEARTBEAT):
                # A leader of an old term, back from a partition: with pre-vote no vote would
                # ever reach it, so tell it the current term to make it step down.
                self._send(MessageType.APPEND_RESPONSE, m.src)
            elif m.type is MessageType.PRE_VOTE:
                self._send(MessageType.PRE_VOTE_RESPONSE, m.src, reject=True)
            return
        if m.type in (MessageType.VOTE, MessageType.PRE_VOTE):
            self._answer_vote(m)
            return
        self._step(m)

    def propose(self, data: bytes) -> int | None:
        """Appends a command; its index, or None when this node cannot take proposals (not the
        leader, or handing leadership over)."""
        if self.role is not Role.LEADER or self.transferee:
            return None
        index = self.log.last_index + 1
        self.log.append([Entry(self.term, index, data)])
        self._unsent = True
        return index

    def read_index(self, context: bytes) -> bool:
        """Asks for a linearizable read point; it comes out as a `ReadState` with `context`
        once a majority confirmed this node still leads. False when not the leader."""
        if self.role is not Role.LEADER:
            return False
        if self.log.term(self.log.committed) != self.term:
            self._reads.waiting.append(context)  # the commit index is not known yet (§6.4)
            return True
        self._start_read(context)
        return True

    def transfer_leadership(self, to: int) -> bool:
        """Hands leadership to `to` once its log is complete (thesis §3.10); proposals are
        refused meanwhile. Abandoned if it has not happened within an election timeout."""
        if self.role is not Role.LEADER or to == self.id or to not in self.voters:
            return False
        self.transferee = to
        self._elapsed = 0
        if self.progress[to].match == self.log.last_index:
            self._send(MessageType.TIMEOUT_NOW, to)
        else:
            self._send_append(to, allow_empty=True)
        return True

    def compact(self, index: int, data: bytes) -> Snapshot:
        """Replaces the applied entries up to `index` by the state machine image `data`; the
        driver stores the returned snapshot and may then drop those entries from disk."""
        return self.log.compact(index, data)

    def has_ready(self) -> bool:
        log = self.log
        return bool(
            self._messages
            or self._read_states
            or self._unsent
            or log.pending_snapshot
            or log.stable < log.last_index
            or min(log.committed, log.stable) > log.applied
            or self._hard_state() != self._saved
        )

    def ready(self) -> Ready:
        if self._unsent:
            self._unsent = False
            self._broadcast_append(allow_empty=False)
        state = self._hard_state()
        ready = Ready(
            hard_state=state if state != self._saved else None,
            entries=self.log.unstable(),
            snapshot=self.log.pending_snapshot,
            messages=self._messages,
            committed=self.log.to_apply(),
            read_states=self._read_states,
        )
        self._messages = []
        self._read_states = []
        return ready

    def advance(self, ready: Ready) -> None:
        """The driver persisted, sent and applied `ready`."""
        log = self.log
        if ready.hard_state:
            self._saved = ready.hard_state
        if ready.snapshot and log.pending_snapshot is ready.snapshot:
            log.pending_snapshot = None
        if ready.entries:
            last = ready.entries[-1]
            if log.term(last.index) == last.term:  # not replaced meanwhile
                log.stable = max(log.stable, last.index)
        if ready.committed:
            log.applied = max(log.applied, ready.committed[-1].index)
        if self.role is Role.LEADER and self.progress[self.id].update(log.stable):
            self._maybe_commit()

    # -- roles -------------------------------------------------------------------------------
    def become_follower(self, term: int, leader: int) -> None:
        if term != self.term:
            self.term = term
            self.vote = 0
        self.leader = leader
        self.role = Role.FOLLOWER
        self._step = self._step_follower
        self._tick = self._tick_election
        self._reset()

    def _become_pre_candidate(self) -> None:
        self.role = Role.PRE_CANDIDATE
        self.leader = 0
        self._step = self._step_candidate
        self._tick = self._tick_election
        self._reset(keep_term=True)

    def _become_candidate(self) -> None:
        self.term += 1
        self.vote = self.id
        self.leader = 0
        self.role = Role.CANDIDATE
        self._step = self._step_candidate
        self._tick = self._tick_election
        self._reset()

    def _become_leader(self) -> None:
        self.role = Role.LEADER
        self.leader = self.id
        self._step = self._step_leader
        self._tick = self._tick_leader
        self._reset()
        next_index = self.log.last_index + 1
        self.progress = {peer: Progress(next_index) for peer in self.voters}
        own = self.progress[self.id]
        own.match = self.log.stable
        own.become_replicate()
        self.log.append([Entry(self.term, next_index, b"", EntryKind.NOOP)])
        self._unsent = True

    def _reset(self, *, keep_term: bool = False) -> None:
        self._elapsed = 0
        self._heartbeat_elapsed = 0
        self._timeout = self.config.election_ticks + self._rng.randrange(self.config.election_ticks)
        self._votes = {}
        self.transferee = 0
        self._reads.clear()
        self._unsent = False
        if not keep_term:
            self.progress = {}

    # -- elections ---------------------------------------------------------------------------
    def _tick_election(self) -> None:
        self._elapsed += 1
        if self._elapsed >= self._timeout:
            self._campaign(pre_vote=self.config.pre_vote)

    def _campaign(self, *, pre_vote: bool, transfer: bool = False) -> None:
        if pre_vote:
            self._become_pre_candidate()
            kind, term = MessageType.PRE_VOTE, self.term + 1
        else:
            self._become_candidate()
            kind, term = MessageType.VOTE, self.term
        self._votes[self.id] = True
        if tally(self._votes, len(self.voters)):
            self._won()
            return
        for peer in self.voters:
            if peer != self.id:
                self._messages.append(
                    Message(
                        kind,
                        self.id,
                        peer,
                        term,
                        index=self.log.last_index,
                        log_term=self.log.last_term,
                        context=TRANSFER if transfer else b"",
                    )
                )

    def _won(self) -> None:
        if self.role is Role.PRE_CANDIDATE:
            self._campaign(pre_vote=False)
        else:
            self._become_leader()

    def _answer_vote(self, m: Message) -> None:
        pre = m.type is MessageType.PRE_VOTE
        may_vote = (
            self.vote == m.src
            or (self.vote == 0 and self.leader == 0)
            or (pre and m.term > self.term)
        )
        reply = MessageType.PRE_VOTE_RESPONSE if pre else MessageType.VOTE_RESPONSE
        if may_vote and self.log.is_up_to_date(m.index, m.log_term):
            self._messages.append(Message(reply, self.id, m.src, m.term))
            if not pre:
                self._elapsed = 0
                self.vote = m.src
        else:
            self._send(reply, m.src, reject=True)

    def _step_candidate(self, m: Message) -> None:
        if m.type in (MessageType.APPEND, MessageType.HEARTBEAT, MessageType.SNAPSHOT):
            self.become_follower(self.term, m.src)
            self._step_follower(m)
            return
        expected = (
            MessageType.PRE_VOTE_RESPONSE
            if self.role is Role.PRE_CANDIDATE
            else MessageType.VOTE_RESPONSE
        )
        if m.type is not expected:
            return
        self._votes[m.src] = not m.reject
        result = tally(self._votes, len(self.voters))
        if result:
            self._won()
        elif result is False:
            self.become_follower(self.term, 0)

    # -- following ---------------------------------------------------------------------------
    def _step_follower(self, m: Message) -> None:
        if m.type is MessageType.APPEND:
            self._elapsed = 0
            self.leader = m.src
            self._handle_append(m)
        elif m.type is MessageType.HEARTBEAT:
            self._elapsed = 0
            self.leader = m.src
            self.log.commit_to(min(m.commit, self.log.last_index))
            self._send(
                MessageType.HEARTBEAT_RESPONSE,
                m.src,
                index=self.log.last_index,
                reject_hint=m.index,
                context=m.context,
            )
        elif m.type is MessageType.SNAPSHOT:
            self._elapsed = 0
            self.leader = m.src
            self._handle_snapshot(m)
        elif m.type is MessageType.TIMEOUT_NOW and self.id in self.voters:
            self._campaign(pre_vote=False, transfer=True)

    def _handle_append(self, m: Message) -> None:
        log = self.log
        if m.index < log.committed:
            self._send(MessageType.APPEND_RESPONSE, m.src, index=log.committed)
            return
        last_new = log.try_append(m.index, m.log_term, m.commit, m.entries)
        if last_new is not None:
            self._send(MessageType.APPEND_RESPONSE, m.src, index=last_new)
            return
        hint, hint_term = log.conflict_hint(m.index, m.log_term)
        self._send(
            MessageType.APPEND_RESPONSE,
            m.src,
            index=m.index,
            reject=True,
            reject_hint=hint,
            hint_term=hint_term,
        )

    def _handle_snapshot(self, m: Message) -> None:
        snapshot = m.snapshot
        assert snapshot is not None
        log = self.log
        if snapshot.index <= log.committed:
            self._send(MessageType.APPEND_RESPONSE, m.src, index=log.committed)
            return
        if log.matches(snapshot.index, snapshot.term):
            log.commit_to(snapshot.index)  # our log already holds it: just move the commit
        else:
            log.restore(snapshot)
        self._send(MessageType.APPEND_RESPONSE, m.src, index=log.last_index)

    # -- leading -----------------------------------------------------------------------------
    def _tick_leader(self) -> None:
        self._heartbeat_elapsed += 1
        self._elapsed += 1
        if self._elapsed >= self.config.election_ticks:
            self._elapsed = 0
            if self.config.check_quorum and not self._quorum_active():
                self.become_follower(self.term, 0)  # cut off from a majority: stop leading
                return
            self.transferee = 0
        if self._heartbeat_elapsed >= self.config.heartbeat_ticks:
            self._heartbeat_elapsed = 0
            self._broadcast_heartbeat(self._reads.last_context())

    def _quorum_active(self) -> bool:
        active = 0
        for peer, pr in self.progress.items():
            if peer == self.id or pr.recent_active:
                active += 1
            pr.recent_active = False
        return active >= majority(len(self.voters))

    def _step_leader(self, m: Message) -> None:
        pr = self.progress.get(m.src)
        if pr is None:
            return
        if m.type is MessageType.APPEND_RESPONSE:
            pr.recent_active = True
            if m.reject:
                self._handle_reject(m, pr)
                return
            if pr.update(m.index):
                caught_up = pr.state is ProgressState.PROBE or (
                    pr.state is ProgressState.SNAPSHOT and pr.match >= pr.pending_snapshot
                )
                if caught_up:
                    pr.become_replicate()
                if not self._maybe_commit():
                    while self._send_append(m.src, allow_empty=False):
                        pass
                if m.src == self.transferee and pr.match == self.log.last_index:
                    self._send(MessageType.TIMEOUT_NOW, m.src)
        elif m.type is MessageType.HEARTBEAT_RESPONSE:
            pr.recent_active = True
            pr.probe_sent = False
            sent = pr.next - 1
            if pr.state is ProgressState.REPLICATE and pr.match < sent <= m.index:
                # It may hold all we sent while its answers were lost: ask again, with nothing.
                pr.inflight.clear()
                self._send_append(m.src, allow_empty=True)
            elif pr.state is ProgressState.SNAPSHOT or (
                pr.state is ProgressState.REPLICATE and pr.lost_appends(m.index, m.reject_hint)
            ):
                pr.become_probe()  # resend from what the follower is known to hold
            if pr.match < self.log.last_index:
                self._send_append(m.src, allow_empty=pr.state is not ProgressState.REPLICATE)
            if m.context:
                self._ack_read(m.context, m.src)

    def _handle_reject(self, m: Message, pr: Progress) -> None:
        hint = m.reject_hint
        if m.hint_term > 0:
            hint, _ = self.log.conflict_hint(m.reject_hint, m.hint_term)
        if pr.decrease_to(m.index, hint):
            if pr.state is ProgressState.REPLICATE:
                pr.become_probe()
            self._send_append(m.src, allow_empty=True)

    def _can_commit(self, index: int) -> bool:
        """Only an entry of the current term commits by counting replicas (Raft paper §5.4.2);
        earlier ones commit with it."""
        return self.log.term(index) == self.term

    def _maybe_commit(self) -> bool:
        index = committed_index(self.progress[p].match for p in self.voters)
        if index <= self.log.committed or not self._can_commit(index):
            return False
        self.log.commit_to(index)
        self._broadcast_append(allow_empty=True)
        if self._reads.waiting and self.log.term(self.log.committed) == self.term:
            for context in self._reads.take_waiting():
                self._start_read(context)
        return True

    def _broadcast_append(self, *, allow_empty: bool) -> None:
        for peer in self.voters:
            if peer != self.id:
                sent = self._send_append(peer, allow_empty=allow_empty)
                while sent and self.progress[peer].state is ProgressState.REPLICATE:
                    sent = self._send_append(peer, allow_empty=False)

    def _send_append(self, to: int, *, allow_empty: bool) -> bool:
        pr = self.progress[to]
        if pr.paused(self.config.max_inflight):
            return False
        log = self.log
        prev = pr.next - 1
        prev_term = log.term(prev)
        if prev_term is None:  # compacted away: only a snapshot can catch it up
            pr.become_snapshot(log.snapshot.index)
            self._messages.append(
                Message(MessageType.SNAPSHOT, self.id, to, self.term, snapshot=log.snapshot)
            )
            return True
        entries = log.slice(
            pr.next, min(log.last_index + 1, pr.next + self.config.max_entries_per_append)
        )
        if not entries and not allow_empty and pr.state is ProgressState.REPLICATE:
            return False
        size = 0
        for count, entry in enumerate(entries):
            size += len(entry.data)
            if size > self.config.max_bytes_per_append and count:
                entries = entries[:count]
                break
        self._messages.append(
            Message(
                MessageType.APPEND,
                self.id,
                to,
                self.term,
                index=prev,
                log_term=prev_term,
                entries=tuple(entries),
                commit=log.committed,
            )
        )
        pr.sent(entries[-1].index if entries else prev, len(entries))
        return bool(entries)

    def _broadcast_heartbeat(self, context: bytes) -> None:
        for peer in self.voters:
            if peer != self.id:
                pr = self.progress[peer]
                self._send(
                    MessageType.HEARTBEAT,
                    peer,
                    index=pr.next - 1,
                    commit=min(pr.match, self.log.committed),
                    context=context,
                )

    # -- read index --------------------------------------------------------------------------
    def _start_read(self, context: bytes) -> None:
        self._reads.start(context, self.log.committed, self.id)
        if len(self.voters) == 1:
            self._ack_read(context, self.id)
        else:
            self._broadcast_heartbeat(context)

    def _ack_read(self, context: bytes, peer: int) -> None:
        self._read_states.extend(self._reads.ack(context, peer, majority(len(self.voters))))

    # -- helpers -----------------------------------------------------------------------------
    def _hard_state(self) -> HardState:
        return HardState(self.term, self.vote, self.log.committed)

    def _send(
        self,
        kind: MessageType,
        to: int,
        *,
        index: int = 0,
        reject: bool = False,
        reject_hint: int = 0,
        hint_term: int = 0,
        commit: int = 0,
        context: bytes = b"",
    ) -> None:
        self._messages.append(
            Message(
                kind,
                self.id,
                to,
                self.term,
                index=index,
                reject=reject,
                reject_hint=reject_hint,
                hint_term=hint_term,
                commit=commit,
                context=context,
            )
        )
