"""The message properties string: `key \\x01 value \\x02` repeated (`MessageDecoder`).

Decoding follows Java's lenient rules: segments shorter than three characters, or without a
separator between a non-empty key and value, are skipped. So empty keys and values do not
survive a round trip; encoding refuses them, and separators inside keys or values, instead of
silently corrupting the neighbouring properties.
"""

from __future__ import annotations

from collections.abc import Mapping

from pocketmq.common.constants import NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR


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
