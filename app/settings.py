"""Server settings. Every field reads an ``ACP_BRIDGE_<NAME>`` environment variable; CLI flags win."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="ACP_BRIDGE_", extra="ignore")

    host: str = "127.0.0.1"
    port: int = 2468
    token: str | None = None
    # Legacy flag: accepted for compatibility; auth is off exactly when no token is set.
    no_token: bool = False

    cors_allow_origin: list[str] = Field(default_factory=list)
    cors_allow_method: list[str] = Field(default_factory=list)
    cors_allow_header: list[str] = Field(default_factory=list)
    cors_allow_credentials: bool = False

    agents_file: Path | None = None
    data_dir: Path = Path("~/.local/share/acp-rest-bridge")

    # Seconds an agent install (`npm install` of its ACP adapter) may take (0: no limit).
    install_timeout: float = 600.0

    # Seconds allowed for `initialize` + `session/new` before create answers 504.
    agent_start_timeout: float = 30.0
    # Seconds between SIGTERM and SIGKILL when an agent's process group is stopped.
    agent_kill_grace: float = 1.0
    # Seconds a terminate waits for the agent to answer `session/cancel` before stopping it.
    cancel_grace: float = 0.5
    # Seconds a permission request or question waits for a reply before it is denied (0: no limit).
    hitl_timeout: float = 0.0
    # Bytes of agent stderr kept per stderr line (longer lines are cut).
    stderr_line_limit: int = 4096
    # Longest agent stdout line (one JSON-RPC message), bytes; a longer one is cut and reported as
    # `agent.unparsed`, never held whole.
    agent_line_limit: int = 64 * 1024 * 1024

    # Largest accepted request body (fs PUT and upload-batch included), as legacy: 2 MiB.
    body_limit: int = 2 * 1024 * 1024
    # Most bytes one upload-batch archive may unpack to (sparse members count at their full size).
    upload_unpacked_limit: int = 1024 * 1024 * 1024

    # Directories /v1/fs and the agents' fs/* requests are confined to (symlinks resolved); empty:
    # no confinement, as legacy. Env: a JSON list or `:`-separated paths.
    fs_roots: Annotated[list[str], NoDecode] = Field(default_factory=list)
    # Newest events of each session kept in memory (besides those not yet written to disk).
    event_tail: int = 4096
    # Largest file read for a message attachment (an image sent inline to the agent), bytes.
    attachment_limit: int = 20 * 1024 * 1024

    # SSE comment keep-alive interval, seconds (0 disables).
    sse_keepalive: float = 15.0
    # A reader that accepts no data for this long is dropped.
    sse_send_timeout: float = 30.0

    # Milliseconds between the mock agent's scripted steps (legacy paced at 200).
    mock_pacing_ms: int = 0

    # When set, every session's raw ACP traffic (both directions) is written to
    # `<transcript_dir>/<session id>.jsonl`, one `{"t", "dir", "msg"}` object per line.
    transcript_dir: Path | None = None

    log_level: str = "warning"

    @field_validator("fs_roots", mode="before")
    @classmethod
    def _split_roots(cls, value: Any) -> Any:
        if isinstance(value, str):
            text = value.strip()
            if text.startswith("["):
                return json.loads(text)
            return [part for part in text.split(os.pathsep) if part]
        return value

    def resolved_data_dir(self) -> Path:
        return self.data_dir.expanduser().resolve()
