"""`BrokerContainer`: the brokers of one process, and the port that adds and removes them.

    code                    request                                  answer
    ADD_BROKER (902)        configPath (or body: properties text)    -; or SYSTEM_ERROR
    REMOVE_BROKER (903)     brokerClusterName, brokerName, brokerId  -; or BROKER_NOT_EXIST,
                                                                     SYSTEM_ERROR (bad header)
    GET_BROKER_CONFIG (26)  -                                        body: `key=value` lines

ADD_BROKER refuses (SYSTEM_ERROR, a remark naming the file and the setting): an empty request,
a file that cannot be read or holds a bad value, a broker whose identity (cluster, name, id) or
`storePathRootDir` another broker of this container already has, a slave with `brokerId` 0, and
a broker that fails to start (its port in use, say), which is stopped again before the answer.

Invariants: `brokers` holds exactly the brokers that started and were not removed; adds,
removes and `stop` run one at a time, so two requests for one identity cannot both win; a
broker that failed never stays half started. `stop` stops the container's port first (no
request can add a broker behind its back), then every broker.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from pocketmq.broker.config import BrokerConfig, BrokerRole
from pocketmq.broker.server import BrokerConfigError, BrokerServer
from pocketmq.common.codes import RequestCode, ResponseCode
from pocketmq.common.config import (
    ConfigError,
    apply_properties,
    config_to_properties,
    format_properties,
    load_properties,
    parse_properties,
)
from pocketmq.container.config import ContainerConfig
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.transport import Channel, RemotingServer, RequestHandler
from pocketmq.runtime.clock import Clock, SystemClock
from pocketmq.store.config import MessageStoreConfig

log = logging.getLogger(__name__)

MASTER_ID: Final = 0
_TRAILING_NUMBER: Final = re.compile(r"(\d+)$")


@dataclass(frozen=True, slots=True)
class BrokerSlot:
    """A broker's identity in a container, as RocketMQ's `BrokerIdentity` compares it."""

    cluster_name: str
    broker_name: str
    broker_id: int

    def __str__(self) -> str:
        return f"{self.cluster_name}:{self.broker_name}:{self.broker_id}"


class BrokerRefusedError(Exception):
    """A broker was not added or removed; `code` and the message are the answer to send."""

    def __init__(self, message: str, code: ResponseCode = ResponseCode.SYSTEM_ERROR) -> None:
        super().__init__(message)
        self.code = code


class BrokerContainer:
    """Several brokers in one process, and the remoting port that manages them."""

    def __init__(self, config: ContainerConfig, *, clock: Clock | None = None) -> None:
        self.config = config
        self.clock = clock or SystemClock()
        self.brokers: dict[BrokerSlot, BrokerServer] = {}
        self.server = RemotingServer(
            self.routes(), host=config.bind_address, port=config.listen_port
        )
        self._changing = asyncio.Lock()
        self._stopped = False

    @property
    def port(self) -> int:
        return self.server.port

    def routes(self) -> dict[int, RequestHandler]:
        return {
            RequestCode.ADD_BROKER: self._handle_add,
            RequestCode.REMOVE_BROKER: self._handle_remove,
            RequestCode.GET_BROKER_CONFIG: self._handle_get_config,
        }

    async def start(self) -> list[str]:
        """Opens the container's port, then starts a broker from each `brokerConfigPaths` file.

        Returns:
            One line per broker that did not start, naming its file and the reason; those are left
            out and the others serve, so an operator can fix the file and `addBroker` it.

        Raises:
            OSError: the container's port cannot be opened; no broker was started.
        """
        port = await self.server.start()
        log.info("broker container serving on port %d", port)
        failures = []
        for path in self.config.broker_config_path_list():
            try:
                await self.add_broker_from_file(path)
            except BrokerRefusedError as exc:
                log.error("broker not started: %s", exc)
                failures.append(str(exc))
        return failures

    async def add_broker_from_file(self, path: str) -> BrokerServer:
        """Starts a broker configured by the properties file `path` (on this machine).

        Raises:
            BrokerRefusedError: see the module docstring; nothing was left running.
        """
        if not path.strip():
            raise BrokerRefusedError("addBroker config path is empty")
        try:
            properties = load_properties(path)
        except ConfigError as exc:
            raise BrokerRefusedError(f"addBroker properties empty: {exc}") from None
        return await self.add_broker(properties, path)

    async def add_broker(self, properties: Mapping[str, str], source: str) -> BrokerServer:
        """Starts a broker configured by `properties`; `source` names them in messages.

        Raises:
            BrokerRefusedError: see the module docstring; nothing was left running.
        """
        async with self._changing:
            if self._stopped:
                raise BrokerRefusedError("the broker container is stopping")
            broker_config, store_config = self._broker_configs(properties, source)
            broker = _new_broker(broker_config, store_config, source, self.clock)
            slot = _slot_of(broker)
            if slot in self.brokers:
                raise BrokerRefusedError(
                    f"{slot} has already been added to current broker container "
                    f"(again from {source}); remove it first or give this one another "
                    "brokerName or brokerId"
                )
            self._check_store_dir(store_config, source)
            try:
                await broker.start()
            except OSError as exc:
                await _stop_quietly(broker)
                raise BrokerRefusedError(
                    f"start broker failed: broker {slot} from {source} cannot listen on "
                    f"listenPort {broker_config.listen_port} or its HA port "
                    f"({exc.strerror or exc}); choose another listenPort"
                ) from None
            except Exception as exc:  # one broker's failure must not take the container down
                log.exception("broker %s from %s failed to start", slot, source)
                await _stop_quietly(broker)
                raise BrokerRefusedError(
                    f"start broker failed: broker {slot} from {source}: {type(exc).__name__}: {exc}"
                ) from None
            if broker.controlled is not None:
                # Its id is the controller's: known once it joined (see `_slot_of`).
                slot = _slot_of(broker)
            self.brokers[slot] = broker
            log.info("broker %s from %s serving at %s", slot, source, broker.address)
            return broker

    async def remove_broker(self, slot: BrokerSlot) -> BrokerServer:
        """Stops the broker `slot` (it unregisters from the NameServers) and forgets it.

        Raises:
            BrokerRefusedError: BROKER_NOT_EXIST when this container has no such broker.
        """
        async with self._changing:
            broker = self.brokers.pop(slot, None)
            if broker is None:
                known = ", ".join(str(s) for s in self.brokers) or "none"
                raise BrokerRefusedError(
                    f"Broker not exist: {slot} is not in this container (it has: {known})",
                    ResponseCode.BROKER_NOT_EXIST,
                )
            await _stop_quietly(broker)
            log.info("broker %s removed", slot)
            return broker

    async def stop(self) -> None:
        """Stops the container's port, then every broker; safe to call twice."""
        await self.server.stop()
        async with self._changing:
            self._stopped = True
            brokers, self.brokers = self.brokers, {}
            # Slaves first, as RocketMQ does, so they do not chase a master that is going away.
            ordered = sorted(brokers.items(), key=lambda item: not item[1].replica.is_slave)
            for slot, broker in ordered:
                await _stop_quietly(broker)
                log.info("broker %s stopped", slot)

    # -- building a broker ---------------------------------------------------------------------

    def _broker_configs(
        self, properties: Mapping[str, str], source: str
    ) -> tuple[BrokerConfig, MessageStoreConfig]:
        """The broker's settings from its properties, normalised as RocketMQ's container does."""
        broker_config = BrokerConfig()
        store_config = MessageStoreConfig()
        try:
            unknown = set(apply_properties(broker_config, properties))
            unknown &= set(apply_properties(store_config, properties))
        except ConfigError as exc:
            raise BrokerRefusedError(f"{source}: {exc}") from None
        if unknown:
            log.warning("%s: keys not used by pocketmq: %s", source, ", ".join(sorted(unknown)))
        if "namesrvAddr" not in properties:
            broker_config.namesrv_addr = self.config.namesrv_addr
        if not broker_config.enable_dleger_commit_log and not broker_config.enable_controller_mode:
            if broker_config.broker_role is BrokerRole.SLAVE:
                if broker_config.broker_id <= MASTER_ID:
                    raise BrokerRefusedError(
                        f"slave broker id must be > 0 ({source} has brokerRole=SLAVE and "
                        f"brokerId={broker_config.broker_id})"
                    )
            else:
                broker_config.broker_id = MASTER_ID
        return broker_config, store_config

    def _check_store_dir(self, store_config: MessageStoreConfig, source: str) -> None:
        """Refuses a store directory another broker here uses, or one that cannot be written."""
        wanted = os.path.realpath(store_config.store_path_root_dir)
        for slot, other in self.brokers.items():
            if os.path.realpath(other.store_config.store_path_root_dir) == wanted:
                raise BrokerRefusedError(
                    f"{source}: storePathRootDir {store_config.store_path_root_dir} is already "
                    f"used by broker {slot} in this container; give each broker its own"
                )
        try:
            os.makedirs(wanted, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=wanted, prefix=".write-check-"):
                pass
        except OSError as exc:
            raise BrokerRefusedError(
                f"{source}: storePathRootDir {store_config.store_path_root_dir} is not writable "
                f"({exc.strerror or exc})"
            ) from None

    # -- requests ------------------------------------------------------------------------------

    async def _handle_add(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        path = request.ext_fields.get("configPath", "")
        log.info("addBroker %r asked by %s", path, channel.remote_address)
        try:
            if not path and request.body:
                text = request.body.decode("utf-8", "replace")
                try:
                    properties = parse_properties(text, source="request body")
                except ConfigError as exc:
                    raise BrokerRefusedError(f"addBroker properties empty: {exc}") from None
                await self.add_broker(properties, "the request body")
            else:
                await self.add_broker_from_file(path)
        except BrokerRefusedError as exc:
            return RemotingCommand.response_to(request, exc.code, str(exc))
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS)

    async def _handle_remove(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        ext = request.ext_fields
        for name in ("brokerName", "brokerClusterName", "brokerId"):
            if not ext.get(name):
                return RemotingCommand.response_to(
                    request, ResponseCode.SYSTEM_ERROR, f"the custom field <{name}> is null"
                )
        try:
            broker_id = int(ext["brokerId"])
        except ValueError:
            return RemotingCommand.response_to(
                request,
                ResponseCode.SYSTEM_ERROR,
                f"brokerId {ext['brokerId']!r} is not a whole number",
            )
        slot = BrokerSlot(ext["brokerClusterName"], ext["brokerName"], broker_id)
        log.info("removeBroker %s asked by %s", slot, channel.remote_address)
        try:
            await self.remove_broker(slot)
        except BrokerRefusedError as exc:
            return RemotingCommand.response_to(request, exc.code, str(exc))
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS)

    async def _handle_get_config(
        self, request: RemotingCommand, channel: Channel
    ) -> RemotingCommand:
        settings = config_to_properties(self.config)
        settings["listenPort"] = str(self.server.port)
        body = format_properties(settings).encode("utf-8")
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, body=body)


def _new_broker(
    broker_config: BrokerConfig, store_config: MessageStoreConfig, source: str, clock: Clock
) -> BrokerServer:
    try:
        return BrokerServer(broker_config, store_config, clock=clock)
    except BrokerConfigError as exc:
        raise BrokerRefusedError(f"{source}: {exc}") from None


def _slot_of(broker: BrokerServer) -> BrokerSlot:
    """RocketMQ's identity: a DLedger broker is numbered by its `dLegerSelfId` (`n0` -> 0); a
    controller-mode broker by the id its controller gave it, and until it has one (its file
    says `brokerId=-1`, or nothing) by its listen port, negated: no two brokers of a container
    share a port."""
    config = broker.config
    broker_id = config.broker_id
    if config.enable_controller_mode:
        joined = broker.controlled.broker_id if broker.controlled is not None else 0
        broker_id = joined or -config.listen_port
    settings = broker.dledger_settings
    if settings is not None:
        numbered = _TRAILING_NUMBER.search(settings.self_id)
        broker_id = int(numbered.group(1)) if numbered else settings.raft_id(settings.self_id) - 1
    return BrokerSlot(config.broker_cluster_name, config.broker_name, broker_id)


async def _stop_quietly(broker: BrokerServer) -> None:
    """Stops a broker; a failure is logged, so the next broker is still stopped."""
    try:
        await broker.stop()
    except Exception:  # each broker is its own unit: one failing stop must not skip the rest
        log.exception("broker %s did not stop cleanly", broker.config.broker_name)
