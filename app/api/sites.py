"""Who may drive a server that has no token: the rules of ``BridgeMiddleware`` for ``Host``,
``Origin`` and ``Sec-Fetch-Site``, as pure functions of the request's header values.

Without a token, anything that reaches the port can run agents and commands. A web page can reach it
too: through the browser (a cross-site form or a no-cors ``fetch``) and through DNS rebinding (a
name of the page's own that later resolves to 127.0.0.1, so the browser sends that name as
``Host``). So a server without a token serves only the names a browser cannot be tricked into
using for it (loopback names, its bound address, the address a connection arrived on, and the
hosts the operator allows), and takes state-changing requests only from its own origin, the
origins CORS allows, or clients that are not browsers (no ``Origin``, no ``Sec-Fetch-Site``).
"""

from __future__ import annotations

import ipaddress

# Requests that change nothing; a browser lets any page send these, but never shows it the answer.
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def host_name(host: str) -> str:
    """The name of a ``Host`` header value, without its port, brackets or trailing dot, lower case."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1:].split("]", 1)[0]
    if host.count(":") == 1:
        host = host.split(":", 1)[0]
    return host.rstrip(".")


def is_loopback_name(name: str) -> bool:
    """``localhost``, a name under ``.localhost`` (browsers resolve those to loopback themselves),
    or a loopback address."""
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _same_address(name: str, address: str) -> bool:
    try:
        return ipaddress.ip_address(name) == ipaddress.ip_address(address)
    except ValueError:
        return False


class SiteRules:
    """The rules for one server: its bound host, the allowed hosts, the CORS origins."""

    def __init__(self, bound_host: str, allowed_hosts: list[str], cors_origins: list[str]) -> None:
        self.bound = host_name(bound_host)
        self.any_host = "*" in allowed_hosts
        self.allowed = {host_name(h) for h in allowed_hosts if h != "*"}
        self.origins = {origin.rstrip("/").lower() for origin in cors_origins}

    def host_allowed(self, host: str, local_address: str | None) -> bool:
        """A ``Host`` this server answers without a token. An IP literal is the address the
        connection reached (a rebinding page cannot make the browser send one for its own name)."""
        if self.any_host:
            return True
        name = host_name(host)
        if name in self.allowed or name == self.bound or is_loopback_name(name):
            return True
        return local_address is not None and _same_address(name, local_address)

    def cross_site(self, host: str | None, origin: str | None, fetch_site: str | None) -> str | None:
        """Why a state-changing request comes from another site, or None when it does not."""
        if origin is not None:
            value = origin.strip().rstrip("/").lower()
            if value in self.origins:
                return None
            if host is not None and value in _own_origins(host):
                return None
            return f"Origin {origin} is neither this server's origin nor allowed by --cors-allow-origin"
        if fetch_site is not None and fetch_site.strip().lower() in ("cross-site", "same-site"):
            return f"Sec-Fetch-Site is {fetch_site}"
        return None


def _own_origins(host: str) -> tuple[str, ...]:
    """The origins a page served by this server under ``host`` has (behind a TLS proxy: https)."""
    host = host.strip().lower()
    origins = [f"http://{host}", f"https://{host}"]
    # A default port is left out of an origin but may be in a Host header, or the other way round.
    if host.endswith(":80"):
        origins.append(f"http://{host[:-3]}")
    elif host.endswith(":443"):
        origins.append(f"https://{host[:-4]}")
    elif not ("]:" in host if host.startswith("[") else ":" in host):
        origins += [f"http://{host}:80", f"https://{host}:443"]
    return tuple(origins)
