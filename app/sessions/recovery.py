"""Sessions that were live when the bridge stopped (a crash, SIGTERM, Ctrl-C) go on after a restart.

At start-up (``settle``), such a session is read back from the end of its log: what the old agent
left open is closed in the log (pending permissions and questions resolved with the legacy reject
statuses, unfinished items failed, the running turn ended) and a ``status`` item says that the
bridge stopped. The session is listed as not ended; its SessionInfo carries
``_meta["sandbox-agent/resume"]`` ``{"state": "suspended", "cause": "crash" | "shutdown"}``.

The next message (``revive``) starts the agent again and asks it to continue the same ACP session.
An agent that offers ``session/list`` is asked first whether it still knows the session (the status
item's ``listed``); one it no longer lists gets ``session/new`` at once. Otherwise, in this order:
``session/resume`` (capability ``sessionCapabilities.resume``; no replay), then
``session/load`` (capability ``loadSession``; the history the agent replays is not logged again),
then ``session/new``, whose ``status`` item says that the agent's memory of the conversation was
lost. A ``status`` item records which one happened in its json part's
``_meta["sandbox-agent/resume"]``, as does SessionInfo. An agent that cannot be started answers the
message with the start-up error (404 ``agent_not_installed``, 500, 502, as at create) and the
session ends with one ``session.ended`` (error) saying why.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, cast

from app.acp.connection import AgentObserver
from app.acp.sdk import RequestError
from app.acp.shapes import NewSessionResult
from app.errors import BridgeError, StreamError
from app.events.model import (
    ITEM_COMPLETED,
    ITEM_STARTED,
    PERMISSION_REQUESTED,
    PERMISSION_RESOLVED,
    QUESTION_REQUESTED,
    QUESTION_RESOLVED,
    SESSION_ENDED,
    TURN_ENDED,
    TURN_STARTED,
    EventDraft,
)
from app.translate.items import make_item

from .agent_link import AgentLink, NewSession, new_session_params
from .client_services import ClientServices
from .host import SessionHost
from .permission_requests import Permissions
from .phases import EndReason
from .question_requests import Questions
from .terminals import SessionTerminals

if TYPE_CHECKING:
    from app.events.store import EventStore

log = logging.getLogger("acp_rest_bridge.sessions")

META = "sandbox-agent/resume"

CRASH = "crash"
SHUTDOWN = "shutdown"
PAGE = 2048


@dataclass(slots=True)
class Recovery:
    """A restored session that was live when the bridge stopped."""

    cause: str  # CRASH or SHUTDOWN
    settled: bool = False  # the log already says that the bridge stopped
    suspended: bool = True  # no agent process yet
    outcome: dict[str, Any] | None = None
    task: asyncio.Task[None] | None = field(default=None, repr=False)
    # Permission and question ids used before the stop (they stay unique in the session).
    permission_ids: list[str] = field(default_factory=list)
    question_ids: list[str] = field(default_factory=list)
    # In a fleet: the advertised address of the bridge that takes the session over (``fleet``),
    # and of the one that ran it until it died.
    bridge: str | None = None
    previous: str | None = None

    def info(self) -> dict[str, Any]:
        if self.suspended:
            return {"state": "suspended", "cause": self.cause}
        return {"state": "restarted", "cause": self.cause, **(self.outcome or {})}


class RecoveryHost(SessionHost, AgentObserver, Protocol):
    """What recovery uses of a session besides the core: its recovery state, the parts whose
    numbering and requests go on, the agent link it starts again (the session observes it), and
    the lifecycle steps of a restored session."""

    recovery: Recovery | None
    native_session_id: str | None
    replaying: bool  # the agent replays its history (session/load): not logged again
    replayed: int

    @property
    def agent(self) -> AgentLink: ...
    @property
    def services(self) -> ClientServices: ...
    @property
    def permissions(self) -> Permissions: ...
    @property
    def questions(self) -> Questions: ...
    @property
    def terminals(self) -> SessionTerminals: ...
    @property
    def end_reason(self) -> EndReason | None: ...
    @property
    def stopped_by_shutdown(self) -> bool: ...
    @property
    def suspended(self) -> bool: ...

    def save(self) -> None: ...
    def restored_as_ended(self, reason: EndReason) -> None: ...
    def end_suspended(self, message: str) -> None: ...
    def agent_restarted(self) -> None: ...


# ---- what the session record keeps ------------------------------------------------------------------
def record_fields(session: RecoveryHost) -> dict[str, Any]:
    """Added to the session record: how a live session was stopped, and where recovery stands."""
    fields: dict[str, Any] = {}
    state = session.recovery
    if state is not None:
        fields["recovery"] = {"cause": state.cause, "settled": state.settled, "suspended": state.suspended}
    agent_cost = session.state.totals.agent_cost
    if agent_cost:  # the agent's running cost as last seen: its next turn's cost is what it adds
        fields["agentCost"] = dict(agent_cost)
    if session.end_reason is None:
        if session.stopped_by_shutdown:
            fields["stopped"] = SHUTDOWN
        # Permission and question ids used so far: those asked after a restart must differ.
        if session.permissions.used:
            fields["permissionIds"] = sorted(session.permissions.used)
        if session.questions.used:
            fields["questionIds"] = sorted(session.questions.used)
    return fields


def adopt(record: dict[str, Any]) -> Recovery | None:
    """For a restored record: the recovery state of a session that was live when the server stopped;
    None for one that ended (it stays ended)."""
    if record.get("endReason") is not None:
        return None
    kept = record.get("recovery")
    previous: dict[str, Any] = kept if isinstance(kept, dict) else {}
    cause = SHUTDOWN if record.get("stopped") == SHUTDOWN else CRASH
    settled = bool(previous.get("suspended") and previous.get("settled"))
    if settled:
        cause = previous.get("cause") or cause  # restarted again before any message: as it was
    state = Recovery(cause=cause, settled=settled)
    for key, ids in (("permissionIds", state.permission_ids), ("questionIds", state.question_ids)):
        if isinstance(record.get(key), list):
            ids.extend(str(value) for value in record[key])
    return state


# ---- reading the end of the log ---------------------------------------------------------------------
_READ = frozenset(
    {
        ITEM_STARTED,
        ITEM_COMPLETED,
        TURN_STARTED,
        TURN_ENDED,
        PERMISSION_REQUESTED,
        PERMISSION_RESOLVED,
        QUESTION_REQUESTED,
        QUESTION_RESOLVED,
        SESSION_ENDED,
    }
)
_ITEM_N = re.compile(r"^itm_(\d+)$")
_TURN_N = re.compile(r"^turn_(\d+)$")
_USER_N = re.compile(r"^user_(\d+)$")


@dataclass(slots=True)
class LogState:
    """What the end of a session's log says about the state the old process left."""

    ended: dict[str, Any] | None = None  # data of a session.ended found at the end
    turns: int = 0
    items: int = 0
    user_messages: int = 0
    open_turn: str | None = None
    open_items: dict[str, dict[str, Any]] = field(default_factory=dict)
    permissions: dict[str, dict[str, Any]] = field(default_factory=dict)
    questions: dict[str, dict[str, Any]] = field(default_factory=dict)
    permission_ids: set[str] = field(default_factory=set)  # ids seen (they stay unique in the session)
    question_ids: set[str] = field(default_factory=set)


def _n(pattern: re.Pattern[str], value: Any) -> int:
    match = pattern.match(value) if isinstance(value, str) else None
    return int(match.group(1)) if match else 0


def _apply(state: LogState, event_type: str, data: dict[str, Any]) -> None:
    """One event, oldest first."""
    if event_type in (ITEM_STARTED, ITEM_COMPLETED):
        found = data.get("item")
        item: dict[str, Any] = found if isinstance(found, dict) else {}
        item_id = item.get("item_id")
        state.items = max(state.items, _n(_ITEM_N, item_id), _n(_ITEM_N, item.get("parent_id")))
        if item.get("role") == "user":
            state.user_messages = max(state.user_messages, _n(_USER_N, item.get("native_item_id")))
        if isinstance(item_id, str):
            if event_type == ITEM_STARTED:
                state.open_items[item_id] = item
            else:
                state.open_items.pop(item_id, None)
    elif event_type == TURN_STARTED:
        state.turns = max(state.turns, _n(_TURN_N, data.get("turn_id")))
        state.open_turn = data.get("turn_id") if isinstance(data.get("turn_id"), str) else None
    elif event_type == TURN_ENDED:
        state.open_turn = None
    elif event_type == PERMISSION_REQUESTED:
        state.permissions[str(data.get("permission_id"))] = data
        state.permission_ids.add(str(data.get("permission_id")))
    elif event_type == PERMISSION_RESOLVED:
        state.permissions.pop(str(data.get("permission_id")), None)
        state.permission_ids.add(str(data.get("permission_id")))
    elif event_type == QUESTION_REQUESTED:
        state.questions[str(data.get("question_id"))] = data
        state.question_ids.add(str(data.get("question_id")))
    elif event_type == QUESTION_RESOLVED:
        state.questions.pop(str(data.get("question_id")), None)
        state.question_ids.add(str(data.get("question_id")))
    elif event_type == SESSION_ENDED:
        state.ended = data


async def read_log_end(store: EventStore, session_id: str, last_sequence: int) -> LogState:
    """Read the log backwards, page by page, until the last turn's start (everything the old process
    can have left open comes after it), the newest item id and the user message count are known."""
    pages: list[list[tuple[str, dict[str, Any]]]] = []
    top = last_sequence + 1
    seen_turn = seen_item = seen_user = False
    while top > 1 and not (seen_turn and seen_item and seen_user):
        after = max(0, top - 1 - PAGE)
        events = await store.read_async(session_id, after, None, top)
        if not events:
            break
        page = []
        for event in events:
            if event.type not in _READ:
                continue  # deltas (most of a long turn) change nothing that is read here
            try:
                data = json.loads(event.json).get("data")
            except (ValueError, AttributeError):
                continue
            if not isinstance(data, dict):
                continue
            page.append((event.type, data))
            if event.type == TURN_STARTED:
                seen_turn = True
            elif event.type in (ITEM_STARTED, ITEM_COMPLETED):
                seen_item = True
                item = data.get("item")
                if isinstance(item, dict) and item.get("role") == "user":
                    seen_user = True
        pages.append(page)
        top = events[0].sequence
    state = LogState()
    for page in reversed(pages):
        for event_type, data in page:
            _apply(state, event_type, data)
    return state


# ---- at start-up ---------------------------------------------------------------------------------------
async def settle(session: RecoveryHost, store: EventStore) -> None:
    """Bring a restored live session to a state that says what happened (see the module doc)."""
    state = session.recovery
    if state is None:
        return
    found = await read_log_end(store, session.id, session.log.last_sequence)
    if found.ended is not None:
        # Its end was logged but its record not updated before the stop: it ended, it stays ended.
        session.recovery = None
        session.restored_as_ended("terminated" if found.ended.get("reason") == "terminated" else "error")
        session.save()
        return
    seed_counters(session, found)
    if not state.settled:
        _remember_the_dead(session, found, state)
        drafts = _close_what_was_open(found)
        drafts.extend(
            _status(session, "stopped", _stopped_text(state.cause), {"state": "suspended", "cause": state.cause})
        )
        session.record(drafts)
        state.settled = True
    session.save()


def seed_counters(session: RecoveryHost, found: LogState) -> None:
    """Continue the turn, item, user message and request numbering of the old process: ids stay
    unique in the session."""
    translator = session.translator
    translator.ids.continue_numbering(found.items)
    translator.prompts = max(translator.prompts, found.turns)
    translator.user_messages = max(translator.user_messages, found.user_messages)
    session.turns.continue_numbering(found.turns)
    state = session.recovery
    session.permissions.used |= found.permission_ids | set(state.permission_ids if state else ())
    session.questions.used |= found.question_ids | set(state.question_ids if state else ())


def _remember_the_dead(session: RecoveryHost, found: LogState, state: Recovery) -> None:
    """A late reply to a request that is closed here says why (not a bare "unknown id")."""
    if state.previous:
        why = f"the session's agent on the bridge at {state.previous}, which stopped"
    else:
        why = "the session's agent when the bridge " + ("was stopped" if state.cause == SHUTDOWN else "stopped")
    session.permissions.died.update(dict.fromkeys(found.permissions, why))
    session.questions.died.update(dict.fromkeys(found.questions, why))


def _close_what_was_open(found: LogState) -> list[EventDraft]:
    out: list[EventDraft] = []
    # The old agent's requests can no longer be answered: resolved as a cancel resolves them.
    for data in found.permissions.values():
        out.append(EventDraft(PERMISSION_RESOLVED, {**data, "status": "reject"}, synthetic=True))
    for data in found.questions.values():
        resolved = {**data, "response": None, "status": "rejected"}
        out.append(EventDraft(QUESTION_RESOLVED, resolved, synthetic=True))
    for item in found.open_items.values():
        out.append(EventDraft(ITEM_COMPLETED, {"item": {**item, "status": "failed"}}, synthetic=True))
    if found.open_turn is not None:
        metadata = {"stopReason": "error", "meta": {META: {"state": "interrupted"}}}
        data = {"phase": "ended", "turn_id": found.open_turn, "metadata": metadata}
        out.append(EventDraft(TURN_ENDED, data, synthetic=True))
    return out


def _stopped_text(cause: str) -> str:
    how = "was stopped" if cause == SHUTDOWN else "stopped unexpectedly"
    return f"The bridge {how} while this session was open; the next message starts the agent again."


def _status(session: RecoveryHost, detail: str, text: str, meta: dict[str, Any], raw: Any = None) -> list[EventDraft]:
    translator = session.translator
    content: list[dict[str, Any]] = [
        {"type": "status", "label": "restart", "detail": detail},
        {"type": "text", "text": text},
        {"type": "json", "json": {"_meta": {META: meta}}},
    ]
    item = make_item(
        item_id=translator.ids.fresh(),
        native_item_id=None,
        kind="status",
        role="assistant",
        content=content,
        status="in_progress",
    )
    out = translator.lifecycle.started(item, raw=raw, synthetic=True)
    out.extend(translator.lifecycle.completed(dict(item, status="completed"), raw=raw, synthetic=True))
    return out


# ---- at the next message ------------------------------------------------------------------------------
async def revive(session: RecoveryHost) -> None:
    """Start the agent of a suspended session again (once, whoever asks first)."""
    state = session.recovery
    if state is None or not session.suspended:
        return
    if state.task is None:
        state.task = asyncio.create_task(_revive(session, state), name=f"session-revive-{session.id}")
    # Shielded: a client that goes away does not cut the start-up short for the others.
    await asyncio.shield(state.task)


async def _revive(session: RecoveryHost, state: Recovery) -> None:
    link = session.agent
    try:
        await link.spawn(session, session.cwd)
        method, extra, raw = await asyncio.wait_for(_reconnect(session), session.settings.agent_start_timeout)
    except asyncio.CancelledError:
        # The server is stopping meanwhile: the session stays suspended, for the next one.
        session.replaying = False
        await session.terminals.close_all()
        await link.stop()
        state.task = None
        raise
    except BaseException as exc:
        error: BaseException | None = exc if isinstance(exc, BridgeError) else None
        if error is None and link.process is not None:
            error = await link.start_failure(exc)
        if error is None:
            error = StreamError(f"cannot start the agent again: {exc}")
        session.replaying = False
        await session.terminals.close_all()  # any the agent opened meanwhile
        await link.stop()
        state.suspended = False
        session.recovery = None
        detail = getattr(error, "detail", None) or str(error)
        session.end_suspended(f"cannot restart the agent: {detail}")
        raise error from (exc if error is not exc else None)
    state.suspended = False
    state.outcome = {"method": method, "memory": "lost" if method == "session/new" else "kept", **extra}
    if state.bridge is not None:
        state.outcome["bridge"] = state.bridge
    session.agent_restarted()
    if method == "session/new":
        text = (
            "The agent could not resume or reload this session after the restart and started a new one "
            "(session/new): the agent's memory of the conversation was lost."
        )
    elif method == "session/load":
        text = "The agent reloaded this session after the restart (session/load): the conversation goes on."
    else:
        text = "The agent resumed this session after the restart (session/resume): the conversation goes on."
    if state.bridge is not None:
        text += f" It runs on the bridge at {state.bridge} now."
    meta = {"state": "restarted", "cause": state.cause, **state.outcome}
    session.record(_status(session, method, text, meta, raw))
    session.save()


async def _reconnect(session: RecoveryHost) -> tuple[str, dict[str, Any], list[Any]]:
    """``initialize``, then resume, load or new. Returns the method that worked, what the status
    item tells about it, and the ACP messages (its raw)."""
    link = session.agent
    connection = link.connection
    assert connection is not None
    await connection.initialize(session.services.client_capabilities(session.spec.disabled_services))
    caps: dict[str, Any] = dict(connection.agent_capabilities)
    config = session.config
    base = new_session_params(config, session.cwd, session.id)
    previous = session.native_session_id
    failed: list[dict[str, Any]] = []
    extra: dict[str, Any] = {"previousNativeSessionId": previous}
    session_caps = caps.get("sessionCapabilities")
    attempts: list[str] = []
    if previous and connection.session_capability("list"):
        # What the agent still knows (ACP session/list): a session it no longer lists is not
        # asked for, it gets a new one at once.
        listed = await _agent_lists(session, previous)
        if listed is not None:
            extra["listed"] = listed
            if not listed:
                previous = None
    if previous:
        if isinstance(session_caps, dict) and isinstance(session_caps.get("resume"), dict):
            attempts.append("session/resume")
        if caps.get("loadSession") is True:
            attempts.append("session/load")
    for method in attempts:
        params = {"sessionId": previous, **base}
        # A load replays the history before it answers: not logged again (Session.on_incoming).
        session.replaying = method == "session/load"
        session.replayed = 0
        try:
            result = await connection.request(method, params)
        except RequestError as exc:
            session.replaying = False
            failed.append({"method": method, "code": exc.code, "message": str(exc)})
            continue
        answer = result if isinstance(result, dict) else {}
        if method == "session/load":
            extra["replayed"] = session.replayed
        await _after_handshake(session, str(previous), answer)
        raw = [_request(method, params), _response(result)]
        return method, {**extra, "nativeSessionId": previous, "failed": failed}, raw
    result = await connection.request("session/new", base)
    if not isinstance(result, dict) or not isinstance(result.get("sessionId"), str):
        raise StreamError("agent answered session/new without a sessionId")
    session.native_session_id = result["sessionId"]
    await _after_handshake(session, result["sessionId"], result)
    raw = [_request("session/new", base), _response(result)]
    return "session/new", {**extra, "nativeSessionId": result["sessionId"], "failed": failed}, raw


# session/list: pages read at most, and seconds one page may take (then it is withdrawn with
# `$/cancel_request` and the bridge tries resume/load as without the list).
LIST_PAGES = 50
LIST_PAGE_TIMEOUT = 5.0


async def _agent_lists(session: RecoveryHost, native_session_id: str) -> bool | None:
    """Whether the agent's `session/list` (for the session's directory) has the session; None when
    it cannot tell (an error, a time-out, too many pages)."""
    connection = session.agent.connection
    assert connection is not None
    timeout = min(LIST_PAGE_TIMEOUT, session.settings.agent_start_timeout / 3)
    params: dict[str, Any] = {"cwd": session.cwd}
    for _ in range(LIST_PAGES):
        try:
            result = await connection.request("session/list", params, timeout)
        except (RequestError, TimeoutError) as exc:
            log.info("%s: session/list failed: %s", session.id, exc or "timed out")
            return None
        found = result.get("sessions") if isinstance(result, dict) else None
        if not isinstance(found, list):
            return None
        if any(isinstance(entry, dict) and entry.get("sessionId") == native_session_id for entry in found):
            return True
        cursor = result.get("nextCursor") if isinstance(result, dict) else None
        if not isinstance(cursor, str) or not cursor:
            return False
        params = {"cwd": session.cwd, "cursor": cursor}
    return None


async def _after_handshake(session: RecoveryHost, native_session_id: str, result: dict[str, Any]) -> None:
    link = session.agent
    assert link.connection is not None
    session.spec.learn(dict(link.connection.initialize_result), result)
    new = NewSession(native_session_id, cast(NewSessionResult, result))
    await link.apply_modes(new, session.config, session.state)


def _request(method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": method, "params": params}


def _response(result: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "result": result}
