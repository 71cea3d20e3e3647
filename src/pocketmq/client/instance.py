"""The client instance (RocketMQ's `MQClientInstance`): what producers and consumers of one
client share.

It owns the remoting connections, asks the NameServers for routes (failing over between
them), keeps the routes fresh (every `route_refresh_interval_s`, and at once when a send or
pull fails), sends heartbeats to every broker it knows (every `heartbeat_interval_s`, and at
once when a member joins), and drives rebalancing: every `rebalance_interval_s` and as soon as a
broker says a consumer group's membership changed (NOTIFY_CONSUMER_IDS_CHANGED). It also
answers the broker's offset requests for its consumers: a reset of their offsets
(RESET_CONSUMER_CLIENT_OFFSET) and where they are (GET_CONSUMER_STATUS_FROM_CLIENT), see
`consumer.offset_reset`.

Members register themselves: a producer by group, a consumer by group with the `ConsumerMember`
protocol (its heartbeat entry, its topics, its rebalance). Background tasks catch and log their
own failures, so a dead NameServer or broker only delays the next round.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import random
import ssl
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final, Protocol

from pocketmq.client.consumer.offset_reset import (
    OffsetResetError,
    ResettableConsumer,
    decode_reset_offsets,
    encode_consumer_status,
)
from pocketmq.client.credentials import SessionCredentials, client_tls
from pocketmq.client.errors import (
    ClientConfigError,
    ConnectionFailedError,
    ProtocolError,
    RequestTimeoutError,
    TopicNotFoundError,
    connection_problem,
    error_for_response,
)
from pocketmq.client.message import MessageQueue
from pocketmq.client.route_cache import RouteCache
from pocketmq.common.codes import RequestCode, ResponseCode
from pocketmq.common.route import TopicRouteData
from pocketmq.common.route_json import RouteBodyError, decode_topic_route
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.errors import RemotingError
from pocketmq.remoting.tls import TlsConfig
from pocketmq.remoting.transport import (
    Channel,
    RemotingClient,
    RemotingConnectError,
    RemotingTimeoutError,
)
from pocketmq.runtime.clock import Clock, SystemClock
from pocketmq.runtime.event_loop import cancel_and_wait

log = logging.getLogger(__name__)

ROUTE_REFRESH_INTERVAL_S: Final = 30.0
HEARTBEAT_INTERVAL_S: Final = 30.0
REBALANCE_INTERVAL_S: Final = 20.0
REQUEST_TIMEOUT_S: Final = 3.0
MISSING_ROUTE_RETRY_S: Final = 1.0


class ConsumerMember(Protocol):
    """What a consumer gives the instance it runs on."""

    group: str

    def heartbeat_entry(self) -> dict[str, Any]:
        """This consumer's `ConsumerData` for heartbeats."""
        ...

    def topics(self) -> Iterable[str]:
        """The topics whose routes it needs (retry topic included)."""
        ...

    async def rebalance(self) -> None:
        """Recomputes its queues from the current routes and group members."""
        ...


def split_namesrv_addresses(addresses: str | Sequence[str]) -> list[str]:
    """NameServer addresses from `a:9876;b:9876` or a list; blanks dropped."""
    items = addresses.split(";") if isinstance(addresses, str) else list(addresses)
    return [a.strip() for a in items if a and a.strip()]


class ClientInstance:
    """Connections, routes, heartbeats and rebalancing for the producers and consumers on it."""

    def __init__(
        self,
        namesrv_addresses: str | Sequence[str],
        *,
        instance_name: str | None = None,
        client_ip: str | None = None,
        request_timeout_s: float = REQUEST_TIMEOUT_S,
        route_refresh_interval_s: float = ROUTE_REFRESH_INTERVAL_S,
        heartbeat_interval_s: float = HEARTBEAT_INTERVAL_S,
        rebalance_interval_s: float = REBALANCE_INTERVAL_S,
        rng: random.Random | None = None,
        clock: Clock | None = None,
        require_namesrv: bool = True,
        tls: bool | ssl.SSLContext | TlsConfig | None = None,
        credentials: SessionCredentials | None = None,
    ) -> None:
        """Creates the instance; nothing connects until `start` or the first request.

        Args:
            namesrv_addresses: `host:port` of each NameServer (a `;`-separated string or a
                list); requests fail over between them.
            instance_name: Distinguishes clients in one process; part of the client id
                (`ip@instance_name`). Defaults to the pid and a random suffix.
            request_timeout_s: How long a NameServer or control request may take.
            route_refresh_interval_s: How often routes are fetched again.
            heartbeat_interval_s: How often brokers hear from this client.
            rebalance_interval_s: How often consumers recompute their queues.
            client_ip: The address this client reports (client id, message ids); by default
                the local address of its connection to a NameServer.
            rng: Randomness for ids and choices (tests pass a seeded one).
            clock: Where this client and its consumers read the time (tests pass a fake).
            require_namesrv: Off for tools that only talk to addresses they are given
                (controllers, one broker): a NameServer request then fails, saying what to
                pass.
            tls: TLS to NameServers and brokers (see `client_tls`): True, a `TlsConfig` with
                RocketMQ's `tls.client.*` keys, or an `ssl.SSLContext`.
            credentials: The ACL account every request is signed with.

        Raises:
            ClientConfigError: no NameServer address (unless not required).
        """
        self.namesrv_addresses = split_namesrv_addresses(namesrv_addresses)
        if not self.namesrv_addresses and require_namesrv:
            raise ClientConfigError(
                "no NameServer address: pass namesrv='host:9876' (several separated by ';')"
            )
        self.rng = rng or random.Random()
        self.clock = clock or SystemClock()
        self.ip = client_ip or "127.0.0.1"
        self._instance_name = instance_name or f"{os.getpid()}#{self.rng.getrandbits(40):010x}"
        self._ip_given = client_ip is not None
        self.request_timeout_s = request_timeout_s
        self.route_refresh_interval_s = route_refresh_interval_s
        self.heartbeat_interval_s = heartbeat_interval_s
        self.rebalance_interval_s = rebalance_interval_s
        self.remoting = RemotingClient(
            {
                RequestCode.NOTIFY_CONSUMER_IDS_CHANGED: self._on_consumer_ids_changed,
                RequestCode.RESET_CONSUMER_CLIENT_OFFSET: self._on_reset_offset,
                RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT: self._on_consumer_status,
            },
            ssl_context=client_tls(tls),
            before_request=credentials.sign if credentials is not None else None,
        )
        self.credentials = credentials
        self.routes = RouteCache()
        # The replica (broker id) each queue's broker suggested for the next pull.
        self.pull_from: dict[MessageQueue, int] = {}
        self.producer_groups: set[str] = set()
        self.consumers: dict[str, ConsumerMember] = {}
        self._publish_topics: set[str] = set()
        self._namesrv_index = 0
        self._tasks: list[asyncio.Task[None]] = []
        self._rebalance_now = asyncio.Event()
        self._resets: set[asyncio.Task[None]] = set()
        self._routes_missing = False
        self._started = False

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        """Starts the background rounds (route refresh, heartbeats, rebalance); idempotent."""
        if self._started:
            return
        self._started = True
        if not self._ip_given:
            self.ip = await self._local_ip()
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self._refresh_routes_periodically(), name="client-routes"),
            loop.create_task(self._heartbeat_periodically(), name="client-heartbeat"),
            loop.create_task(self._rebalance_periodically(), name="client-rebalance"),
        ]
        log.debug("client %s started, NameServers %s", self.client_id, self.namesrv_addresses)

    @property
    def client_id(self) -> str:
        """`ip@instance_name`: how brokers tell this client from others of its groups."""
        return f"{self.ip}@{self._instance_name}"

    async def _local_ip(self) -> str:
        # The address the kernel picked for reaching a NameServer is the one others reach us
        # by; asking a connection avoids guessing among interfaces.
        for address in self.namesrv_addresses:
            with contextlib.suppress(RemotingError, OSError):
                return (await self.remoting.channel(address)).local_ip
        return self.ip

    async def close(self) -> None:
        """Stops the rounds, tells every broker this client is gone, closes connections."""
        for task in [*self._tasks, *self._resets]:
            await cancel_and_wait(task)
        self._tasks = []
        if self._started:
            await self._unregister_everywhere()
        self._started = False
        await self.remoting.close()

    # -- members ---------------------------------------------------------------------------

    def add_producer(self, group: str) -> None:
        self.producer_groups.add(group)

    def remove_producer(self, group: str) -> None:
        self.producer_groups.discard(group)

    def add_consumer(self, consumer: ConsumerMember) -> None:
        """Registers a consumer.

        Raises:
            ClientConfigError: another consumer of the same group runs on this instance.
        """
        if consumer.group in self.consumers:
            raise ClientConfigError(
                f"a consumer of group {consumer.group} already runs on client {self.client_id}:"
                " give the second one its own instance_name"
            )
        self.consumers[consumer.group] = consumer

    def remove_consumer(self, group: str) -> None:
        self.consumers.pop(group, None)

    def request_rebalance(self) -> None:
        """Runs the rebalance round now instead of at its next tick."""
        self._rebalance_now.set()

    # -- requests --------------------------------------------------------------------------

    async def invoke(
        self,
        address: str,
        code: int,
        ext_fields: Mapping[str, str] | None = None,
        body: bytes = b"",
        *,
        timeout_s: float | None = None,
    ) -> RemotingCommand:
        """Sends one request to `address` and returns its answer, whatever its code.

        Raises:
            ConnectionFailedError: no connection to `address`.
            RequestTimeoutError: no answer within the timeout.
        """
        request = RemotingCommand.request(code, ext_fields, body)
        timeout = self.request_timeout_s if timeout_s is None else timeout_s
        try:
            return await self.remoting.invoke(address, request, timeout)
        except RemotingTimeoutError as exc:
            raise RequestTimeoutError(str(exc)) from None
        except (RemotingConnectError, OSError) as exc:
            raise _unreachable(address, exc) from exc
        except RemotingError as exc:
            raise ConnectionFailedError(str(exc)) from exc

    async def invoke_oneway(
        self,
        address: str,
        code: int,
        ext_fields: Mapping[str, str] | None = None,
        body: bytes = b"",
    ) -> None:
        """Sends a oneway request; failures to reach `address` raise ConnectionFailedError."""
        request = RemotingCommand.request(code, ext_fields, body)
        try:
            await self.remoting.invoke_oneway(address, request)
        except (RemotingConnectError, OSError) as exc:
            raise _unreachable(address, exc) from exc
        except RemotingError as exc:
            raise ConnectionFailedError(f"{address}: {exc}") from exc

    async def invoke_namesrv(
        self, code: int, ext_fields: Mapping[str, str] | None = None, body: bytes = b""
    ) -> RemotingCommand:
        """Asks the NameServers in turn, starting with the last one that answered.

        Raises:
            ConnectionFailedError: none of them answers.
        """
        problems: list[tuple[str, str]] = []
        last: ConnectionFailedError | RequestTimeoutError | None = None
        count = len(self.namesrv_addresses)
        if not count:
            raise ConnectionFailedError(
                "no NameServer address: pass -n host:port (several separated by ';') or set "
                "NAMESRV_ADDR",
                reason="no NameServer address",
            )
        for attempt in range(count):
            index = (self._namesrv_index + attempt) % count
            address = self.namesrv_addresses[index]
            try:
                response = await self.invoke(address, code, ext_fields, body)
            except ConnectionFailedError as exc:
                problems.append((address, exc.reason))
                last = exc
                continue
            except RequestTimeoutError as exc:
                problems.append((address, "no answer in time"))
                last = exc
                continue
            self._namesrv_index = index
            return response
        # One line a developer can act on: the address, what happened, what to check. It
        # starts like it always did, which scripts and the admin CLI's tests look for.
        tried = "; ".join(f"cannot reach {address}: {reason}" for address, reason in problems)
        running = "is it running?" if len(problems) == 1 else "are they running?"
        message = f"no NameServer answers: {tried}; {running} check the namesrv address"
        raise ConnectionFailedError(message, reason="no NameServer answers") from last

    # -- routes ----------------------------------------------------------------------------

    async def fetch_route(self, topic: str) -> TopicRouteData:
        """Asks a NameServer for `topic`'s route and caches it.

        Raises:
            TopicNotFoundError: the NameServer knows no such topic.
            ConnectionFailedError: no NameServer answers.
            ProtocolError: the route body is not a route.
        """
        response = await self.invoke_namesrv(
            RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic, "acceptStandardJsonOnly": "true"}
        )
        if response.code == ResponseCode.TOPIC_NOT_EXIST:
            raise TopicNotFoundError(
                f"topic {topic} does not exist: create it with `pocketmq admin updateTopic "
                f"-t {topic} -c <cluster>`, or enable autoCreateTopicEnable on the broker",
                response.code,
            )
        if response.code != ResponseCode.SUCCESS:
            raise error_for_response(response.code, response.remark, f"route of {topic}")
        try:
            route = decode_topic_route(response.body)
        except RouteBodyError as exc:
            raise ProtocolError(f"the NameServer sent a bad route for {topic}: {exc}") from None
        if self.routes.update(topic, route):
            log.debug("route of %s is now %s", topic, route)
        return route

    async def route(self, topic: str) -> TopicRouteData:
        """The cached route of `topic`, fetched the first time."""
        cached = self.routes.routes.get(topic)
        return cached if cached is not None else await self.fetch_route(topic)

    def watch_topic(self, topic: str) -> None:
        """Keeps `topic`'s route fresh from now on (producers call it for topics they use)."""
        self._publish_topics.add(topic)

    async def refresh_routes(self) -> None:
        """Fetches every used topic's route again; failures are logged, not raised."""
        topics = set(self._publish_topics)
        for consumer in list(self.consumers.values()):
            topics.update(consumer.topics())
        changed = False
        self._routes_missing = False
        known = set(self.routes.all_broker_addresses())
        for topic in sorted(topics):
            before = self.routes.routes.get(topic)
            try:
                after = await self.fetch_route(topic)
            except TopicNotFoundError:
                log.debug("route of %s: topic does not exist (yet)", topic)
                self._routes_missing = True
                continue
            except (ConnectionFailedError, RequestTimeoutError, ProtocolError) as exc:
                log.warning("cannot refresh the route of %s: %s", topic, exc)
                continue
            changed = changed or before != after
        if not known.issuperset(self.routes.all_broker_addresses()):
            # A broker seen for the first time must learn this client's groups now: a
            # consumer is not given queues by brokers that never had its heartbeat.
            await self.send_heartbeats()
        if changed and self.consumers:
            self.request_rebalance()

    # -- heartbeats ------------------------------------------------------------------------

    def heartbeat_body(self) -> bytes:
        """RocketMQ's `HeartbeatData` JSON for this client's members."""
        data = {
            "clientID": self.client_id,
            "producerDataSet": [{"groupName": g} for g in sorted(self.producer_groups)],
            "consumerDataSet": [c.heartbeat_entry() for c in self.consumers.values()],
        }
        return json.dumps(data, separators=(",", ":")).encode()

    async def send_heartbeats(self) -> None:
        """One heartbeat to every known broker (only masters when this client has no
        consumers, as RocketMQ's), all at once: a broker that does not answer (stopped, cut
        off) delays the others by nothing; failures are logged per broker."""
        if not self.producer_groups and not self.consumers:
            return
        body = self.heartbeat_body()

        async def one(address: str) -> None:
            try:
                response = await self.invoke(address, RequestCode.HEART_BEAT, None, body)
            except (ConnectionFailedError, RequestTimeoutError) as exc:
                log.debug("heartbeat to %s failed: %s", address, exc)
                return
            if response.code != ResponseCode.SUCCESS:
                log.warning(
                    "broker %s refused the heartbeat: %s (%s)",
                    address,
                    response.code,
                    response.remark,
                )

        addresses = self.routes.all_broker_addresses(masters_only=not self.consumers)
        await asyncio.gather(*(one(address) for address in addresses))

    async def _unregister_everywhere(self) -> None:
        groups: list[tuple[str, str]] = [("producerGroup", g) for g in self.producer_groups]
        groups += [("consumerGroup", g) for g in self.consumers]
        for address in self.routes.all_broker_addresses():
            for field_name, group in groups:
                with contextlib.suppress(ConnectionFailedError, RequestTimeoutError):
                    await self.invoke(
                        address,
                        RequestCode.UNREGISTER_CLIENT,
                        {"clientID": self.client_id, field_name: group},
                        timeout_s=1.0,
                    )

    async def consumer_ids(self, group: str, topic: str) -> list[str]:
        """The client ids of `group`'s members, as a broker serving `topic` knows them.

        Raises:
            ConnectionFailedError, RequestTimeoutError: the broker cannot be asked.
        """
        route = self.routes.routes.get(topic)
        names = sorted(d.broker_name for d in route.broker_datas) if route else []
        if not names:
            return []
        # Java asks one broker of the topic chosen at random: any one has every heartbeat.
        address = self.routes.any_address(self.rng.choice(names))
        if address is None:
            return []
        response = await self.invoke(
            address, RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": group}
        )
        if response.code != ResponseCode.SUCCESS:
            return []
        try:
            ids = json.loads(response.body).get("consumerIdList") or []
        except (ValueError, AttributeError):
            raise ProtocolError(f"broker {address} sent a bad consumer list") from None
        return sorted(str(i) for i in ids)

    # -- background rounds -----------------------------------------------------------------

    async def _refresh_routes_periodically(self) -> None:
        last = self.clock.monotonic()
        while True:
            # A topic a consumer waits for (a retry topic its first heartbeat just created)
            # is looked up every second until it appears, not only every 30 s.
            await asyncio.sleep(min(MISSING_ROUTE_RETRY_S, self.route_refresh_interval_s))
            elapsed = self.clock.monotonic() - last
            if not self._routes_missing and elapsed < self.route_refresh_interval_s:
                continue
            last = self.clock.monotonic()
            await self._guarded(self.refresh_routes, "route refresh")

    async def _heartbeat_periodically(self) -> None:
        while True:
            await asyncio.sleep(self.heartbeat_interval_s)
            await self._guarded(self.send_heartbeats, "heartbeat")

    async def _rebalance_periodically(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.rebalance_interval_s):
                    await self._rebalance_now.wait()
            self._rebalance_now.clear()
            for consumer in list(self.consumers.values()):
                await self._guarded(consumer.rebalance, f"rebalance of {consumer.group}")

    async def _guarded(self, work: Any, what: str) -> None:
        try:
            await work()
        except asyncio.CancelledError:
            raise
        except Exception:  # a round's failure must not end the rounds
            log.exception("%s failed; trying again next round", what)

    async def _on_consumer_ids_changed(
        self, request: RemotingCommand, channel: Channel
    ) -> RemotingCommand | None:
        group = request.ext_fields.get("consumerGroup", "")
        if group in self.consumers:
            log.info("members of group %s changed: rebalancing now", group)
            self.request_rebalance()
        return None

    async def _on_reset_offset(
        self, request: RemotingCommand, channel: Channel
    ) -> RemotingCommand | None:
        fields = request.ext_fields
        group, topic = fields.get("group", ""), fields.get("topic", "")
        consumer = self.consumers.get(group)
        if not isinstance(consumer, ResettableConsumer):
            log.info("offset reset of %s for group %s: no such consumer here", topic, group)
            return None
        try:
            offsets = decode_reset_offsets(request.body)
        except OffsetResetError as exc:
            log.warning(
                "offset reset of %s from %s ignored: %s", topic, channel.remote_address, exc
            )
            return None
        log.info("offsets of group %s in %s reset by the broker: %s", group, topic, offsets)
        # In the background: the reset waits for running listener calls, and this connection
        # must keep reading meanwhile.
        task = asyncio.get_running_loop().create_task(
            self._guarded(lambda: consumer.reset_offsets(topic, offsets), f"reset of {group}"),
            name=f"reset-{group}",
        )
        self._resets.add(task)
        task.add_done_callback(self._resets.discard)
        return None

    async def _on_consumer_status(
        self, request: RemotingCommand, channel: Channel
    ) -> RemotingCommand | None:
        fields = request.ext_fields
        consumer = self.consumers.get(fields.get("group", ""))
        offsets: dict[MessageQueue, int] = (
            consumer.offsets_of(fields.get("topic", ""))
            if isinstance(consumer, ResettableConsumer)
            else {}
        )
        return RemotingCommand.response_to(
            request, ResponseCode.SUCCESS, body=encode_consumer_status(offsets)
        )


def _unreachable(address: str, exc: BaseException) -> ConnectionFailedError:
    reason = connection_problem(exc)
    return ConnectionFailedError(f"cannot reach {address}: {reason}", reason=reason)
