"""JSON bodies of the NameServer calls, byte for byte as RocketMQ's fastjson writes them.

Encoders write what a Java NameServer writes: bean fields in alphabetical order, null fields
left out, no spaces. Two styles exist (`ClientRequestProcessor`):

* fastjson style, the default: `Long` map keys are bare numbers, `{"brokerAddrs":{0:"a:1"}}`,
  which is not standard JSON; non-ASCII text is written as UTF-8;
* standard style (`BrowserCompatible` + `MapSortField`): every key quoted, maps sorted, and
  non-ASCII escaped as `\\uXXXX`. A route request gets it when its `version` is at least 401
  (V4_9_4) or it sets `acceptStandardJsonOnly` (see `wants_standard_json`).

Maps are written sorted in both styles (fastjson's HashMap order for small broker ids is
ascending anyway), and route lists by broker name, so equal tables give equal bytes.

Decoders accept either style (`common.fastjson` reads bare numeric keys; this module owns only
the shapes of the bodies). REGISTER_BROKER bodies are read in all three forms a broker may
send: `RegisterBrokerBody` JSON, the bare `TopicConfigSerializeWrapper` of brokers older than
V3_0_11, and the zlib-compressed binary form (`compressedRegister`). Anything malformed raises
`RouteBodyError`; a caller answers SYSTEM_ERROR and keeps the connection.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from pocketmq.common.data_version import DataVersion
from pocketmq.common.fastjson import FastjsonError, Node, dumps, parse_fastjson
from pocketmq.common.route import (
    BrokerData,
    BrokerTopicConfig,
    ClusterInfo,
    QueueData,
    TopicList,
    TopicRouteData,
)

STANDARD_JSON_MIN_VERSION: Final = 401
"""`MQVersion.Version.V4_9_4.ordinal()`: from this request version on, routes are standard JSON."""
REGISTER_BODY_INFLATED_BYTES_MAX: Final = 64 << 20
"""Cap on an inflated compressed registration: about ten times a 100 000-topic broker's body."""


class RouteBodyError(FastjsonError):
    """A NameServer call's body is not what RocketMQ would send; the message says where."""


def wants_standard_json(request_version: int, accept_standard_json_only: bool = False) -> bool:
    """True when a GET_ROUTEINFO_BY_TOPIC answer must quote its `brokerAddrs` keys."""
    return request_version >= STANDARD_JSON_MIN_VERSION or accept_standard_json_only


def register_body_crc32(body: bytes) -> int:
    """The `bodyCrc32` a broker puts in REGISTER_BROKER (`UtilAll.crc32`: CRC32 & 0x7FFFFFFF)."""
    return zlib.crc32(body) & 0x7FFFFFFF


# ---- writing ------------------------------------------------------------------------------


def _queue_data_node(queue_data: QueueData) -> Node:
    node: dict[str, Node] = {
        "brokerName": queue_data.broker_name,
        "perm": queue_data.perm,
        "readQueueNums": queue_data.read_queue_nums,
        "topicSysFlag": queue_data.topic_sys_flag,
        "writeQueueNums": queue_data.write_queue_nums,
    }
    return node


def _broker_data_node(broker_data: BrokerData) -> Node:
    node: dict[str, Node] = {
        "brokerAddrs": broker_data.broker_addrs,
        "brokerName": broker_data.broker_name,
        "cluster": broker_data.cluster,
        "enableActingMaster": broker_data.enable_acting_master,
    }
    if broker_data.zone_name is not None:
        node["zoneName"] = broker_data.zone_name
    return node


def encode_topic_route(route: TopicRouteData, *, standard_json: bool) -> bytes:
    """The GET_ROUTEINFO_BY_TOPIC body.

    Args:
        route: From `RouteTable.route`, with `order_topic_conf` set if ordered messages are on.
        standard_json: `wants_standard_json(request.version, acceptStandardJsonOnly)`.
    """
    node: dict[str, Node] = {
        "brokerDatas": [
            _broker_data_node(b) for b in sorted(route.broker_datas, key=lambda b: b.broker_name)
        ],
        "filterServerTable": route.filter_server_table,
        "queueDatas": [
            _queue_data_node(q) for q in sorted(route.queue_datas, key=lambda q: q.broker_name)
        ],
    }
    if route.order_topic_conf is not None:
        node["orderTopicConf"] = route.order_topic_conf
    return dumps(node, standard_json=standard_json)


def encode_cluster_info(info: ClusterInfo, *, standard_json: bool = False) -> bytes:
    """The GET_BROKER_CLUSTER_INFO body; a Java NameServer always writes fastjson style."""
    node: dict[str, Node] = {
        "brokerAddrTable": {n: _broker_data_node(b) for n, b in info.broker_addr_table.items()},
        "clusterAddrTable": {c: sorted(n) for c, n in info.cluster_addr_table.items()},
    }
    return dumps(node, standard_json=standard_json)


def encode_topic_list(topics: TopicList) -> bytes:
    """A `TopicList` body: `{"brokerAddr":...,"topicList":[...]}` (brokerAddr when set)."""
    node: dict[str, Node] = {"topicList": topics.topic_list}
    if topics.broker_addr is not None:
        node["brokerAddr"] = topics.broker_addr
    return dumps(node, standard_json=False)


def encode_data_version(version: DataVersion) -> bytes:
    """A `DataVersion` body (QUERY_DATA_VERSION request and response)."""
    return dumps(version.to_json(), standard_json=False)


def encode_kv_table(table: Mapping[str, str]) -> bytes:
    """A `KVTable` body, `{"table":{...}}` (GET_KVLIST_BY_NAMESPACE, REGISTER_BROKER reply)."""
    return dumps({"table": table}, standard_json=False)


# ---- reading ------------------------------------------------------------------------------


def _parse(data: bytes | str) -> object:
    try:
        return parse_fastjson(data)
    except FastjsonError as error:
        raise RouteBodyError(str(error)) from None


def _object(value: object, what: str) -> dict[str, object]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise RouteBodyError(f"{what} is not a JSON object")
    return value


def _array(value: object, what: str) -> list[object]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise RouteBodyError(f"{what} is not a JSON array")
    return value


def _string(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise RouteBodyError(f"{what} is not a string")
    return value


def _int(value: object, what: str, default: int | None = None) -> int:
    if value is None and default is not None:
        return default
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            pass
    raise RouteBodyError(f"{what} is not an integer: {value!r}")


def _bool(value: object, what: str) -> bool:
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    if value in ("true", "false"):
        return value == "true"
    raise RouteBodyError(f"{what} is not a boolean: {value!r}")


def _string_list(value: object, what: str) -> list[str]:
    return [_string(item, f"{what}[]") for item in _array(value, what)]


def _data_version(value: object, what: str) -> DataVersion:
    document = _object(value, what)
    return DataVersion(
        counter=_int(document.get("counter"), f"{what}.counter", 0),
        state_version=_int(document.get("stateVersion"), f"{what}.stateVersion", 0),
        timestamp=_int(document.get("timestamp"), f"{what}.timestamp", 0),
    )


def _queue_data(value: object) -> QueueData:
    document = _object(value, "queueData")
    # 4.x wrote `topicSynFlag`; 5.x renamed it `topicSysFlag`.
    flag = document.get("topicSysFlag", document.get("topicSynFlag"))
    return QueueData(
        broker_name=_string(document.get("brokerName"), "queueData.brokerName"),
        read_queue_nums=_int(document.get("readQueueNums"), "queueData.readQueueNums", 0),
        write_queue_nums=_int(document.get("writeQueueNums"), "queueData.writeQueueNums", 0),
        perm=_int(document.get("perm"), "queueData.perm", 0),
        topic_sys_flag=_int(flag, "queueData.topicSysFlag", 0),
    )


def _broker_data(value: object) -> BrokerData:
    document = _object(value, "brokerData")
    addrs = _object(document.get("brokerAddrs"), "brokerData.brokerAddrs")
    zone = document.get("zoneName")
    return BrokerData(
        cluster=_string(document.get("cluster", ""), "brokerData.cluster"),
        broker_name=_string(document.get("brokerName"), "brokerData.brokerName"),
        broker_addrs={
            _int(key, "brokerData.brokerAddrs key"): _string(addr, "brokerData.brokerAddrs[]")
            for key, addr in addrs.items()
        },
        zone_name=None if zone is None else _string(zone, "brokerData.zoneName"),
        enable_acting_master=_bool(
            document.get("enableActingMaster"), "brokerData.enableActingMaster"
        ),
    )


def decode_topic_route(body: bytes) -> TopicRouteData:
    """Reads a GET_ROUTEINFO_BY_TOPIC body in either style.

    Raises:
        RouteBodyError: Not a `TopicRouteData`.
    """
    document = _object(_parse(body), "route")
    filter_servers = _object(document.get("filterServerTable"), "filterServerTable")
    order_conf = document.get("orderTopicConf")
    return TopicRouteData(
        queue_datas=[_queue_data(q) for q in _array(document.get("queueDatas"), "queueDatas")],
        broker_datas=[_broker_data(b) for b in _array(document.get("brokerDatas"), "brokerDatas")],
        filter_server_table={
            addr: _string_list(servers, "filterServerTable[]")
            for addr, servers in filter_servers.items()
            if servers is not None
        },
        order_topic_conf=None if order_conf is None else _string(order_conf, "orderTopicConf"),
    )


def decode_cluster_info(body: bytes) -> ClusterInfo:
    """Reads a GET_BROKER_CLUSTER_INFO body in either style.

    Raises:
        RouteBodyError: Not a `ClusterInfo`.
    """
    document = _object(_parse(body), "clusterInfo")
    brokers = _object(document.get("brokerAddrTable"), "brokerAddrTable")
    clusters = _object(document.get("clusterAddrTable"), "clusterAddrTable")
    return ClusterInfo(
        broker_addr_table={name: _broker_data(data) for name, data in brokers.items()},
        cluster_addr_table={
            cluster: set(_string_list(names, "clusterAddrTable[]"))
            for cluster, names in clusters.items()
        },
    )


def decode_topic_list(body: bytes) -> TopicList:
    """Reads a `TopicList` body.

    Raises:
        RouteBodyError: Not a `TopicList`.
    """
    document = _object(_parse(body), "topicList")
    broker_addr = document.get("brokerAddr")
    return TopicList(
        topic_list=_string_list(document.get("topicList"), "topicList"),
        broker_addr=None if broker_addr is None else _string(broker_addr, "brokerAddr"),
    )


def decode_data_version(body: bytes) -> DataVersion:
    """Reads a `DataVersion` body; an empty body is the zero version, as in Java.

    Raises:
        RouteBodyError: Not a `DataVersion`.
    """
    if not body:
        return DataVersion()
    return _data_version(_parse(body), "dataVersion")


def decode_kv_table(body: bytes) -> dict[str, str]:
    """Reads a `KVTable` body.

    Raises:
        RouteBodyError: Not `{"table": {str: str}}`.
    """
    table = _object(_object(_parse(body), "kvTable").get("table"), "table")
    return {key: _string(value, f"table[{key!r}]") for key, value in table.items()}


# ---- REGISTER_BROKER ----------------------------------------------------------------------


@dataclass(slots=True)
class RegisterBrokerBody:
    """What a broker sends with REGISTER_BROKER (`RegisterBrokerBody`).

    `filter_server_list` is None for brokers older than V3_0_11, whose body is a bare
    `TopicConfigSerializeWrapper`; RocketMQ then leaves the filter server table alone.
    """

    data_version: DataVersion = field(default_factory=DataVersion)
    topic_configs: dict[str, BrokerTopicConfig] = field(default_factory=dict)
    filter_server_list: list[str] | None = field(default_factory=list)


def _topic_config(name: str, value: object) -> BrokerTopicConfig:
    what = f"topicConfigTable[{name!r}]"
    document = _object(value, what)
    attributes = _object(document.get("attributes"), f"{what}.attributes")
    return BrokerTopicConfig(
        topic_name=name,
        read_queue_nums=_int(document.get("readQueueNums"), f"{what}.readQueueNums", 16),
        write_queue_nums=_int(document.get("writeQueueNums"), f"{what}.writeQueueNums", 16),
        perm=_int(document.get("perm"), f"{what}.perm", 6),
        topic_sys_flag=_int(document.get("topicSysFlag"), f"{what}.topicSysFlag", 0),
        topic_filter_type=_string(
            document.get("topicFilterType", "SINGLE_TAG"), f"{what}.topicFilterType"
        ),
        order=_bool(document.get("order"), f"{what}.order"),
        attributes={k: _string(v, f"{what}.attributes[]") for k, v in attributes.items()},
    )


def _topic_config_node(config: BrokerTopicConfig) -> Node:
    node: dict[str, Node] = {
        "attributes": config.attributes,
        "order": config.order,
        "perm": config.perm,
        "readQueueNums": config.read_queue_nums,
        "topicFilterType": config.topic_filter_type,
        "topicName": config.topic_name,
        "topicSysFlag": config.topic_sys_flag,
        "writeQueueNums": config.write_queue_nums,
    }
    return node


def decode_register_broker_body(body: bytes, *, compressed: bool) -> RegisterBrokerBody:
    """Reads a REGISTER_BROKER body in any of its forms.

    Args:
        body: The request body; empty means no topics, version zero (as Java reads it).
        compressed: The `compressed` ext field. A zlib stream is also recognised without it,
            because develop brokers compress with `compressed=false` in the header.

    Raises:
        RouteBodyError: Malformed JSON, a truncated or oversized compressed stream, or a
            field of the wrong type.
    """
    if not body:
        return RegisterBrokerBody()
    if compressed or body[:1] == b"\x78":  # 0x78: the first byte of every zlib stream
        return _decode_compressed(body)
    document = _object(_parse(body), "registerBrokerBody")
    if "topicConfigSerializeWrapper" in document:
        wrapper = _object(document["topicConfigSerializeWrapper"], "topicConfigSerializeWrapper")
        filter_servers: list[str] | None = _string_list(
            document.get("filterServerList"), "filterServerList"
        )
    else:
        wrapper = document
        filter_servers = None
    table = _object(wrapper.get("topicConfigTable"), "topicConfigTable")
    return RegisterBrokerBody(
        data_version=_data_version(wrapper.get("dataVersion"), "dataVersion"),
        topic_configs={name: _topic_config(name, value) for name, value in table.items()},
        filter_server_list=filter_servers,
    )


class _Reader:
    """Big-endian reads over the inflated body; a short read is a `RouteBodyError`."""

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._offset = 0

    @property
    def remaining(self) -> int:
        return len(self._data) - self._offset

    def read_int(self, what: str) -> int:
        value: int = struct.unpack(">i", self.read_bytes(4, what))[0]
        return value

    def read_bytes(self, length: int, what: str) -> bytes:
        if length < 0 or length > self.remaining:
            raise RouteBodyError(
                f"compressed register body: {what} needs {length} bytes, {self.remaining} left"
            )
        chunk = self._data[self._offset : self._offset + length]
        self._offset += length
        return chunk

    def read_count(self, what: str) -> int:
        count = self.read_int(what)
        if not 0 <= count <= self.remaining // 4:  # every entry has at least a length word
            raise RouteBodyError(f"compressed register body: {what} {count} is impossible")
        return count

    def read_text(self, what: str) -> str:
        raw = self.read_bytes(self.read_int(f"{what} length"), what)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise RouteBodyError(f"compressed register body: {what} is not UTF-8") from None


def _inflate(body: bytes) -> bytes:
    inflater = zlib.decompressobj()
    try:
        data = inflater.decompress(body, REGISTER_BODY_INFLATED_BYTES_MAX)
    except zlib.error as error:
        raise RouteBodyError(f"compressed register body does not inflate: {error}") from None
    if inflater.unconsumed_tail:
        raise RouteBodyError(
            f"compressed register body inflates past {REGISTER_BODY_INFLATED_BYTES_MAX} bytes"
        )
    return data


def _decode_compressed(body: bytes) -> RegisterBrokerBody:
    reader = _Reader(_inflate(body))
    data_version = _data_version(_parse(reader.read_text("data version")), "dataVersion")
    topic_configs: dict[str, BrokerTopicConfig] = {}
    for _ in range(reader.read_count("topic count")):
        config = _topic_config_text(reader.read_text("topic config"))
        topic_configs[config.topic_name] = config
    filter_servers = _string_list(
        _parse(reader.read_text("filter server list")), "filterServerList"
    )
    # Static-topic mappings follow for brokers >= V5_0_0; pocketmq keeps none, so skip them.
    if reader.remaining >= 4:
        for _ in range(reader.read_count("topic queue mapping count")):
            reader.read_text("topic queue mapping")
    return RegisterBrokerBody(data_version, topic_configs, filter_servers)


def _topic_config_text(text: str) -> BrokerTopicConfig:
    # `TopicConfig.encode()`: name, read, write, perm, filter type, then (5.x) attributes JSON,
    # separated by single spaces; topicSysFlag and order are not carried.
    parts = text.split(" ", 5)
    if len(parts) < 5:
        raise RouteBodyError(f"topic config {text!r} has fewer than 5 fields")
    name, read, write, perm, filter_type = parts[:5]
    attributes: dict[str, str] = {}
    if len(parts) == 6:
        document = _object(_parse(parts[5]), f"topic {name!r} attributes")
        attributes = {k: _string(v, f"topic {name!r} attributes[]") for k, v in document.items()}
    return BrokerTopicConfig(
        topic_name=name,
        read_queue_nums=_int(read, f"topic {name!r} readQueueNums"),
        write_queue_nums=_int(write, f"topic {name!r} writeQueueNums"),
        perm=_int(perm, f"topic {name!r} perm"),
        topic_filter_type=filter_type,
        attributes=attributes,
    )


def encode_register_broker_body(body: RegisterBrokerBody, *, compress: bool = False) -> bytes:
    """A REGISTER_BROKER body as a Java broker writes it (`RegisterBrokerBody.encode`).

    Args:
        body: What to register; `filter_server_list=None` is written as an empty list.
        compress: The binary zlib form (`compressedRegister`), which drops topicSysFlag and
            order; the caller sets the `compressed` ext field to match.
    """
    filter_servers = body.filter_server_list or []
    if compress:
        return _encode_compressed(body, filter_servers)
    wrapper: dict[str, Node] = {
        "dataVersion": body.data_version.to_json(),
        "mappingDataVersion": DataVersion().to_json(),
        "topicConfigTable": {n: _topic_config_node(c) for n, c in body.topic_configs.items()},
        "topicQueueMappingDetailMap": {},
        "topicQueueMappingInfoMap": {},
    }
    node: dict[str, Node] = {
        "filterServerList": filter_servers,
        "topicConfigSerializeWrapper": wrapper,
    }
    return dumps(node, standard_json=False)


def _encode_compressed(body: RegisterBrokerBody, filter_servers: list[str]) -> bytes:
    parts: list[bytes] = []

    def text(value: bytes) -> None:
        parts.append(struct.pack(">i", len(value)))
        parts.append(value)

    text(encode_data_version(body.data_version))
    parts.append(struct.pack(">i", len(body.topic_configs)))
    for name, config in sorted(body.topic_configs.items()):
        fields = [
            name,
            str(config.read_queue_nums),
            str(config.write_queue_nums),
            str(config.perm),
            config.topic_filter_type,
            dumps(config.attributes, standard_json=False).decode("utf-8"),
        ]
        text(" ".join(fields).encode("utf-8"))
    text(dumps(filter_servers, standard_json=False))
    parts.append(struct.pack(">i", 0))  # no static-topic mappings
    return zlib.compress(b"".join(parts), 9)  # Deflater.BEST_COMPRESSION
