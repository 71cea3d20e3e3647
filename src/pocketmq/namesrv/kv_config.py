"""The NameServer's KV config (`KVConfigManager`), e.g. ordered-topic settings."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping


class KvConfig:
    """The NameServer's KV config (`KVConfigManager`): namespace -> key -> value.

    Persisted as RocketMQ's `kvConfig.json`: `{"configTable": {namespace: {key: value}}}`.
    Writing the file is the caller's move (`to_json` after `put` or `delete`).
    """

    def __init__(self, table: Mapping[str, Mapping[str, str]] | None = None) -> None:
        self._table: dict[str, dict[str, str]] = {
            namespace: dict(values) for namespace, values in (table or {}).items()
        }

    def put(self, namespace: str, key: str, value: str) -> None:
        self._table.setdefault(namespace, {})[key] = value

    def get(self, namespace: str, key: str) -> str | None:
        return self._table.get(namespace, {}).get(key)

    def delete(self, namespace: str, key: str) -> bool:
        """Removes one key; the namespace stays, even empty, as in RocketMQ."""
        values = self._table.get(namespace)
        return values is not None and values.pop(key, None) is not None

    def namespace(self, namespace: str) -> dict[str, str] | None:
        """A copy of one namespace (GET_KVLIST_BY_NAMESPACE), or None when it never existed."""
        values = self._table.get(namespace)
        return None if values is None else dict(values)

    def namespaces(self) -> list[str]:
        return sorted(self._table)

    def to_json(self) -> str:
        """The `kvConfig.json` text, keys sorted."""
        return json.dumps({"configTable": self._table}, sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | bytes) -> KvConfig:
        """Loads `kvConfig.json` text.

        Raises:
            ValueError: Not JSON, or not `{"configTable": {str: {str: str}}}`.
        """
        document: object = json.loads(text)
        if not isinstance(document, dict):
            raise ValueError("kvConfig.json is not a JSON object")
        table: object = document.get("configTable", {})
        if not isinstance(table, dict):
            raise ValueError("kvConfig.json: configTable is not an object")
        return cls(_string_tables(table.items()))


def _string_tables(items: Iterable[tuple[object, object]]) -> dict[str, dict[str, str]]:
    tables: dict[str, dict[str, str]] = {}
    for namespace, values in items:
        if not isinstance(values, dict):
            raise ValueError(f"kvConfig.json: namespace {namespace!r} is not an object")
        tables[str(namespace)] = {str(k): _kv_value(v, namespace) for k, v in values.items()}
    return tables


def _kv_value(value: object, namespace: object) -> str:
    if isinstance(value, dict | list) or value is None:
        raise ValueError(f"kvConfig.json: a value in {namespace!r} is not a string: {value!r}")
    return value if isinstance(value, str) else json.dumps(value)
