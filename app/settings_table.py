"""README's table of server options, made from ``Settings`` itself (every field is a row, with its
env var and default), so the table cannot drift: ``acp-rest-bridge settings`` prints it and a test
checks that README.md holds exactly that."""

from __future__ import annotations

from typing import Any

from pydantic_core import PydanticUndefined

from app.settings import Settings

# The flags of `acp-rest-bridge server`, by setting (app.main's parser has exactly these).
FLAGS: dict[str, tuple[str, ...]] = {
    "host": ("-H", "--host"),
    "port": ("-p", "--port"),
    "token": ("-t", "--token"),
    "no_token": ("-n", "--no-token"),
    "cors_allow_origin": ("-O", "--cors-allow-origin"),
    "cors_allow_method": ("-M", "--cors-allow-method"),
    "cors_allow_header": ("-A", "--cors-allow-header"),
    "cors_allow_credentials": ("-C", "--cors-allow-credentials"),
    "agents_file": ("--agents-file",),
    "data_dir": ("--data-dir",),
    "fs_roots": ("--fs-root",),
    "database_url": ("--database-url",),
    "advertise_url": ("--advertise-url",),
    "log_level": ("--log-level",),
}

MEANING: dict[str, str] = {
    "host": "bind address",
    "port": "port",
    "token": "require `Authorization: Bearer <token>` (or `Token`, or Basic with the token as password) on "
    "`/v1` and `/metrics`, except `GET /v1/health`",
    "no_token": "accepted for compatibility; auth is on exactly when a token is set",
    "cors_allow_origin": "allowed origin, repeatable; `*` is refused at start (list each origin), as legacy",
    "cors_allow_method": "allowed method, repeatable",
    "cors_allow_header": "allowed header, repeatable",
    "cors_allow_credentials": "needs explicit methods and headers",
    "allowed_hosts": "without a token, `Host` names served besides loopback names and the bound address (`*`: "
    "any); other hosts get 403, as do state-changing requests from another site (below)",
    "agents_file": "TOML file of extra ACP agents (below)",
    "data_dir": "where events (and agent installs) are kept; unset: a private directory per run, removed at exit "
    "(below)",
    "acp_registry_url": "the ACP registry's catalog (`registry.json`), fetched at start and hourly; its agents are "
    "listed beside the legacy ids (below); empty: the snapshot shipped with the package",
    "registry_allow_http": "allow plain-http ACP registry catalogs and archive downloads, and redirects to them "
    "(refused by default: a catalog says what runs)",
    "install_timeout": "seconds one agent install (`npm install`) may take (0: no limit)",
    "node_on_demand": "when npm is not on PATH, or an adapter's `engines.node` wants a newer Node.js than the "
    "system's, the agent install brings the bridge's own (24 LTS, with pip, into the cache dir), used for the agents "
    "that need it; `0`: never (the install then fails naming what it needs)",
    "agent_start_timeout": "seconds an agent has for `initialize` and `session/new` before create answers 504",
    "agent_kill_grace": "seconds between SIGTERM and SIGKILL when an agent's process group is stopped",
    "cancel_grace": "seconds a terminate waits for the agent to answer `session/cancel`",
    "session_close_timeout": "seconds a terminate waits for the agent to answer `session/close` (sent when the agent "
    "offers it; a late one is withdrawn with `$/cancel_request`) before stopping it (0: not sent)",
    "hitl_timeout": "seconds a permission request or question waits for a reply before it is denied (0: off)",
    "stderr_line_limit": "bytes of an agent's stderr line that are kept",
    "agent_line_limit": "longest agent stdout line; a longer one is cut and recorded as `agent.unparsed`",
    "max_sessions": "live sessions (each an agent process) at most; one more is refused with 429 `Too Many "
    "Sessions` (below; 0: no limit)",
    "body_limit": "largest request body, bytes",
    "upload_unpacked_limit": "most bytes one `upload-batch` archive may unpack to (sparse members count whole)",
    "fs_roots": "confine file access to these directories, repeatable (below)",
    "event_tail": "newest events per running session kept in memory (an ended session keeps none)",
    "event_tail_bytes": "... and at most this many bytes of them",
    "event_backlog_bytes": "most bytes of events waiting for a disk that cannot write; beyond, new events are dropped "
    "and counted in an `error` event (below)",
    "database_url": "a PostgreSQL database (`postgresql://user@host/db`; the password from libpq's `PGPASSFILE`, "
    "`~/.pgpass` or `PGPASSWORD`, never on the command line) as the event store instead of SQLite in the data dir; "
    "bridges on one database are a fleet: any bridge serves any session (below)",
    "advertise_url": "where the other bridges of the fleet reach this one (`http://host:port`); named in listings, "
    "requests for the sessions it runs are forwarded there (below)",
    "lease_seconds": "seconds a bridge's hold on a session it runs lasts unrenewed; after a crash another bridge "
    "takes the session over at its next message once it passed",
    "retention_days": "ended sessions not updated for this many days are deleted, at start and daily (0: off)",
    "attachment_limit": "largest image attachment the bridge reads to send inline, bytes",
    "max_connections": "open connections beyond which a new one is refused at once, unless one idle for 1 s can be "
    "closed for it (0: half the open-file limit, at most 10,000; the soft limit is raised to the hard one at start)",
    "header_timeout": "seconds a connection has for a complete request head (from its start, or a later request's "
    "first byte)",
    "body_timeout": "seconds a request body may stop arriving before the connection is closed",
    "write_timeout": "seconds a response's writes may make no progress (its reader takes nothing) before the "
    "connection is closed, unsent data dropped",
    "pipeline_limit": "pipelined requests that may wait behind a running one per connection; what the client sends "
    "beyond them is read and parsed only as answers go out",
    "sse_keepalive": "seconds between SSE keep-alive comments (0: none)",
    "sse_send_timeout": "an SSE reader that accepts nothing this long is dropped",
    "mock_pacing_ms": "pause between the mock agent's steps (legacy: 200)",
    "transcript_dir": "write each session's raw ACP traffic to `<dir>/<session id>.jsonl` (below)",
    "docs": "serve Swagger UI at `/docs`, its scripts from the `swagger-ui-bundle` package (`pip install "
    "'acp-rest-bridge[docs]'`), nothing from elsewhere",
    "log_level": "log level (`critical`, `error`, `warning`, `info`, `debug`); `info` also logs agent start/stop/exit "
    "and install progress",
    "log_format": "`json`: one JSON object per log line (`time`, `level`, `logger`, `message`, `session_id` and "
    "`trace_id` where known)",
    "webhook_url": "POST each selected event, signed, to these URLs (below)",
    "webhook_secret": "the signing secret, `whsec_<base64>` (Standard Webhooks); needed with a URL",
    "webhook_events": "event types sent (the agent's exit is an `error` with code `process_exit` and a "
    "`session.ended`)",
    "webhook_retry_delay": "seconds before the first retry of a failed delivery, doubled for each next one "
    "(less up to 20% jitter)",
    "webhook_retry_max_delay": "longest wait between two tries, seconds",
    "webhook_attempts": "tries of one delivery before it is recorded as failed",
    "webhook_timeout": "seconds one whole try may take (connecting, sending, the answer's head and body)",
    "webhook_queue_limit": "deliveries waiting per URL; beyond, new ones for that URL are dropped (counted and logged)",
    "webhook_failed_retention_days": "days a delivery given up stays in the outbox (for an operator), then it is "
    "deleted (0: kept)",
}

# How a list setting is written in its environment variable.
LIST_ENV = {"fs_roots": "JSON list or `:`-separated"}
DEFAULT_TEXT = {
    "data_dir": "private per run",
    "token": "none",
    "cors_allow_method": "any",
    "cors_allow_header": "any (`*,authorization` when `-O` is given)",
    "webhook_events": "`session.started,session.ended,turn.ended,permission.requested,question.requested,error`",
}


def _default(name: str, field: Any) -> str:
    if name in DEFAULT_TEXT:
        return DEFAULT_TEXT[name]
    value = field.default
    if value is PydanticUndefined and field.default_factory is not None:
        value = field.default_factory()
    if value is None or value == []:
        return "none"
    if value is False:
        return "off"
    if value is True:
        return "on"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"`{value}`"


def render() -> str:
    """The Markdown table, one row per setting."""
    prefix = Settings.model_config.get("env_prefix", "")
    rows = ["| flag | env | default | meaning |", "|---|---|---|---|"]
    for name, field in Settings.model_fields.items():
        flags = ", ".join(f"`{flag}`" for flag in FLAGS.get(name, ()))
        env = f"`{prefix}{name.upper()}`"
        if name in LIST_ENV:
            env += f" ({LIST_ENV[name]})"
        elif field.annotation is not None and "list" in str(field.annotation):
            env += " (JSON list or comma-separated)"
        rows.append(f"| {flags} | {env} | {_default(name, field)} | {MEANING.get(name, '')} |")
    return "\n".join(rows) + "\n"
