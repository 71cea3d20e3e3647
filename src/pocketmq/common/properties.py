"""The message properties string: `key \\x01 value \\x02` repeated (`MessageDecoder`).

Decoding follows Java's lenient rules: segments shorter than three characters, or without a
separator between a non-empty key and value, are skipped. So empty keys and values do not
survive a round trip; encoding refuses them, and separators inside keys or values, instead of
silently corrupting the neighbouring properties.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from pocketmq.common.constants import NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR
from pocketmq.common.property_kernel import find_property

__all__ = [
    "LazyProperties",
    "PropertyError",
    "decode_properties",
    "encode_properties",
    "find_property",
]


class PropertyError(ValueError):
    """A property key or value that cannot be carried by the properties string."""


def encode_properties(properties: Mapping[str, str | None]) -> str:
    """Encodes properties; `None` values are left out, as Java does.

    Raises:
        PropertyError: a key or value is empty or contains a separator character.
    """
    parts: list[str] = []
    for key, value in properties.items():
        if value is None:
            continue
        for text in (key, value):
            if not text:
                raise PropertyError(f"empty property key or value: {key!r}={value!r}")
            if NAME_VALUE_SEPARATOR in text or PROPERTY_SEPARATOR in text:
                raise PropertyError(
                    f"property {key!r} contains a reserved separator (\\x01 or \\x02)"
                )
        parts.append(f"{key}{NAME_VALUE_SEPARATOR}{value}{PROPERTY_SEPARATOR}")
    return "".join(parts)


def decode_properties(text: str) -> dict[str, str]:
    """Decodes a properties string; malformed segments are skipped as Java skips them."""
    result: dict[str, str] = {}
    for segment in text.split(PROPERTY_SEPARATOR):
        if len(segment) < 3:
            continue
        key, sep, value = segment.partition(NAME_VALUE_SEPARATOR)
        if sep and key and value:
            result[key] = value
    return result


class LazyProperties(Mapping[str, str]):
    """A properties string read as a mapping, decoded on first access.

    A consumer gets one per message and its listener often reads no property at all: the text
    is kept, and split only when a property is asked for. Equal to a dict of the same items.
    """

    __slots__ = ("_decoded", "_text")

    def __init__(self, text: str) -> None:
        self._text = text
        self._decoded: dict[str, str] | None = None

    def _items(self) -> dict[str, str]:
        decoded = self._decoded
        if decoded is None:
            decoded = self._decoded = decode_properties(self._text)
        return decoded

    def __getitem__(self, key: str) -> str:
        return self._items()[key]

    def get(self, key: str, default: str | None = None) -> str | None:  # type: ignore[override]
        return self._items().get(key, default)

    def __contains__(self, key: object) -> bool:
        return key in self._items()

    def __iter__(self) -> Iterator[str]:
        return iter(self._items())

    def __len__(self) -> int:
        return len(self._items())

    def __repr__(self) -> str:
        return repr(self._items())
