"""GET_CONTROLLER_CONFIG (1010) and UPDATE_CONTROLLER_CONFIG (1009): a controller replica's
own settings, answered by every replica (each has its own file), as `key=value` lines.

UPDATE refuses, in this order: a key of `configBlackList` (NO_PERMISSION, RocketMQ's remark);
a key pocketmq does not know (INVALID_PARAMETER; RocketMQ answers SUCCESS and ignores it); a key
read only at start, such as the peers or the store path (NO_PERMISSION naming it); a value that
does not convert (INVALID_PARAMETER). A refused update changes nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Final

from pocketmq.common.codes import RequestCode, ResponseCode
from pocketmq.common.config import (
    ConfigError,
    apply_properties,
    config_to_properties,
    format_properties,
    parse_properties,
)
from pocketmq.common.ha_qos import QosError, parse_group_qos, parse_qos
from pocketmq.controller.config import ControllerConfig
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.transport import Channel, RequestHandler

log = logging.getLogger(__name__)

CONFIG_BLACK_LIST: Final = "configBlackList;configStorePath"
LIVE_KEYS: Final = frozenset(
    {
        "scanNotActiveBrokerInterval",
        "enableElectUncleanMaster",
        "notifyBrokerRoleChanged",
        "electMasterMaxRetryCount",
        "defaultBrokerGroupQos",
        "brokerGroupQos",
    }
)
"""Read on every use, so an update takes effect at once."""


def controller_settings(config: ControllerConfig, served_port: int = 0) -> dict[str, str]:
    """The settings as `key=value`; `listenPort` is the port served on (RocketMQ's controller
    reports its DLedger peer port there) when the file set none."""
    settings = config_to_properties(config)
    if not config.listen_port and served_port:
        settings["listenPort"] = str(served_port)
    settings["controllerType"] = "DLedger"
    settings["configBlackList"] = CONFIG_BLACK_LIST
    return dict(sorted(settings.items()))


class ControllerSettingsHandlers:
    def __init__(self, config: ControllerConfig, served_port: Callable[[], int]) -> None:
        self.config = config
        self._served_port = served_port

    def routes(self) -> dict[int, RequestHandler]:
        return {
            RequestCode.GET_CONTROLLER_CONFIG: self.get_config,
            RequestCode.UPDATE_CONTROLLER_CONFIG: self.update_config,
        }

    async def get_config(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        body = format_properties(controller_settings(self.config, self._served_port())).encode()
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, body=body)

    async def update_config(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        try:
            updates = parse_properties(request.body.decode("utf-8"), source="request body")
        except (UnicodeDecodeError, ConfigError) as exc:
            return RemotingCommand.response_to(request, ResponseCode.INVALID_PARAMETER, str(exc))
        code, remark = self.try_update(updates)
        if code != ResponseCode.SUCCESS:
            log.warning("controller config update %s refused: %s", updates, remark)
            return RemotingCommand.response_to(request, code, remark)
        if updates:
            log.info("controller config updated: %s", updates)
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS)

    def try_update(self, updates: dict[str, str]) -> tuple[int, str]:
        if any(name in CONFIG_BLACK_LIST.split(";") for name in updates):
            return ResponseCode.NO_PERMISSION, "Can not update config in black list."
        known = controller_settings(self.config)
        unknown = sorted(name for name in updates if name not in known)
        if unknown:
            return ResponseCode.INVALID_PARAMETER, (
                f"unknown config key(s): {', '.join(unknown)}; known: {', '.join(known)}"
            )
        frozen = sorted(name for name in updates if name not in LIVE_KEYS)
        if frozen:
            return ResponseCode.NO_PERMISSION, (
                f"{', '.join(frozen)} cannot change while the controller runs: set it in its "
                "file and restart; changeable now: " + ", ".join(sorted(LIVE_KEYS))
            )
        try:
            if "defaultBrokerGroupQos" in updates:
                parse_qos(updates["defaultBrokerGroupQos"], "defaultBrokerGroupQos")
            if "brokerGroupQos" in updates:
                parse_group_qos(updates["brokerGroupQos"], "brokerGroupQos")
            apply_properties(self.config, updates)
        except (ConfigError, QosError) as exc:
            return ResponseCode.INVALID_PARAMETER, str(exc)
        return ResponseCode.SUCCESS, ""
