"""What the server says when it starts: the listening socket (bound before anything is served, so a
port in use is a one-line error), the start-up line, and the warning about an open API."""

from __future__ import annotations

import ipaddress
import socket

from app.agents.registry import AgentRegistry
from app.settings import Settings


class StartError(Exception):
    """The server cannot start; the message is its one-line reason."""


def listen(host: str, port: int) -> socket.socket:
    """The server's socket, bound (uvicorn listens on it)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except OSError as exc:
        raise StartError(f"cannot listen on {host}:{port}: {exc}") from exc
    family, _, _, _, address = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError as exc:
        sock.close()
        raise StartError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    return sock


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def startup_line(settings: Settings, registry: AgentRegistry, sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    url = f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
    data_dir = str(settings.resolved_data_dir())
    if settings.private_data_dir:
        data_dir += " (private to this run: set --data-dir to keep sessions)"
    agents = ", ".join(spec.id if spec.installed else f"{spec.id} (not installed)" for spec in registry.all())
    return (
        f"acp-rest-bridge listening on {url}; data dir {data_dir}; "
        f"auth {'on' if settings.token else 'off'}; agents file {settings.agents_file or 'none'}; agents: {agents}"
    )


def open_api_warning(settings: Settings) -> str | None:
    if settings.token or is_loopback(settings.host):
        return None
    return (
        f"WARNING: no token is set and the server listens on {settings.host}: anyone who reaches this port "
        "can run agents and read and write files. Set ACP_BRIDGE_TOKEN (or --token)."
    )
