"""What a session's parts need of the session that holds them: ``SessionHost``.

The parts (client services, file service, permission and question requests and their books,
terminals, recovery, turns) take their session as a ``SessionHost``, not as a ``Session``: they
import this module, never ``session.py``, and each is tested alone on a small fake session. A part
that keeps state of its own in the session names that one member in a protocol of its own that
extends this one (``PermissionHost``: ``permissions``; ``QuestionHost``; ``TerminalHost``; the
client services' ``ServedSession``; ``RecoveryHost``; ``TurnHost``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    # Named only: this module is loaded at start (by ``client_services``), before any session
    # needs the translator.
    from app.acp.orphans import ProcessRegistry
    from app.agents.registry import AgentSpec
    from app.events.log import SessionEventLog
    from app.events.model import EventDraft
    from app.settings import Settings
    from app.translate.session_translator import SessionState, SessionTranslator

    from .config import SessionConfig
    from .turns import TurnQueue


class SessionHost(Protocol):
    @property
    def id(self) -> str: ...
    @property
    def spec(self) -> AgentSpec: ...
    @property
    def config(self) -> SessionConfig: ...
    @property
    def settings(self) -> Settings: ...
    @property
    def cwd(self) -> str: ...  # the agent's working directory
    @property
    def processes(self) -> ProcessRegistry | None: ...  # where process groups are recorded
    @property
    def log(self) -> SessionEventLog: ...
    @property
    def translator(self) -> SessionTranslator: ...  # ACP traffic in, event drafts out
    @property
    def state(self) -> SessionState: ...  # what SessionInfo shows (kept when an ended session sheds its translator)
    @property
    def turns(self) -> TurnQueue: ...
    @property
    def ended(self) -> bool: ...  # ending or ended: takes no more messages
    @property
    def shutting_down(self) -> bool: ...  # the server stops: nothing more is recorded

    def record(self, drafts: list[EventDraft]) -> None:
        """Append to the log now (never awaits, so wire order is kept)."""

    def record_one(self, event_type: str, data: dict[str, Any], *, synthetic: bool, raw: Any = None) -> None: ...

    def cancel_one(self, key: Any) -> bool:
        """Answer the request waiting under the JSON-RPC id ``key`` with its cancel result; False
        when none waits."""

    def check_accepting(self) -> None:
        """Raise the legacy error of an ended session."""
