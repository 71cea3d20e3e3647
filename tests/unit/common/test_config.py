"""Properties syntax (java.util.Properties.load), typed settings, and their round trips."""

from __future__ import annotations

import dataclasses
import enum
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pocketmq.common.config import (
    ConfigError,
    ConfigFileError,
    apply_properties,
    config_to_properties,
    format_properties,
    key,
    load_properties,
    parse_properties,
)
from pocketmq.store.config import FlushDiskType, MessageStoreConfig

# --- syntax ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("a=b", {"a": "b"}),
        ("a:b", {"a": "b"}),
        ("a b", {"a": "b"}),
        ("a\tb", {"a": "b"}),
        ("a\fb", {"a": "b"}),
        ("a = b", {"a": "b"}),
        ("a   :   b", {"a": "b"}),
        ("a  b", {"a": "b"}),
        ("a =  = b", {"a": "= b"}),
        ("a b = c", {"a": "b = c"}),
        ("a==b", {"a": "=b"}),
        ("a=b=c", {"a": "b=c"}),
        ("a", {"a": ""}),
        ("a=", {"a": ""}),
        ("=b", {"": "b"}),
        ("   indented=yes", {"indented": "yes"}),
        ("\t\f key=value", {"key": "value"}),
    ],
)
def test_parse_splits_key_and_value_like_java(line: str, expected: dict[str, str]) -> None:
    assert parse_properties(line) == expected


def test_parse_keeps_trailing_blanks_of_a_value() -> None:
    assert parse_properties("a=b  \t") == {"a": "b  \t"}


@pytest.mark.parametrize("marker", ["#", "!"])
def test_parse_skips_comment_lines(marker: str) -> None:
    text = f"{marker} comment=1\n   {marker}indented comment\nkey=value {marker} not a comment\n"
    assert parse_properties(text) == {"key": "value " + marker + " not a comment"}


def test_parse_skips_blank_lines() -> None:
    assert parse_properties("\n  \n\t\na=1\n\f\n") == {"a": "1"}


@pytest.mark.parametrize("line_break", ["\n", "\r\n", "\r"])
def test_parse_accepts_every_line_break(line_break: str) -> None:
    text = line_break.join(["a=1", "b=2", "c=\\", "  3"]) + line_break
    assert parse_properties(text) == {"a": "1", "b": "2", "c": "3"}


def test_parse_joins_continued_lines_dropping_leading_blanks() -> None:
    text = "fruits apple, banana, \\\n        pear, \\\n\t cantaloupe\nnext=1"
    assert parse_properties(text) == {"fruits": "apple, banana, pear, cantaloupe", "next": "1"}


def test_parse_continues_a_key_across_lines() -> None:
    assert parse_properties("long\\\n  key=v") == {"longkey": "v"}


def test_parse_reads_an_even_number_of_trailing_backslashes_as_escaped_backslashes() -> None:
    assert parse_properties("a=c:\\\\\nb=2") == {"a": "c:\\", "b": "2"}


def test_parse_does_not_treat_hash_on_a_continuation_line_as_comment() -> None:
    assert parse_properties("a=1\\\n# 2") == {"a": "1# 2"}


def test_parse_does_not_continue_a_comment_ending_in_backslash() -> None:
    assert parse_properties("# comment \\\na=1") == {"a": "1"}


def test_parse_ends_a_continuation_at_an_empty_line() -> None:
    assert parse_properties("a=1\\\n\nb=2") == {"a": "1", "b": "2"}


def test_parse_drops_a_continuation_at_end_of_text() -> None:
    assert parse_properties("a=1\\") == {"a": "1"}


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("\\t\\n\\r\\f", "\t\n\r\f"),
        ("\\u0041\\u00e9", "Aé"),
        ("\\uD83D\\uDE00", "\U0001f600"),
        ("\\=\\:\\#\\!\\ ", "=:#! "),
        ("\\\\", "\\"),
        ("\\q\\b", "qb"),
    ],
)
def test_parse_decodes_escapes_in_values(raw: str, expected: str) -> None:
    assert parse_properties("k=" + raw) == {"k": expected}


def test_parse_decodes_escaped_separators_and_blanks_in_keys() -> None:
    assert parse_properties("a\\=b\\:c\\ d = 1") == {"a=b:c d": "1"}


def test_parse_keeps_the_last_value_of_a_repeated_key() -> None:
    assert parse_properties("a=1\nb=2\na=3") == {"a": "3", "b": "2"}


@pytest.mark.parametrize("bad", ["\\u12", "\\u12G4", "\\u"])
def test_parse_rejects_a_malformed_unicode_escape_naming_the_line(bad: str) -> None:
    with pytest.raises(ConfigError, match=r"conf:2: .* is not a \\uXXXX escape") as caught:
        parse_properties("a=1\nb=" + bad, source="conf")
    assert caught.value.key == "conf:2"


def test_load_reads_a_utf8_file(tmp_path: Path) -> None:
    path = tmp_path / "broker.conf"
    path.write_bytes("\ufeffbrokerName=broker-é\n".encode())
    assert load_properties(path) == {"brokerName": "broker-é"}


def test_load_falls_back_to_latin1(tmp_path: Path) -> None:
    path = tmp_path / "broker.conf"
    path.write_bytes("brokerName=caf\xe9\n".encode("latin-1"))
    assert load_properties(str(path)) == {"brokerName": "café"}


def test_load_names_the_path_of_a_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "missing.conf"
    with pytest.raises(ConfigFileError, match=r"missing\.conf: cannot read properties file"):
        load_properties(path)


def test_load_locates_a_syntax_error_by_path_and_line(tmp_path: Path) -> None:
    path = tmp_path / "broker.conf"
    path.write_text("# header\nbrokerName=\\u00\n")
    with pytest.raises(ConfigError, match=r"broker\.conf:2"):
        load_properties(path)


def test_format_escapes_like_properties_store() -> None:
    text = format_properties({"a key": " lead and trail ", "k=:#!": "tab\there\\", "é": "😀"})
    assert text == (
        "a\\ key=\\ lead and trail \nk\\=\\:\\#\\!=tab\\there\\\\\n\\u00E9=\\uD83D\\uDE00\n"
    )


_ANY_TEXT = st.text(max_size=20)  # any code point but lone surrogates


@given(st.dictionaries(_ANY_TEXT, _ANY_TEXT, max_size=8))
def test_parse_reads_back_what_format_writes(properties: dict[str, str]) -> None:
    assert parse_properties(format_properties(properties)) == properties


@given(
    st.dictionaries(_ANY_TEXT.filter(bool), _ANY_TEXT, min_size=1, max_size=8),
    st.sampled_from(["=", ":", " ", " = ", "\t: "]),
    st.sampled_from(["", "  ", "\t"]),
    st.sampled_from(["\n", "\r\n", "\r"]),
)
def test_parse_reads_back_any_separator_indent_and_line_break(
    properties: dict[str, str], separator: str, indent: str, line_break: str
) -> None:
    lines = [
        f"{indent}{escaped_key(k)}{separator}{escaped_value(v)}" for k, v in properties.items()
    ]
    text = line_break.join(["# generated", *lines])
    assert parse_properties(text) == properties


def escaped_key(text: str) -> str:
    return format_properties({text: ""}).removesuffix("=\n")


def escaped_value(text: str) -> str:
    return format_properties({"": text}).removeprefix("=").removesuffix("\n")


# --- typed settings ----------------------------------------------------------------------------


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


@dataclasses.dataclass
class Settings:
    port: int = key("listenPort", 10911)
    ratio: float = key("ratio", 0.5)
    enabled: bool = key("enabled", False, "enable", "enabledOld")
    name: str = key("brokerName", "broker-a")
    color: Color = key("color", Color.RED)
    level: Level = key("level", Level.LOW)
    region: str | None = key("region", None)
    delete_when: str = "04"
    max_message_size_bytes: int = 4 << 20


def test_apply_converts_each_annotated_type() -> None:
    settings = Settings()
    unknown = apply_properties(
        settings,
        {
            "listenPort": "65535",
            "ratio": "1e-3",
            "enabled": "TRUE",
            "brokerName": "broker-b",
            "color": "green",
            "level": "2",
            "region": "eu",
        },
    )
    assert unknown == []
    assert settings == Settings(
        port=65535,
        ratio=0.001,
        enabled=True,
        name="broker-b",
        color=Color.GREEN,
        level=Level.HIGH,
        region="eu",
    )


@pytest.mark.parametrize(
    ("name", "text", "attribute", "value"),
    [
        ("listenPort", "0", "port", 0),
        ("listenPort", "+12 ", "port", 12),
        ("ratio", "72", "ratio", 72.0),
        ("enabled", "false", "enabled", False),
        ("enabled", " True\t", "enabled", True),
        ("brokerName", "  padded  ", "name", "padded"),
        ("color", "GREEN", "color", Color.GREEN),
        ("level", "HIGH", "level", Level.HIGH),
    ],
)
def test_apply_accepts_java_spellings(name: str, text: str, attribute: str, value: object) -> None:
    settings = Settings()
    apply_properties(settings, {name: text})
    assert getattr(settings, attribute) == value
    assert type(getattr(settings, attribute)) is type(value)


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("listenPort", "10k", "listenPort: '10k' is not an integer"),
        ("listenPort", "1_000", "listenPort: '1_000' is not an integer"),
        ("listenPort", "1.5", "listenPort: '1.5' is not an integer"),
        ("listenPort", "", "listenPort: '' is not an integer"),
        ("ratio", "half", "ratio: 'half' is not a number"),
        ("ratio", "1_0", "ratio: '1_0' is not a number"),
        ("enabled", "yes", "enabled: 'yes' is not true or false"),
        ("enabled", "1", "enabled: '1' is not true or false"),
        ("color", "blue", "color: 'blue' is not one of red, green"),
        ("level", "3", "level: '3' is not one of 1, 2"),
    ],
)
def test_apply_rejects_a_bad_value_naming_key_value_and_expectation(
    name: str, text: str, message: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        apply_properties(Settings(), {name: text})
    assert str(caught.value) == message
    assert (caught.value.key, caught.value.value) == (name, text)


def test_apply_rejects_an_unknown_flush_disk_type() -> None:
    with pytest.raises(ConfigError) as caught:
        apply_properties(MessageStoreConfig(), {"flushDiskType": "SYNC"})
    assert str(caught.value) == "flushDiskType: 'SYNC' is not one of ASYNC_FLUSH, SYNC_FLUSH"


def test_apply_changes_nothing_when_any_value_is_bad() -> None:
    settings = Settings()
    with pytest.raises(ConfigError):
        apply_properties(settings, {"listenPort": "1", "brokerName": "b", "enabled": "maybe"})
    assert settings == Settings()


def test_apply_matches_fields_without_key_by_camel_case() -> None:
    settings = Settings()
    apply_properties(settings, {"deleteWhen": "02", "maxMessageSizeBytes": "1024"})
    assert (settings.delete_when, settings.max_message_size_bytes) == ("02", 1024)


def test_apply_does_not_match_snake_case_names() -> None:
    settings = Settings()
    assert apply_properties(settings, {"delete_when": "02", "port": "1"}) == ["delete_when", "port"]
    assert settings == Settings()


def test_apply_accepts_old_spellings() -> None:
    config = MessageStoreConfig()
    apply_properties(config, {"mapedFileSizeCommitLog": "1048576"})
    assert config.mapped_file_size_commit_log == 1048576


def test_apply_prefers_the_current_spelling_over_an_alias() -> None:
    settings = Settings()
    apply_properties(settings, {"enable": "false", "enabled": "true", "enabledOld": "false"})
    assert settings.enabled is True


def test_apply_prefers_the_first_listed_alias() -> None:
    settings = Settings()
    apply_properties(settings, {"enabledOld": "false", "enable": "true"})
    assert settings.enabled is True


def test_apply_returns_unknown_keys_in_order() -> None:
    settings = Settings()
    unknown = apply_properties(settings, {"zeta": "1", "listenPort": "1", "alpha": "2"})
    assert unknown == ["zeta", "alpha"]
    assert settings.port == 1


def test_apply_configures_the_store_from_a_rocketmq_file(tmp_path: Path) -> None:
    path = tmp_path / "broker.conf"
    path.write_text(
        "brokerClusterName = DefaultCluster\n"
        "storePathRootDir=/data/store\n"
        "flushDiskType=SYNC_FLUSH\n"
        "fileReservedTime=48\n"
        "messageIndexEnable=false\n"
    )
    config = MessageStoreConfig()
    assert apply_properties(config, load_properties(path)) == ["brokerClusterName"]
    assert config.store_path_root_dir == "/data/store"
    assert config.flush_disk_type is FlushDiskType.SYNC_FLUSH
    assert config.file_reserved_time_hours == 48.0
    assert config.message_index_enable is False


def test_apply_refuses_a_non_dataclass() -> None:
    with pytest.raises(TypeError, match="dataclass instance"):
        apply_properties(Settings, {})  # type: ignore[arg-type]


def test_apply_refuses_an_unsupported_field_type() -> None:
    @dataclasses.dataclass
    class Odd:
        items: list[str] = key("items", None)

    with pytest.raises(TypeError, match="items"):
        apply_properties(Odd(), {"items": "a,b"})


def test_apply_refuses_two_fields_claiming_one_key() -> None:
    @dataclasses.dataclass
    class Clash:
        first: int = key("port", 1)
        second: int = key("other", 2, "port")

    with pytest.raises(TypeError, match="both claim key port"):
        apply_properties(Clash(), {})


def test_config_to_properties_renders_rocketmq_keys_and_java_values() -> None:
    assert config_to_properties(Settings(color=Color.GREEN, ratio=72.0)) == {
        "listenPort": "10911",
        "ratio": "72",
        "enabled": "false",
        "brokerName": "broker-a",
        "color": "green",
        "level": "1",
        "deleteWhen": "04",
        "maxMessageSizeBytes": str(4 << 20),
    }


def test_config_to_properties_renders_the_store_config() -> None:
    properties = config_to_properties(MessageStoreConfig())
    assert properties["flushDiskType"] == "ASYNC_FLUSH"
    assert properties["messageIndexEnable"] == "true"
    assert properties["mappedFileSizeCommitLog"] == str(1 << 30)
    assert "mapedFileSizeCommitLog" not in properties


def test_store_config_round_trips_through_properties_text() -> None:
    config = MessageStoreConfig(
        store_path_root_dir="C:\\store dir",
        flush_disk_type=FlushDiskType.SYNC_FLUSH,
        file_reserved_time_hours=0.25,
        message_index_enable=False,
    )
    text = format_properties(config_to_properties(config))
    restored = MessageStoreConfig()
    assert apply_properties(restored, parse_properties(text)) == []
    assert restored == config


_STRIPPED = st.text(max_size=12).map(str.strip)  # apply_properties strips values


@given(
    st.builds(
        Settings,
        port=st.integers(0, 65535),
        ratio=st.floats(min_value=0, allow_nan=False),
        enabled=st.booleans(),
        name=_STRIPPED,
        color=st.sampled_from(Color),
        level=st.sampled_from(Level),
        region=st.one_of(st.none(), _STRIPPED),
        delete_when=_STRIPPED,
        max_message_size_bytes=st.integers(min_value=1),
    )
)
def test_apply_reads_back_what_config_to_properties_renders(settings: Settings) -> None:
    restored = Settings()
    assert apply_properties(restored, config_to_properties(settings)) == []
    assert restored == settings
