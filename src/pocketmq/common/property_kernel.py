"""Property lookups in a properties string, which every stored record pays in dispatch; written
to be compiled by mypyc (`setup.py`), and run interpreted where the build could not.

The same source serves both builds: compiled, the three lookups of a record take about a
third of their interpreted time, as the calls, slices and comparisons around `str.rfind` run
in C.
"""

from __future__ import annotations

from typing import Final

# `common.constants`' values, repeated: a kernel imports nothing of the package, so that mypyc
# checks it alone in the build's environment.
NAME_VALUE_SEPARATOR: Final = "\x01"
PROPERTY_SEPARATOR: Final = "\x02"
PROPERTY_KEYS: Final = "KEYS"
PROPERTY_TAGS: Final = "TAGS"
PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX: Final = "UNIQ_KEY"


def find_property(text: str, name: str) -> str | None:
    """`decode_properties(text).get(name)` without decoding the rest: a match must start a
    segment, an empty value counts as absent, and of repeated keys the last one wins."""
    return _find_segment(text, name + NAME_VALUE_SEPARATOR)


def _find_segment(text: str, needle: str) -> str | None:
    """`find_property` given its needle: the name and its separator."""
    i = text.rfind(needle)
    while i != -1:
        if i == 0 or text[i - 1] == PROPERTY_SEPARATOR:
            start = i + len(needle)
            end = text.find(PROPERTY_SEPARATOR, start)
            value = text[start:] if end == -1 else text[start:end]
            if value:
                return value
        i = text.rfind(needle, 0, i)
    return None


# The needles of dispatch's three lookups, made once.
_TAGS_NEEDLE: Final = PROPERTY_TAGS + NAME_VALUE_SEPARATOR
_KEYS_NEEDLE: Final = PROPERTY_KEYS + NAME_VALUE_SEPARATOR
_UNIQ_KEY_NEEDLE: Final = PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX + NAME_VALUE_SEPARATOR


def index_properties(text: str) -> tuple[str | None, str, str | None]:
    """What dispatch reads of a record's properties: TAGS, KEYS ("" when absent) and UNIQ_KEY."""
    return (
        _find_segment(text, _TAGS_NEEDLE),
        _find_segment(text, _KEYS_NEEDLE) or "",
        _find_segment(text, _UNIQ_KEY_NEEDLE),
    )
