"""Settings: README's table is the generated one, flags and table agree, list values parse, the
start-up line and the open-API warning."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from pydantic import ValidationError

from app.agents.registry import AgentRegistry
from app.main import _parser, settings_error, settings_from_args
from app.settings import Settings
from app.settings_table import FLAGS, render
from app.startup import StartError, listen, open_api_warning, startup_line
from tests.support import ROOT

START = "<!-- settings: `acp-rest-bridge settings` prints this table; a test keeps them equal -->\n"
END = "<!-- /settings -->"


def test_readme_table_is_the_generated_one() -> None:
    readme = (ROOT / "README.md").read_text()
    assert START in readme and END in readme
    table = readme.split(START, 1)[1].split(END, 1)[0]
    assert table == render(), "README.md's settings table is stale: paste `acp-rest-bridge settings` in"


def test_every_setting_has_a_row_and_a_meaning() -> None:
    table = render()
    for name in Settings.model_fields:
        assert f"`ACP_BRIDGE_{name.upper()}`" in table
    assert "`--log-level`" in table


def test_the_table_lists_exactly_the_parser_flags() -> None:
    server = next(a for a in _parser()._actions if a.dest == "command").choices["server"]  # type: ignore[index]
    parsed = {
        action.dest: tuple(action.option_strings)
        for action in server._actions
        if action.option_strings and action.dest != "help"
    }
    assert parsed == FLAGS


@pytest.mark.parametrize(
    ("value", "expected"),
    [("GET", ["GET"]), ("GET, POST", ["GET", "POST"]), ('["GET","PUT"]', ["GET", "PUT"]), ("", [])],
)
def test_list_settings_take_plain_or_json_values(
    monkeypatch: pytest.MonkeyPatch, value: str, expected: list[str]
) -> None:
    monkeypatch.setenv("ACP_BRIDGE_CORS_ALLOW_METHOD", value)
    monkeypatch.setenv("ACP_BRIDGE_CORS_ALLOW_HEADER", value)
    settings = Settings()
    assert settings.cors_allow_method == expected
    assert settings.cors_allow_header == expected


def test_environment_variables_any_case_flags_win_and_bad_values_are_one_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("acp_bridge_port", "1234")
    monkeypatch.setenv("ACP_BRIDGE_NO_TOKEN", "yes")
    monkeypatch.setenv("ACP_BRIDGE_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("ACP_BRIDGE_NOT_A_SETTING", "ignored")
    settings = Settings()
    assert (settings.port, settings.no_token, settings.data_dir) == (1234, True, tmp_path)
    assert Settings(port=5, data_dir=None).port == 5 and Settings(data_dir=None).data_dir is None
    monkeypatch.setenv("ACP_BRIDGE_PORT", "x")
    monkeypatch.setenv("ACP_BRIDGE_INSTALL_TIMEOUT", "soon")
    with pytest.raises(ValidationError) as caught:
        settings_from_args(_parser().parse_args(["server"]))
    assert settings_error(caught.value) == (
        "invalid setting --port / ACP_BRIDGE_PORT: Input should be a valid integer, unable to parse string as an "
        "integer; --install-timeout / ACP_BRIDGE_INSTALL_TIMEOUT: Input should be a valid number, unable to parse "
        "string as a number"
    )
    monkeypatch.delenv("ACP_BRIDGE_INSTALL_TIMEOUT")
    assert settings_from_args(_parser().parse_args(["server", "-p", "7"])).port == 7  # the flag wins


def test_no_data_dir_means_a_private_one_and_the_user_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    private, other = Settings(), Settings()
    assert private.private_data_dir
    assert private.resolved_data_dir() == private.resolved_data_dir() != other.resolved_data_dir()
    assert not private.resolved_data_dir().exists()  # named only; made when the server starts
    assert private.cache_dir() == tmp_path / "cache" / "acp-rest-bridge"
    fixed = Settings(data_dir=tmp_path / "data")
    assert not fixed.private_data_dir
    assert fixed.resolved_data_dir() == fixed.cache_dir() == tmp_path / "data"


def test_startup_line_and_open_api_warning(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, token="t")
    with listen("127.0.0.1", 0) as sock:
        port = sock.getsockname()[1]
        line = startup_line(settings, AgentRegistry(), sock)
    assert "\n" not in line
    for part in (f"http://127.0.0.1:{port}", str(tmp_path), "auth on", "agents file none", "mock"):
        assert part in line
    assert open_api_warning(settings) is None
    assert open_api_warning(Settings(data_dir=tmp_path, host="::1")) is None
    warning = open_api_warning(Settings(data_dir=tmp_path, host="0.0.0.0"))
    assert warning is not None and "ACP_BRIDGE_TOKEN" in warning


def test_a_port_in_use_is_a_start_error() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(StartError, match=f"cannot listen on 127.0.0.1:{port}"):
            listen("127.0.0.1", port)
