"""The NameServer's settings, and the two requests that read and change them while it runs.

    code                         request                  answer
    GET_NAMESRV_CONFIG (319)     -                        body: `key=value` lines
    UPDATE_NAMESRV_CONFIG (318)  body: `key=value` lines  -; or NO_PERMISSION / INVALID_PARAMETER

GET answers the settings pocketmq has, under RocketMQ's key names, plus a few of RocketMQ's keys
whose value here is a fixed fact (`FIXED_FACTS`: pocketmq has no cluster-test mode, no acting
masters...). `listenPort` is the port actually bound (a configured 0
picks one). Left out, because pocketmq has no such thing: Netty and thread-pool tuning
(`serverWorkerThreads`, `clientRequestThreadPoolNums`, ...), `rocketmqHome`, `productEnvName`,
and `configStorePath` (updates are not written to any file; they last until the process ends).

UPDATE refuses, checked in this order, so the first reason is the one reported:

* a key of `configBlackList` (`configBlackList;configStorePath;kvConfigPath`): NO_PERMISSION
  with RocketMQ's own remark;
* a key pocketmq does not know: INVALID_PARAMETER (RocketMQ answers SUCCESS and ignores it,
  which tells an operator with a typo that the change was made);
* a key of `FIXED_FACTS`, or one read only at start (`listenPort`, `bindAddress`,
  `brokerChannelExpiredTime`, `deleteTopicWithBrokerRegistration`): NO_PERMISSION naming it;
* a value that does not convert: INVALID_PARAMETER (RocketMQ ignores it and answers SUCCESS).

A refused request changes nothing; an accepted one changes every key it carries. The keys in
`LIVE_CONFIG_KEYS` are read on every use, so a change takes effect at once (the broker scan at its
next round).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from pocketmq.common.codes import RequestCode, ResponseCode
from pocketmq.common.config import (
    ConfigError,
    apply_properties,
    config_to_properties,
    format_properties,
    key,
    parse_properties,
)
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.transport import Channel, RequestHandler

log = logging.getLogger(__name__)


@dataclass
class NamesrvConfig:
    """NameServer settings under RocketMQ's key names."""

    listen_port: int = key("listenPort", 9876)
    bind_address: str = key("bindAddress", "0.0.0.0")
    # 0 would make the scan loop spin without yielding time to anything else.
    scan_not_active_broker_interval_ms: int = key("scanNotActiveBrokerInterval", 10_000, minimum=1)
    broker_channel_expired_time_ms: int = key("brokerChannelExpiredTime", 120_000)
    # RocketMQ's default is false; pocketmq's admin writes order confs for strictly ordered
    # topics and its producers rely on seeing them in routes, so here it is on unless set off.
    order_message_enable: bool = key("orderMessageEnable", True)
    return_order_topic_config_to_broker: bool = key("returnOrderTopicConfigToBroker", True)
    enable_all_topic_list: bool = key("enableAllTopicList", True)
    enable_topic_list: bool = key("enableTopicList", True)
    delete_topic_with_broker_registration: bool = key("deleteTopicWithBrokerRegistration", False)
    # RocketMQ keeps this under the user's home; here it is opt-in (`pocketmq up` sets it).
    kv_config_path: str = key("kvConfigPath", "")
    # The controller of controller mode in this process, configured by the same file
    # (`pocketmq namesrv` starts it; RocketMQ's key).
    enable_controller_in_namesrv: bool = key("enableControllerInNamesrv", False)


CONFIG_BLACK_LIST: Final = "configBlackList;configStorePath;kvConfigPath"
"""RocketMQ's default `configBlackList`: keys no request may change."""
BLACK_LIST_REMARK: Final = "Can not update config in black list."

LIVE_CONFIG_KEYS: Final = frozenset(
    {
        "scanNotActiveBrokerInterval",
        "orderMessageEnable",
        "returnOrderTopicConfigToBroker",
        "enableAllTopicList",
        "enableTopicList",
    }
)
"""Keys the NameServer reads on every use, so UPDATE_NAMESRV_CONFIG may change them."""

FIXED_FACTS: Final = {
    "clusterTest": "false",
    "supportActingMaster": "false",
    "notifyMinBrokerIdChanged": "false",
    "needWaitForService": "false",
    "configBlackList": CONFIG_BLACK_LIST,
}
"""RocketMQ keys whose value is a fact of pocketmq, not a setting: answered, never changed."""


def namesrv_settings(config: NamesrvConfig, bound_port: int) -> dict[str, str]:
    """What GET_NAMESRV_CONFIG reports: the settings, `listenPort` as bound, then the facts."""
    settings = config_to_properties(config)
    if bound_port:
        settings["listenPort"] = str(bound_port)
    settings.update(FIXED_FACTS)
    return settings


class NamesrvConfigHandlers:
    """GET_NAMESRV_CONFIG and UPDATE_NAMESRV_CONFIG over one `NamesrvConfig`."""

    def __init__(self, config: NamesrvConfig, bound_port: Callable[[], int]) -> None:
        """Serves one NameServer's settings.

        Args:
            config: The running settings; live keys are changed in place.
            bound_port: The port the server listens on (0 before it started).
        """
        self.config = config
        self._bound_port = bound_port

    def routes(self) -> dict[int, RequestHandler]:
        return {
            RequestCode.GET_NAMESRV_CONFIG: self.get_config,
            RequestCode.UPDATE_NAMESRV_CONFIG: self.update_config,
        }

    async def get_config(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        body = format_properties(namesrv_settings(self.config, self._bound_port()))
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, body=body.encode())

    async def update_config(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        try:
            updates = parse_properties(request.body.decode("utf-8"), source="request body")
        except (UnicodeDecodeError, ConfigError) as exc:
            return _refuse(request, ResponseCode.INVALID_PARAMETER, str(exc))
        code, remark = self.try_update(updates)
        if code != ResponseCode.SUCCESS:
            log.warning("NameServer config update %s refused: %s", updates, remark)
            return _refuse(request, code, remark)
        if updates:
            log.info("NameServer config updated: %s", updates)
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS)

    def try_update(self, updates: dict[str, str]) -> tuple[ResponseCode, str]:
        """Applies `updates` if every key may change now and every value converts.

        Returns:
            (SUCCESS, "") when applied; otherwise the refusal's code and remark, and nothing
            has changed.
        """
        if any(name in CONFIG_BLACK_LIST.split(";") for name in updates):
            return ResponseCode.NO_PERMISSION, BLACK_LIST_REMARK
        known = namesrv_settings(self.config, 0)
        unknown = sorted(name for name in updates if name not in known)
        if unknown:
            return ResponseCode.INVALID_PARAMETER, (
                f"unknown config key(s): {', '.join(unknown)}; known: {', '.join(sorted(known))}"
            )
        facts = sorted(name for name in updates if name in FIXED_FACTS)
        if facts:
            return ResponseCode.NO_PERMISSION, (
                f"{', '.join(facts)} cannot change: pocketmq's NameServer has no such mode"
            )
        frozen = sorted(name for name in updates if name not in LIVE_CONFIG_KEYS)
        if frozen:
            return ResponseCode.NO_PERMISSION, (
                f"{', '.join(frozen)} cannot change while the NameServer runs: set it in "
                "namesrv.properties and restart; changeable now: "
                + ", ".join(sorted(LIVE_CONFIG_KEYS))
            )
        try:
            apply_properties(self.config, updates)  # converts every value before setting any
        except ConfigError as exc:
            return ResponseCode.INVALID_PARAMETER, str(exc)
        return ResponseCode.SUCCESS, ""


def _refuse(request: RemotingCommand, code: int, remark: str) -> RemotingCommand:
    return RemotingCommand.response_to(request, code, remark)
