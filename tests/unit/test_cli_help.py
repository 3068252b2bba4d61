"""``--help`` is written for users: what the command is and how to start it, not a module docstring."""

from __future__ import annotations

import pytest

from app.main import cli


@pytest.mark.parametrize("argv", [["--help"], ["server", "--help"]])
def test_help_is_for_users(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli(argv)
    assert exited.value.code == 0
    text = capsys.readouterr().out
    assert "ACP" in text and "ACP_BRIDGE_" in text
    assert "``" not in text and "create_app" not in text
    if argv == ["--help"]:
        assert "acp-rest-bridge server" in text and "sandbox-agent v0.1 REST/SSE API" in text
    else:
        assert "--data-dir" in text and "Ctrl-C" in text
