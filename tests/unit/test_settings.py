"""Settings: each described once (its field), the table of docs/configuration.md is the generated one, the flags are
exactly the legacy ones and belong to settings, list values parse, flags win over variables, the
start-up line and the open-API warning."""

from __future__ import annotations

import argparse
import os
import socket
from pathlib import Path

import pytest
from pydantic import ValidationError

from app.agents.registry import AgentRegistry
from app.main import _parser, cli
from app.settings import Settings, option
from app.settings_cli import error_line, from_args, render
from app.startup import StartError, listen, open_api_warning, startup_line
from tests.support import ROOT

START = "<!-- settings: `acp-rest-bridge settings` prints this table; a test keeps them equal -->\n"
END = "<!-- /settings -->"


def test_the_docs_table_is_the_generated_one() -> None:
    page = (ROOT / "docs" / "configuration.md").read_text()
    assert START in page and END in page
    table = page.split(START, 1)[1].split(END, 1)[0]
    assert table == render(), "docs/configuration.md's settings table is stale: paste `acp-rest-bridge settings` in"


# The flags of `acp-rest-bridge server` as legacy spelled them: (option strings, what argparse does
# with a value), by setting. Changing one breaks scripts and SDKs that start the server.
LEGACY_FLAGS: dict[str, tuple[tuple[str, ...], str]] = {
    "host": (("-H", "--host"), "str"),
    "port": (("-p", "--port"), "int"),
    "token": (("-t", "--token"), "str"),
    "no_token": (("-n", "--no-token"), "switch"),
    "cors_allow_origin": (("-O", "--cors-allow-origin"), "repeat"),
    "cors_allow_method": (("-M", "--cors-allow-method"), "repeat"),
    "cors_allow_header": (("-A", "--cors-allow-header"), "repeat"),
    "cors_allow_credentials": (("-C", "--cors-allow-credentials"), "switch"),
    "agents_file": (("--agents-file",), "Path"),
    "data_dir": (("--data-dir",), "Path"),
    "fs_roots": (("--fs-root",), "repeat"),
    "database_url": (("--database-url",), "str"),
    "advertise_url": (("--advertise-url",), "str"),
    "log_level": (("--log-level",), "str"),
}


def server_parser() -> argparse.ArgumentParser:
    commands = next(a for a in _parser()._actions if a.dest == "command")
    server: argparse.ArgumentParser = commands.choices["server"]  # type: ignore[index]
    return server


def kind(action: argparse.Action) -> str:
    if isinstance(action, argparse._StoreTrueAction):
        return "switch"
    if isinstance(action, argparse._AppendAction):
        return "repeat"
    return getattr(action.type, "__name__", "str")


def test_every_setting_is_described_and_has_a_row() -> None:
    table = render()
    undescribed = [name for name, field in Settings.model_fields.items() if not (field.description or "").strip()]
    assert not undescribed, f"settings without a description (Field(..., description=...)): {undescribed}"
    for name, field in Settings.model_fields.items():
        assert f"| `ACP_BRIDGE_{name.upper()}`" in table and f"| {field.description} |" in table


def test_the_flags_are_the_legacy_ones_and_every_flag_is_a_setting() -> None:
    actions = [a for a in server_parser()._actions if a.option_strings and a.dest != "help"]
    strays = [a.option_strings for a in actions if a.dest not in Settings.model_fields]
    assert not strays, f"flags without a setting (declare them as an Option of a Settings field): {strays}"
    parsed = {a.dest: (tuple(a.option_strings), kind(a)) for a in actions}
    assert parsed == LEGACY_FLAGS
    declared = {name: option(field).flags for name, field in Settings.model_fields.items() if option(field).flags}
    assert declared == {name: spelled for name, (spelled, _) in LEGACY_FLAGS.items()}
    for action in actions:
        assert action.default is None  # a flag not given leaves the setting to its variable
        description = Settings.model_fields[action.dest].description or ""
        assert action.help and description.replace("`", "")[:20] in action.help


def test_flags_parse_as_legacy_did(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    argv = ["server", "-H", "0.0.0.0", "-p", "9", "-t", "s", "-n", "-O", "http://a", "-O", "http://b", "-M", "GET"]
    argv += ["-A", "x-a", "-C", "--agents-file", "a.toml", "--data-dir", str(tmp_path), "--fs-root", "/r1"]
    argv += ["--fs-root", "/r2", "--database-url", "postgresql://h/d", "--advertise-url", "http://h:1"]
    argv += ["--log-level", "debug"]
    settings = from_args(_parser().parse_args(argv))
    assert (settings.host, settings.port, settings.token, settings.no_token) == ("0.0.0.0", 9, "s", True)
    assert settings.cors_allow_origin == ["http://a", "http://b"]
    assert (settings.cors_allow_method, settings.cors_allow_header, settings.cors_allow_credentials) == (
        ["GET"],
        ["x-a"],
        True,
    )
    assert (settings.agents_file, settings.data_dir, settings.fs_roots) == (Path("a.toml"), tmp_path, ["/r1", "/r2"])
    assert (settings.database_url, settings.advertise_url, settings.log_level) == (
        "postgresql://h/d",
        "http://h:1",
        "debug",
    )
    # Given neither as a flag nor a variable: the defaults; a variable fills what no flag gives.
    monkeypatch.setenv("ACP_BRIDGE_FS_ROOTS", f"/e1{os.pathsep}/e2")
    monkeypatch.setenv("ACP_BRIDGE_NO_TOKEN", "1")
    settings = from_args(_parser().parse_args(["server"]))
    assert (settings.port, settings.cors_allow_origin, settings.fs_roots, settings.no_token) == (
        2468,
        [],
        ["/e1", "/e2"],
        True,
    )
    assert from_args(_parser().parse_args(["server", "--fs-root", "/f"])).fs_roots == ["/f"]  # the flag wins
    with pytest.raises(SystemExit) as exited:
        _parser().parse_args(["server", "--port", "x"])  # argparse's own error, as legacy
    assert exited.value.code == 2


def test_the_settings_command_prints_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    cli(["settings"])
    assert capsys.readouterr().out == render()


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
        from_args(_parser().parse_args(["server"]))
    assert error_line(caught.value) == (
        "invalid setting --port / ACP_BRIDGE_PORT: Input should be a valid integer, unable to parse string as an "
        "integer; ACP_BRIDGE_INSTALL_TIMEOUT: Input should be a valid number, unable to parse string as a number"
    )
    monkeypatch.delenv("ACP_BRIDGE_INSTALL_TIMEOUT")
    assert from_args(_parser().parse_args(["server", "-p", "7"])).port == 7  # the flag wins


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
