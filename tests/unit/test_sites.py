"""The rules of a server without a token (``app/api/sites.py``): which ``Host`` names it serves and
which state-changing requests count as coming from another site."""

from __future__ import annotations

import pytest

from app.api.sites import SiteRules, host_name, is_loopback_name

RULES = SiteRules("127.0.0.1", ["devbox.lan"], ["http://localhost:5173"])


@pytest.mark.parametrize(
    ("host", "name"),
    [
        ("LocalHost:2468", "localhost"),
        ("[::1]:80", "::1"),
        ("[::1]", "::1"),
        ("a.example.", "a.example"),
        ("::1", "::1"),
    ],
)
def test_host_names(host: str, name: str) -> None:
    assert host_name(host) == name


@pytest.mark.parametrize("name", ["localhost", "app.localhost", "127.0.0.1", "127.9.9.9", "::1"])
def test_loopback_names(name: str) -> None:
    assert is_loopback_name(name)


@pytest.mark.parametrize("name", ["localhost.example", "evil.example", "10.0.0.1", "0.0.0.0", "127.0.0.1.nip.io"])
def test_other_names(name: str) -> None:
    assert not is_loopback_name(name)


@pytest.mark.parametrize(
    ("host", "local", "allowed"),
    [
        ("127.0.0.1:2468", "127.0.0.1", True),
        ("localhost:2468", "127.0.0.1", True),
        ("[::1]:2468", "::1", True),
        ("devbox.lan:2468", "10.0.0.5", True),  # allowed by the setting
        ("DEVBOX.LAN", "10.0.0.5", True),
        ("10.0.0.5:2468", "10.0.0.5", True),  # the address the connection reached
        ("10.0.0.6:2468", "10.0.0.5", False),
        ("evil.example", "127.0.0.1", False),  # DNS rebinding: the page's own name
        ("evil.example:2468", None, False),
        ("", "127.0.0.1", False),
    ],
)
def test_hosts(host: str, local: str | None, allowed: bool) -> None:
    assert RULES.host_allowed(host, local) is allowed


def test_the_bound_name_and_any_host() -> None:
    assert SiteRules("devbox", [], []).host_allowed("devbox:2468", "10.0.0.5")
    assert SiteRules("0.0.0.0", ["*"], []).host_allowed("anything.example", None)


@pytest.mark.parametrize(
    ("host", "origin", "fetch_site", "refused"),
    [
        ("127.0.0.1:2468", None, None, False),  # curl, SDKs
        ("127.0.0.1:2468", "http://127.0.0.1:2468", "same-origin", False),  # the inspector on its server
        ("localhost", "http://localhost", None, False),
        ("localhost:80", "http://localhost", None, False),
        ("localhost", "http://localhost:80", None, False),
        ("127.0.0.1:2468", "http://localhost:5173", "cross-site", False),  # allowed by CORS
        ("127.0.0.1:2468", "http://localhost:5173/", None, False),
        ("127.0.0.1:2468", "http://evil.example", "cross-site", True),
        ("127.0.0.1:2468", "http://127.0.0.1:3000", "same-site", True),  # another port is another origin
        ("127.0.0.1:2468", "null", None, True),  # a sandboxed frame, a file:// page
        ("127.0.0.1:2468", None, "cross-site", True),
        ("127.0.0.1:2468", None, "same-site", True),
        ("127.0.0.1:2468", None, "none", False),  # typed in the address bar
        ("127.0.0.1:2468", None, "same-origin", False),
        (None, "http://evil.example", None, True),
    ],
)
def test_cross_site(host: str | None, origin: str | None, fetch_site: str | None, refused: bool) -> None:
    assert (RULES.cross_site(host, origin, fetch_site) is not None) is refused
