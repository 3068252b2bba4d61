"""A session as its parts see it, for testing each part alone: what ``app/sessions/host.py``'s
``SessionHost`` and each part's own protocol ask for, with the real state the parts keep (the
translator, an event log on a memory store, the turn queue, the request books, the terminals) and
no agent process, no ``Session``. mypy checks that it is what each part asks for wherever a test
hands it to one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from app.acp.process import ExitInfo
from app.agents.registry import AgentSpec
from app.events.log import SessionEventLog
from app.events.model import SESSION_ENDED, EventDraft
from app.events.store import MemoryEventStore
from app.metrics import Metrics
from app.sessions import listing
from app.sessions.agent_link import AgentLink
from app.sessions.client_services import ClientServices
from app.sessions.config import SessionConfig
from app.sessions.permission_requests import Permissions
from app.sessions.phases import EndReason, ended_error
from app.sessions.question_requests import Questions
from app.sessions.recovery import Recovery
from app.sessions.request_book import HumanRequest, cancel
from app.sessions.terminals import SessionTerminals
from app.sessions.turns import Turn, TurnQueue
from app.settings import Settings
from app.tracing import Tracing
from app.translate.session_translator import SessionTranslator


class FakeSession:
    """Records into a real log; its lifecycle is two flags (``ended``, ``suspended``) that the
    steps a part may take (``restored_as_ended``, ``end_suspended``, ``agent_restarted``) set."""

    def __init__(
        self,
        tmp: Path,
        *,
        spec: AgentSpec | None = None,
        permission_mode: str = "default",
        store: MemoryEventStore | None = None,
        **settings: Any,
    ) -> None:
        self.id = "s1"
        self.spec = spec or AgentSpec("probe", None)
        self.config = SessionConfig(
            agent=self.spec.id, agent_mode="build", permission_mode=permission_mode, model=None, variant=None
        )
        self.settings = Settings(data_dir=tmp / "data", **settings)
        self.cwd = self.fs_root = str(tmp)
        self.processes = None
        self.store = store or MemoryEventStore()
        self.log = SessionEventLog(self.id, self.store)
        self.terminals = SessionTerminals()
        self.translator = SessionTranslator(terminal_output=self.terminals.output_of)
        self.state = self.translator.state
        self.begun: list[Turn] = []
        self.turns = TurnQueue(self.id, self.begun.append, self._run)
        self.pending: dict[Any, HumanRequest[Any]] = {}
        self.permissions = Permissions(self.pending)
        self.questions = Questions(self.pending)
        self.services = ClientServices()
        self.agent = AgentLink(self.id, self.spec, self.settings)
        self.metrics: Metrics | None = None
        self.tracing: Tracing | None = None
        self.native_session_id: str | None = "native-1"
        self.created_at_ms = 1_700_000_000_000
        self.runner: str | None = None
        self.exit_info: ExitInfo | None = None
        # Lifecycle.
        self.ended = False
        self.suspended = False
        self.end_reason: EndReason | None = None
        self.shutting_down = False
        self.stopped_by_shutdown = False
        self.recovery: Recovery | None = None
        self.replaying = False
        self.replayed = 0
        self.saved: list[dict[str, Any]] = []
        self.restarted = 0

    async def _run(self, turn: Turn) -> None:
        pass

    # ---- SessionHost -------------------------------------------------------------------------
    def record(self, drafts: list[EventDraft]) -> None:
        for draft in drafts:
            self.log.append(draft)

    def record_one(self, event_type: str, data: dict[str, Any], *, synthetic: bool, raw: Any = None) -> None:
        self.record([EventDraft(event_type, data, synthetic=synthetic, raw=raw)])

    def cancel_one(self, key: Any) -> bool:
        return cancel(self, self.pending, key)

    def cancel_pending(self) -> None:
        for key in list(self.pending):
            self.cancel_one(key)

    def check_accepting(self) -> None:
        if self.ended:
            raise ended_error(self.spec.id, self.end_reason, self.exit_info, None)

    # ---- RecoveryHost ------------------------------------------------------------------------
    def save(self) -> None:
        self.saved.append(listing.saved_record(self))

    def restored_as_ended(self, reason: EndReason) -> None:
        self.ended, self.suspended, self.end_reason = True, False, reason

    def end_suspended(self, message: str) -> None:
        self.restored_as_ended("error")
        self.record_one(
            SESSION_ENDED, {"reason": "error", "terminated_by": "daemon", "message": message}, synthetic=True
        )

    def agent_restarted(self) -> None:
        self.suspended = False
        self.restarted += 1

    # The agent link's observer (recovery starts the agent again with the session observing it).
    def on_incoming(self, message: dict[str, Any]) -> None:
        pass

    def on_unparsed_line(self, line: bytes, error: str) -> None:
        pass

    def on_outgoing(self, message: dict[str, Any]) -> None:
        pass

    async def handle_request(self, method: str, params: Any, request_id: Any) -> Any:
        return await self.services.handle(self, method, params, request_id)

    # ---- for the tests -----------------------------------------------------------------------
    def events(self) -> list[tuple[str, dict[str, Any]]]:
        """(type, data) of every event recorded, oldest first."""
        return [(e.type, json.loads(e.json)["data"]) for e in self.store.read(self.id, 0, None)]

    def types(self) -> list[str]:
        return [event_type for event_type, _ in self.events()]
