"""Server settings. Every field reads an ``ACP_BRIDGE_<NAME>`` environment variable; CLI flags win."""

from __future__ import annotations

import json
import os
import secrets
import tempfile
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, PrivateAttr, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

# The events webhooks send unless told otherwise.
WEBHOOK_EVENTS = (
    "session.started",
    "session.ended",
    "turn.ended",
    "permission.requested",
    "question.requested",
    "error",
)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="ACP_BRIDGE_", extra="ignore")

    host: str = "127.0.0.1"
    port: int = 2468
    token: str | None = None
    # Legacy flag: accepted for compatibility; auth is off exactly when no token is set.
    no_token: bool = False

    # Env: a JSON list or comma-separated values.
    cors_allow_origin: Annotated[list[str], NoDecode] = Field(default_factory=list)
    cors_allow_method: Annotated[list[str], NoDecode] = Field(default_factory=list)
    cors_allow_header: Annotated[list[str], NoDecode] = Field(default_factory=list)
    cors_allow_credentials: bool = False
    # Without a token: `Host` names served besides loopback names and the bound address (`*`: any).
    allowed_hosts: Annotated[list[str], NoDecode] = Field(default_factory=list)

    agents_file: Path | None = None
    # Where events are kept. Unset: a private directory per server process, removed when it exits,
    # so parallel servers never collide and each run starts with no sessions (see cache_dir()).
    data_dir: Path | None = None

    # Where the ACP registry's catalog is refreshed from (at start, then hourly when agents are
    # listed); empty: only the snapshot shipped with the package.
    acp_registry_url: str = "https://cdn.agentclientprotocol.com/registry/v1/latest/registry.json"
    # Plain-http catalogs and archive downloads (and redirects to them) are refused unless allowed.
    registry_allow_http: bool = False
    # Seconds an agent install (`npm install` of its ACP adapter) may take (0: no limit).
    install_timeout: float = 600.0
    # Without npm on PATH, or for an adapter whose `engines.node` the system's Node.js does not meet,
    # an agent install brings the bridge's own Node.js with pip (app/agents/node.py).
    node_on_demand: bool = True

    # Seconds allowed for `initialize` + `session/new` before create answers 504.
    agent_start_timeout: float = 30.0
    # Seconds between SIGTERM and SIGKILL when an agent's process group is stopped.
    agent_kill_grace: float = 1.0
    # Seconds a terminate waits for the agent to answer `session/cancel` before stopping it.
    cancel_grace: float = 0.5
    # Seconds a terminate waits for the agent to answer ACP `session/close` (sent when the agent
    # offers it) before stopping it; 0: no `session/close`.
    session_close_timeout: float = 2.0
    # Seconds a permission request or question waits for a reply before it is denied (0: no limit).
    hitl_timeout: float = 0.0
    # Bytes of agent stderr kept per stderr line (longer lines are cut).
    stderr_line_limit: int = 4096
    # Longest agent stdout line (one JSON-RPC message), bytes; a longer one is cut and reported as
    # `agent.unparsed`, never held whole.
    agent_line_limit: int = 64 * 1024 * 1024

    # Live sessions (each an agent process) at most; a create beyond it answers 429 (0: no limit).
    max_sessions: int = 32

    # Largest accepted request body (fs PUT and upload-batch included), as legacy: 2 MiB.
    body_limit: int = 2 * 1024 * 1024
    # Most bytes one upload-batch archive may unpack to (sparse members count at their full size).
    upload_unpacked_limit: int = 1024 * 1024 * 1024

    # Directories /v1/fs and the agents' fs/* requests are confined to (symlinks resolved); empty:
    # no confinement, as legacy. Env: a JSON list or `:`-separated paths.
    fs_roots: Annotated[list[str], NoDecode] = Field(default_factory=list)
    # Newest events of each session kept in memory (besides those not yet written to disk), by
    # count and by bytes; an ended session keeps none.
    event_tail: int = 4096
    event_tail_bytes: int = 4 * 1024 * 1024
    # Bytes of events waiting for the disk (a full or failing disk) beyond which new events are
    # refused (and counted in an `error` event once the disk writes again).
    event_backlog_bytes: int = 256 * 1024 * 1024
    # A PostgreSQL database (`postgresql://user@host/db`, the password from libpq's PGPASSFILE) as the
    # event store instead of the data dir's SQLite file: bridges on one database are a fleet (any
    # bridge serves any session).
    database_url: str | None = None
    # The address other bridges of the fleet reach this one at (`http://host:port`), named in
    # session listings; requests for a session this bridge runs are forwarded here.
    advertise_url: str | None = None
    # Seconds a bridge's hold on a session it runs lasts without renewal (renewed every third of it):
    # after a crash, another bridge takes the session over at its next message once this passed.
    lease_seconds: float = 10.0
    # Ended sessions not updated for this many days are deleted from the store, at start and
    # daily (0: kept forever).
    retention_days: float = 0.0
    # Largest file read for a message attachment (an image sent inline to the agent), bytes.
    attachment_limit: int = 20 * 1024 * 1024

    # Open connections beyond which new ones are refused (0: half the open-file limit, at most
    # 10,000); seconds a connection has for a complete request head, and a request body may stall.
    max_connections: int = 0
    header_timeout: float = 15.0
    body_timeout: float = 30.0
    # Seconds a response's writes may make no progress (the reader takes nothing) before the
    # connection is closed; pipelined requests that may wait per connection, unparsed beyond.
    write_timeout: float = 30.0
    pipeline_limit: int = 4

    # SSE comment keep-alive interval, seconds (0 disables).
    sse_keepalive: float = 15.0
    # A reader that accepts no data for this long is dropped.
    sse_send_timeout: float = 30.0

    # Milliseconds between the mock agent's scripted steps (legacy paced at 200).
    mock_pacing_ms: int = 0

    # When set, every session's raw ACP traffic (both directions) is written to
    # `<transcript_dir>/<session id>.jsonl`, one `{"t", "dir", "msg"}` object per line.
    transcript_dir: Path | None = None

    # Serve Swagger UI at /docs, its assets from the swagger-ui-bundle package (the `docs` extra).
    docs: bool = False

    log_level: str = "warning"
    # `text`, or `json`: one JSON object per log line (with session id and trace id where known).
    log_format: Literal["text", "json"] = "text"

    # Webhooks (app/webhooks/): each committed event of these types is POSTed to every URL, signed
    # with the secret (Standard Webhooks), per session in order, retried with growing delays.
    webhook_url: Annotated[list[str], NoDecode] = Field(default_factory=list)
    webhook_secret: str | None = None
    webhook_events: Annotated[list[str], NoDecode] = Field(default_factory=lambda: list(WEBHOOK_EVENTS))
    webhook_retry_delay: float = 1.0  # seconds before the first retry, doubled for each next one
    webhook_retry_max_delay: float = 300.0
    webhook_attempts: int = 10  # tries of one delivery before it is recorded as failed
    webhook_timeout: float = 10.0  # seconds one whole try may take (connect, send, the answer's head and body)
    webhook_queue_limit: int = 10_000  # deliveries waiting per URL; beyond, new ones are dropped (logged)
    webhook_failed_retention_days: float = 7.0  # deliveries given up are kept this long (0: forever)

    @field_validator("webhook_url", "webhook_events", mode="before")
    @classmethod
    def _split_webhook_lists(cls, value: Any) -> Any:
        if isinstance(value, str):
            text = value.strip()
            return json.loads(text) if text.startswith("[") else [p.strip() for p in text.split(",") if p.strip()]
        return value

    @field_validator("cors_allow_origin", "cors_allow_method", "cors_allow_header", "allowed_hosts", mode="before")
    @classmethod
    def _split_commas(cls, value: Any) -> Any:
        if isinstance(value, str):
            text = value.strip()
            if text.startswith("["):
                return json.loads(text)
            return [part.strip() for part in text.split(",") if part.strip()]
        return value

    @field_validator("fs_roots", mode="before")
    @classmethod
    def _split_roots(cls, value: Any) -> Any:
        if isinstance(value, str):
            text = value.strip()
            if text.startswith("["):
                return json.loads(text)
            return [part for part in text.split(os.pathsep) if part]
        return value

    _private_data_dir: Path | None = PrivateAttr(default=None)

    @property
    def private_data_dir(self) -> bool:
        """No data dir was asked for: this server's events live in its own directory, removed at exit."""
        return self.data_dir is None

    def resolved_data_dir(self) -> Path:
        if self.data_dir is not None:
            return self.data_dir.expanduser().resolve()
        if self._private_data_dir is None:
            # Named, not created: app.datadir.prepare() makes it (mode 0700) when the server starts.
            name = f"acp-rest-bridge-{os.getpid()}-{secrets.token_hex(4)}"
            self._private_data_dir = Path(tempfile.gettempdir()).resolve() / name
        return self._private_data_dir

    def cache_dir(self) -> Path:
        """Agent installs (`bin/`) and skill sources (`skills/`), which outlive a run: in the data dir
        when one is set (the Docker volume), else in the user's cache dir, shared by every server."""
        if self.data_dir is not None:
            return self.resolved_data_dir()
        base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
        return Path(base).resolve() / "acp-rest-bridge"
