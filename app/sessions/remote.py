"""A session another bridge of the fleet runs, as this bridge sees it (``fleet``)."""

from __future__ import annotations

from typing import Any, NoReturn

from app.acp.process import ExitInfo
from app.errors import StreamError
from app.events.log import SessionEventLog

from . import saved as saved_record
from .phases import EndReason, Phase, ended_error
from .saved import SavedSession

# SessionInfo ``_meta`` in a fleet: which bridge runs the session (its advertised address).
BRIDGE_META = "sandbox-agent/bridge"


class RemoteSession:
    """Listed here and its events served here: its ``log`` follows the runner's commits in the
    database (``Fleet``) and reads them from there. Requests for its agent, and for its files, go
    to ``runner`` (``api/forward.py``). It has no agent and no lifecycle of its own: whether and
    how it ended is what its runner saved last (``follow``). When the runner dies,
    ``Fleet.take_over`` builds a ``Session`` on the same ``log``, so its readers carry on."""

    def __init__(self, saved: SavedSession, log: SessionEventLog, runner: str | None) -> None:
        self.id = saved.session_id
        self.config = saved.config
        self.fs_root = saved.fs_root  # its files are where it runs; this one when it ended here
        self.created_at_ms = saved.created_at_ms
        self.log = log
        log.native_session_id = saved.native_session_id
        # The runner's advertised address, and the SessionInfo it saved last.
        self.runner = runner
        self.remote_info = saved.info
        self.ended = saved.ended
        self.end_reason: EndReason = saved.end_reason
        self.exit_info: ExitInfo | None = saved.exit_info

    def follow(self, record: dict[str, Any], runner: str | None) -> None:
        """What the runner saved last (``record``). One saved as its bridge stopped is not ended:
        it goes on elsewhere."""
        self.remote_info = record["info"]
        self.runner = runner
        self.ended = record.get("endReason") is not None
        self.end_reason = saved_record.end_reason(record)
        self.exit_info = saved_record.exit_info(record)

    @property
    def phase(self) -> Phase:
        """As counted in the metrics: ended, or live elsewhere (no agent here)."""
        return Phase.ENDED if self.ended else Phase.SUSPENDED

    def info(self) -> dict[str, Any]:
        remote = {**self.remote_info, "eventCount": self.log.count, "ended": self.ended}
        remote["updatedAt"] = max(int(remote.get("updatedAt") or 0), self.log.updated_ns // 1_000_000)
        remote["_meta"] = {**(remote.get("_meta") or {}), BRIDGE_META: {"url": self.runner}}
        return remote

    # ---- requests for the agent that stay here (``forward`` sends the others to the runner) ------
    def check_accepting(self) -> NoReturn:
        """It ended (on its runner): refused as an ended session is."""
        if self.ended:
            raise ended_error(self.config.agent, self.end_reason, self.exit_info, None)
        raise StreamError(f"session {self.id} is run by the bridge at {self.runner}")

    async def terminate(self) -> None:
        """Legacy terminate of an ended session: nothing more to do."""
        if not self.ended:
            self.check_accepting()
