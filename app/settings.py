"""Server settings: every field reads an ``ACP_BRIDGE_<NAME>`` environment variable; flags of
``acp-rest-bridge server`` win over it.

A field's ``description`` is its one text: the options table of docs/configuration.md, ``acp-rest-bridge settings`` and
``acp-rest-bridge server --help`` are made from it (``app/settings_cli.py``). What a field needs
beyond it is an ``Option`` in its ``Annotated`` metadata: its flags (the legacy spellings), and how
its default or its variable's value reads where the value alone does not say it. A field without
a description fails ``tests/unit/test_settings.py``.
"""

from __future__ import annotations

import json
import os
import secrets
import tempfile
import types
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import Field, PrivateAttr, ValidationInfo, field_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, SettingsConfigDict

ENV_PREFIX = "ACP_BRIDGE_"

# The events webhooks send unless told otherwise.
WEBHOOK_EVENTS = (
    "session.started",
    "session.ended",
    "turn.ended",
    "permission.requested",
    "question.requested",
    "error",
)


class Option:
    """A setting's flags of ``acp-rest-bridge server`` and how it is shown and written, in its
    ``Annotated`` metadata: ``Annotated[int, Option("-p", "--port")]``.

    ``default``: the default as the table and ``--help`` say it, when its value does not (a
    computed one); ``separator``: what separates a list's values in its variable besides a JSON
    list (None: commas)."""

    __slots__ = ("default", "flags", "separator")

    def __init__(self, *flags: str, default: str | None = None, separator: str | None = None) -> None:
        self.flags = flags
        self.default = default
        self.separator = separator

    def __repr__(self) -> str:
        return f"Option{(*self.flags,)!r}"


NO_OPTION = Option()


def option(field: FieldInfo) -> Option:
    """The field's ``Option`` (an empty one when it has none: no flags, default as its value says)."""
    return next((m for m in field.metadata if isinstance(m, Option)), NO_OPTION)


def env_name(name: str) -> str:
    return ENV_PREFIX + name.upper()


def field_types(field: FieldInfo) -> tuple[Any, ...]:
    """The types a setting takes, ``None`` left out (``Path | None``: ``(Path,)``)."""
    annotation = field.annotation
    members = get_args(annotation) if get_origin(annotation) in (Union, types.UnionType) else (annotation,)
    return tuple(member for member in members if member is not type(None))


def is_list(field: FieldInfo) -> bool:
    return any(get_origin(member) is list for member in field_types(field))


def split_list(text: str, separator: str | None) -> Any:
    """A list setting's variable: a JSON list, or values split at ``separator`` (None: commas,
    blanks around them dropped)."""
    text = text.strip()
    if text.startswith("["):
        return json.loads(text)
    if separator is not None:
        return [part for part in text.split(separator) if part]
    return [part.strip() for part in text.split(",") if part.strip()]


class Settings(BaseSettings):
    # Variables are not JSON-decoded by pydantic-settings: a list's is split by ``_split_lists``.
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore", enable_decoding=False)

    host: Annotated[str, Option("-H", "--host")] = Field("127.0.0.1", description="bind address")
    port: Annotated[int, Option("-p", "--port")] = Field(2468, description="port")
    token: Annotated[str | None, Option("-t", "--token")] = Field(
        None,
        description="require `Authorization: Bearer <token>` (or `Token`, or Basic with the token as password) on "
        "`/v1` and `/metrics`, except `GET /v1/health`",
    )
    no_token: Annotated[bool, Option("-n", "--no-token")] = Field(
        False, description="accepted for compatibility; auth is on exactly when a token is set"
    )

    cors_allow_origin: Annotated[list[str], Option("-O", "--cors-allow-origin")] = Field(
        default_factory=list,
        description="allowed origin, repeatable; `*` is refused at start (list each origin), as legacy",
    )
    cors_allow_method: Annotated[list[str], Option("-M", "--cors-allow-method", default="any")] = Field(
        default_factory=list, description="allowed method, repeatable"
    )
    cors_allow_header: Annotated[
        list[str], Option("-A", "--cors-allow-header", default="any (`*,authorization` when `-O` is given)")
    ] = Field(default_factory=list, description="allowed header, repeatable")
    cors_allow_credentials: Annotated[bool, Option("-C", "--cors-allow-credentials")] = Field(
        False, description="allow credentials; needs explicit methods and headers"
    )
    allowed_hosts: list[str] = Field(
        default_factory=list,
        description="without a token, `Host` names served besides loopback names and the bound address (`*`: any); "
        "other hosts get 403, as do state-changing requests from another site (below)",
    )

    agents_file: Annotated[Path | None, Option("--agents-file")] = Field(
        None, description="TOML file of extra ACP agents (below)"
    )
    # Unset: parallel servers never collide and each run starts with no sessions (see cache_dir()).
    data_dir: Annotated[Path | None, Option("--data-dir", default="private per run")] = Field(
        None,
        description="where events (and agent installs) are kept; unset: a private directory per run, removed at "
        "exit (below)",
    )

    acp_registry_url: str = Field(
        "https://cdn.agentclientprotocol.com/registry/v1/latest/registry.json",
        description="the ACP registry's catalog (`registry.json`), fetched in the background when first needed (the "
        "agents list, a create naming an agent not listed yet), then hourly; its agents are listed beside the "
        "legacy ids (below); empty: the snapshot shipped with the package",
    )
    registry_allow_http: bool = Field(
        False,
        description="allow plain-http ACP registry catalogs and archive downloads, and redirects to them (refused by "
        "default: a catalog says what runs)",
    )
    install_timeout: float = Field(
        600.0, description="seconds one agent install (`npm install` of its ACP adapter) may take (0: no limit)"
    )
    node_on_demand: bool = Field(
        True,
        description="when npm is not on PATH, or an adapter's `engines.node` wants a newer Node.js than the system's, "
        "the agent install brings the bridge's own (24 LTS, with pip, into the cache dir), used for the agents that "
        "need it; `0`: never (the install then fails naming what it needs)",
    )

    agent_start_timeout: float = Field(
        30.0, description="seconds an agent has for `initialize` and `session/new` before create answers 504"
    )
    agent_kill_grace: float = Field(
        1.0, description="seconds between SIGTERM and SIGKILL when an agent's process group is stopped"
    )
    cancel_grace: float = Field(
        0.5, description="seconds a terminate waits for the agent to answer `session/cancel` before stopping it"
    )
    session_close_timeout: float = Field(
        2.0,
        description="seconds a terminate waits for the agent to answer `session/close` (sent when the agent offers "
        "it; a late one is withdrawn with `$/cancel_request`) before stopping it (0: not sent)",
    )
    hitl_timeout: float = Field(
        0.0, description="seconds a permission request or question waits for a reply before it is denied (0: off)"
    )
    stderr_line_limit: int = Field(
        4096, description="bytes kept of each line an agent writes to stderr (the rest is cut)"
    )
    agent_line_limit: int = Field(
        64 * 1024 * 1024,
        description="longest agent stdout line (one JSON-RPC message), bytes; a longer one is cut and recorded as "
        "`agent.unparsed`, never held whole",
    )

    max_sessions: int = Field(
        32,
        description="live sessions (each an agent process) at most; one more is refused with 429 `Too Many Sessions` "
        "(below; 0: no limit)",
    )

    body_limit: int = Field(
        2 * 1024 * 1024, description="largest request body (file writes and `upload-batch` included), bytes, as legacy"
    )
    upload_unpacked_limit: int = Field(
        1024 * 1024 * 1024,
        description="most bytes one `upload-batch` archive may unpack to (sparse members count whole)",
    )

    fs_roots: Annotated[list[str], Option("--fs-root", separator=os.pathsep)] = Field(
        default_factory=list,
        description="confine `/v1/fs` and the agents' file access to these directories (symlinks resolved), "
        "repeatable; none: no confinement, as legacy (below)",
    )
    event_tail: int = Field(
        4096, description="newest events per running session kept in memory (an ended session keeps none)"
    )
    event_tail_bytes: int = Field(4 * 1024 * 1024, description="... and at most this many bytes of them")
    event_backlog_bytes: int = Field(
        256 * 1024 * 1024,
        description="most bytes of events waiting for a disk that cannot write; beyond, new events are dropped and "
        "counted in an `error` event (below)",
    )
    database_url: Annotated[str | None, Option("--database-url")] = Field(
        None,
        description="a PostgreSQL database (`postgresql://user@host/db`; the password from libpq's `PGPASSFILE`, "
        "`~/.pgpass` or `PGPASSWORD`, never on the command line) as the event store instead of SQLite in the data "
        "dir; bridges on one database are a fleet: any bridge serves any session (below)",
    )
    advertise_url: Annotated[str | None, Option("--advertise-url")] = Field(
        None,
        description="where the other bridges of the fleet reach this one (`http://host:port`); named in listings, "
        "requests for the sessions it runs are forwarded there (below)",
    )
    lease_seconds: float = Field(
        10.0,
        description="seconds a bridge's hold on a session it runs lasts unrenewed (renewed every third of it); after "
        "a crash another bridge takes the session over at its next message once it passed",
    )
    retention_days: float = Field(
        0.0, description="ended sessions not updated for this many days are deleted, at start and daily (0: off)"
    )
    attachment_limit: int = Field(
        20 * 1024 * 1024, description="largest image attachment the bridge reads to send inline, bytes"
    )

    max_connections: int = Field(
        0,
        description="open connections at most; at the cap a new one makes room by closing the one whose reader "
        "has taken nothing longest (for 0.25 s), else the one idle longest (for 1 s); while there is none such, it "
        "waits, unread, until there is or one closes, 5 s at most, then is answered 503; with a quarter of the cap "
        "(at least 16) waiting, one more is reset at once (0: half the open-file limit, at most 10,000; the soft "
        "limit is raised to the hard one at start)",
    )
    header_timeout: float = Field(
        15.0,
        description="seconds a connection has for a complete request head (from its start, or a later request's "
        "first byte)",
    )
    body_timeout: float = Field(
        30.0, description="seconds a request body may stop arriving before the connection is closed"
    )
    write_timeout: float = Field(
        30.0,
        description="seconds a response's writes may make no progress (its reader takes nothing) before the "
        "connection is closed, unsent data dropped",
    )
    pipeline_limit: int = Field(
        4,
        description="pipelined requests that may wait behind a running one per connection; what the client sends "
        "beyond them is read and parsed only as answers go out",
    )

    sse_keepalive: float = Field(15.0, description="seconds between SSE keep-alive comments (0: none)")
    sse_send_timeout: float = Field(30.0, description="seconds an SSE reader may accept nothing before it is dropped")

    mock_pacing_ms: int = Field(0, description="milliseconds between the mock agent's steps (legacy: 200)")

    transcript_dir: Path | None = Field(
        None,
        description="write each session's raw ACP traffic (both ways) to `<dir>/<session id>.jsonl`, one "
        '`{"t", "dir", "msg"}` object per line (below)',
    )

    docs: bool = Field(
        False,
        description="serve Swagger UI at `/docs`, its scripts from the `swagger-ui-bundle` package (the `docs` extra: "
        "`pip install -e '.[docs]'` in a clone), nothing from elsewhere",
    )

    log_level: Annotated[str, Option("--log-level")] = Field(
        "warning",
        description="log level (`critical`, `error`, `warning`, `info`, `debug`); `info` also logs agent "
        "start/stop/exit and install progress",
    )
    log_format: Literal["text", "json"] = Field(
        "text",
        description="`json`: one JSON object per log line (`time`, `level`, `logger`, `message`, `session_id` and "
        "`trace_id` where known)",
    )

    webhook_url: list[str] = Field(
        default_factory=list, description="POST each selected event, signed, to these URLs (below)"
    )
    webhook_secret: str | None = Field(
        None, description="the signing secret, `whsec_<base64>` (Standard Webhooks); needed with a URL"
    )
    webhook_events: list[str] = Field(
        default_factory=lambda: list(WEBHOOK_EVENTS),
        description="event types sent (the agent's exit is an `error` with code `process_exit` and a `session.ended`)",
    )
    webhook_retry_delay: float = Field(
        1.0,
        description="seconds before the first retry of a failed delivery, doubled for each next one (less up to 20% "
        "jitter)",
    )
    webhook_retry_max_delay: float = Field(300.0, description="longest wait between two tries, seconds")
    webhook_attempts: int = Field(10, description="tries of one delivery before it is recorded as failed")
    webhook_timeout: float = Field(
        10.0, description="seconds one whole try may take (connecting, sending, the answer's head and body)"
    )
    webhook_queue_limit: int = Field(
        10_000, description="deliveries waiting per URL; beyond, new ones for that URL are dropped (counted and logged)"
    )
    webhook_failed_retention_days: float = Field(
        7.0, description="days a delivery given up stays in the outbox (for an operator), then it is deleted (0: kept)"
    )

    @field_validator("*", mode="before")
    @classmethod
    def _split_lists(cls, value: Any, info: ValidationInfo) -> Any:
        """A list setting's variable (a string) becomes its list; flags give lists already."""
        if not isinstance(value, str) or info.field_name is None:
            return value
        field = cls.model_fields[info.field_name]
        return split_list(value, option(field).separator) if is_list(field) else value

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
