"""Java `.properties` files, and settings dataclasses configured from them.

RocketMQ servers are configured by `broker.properties`-style files whose keys are Java field
names (`brokerClusterName`, `flushDiskType`). This module owns three steps:

- `parse_properties` / `load_properties`: the syntax of `java.util.Properties.load` (comments,
  the three separators, line continuation, `\\uXXXX` and the other escapes; the last value of a
  repeated key wins). `format_properties` writes text that both Java and this parser read back.
- `apply_properties`: strings to typed fields of a settings dataclass, matched by the RocketMQ key
  in the field's `metadata["key"]` (see `key`), its old spellings in `metadata["aliases"]`, or
  else the camelCase spelling of the field name.
- `config_to_properties`: the reverse, as `getBrokerConfig` reports it.

It does not decide what an unknown key means: `apply_properties` returns those keys and the
caller logs them (RocketMQ ignores them). It reads files but never watches or writes them.

Invariant: `apply_properties` converts every recognised value before it sets any field, so a
`ConfigError` leaves the settings object as it was.
"""

from __future__ import annotations

import dataclasses
import enum
import os
import re
import types
import typing
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

_WHITESPACE: Final = " \t\f"
_KEY_TERMINATORS: Final = "=: \t\f"
_NATURAL_LINE_BREAK: Final = re.compile(r"\r\n|\r|\n")
_HEX4: Final = re.compile(r"[0-9A-Fa-f]{4}")
_INTEGER: Final = re.compile(r"[+-]?[0-9]+")
_ESCAPED_CHARACTERS: Final = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_ESCAPES_FOR_WRITING: Final = {
    "\\": "\\\\",
    "\t": "\\t",
    "\n": "\\n",
    "\r": "\\r",
    "\f": "\\f",
    "=": "\\=",
    ":": "\\:",
    "#": "\\#",
    "!": "\\!",
}


class ConfigError(ValueError):
    """A configuration value that cannot be used.

    The message names the key, the bad value and what was expected, e.g.
    `flushDiskType: 'SYNC' is not one of ASYNC_FLUSH, SYNC_FLUSH`.

    Attributes:
        key: the property key (or, for a syntax error, where it is: `file:line`).
        value: the offending text.
        expected: what would have been accepted.
    """

    def __init__(self, key: str, value: str, expected: str) -> None:
        super().__init__(f"{key}: {value!r} is not {expected}")
        self.key = key
        self.value = value
        self.expected = expected


class ConfigFileError(ConfigError):
    """A properties file that cannot be read at all (missing, a directory, no permission)."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(path, reason, "a readable properties file")
        self.path = path
        self.reason = reason

    def __str__(self) -> str:
        return f"{self.path}: cannot read properties file: {self.reason}"


def key(
    name: str,
    default: Any,
    *aliases: str,
    minimum: float | None = None,
    maximum: float | None = None,
) -> Any:
    """A dataclass field bound to the RocketMQ property `name` (and its old spellings).

    `minimum` / `maximum` bound a number read from a file; without them the key's name decides
    (see `value_bounds`).

    Example: `mapped_file_size_commit_log: int = key("mappedFileSizeCommitLog", 1 << 30,
    "mapedFileSizeCommitLog")`.
    """
    metadata: dict[str, Any] = {"key": name, "aliases": aliases}
    if minimum is not None:
        metadata["minimum"] = minimum
    if maximum is not None:
        metadata["maximum"] = maximum
    return dataclasses.field(default=default, metadata=metadata)


# --- syntax ------------------------------------------------------------------------------------


def parse_properties(text: str, *, source: str = "<properties>") -> dict[str, str]:
    """Parses `.properties` text the way `java.util.Properties.load` does.

    Lines starting (after blanks) with `#` or `!` are comments. A key ends at the first
    unescaped `=`, `:` or blank; blanks around one `=`/`:` separator are skipped, the rest of
    the line is the value (trailing blanks included, as in Java). A line ending in an odd number
    of backslashes continues on the next one, whose leading blanks are dropped. Escapes: `\\t`,
    `\\n`, `\\r`, `\\f`, `\\uXXXX` (UTF-16 pairs are joined); any other escaped character
    stands for itself.

    Args:
        text: the file's text.
        source: names the text in error messages (a file path, usually).

    Returns:
        key -> value in file order; a repeated key keeps its last value.

    Raises:
        ConfigError: a malformed `\\uXXXX` escape, located as `source:line`.
    """
    properties: dict[str, str] = {}
    for line_number, line in _logical_lines(text):
        where = f"{source}:{line_number}"
        raw_key, raw_value = _split_key_value(line)
        properties[_unescape(raw_key, where)] = _unescape(raw_value, where)
    return properties


def load_properties(path: str | os.PathLike[str]) -> dict[str, str]:
    """Reads and parses a `.properties` file (UTF-8, or Latin-1 when it is not valid UTF-8).

    Java reads these files as Latin-1; files that stick to ASCII and `\\uXXXX` escapes, as
    RocketMQ's shipped ones do, read the same either way. A UTF-8 byte order mark is skipped.

    Raises:
        ConfigFileError: the file cannot be read (message names the path and the OS error).
        ConfigError: a syntax error, located as `path:line`.
    """
    name = os.fspath(path)
    try:
        with open(name, "rb") as file:
            data = file.read()
    except OSError as error:
        raise ConfigFileError(name, error.strerror or str(error)) from error
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        text = data.decode("latin-1")
    return parse_properties(text, source=name)


def format_properties(properties: Mapping[str, str]) -> str:
    """Writes `key=value` lines that `parse_properties` and Java's `Properties.load` read back.

    Escapes like `Properties.store` with an output stream: separators and comment characters,
    backslashes, control characters, blanks in keys and leading blanks in values, and every
    character outside printable ASCII as `\\uXXXX` (UTF-16 pairs above U+FFFF). No date comment,
    so equal input gives equal output.
    """
    lines = [
        f"{_escape(name, escape_all_blanks=True)}={_escape(value, escape_all_blanks=False)}\n"
        for name, value in properties.items()
    ]
    return "".join(lines)


def _logical_lines(text: str) -> Iterator[tuple[int, str]]:
    """Yields (number of its first natural line, text) of each non-blank, non-comment line."""
    natural = _NATURAL_LINE_BREAK.split(text)
    index = 0
    while index < len(natural):
        first_line_number = index + 1
        line = natural[index].lstrip(_WHITESPACE)
        index += 1
        if not line or line[0] in "#!":
            continue  # a comment never continues, even when it ends in a backslash
        parts: list[str] = []
        while _ends_with_continuation(line):
            parts.append(line[:-1])
            if index == len(natural):
                line = ""  # a continuation at the end of the text continues into nothing
                break
            line = natural[index].lstrip(_WHITESPACE)
            index += 1
        parts.append(line)
        yield first_line_number, "".join(parts)


def _ends_with_continuation(line: str) -> bool:
    backslashes = len(line) - len(line.rstrip("\\"))
    return backslashes % 2 == 1


def _split_key_value(line: str) -> tuple[str, str]:
    """Splits a logical line (escapes still in) into raw key and raw value."""
    key_end = 0
    value_start = len(line)
    has_separator = False
    preceding_backslash = False
    while key_end < len(line):
        char = line[key_end]
        if not preceding_backslash and char in _KEY_TERMINATORS:
            value_start = key_end + 1
            has_separator = char in "=:"
            break
        preceding_backslash = char == "\\" and not preceding_backslash
        key_end += 1
    while value_start < len(line):
        char = line[value_start]
        if char not in _WHITESPACE:
            if has_separator or char not in "=:":
                break
            has_separator = True
        value_start += 1
    return line[:key_end], line[value_start:]


def _unescape(raw: str, where: str) -> str:
    if "\\" not in raw:
        return raw
    out: list[str] = []
    position = 0
    while True:
        backslash = raw.find("\\", position)
        if backslash < 0:
            out.append(raw[position:])
            break
        out.append(raw[position:backslash])
        if backslash + 1 == len(raw):
            break  # a lone trailing backslash stands for nothing
        char = raw[backslash + 1]
        position = backslash + 2
        if char == "u":
            digits = raw[position : position + 4]
            if not _HEX4.fullmatch(digits):
                raise ConfigError(where, "\\u" + digits, "a \\uXXXX escape (4 hex digits)")
            out.append(chr(int(digits, 16)))
            position += 4
        else:
            out.append(_ESCAPED_CHARACTERS.get(char, char))
    return _join_surrogates("".join(out))


def _join_surrogates(text: str) -> str:
    """Turns UTF-16 surrogate pairs from `\\uD83D\\uDE00` escapes into one code point."""
    if not any("\ud800" <= char <= "\udfff" for char in text):
        return text
    utf16 = text.encode("utf-16-le", "surrogatepass")
    return utf16.decode("utf-16-le", "surrogatepass")


def _escape(text: str, *, escape_all_blanks: bool) -> str:
    out: list[str] = []
    for index, char in enumerate(text):
        if char == " ":
            out.append("\\ " if escape_all_blanks or index == 0 else " ")
        elif char in _ESCAPES_FOR_WRITING:
            out.append(_ESCAPES_FOR_WRITING[char])
        elif " " < char < "\x7f":
            out.append(char)
        else:
            utf16 = char.encode("utf-16-be", "surrogatepass")
            units = (int.from_bytes(utf16[i : i + 2], "big") for i in range(0, len(utf16), 2))
            out.extend(f"\\u{unit:04X}" for unit in units)
    return "".join(out)


# --- typed settings ----------------------------------------------------------------------------


def apply_properties(config: DataclassInstance, properties: Mapping[str, str]) -> list[str]:
    """Sets fields of the settings dataclass `config` from string properties.

    A field matches its `metadata["key"]`, then its `metadata["aliases"]` in order (the first
    present wins, so the current spelling beats an old one); a field without a key matches the
    camelCase spelling of its name (`delete_when` <- `deleteWhen`). Values are stripped of
    surrounding blanks, then converted by the field's annotation:

    - `int`: an optional sign and decimal digits (`1073741824`);
    - `float`: any Python float literal (`72`, `0.5`, `1e3`);
    - `bool`: `true` or `false`, in any case;
    - `str`: as is;
    - an `enum.Enum` subclass: a member's value, or failing that its name;
    - `X | None`: as `X` (a properties file cannot say None).

    A number must also lie within `value_bounds` (a negative `maxMessageSize` would otherwise
    surface as a failed assertion deep in the put path, long after startup).

    Args:
        config: a (mutable) dataclass instance; changed in place.
        properties: key -> text, e.g. from `load_properties`.

    Returns:
        The keys that matched no field, in mapping order; the caller logs them as warnings.

    Raises:
        ConfigError: a value does not convert. No field has been changed.
        TypeError: `config` is not a dataclass instance, two fields claim one key, or a matched
            field's annotation is none of the supported types (a bug in the settings class).
    """
    if not dataclasses.is_dataclass(config) or isinstance(config, type):
        raise TypeError(f"apply_properties needs a dataclass instance, not {config!r}")
    hints = typing.get_type_hints(type(config))
    claimed: dict[str, str] = {}
    updates: dict[str, object] = {}
    for field in dataclasses.fields(config):
        names = _property_names(field)
        for name in names:
            if name in claimed:
                raise TypeError(f"fields {claimed[name]} and {field.name} both claim key {name}")
            claimed[name] = field.name
        present = next((name for name in names if name in properties), None)
        if present is not None:
            value = _convert(present, properties[present], hints[field.name])
            _check_bounds(present, properties[present], value, field)
            updates[field.name] = value
    for name, value in updates.items():
        setattr(config, name, value)
    return [name for name in properties if name not in claimed]


def config_to_properties(config: DataclassInstance) -> dict[str, str]:
    """Renders the settings `config` as RocketMQ key -> text, in field order.

    Enums render as their value, bools as `true`/`false`, whole floats without `.0`
    (`fileReservedTime=72`, as Java's int field prints); fields set to None are left out, as
    Java's `MixAll.object2Properties` leaves out nulls. `apply_properties` reads the result back
    to an equal object.
    """
    if not dataclasses.is_dataclass(config) or isinstance(config, type):
        raise TypeError(f"config_to_properties needs a dataclass instance, not {config!r}")
    properties: dict[str, str] = {}
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        if value is not None:
            properties[_property_names(field)[0]] = _render(value)
    return properties


PORT_MAX: Final = 65535


def value_bounds(field: dataclasses.Field[Any]) -> tuple[float | None, float | None]:
    """(minimum, maximum) a number in `field` may take from a file; None is unbounded.

    Explicit `key(..., minimum=, maximum=)` bounds win. Otherwise, by the key's name: a port
    (`...Port`) is 0-65535, a size (`...Size...`) is 1 or more, and any other number whose
    default is not negative is 0 or more (counts, intervals, timeouts, ratios). A negative
    default is a sentinel (`haListenPort=-1`: listenPort + 1), so it stays allowed.
    """
    minimum = field.metadata.get("minimum")
    maximum = field.metadata.get("maximum")
    if minimum is not None or maximum is not None:
        return minimum, maximum
    default = field.default
    if isinstance(default, bool) or not isinstance(default, int | float):
        return None, None
    name = _property_names(field)[0]
    floor = min(0, default)
    if name.endswith(("Port", "port")):
        return floor, PORT_MAX
    if "Size" in name and default > 0:
        return 1, None
    return (0, None) if default >= 0 else (None, None)


def _check_bounds(name: str, text: str, value: object, field: dataclasses.Field[Any]) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return
    minimum, maximum = value_bounds(field)
    if (minimum is None or value >= minimum) and (maximum is None or value <= maximum):
        return
    kind = "an integer" if isinstance(value, int) else "a number"
    if maximum is None:
        expected = f"{kind} of {_number(minimum)} or more"
    elif minimum is None:
        expected = f"{kind} of {_number(maximum)} or less"
    else:
        expected = f"{kind} from {_number(minimum)} to {_number(maximum)}"
    raise ConfigError(name, text, expected)


def _number(value: float | None) -> str:
    return str(int(value)) if value is not None and float(value).is_integer() else str(value)


def _property_names(field: dataclasses.Field[Any]) -> tuple[str, ...]:
    """The keys a field answers to, the current spelling first."""
    name = field.metadata.get("key")
    if name is None:
        return (_camel_case(field.name),)
    return (name, *field.metadata.get("aliases", ()))


def _camel_case(snake_case: str) -> str:
    first, *rest = snake_case.split("_")
    return first + "".join(part[:1].upper() + part[1:] for part in rest)


def _convert(name: str, text: str, hint: Any) -> object:
    value = text.strip()
    hint = _without_none(name, hint)
    if hint is bool:
        lowered = value.lower()
        if lowered not in ("true", "false"):
            raise ConfigError(name, text, "true or false")
        return lowered == "true"
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return _convert_enum(name, text, hint)
    if hint is int:
        if not _INTEGER.fullmatch(value):
            raise ConfigError(name, text, "an integer")
        return int(value)
    if hint is float:
        try:
            if "_" in value:
                raise ValueError(value)  # Python accepts `1_000`; Java does not
            return float(value)
        except ValueError:
            raise ConfigError(name, text, "a number") from None
    if hint is str:
        return value
    raise TypeError(f"field for key {name} has unsupported type {hint!r}")


def _without_none(name: str, hint: Any) -> Any:
    """`X | None` -> `X`; any other union is a bug in the settings class."""
    if typing.get_origin(hint) not in (typing.Union, types.UnionType):
        return hint
    members = [member for member in typing.get_args(hint) if member is not type(None)]
    if len(members) != 1:
        raise TypeError(f"field for key {name} has unsupported type {hint!r}")
    return members[0]


def _convert_enum(name: str, text: str, enum_type: type[enum.Enum]) -> enum.Enum:
    value = text.strip()
    for member in enum_type:
        if str(member.value) == value:
            return member
    for member in enum_type:
        if member.name == value:
            return member
    choices = ", ".join(str(member.value) for member in enum_type)
    raise ConfigError(name, text, f"one of {choices}")


def _render(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, enum.Enum):
        return str(value.value)
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else repr(value)
    return str(value)
