"""Events: JSON pages, the SSE follow stream, and the per-turn messages/stream."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from typing import Annotated, Any

import anyio
from fastapi import APIRouter, Path, Request
from sse_starlette import EventSourceResponse, ServerSentEvent
from sse_starlette.sse import SendTimeoutError
from starlette.responses import Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from app.events.log import SessionEventLog, StoredEvent
from app.events.model import SESSION_ENDED, TERMINAL_TYPES, TURN_STARTED
from app.legacy.models import EventsResponse

from . import deps
from .openapi import ADDITION, json_request, operation, problems, query
from .parsing import Query, path_param
from .sessions import accept_message

router = APIRouter(tags=["sessions"])
SessionId = Annotated[str, Path(description="Session id")]
log = logging.getLogger("acp_rest_bridge.sse")

SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


OFFSET = "Events after this sequence (exclusive)"
INCLUDE_RAW = "Include the ACP messages each event came from (also `includeRaw`)"
SSE_FRAMES = (
    "Each event is one frame, `id: <sequence>` then `data: <UniversalEvent JSON>` (the `id` line is the "
    "bridge's addition to the legacy frames)."
)
LAST_EVENT_ID = {
    "name": "Last-Event-ID",
    "in": "header",
    "description": "Resume after this sequence (the larger of it and `offset` wins)",
    "required": False,
    "schema": {"type": "string"},
    ADDITION: True,
}


@router.get(
    "/v1/sessions/{session_id}/events",
    operation_id="get_events",
    summary="Get Events",
    description="A page of the session's events after `offset`, at most `limit` of them.",
    responses={200: {"model": EventsResponse, "description": "The events"}, **problems(e404="No such session")},
    openapi_extra=query("EventsQuery", offset=OFFSET, limit="Largest number of events", include_raw=INCLUDE_RAW),
)
async def get_events(session_id: SessionId, request: Request) -> Response:
    query = Query(request)
    offset = query.integer("offset") or 0
    limit = query.integer("limit")
    include_raw = query.include_raw()
    log = deps.manager(request).get(path_param(session_id)).log
    if (limit is None or limit > log.PAGE_BATCH) and log.last_sequence - offset > log.PAGE_BATCH:
        # A long page is written as it is read, so memory stays flat whatever its length.
        return StreamingResponse(_page_body(log, offset, limit, include_raw), media_type="application/json")
    events, has_more = await log.page(offset, limit)
    body = '{"events":[' + ",".join(e.render(include_raw) for e in events) + '],"hasMore":'
    return Response(body + ("true}" if has_more else "false}"), media_type="application/json")


async def _page_body(log: SessionEventLog, offset: int, limit: int | None, include_raw: bool) -> AsyncIterator[str]:
    yield '{"events":['
    sent = 0
    has_more = False
    async for batch in log.page_batches(offset, limit):
        if limit is not None and sent + len(batch) > limit:
            batch = batch[: limit - sent]
            has_more = True
        if batch:
            yield ("," if sent else "") + ",".join(e.render(include_raw) for e in batch)
            sent += len(batch)
    yield '],"hasMore":' + ("true}" if has_more else "false}")


def frames(events: list[StoredEvent], include_raw: bool) -> bytes:
    """SSE frames ``id: <sequence>`` + ``data: <compact JSON>``; legacy parsers keep only the data
    line, and the JSON never holds a raw newline (JSON escapes them), so one data line suffices."""
    if not include_raw:
        return b"".join([e.frame for e in events])
    return "".join([f"id: {e.sequence}\ndata: {e.render(True)}\n\n" for e in events]).encode()


async def _follow(
    log: SessionEventLog,
    after: int,
    include_raw: bool,
    *,
    stop_at_terminal: bool,
    shutdown: anyio.Event,
    turn_id: str | None = None,
) -> AsyncIterator[bytes]:
    """Batches of frames: the events the reader has not seen yet go out in one write each.

    The reader is a cursor on the log (everything is by sequence), so taking it when the stream
    starts, from ``after``, can miss nothing recorded meanwhile. When the server stops, the stream
    ends properly (a complete chunked body) rather than being cut. With ``turn_id``, the stream is
    that turn's: what comes before its turn.started (the end of a turn still running when the
    message was queued) is skipped, unless the session ends first.
    """
    sub = log.subscribe(after)
    own_start = None if turn_id is None else f'"turn_id":{json.dumps(turn_id)}'

    async def close_on_shutdown() -> None:
        await shutdown.wait()
        sub.close()

    watcher = asyncio.ensure_future(close_on_shutdown())
    try:
        while True:
            batch = await sub.next_batch()
            if not batch:
                return
            if own_start is not None:
                for index, event in enumerate(batch):
                    if event.type == TURN_STARTED and own_start in event.json:
                        batch = batch[index:]
                        own_start = None
                        break
                    if event.type == SESSION_ENDED:
                        yield frames([event], include_raw)
                        return
                else:
                    continue
            if stop_at_terminal:
                for index, event in enumerate(batch):
                    if event.type in TERMINAL_TYPES:
                        yield frames(batch[: index + 1], include_raw)
                        return
            yield frames(batch, include_raw)
    finally:
        watcher.cancel()
        sub.close()


def _keepalive() -> ServerSentEvent:
    return ServerSentEvent(comment="keep-alive", sep="\n")


class _DroppedReaders(logging.Filter):
    """uvicorn reports a response that ends unfinished as an ERROR; for a reader dropped on purpose
    the bridge's own warning says what happened, so that one line is left out."""

    MESSAGE = "ASGI callable returned without completing response."

    def __init__(self) -> None:
        super().__init__()
        self.expected = 0

    def expect(self) -> None:
        logger = logging.getLogger("uvicorn.error")
        if self not in logger.filters:
            logger.addFilter(self)
        self.expected += 1

    def filter(self, record: logging.LogRecord) -> bool:
        if self.expected and record.getMessage() == self.MESSAGE:
            self.expected -= 1
            return False
        return True


_dropped_readers = _DroppedReaders()


class EventStream(EventSourceResponse):
    """sse-starlette's response; a reader that accepts nothing for the send timeout is dropped."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # `text/event-stream` as legacy sent it (starlette would add a charset parameter).
        self.raw_headers = [
            (name, b"text/event-stream" if name == b"content-type" else value) for name, value in self.raw_headers
        ]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        except SendTimeoutError:
            # Returning unfinished makes the server close the connection.
            client = scope.get("client")
            log.warning(
                "SSE reader %s dropped: it accepted no data for %ss",
                f"{client[0]}:{client[1]}" if client else "",
                self.send_timeout,
            )
            _dropped_readers.expect()


def _sse(
    request: Request,
    log: SessionEventLog,
    after: int,
    include_raw: bool,
    *,
    stop_at_terminal: bool,
    turn_id: str | None = None,
) -> EventSourceResponse:
    settings = deps.settings(request)
    shutdown = anyio.Event()
    stream = _follow(log, after, include_raw, stop_at_terminal=stop_at_terminal, shutdown=shutdown, turn_id=turn_id)
    return EventStream(
        stream,
        shutdown_event=shutdown,
        shutdown_grace_period=1.0,
        headers=SSE_HEADERS,
        sep="\n",
        ping=settings.sse_keepalive,
        ping_message_factory=_keepalive,
        send_timeout=settings.sse_send_timeout or None,
    )


@router.get(
    "/v1/sessions/{session_id}/events/sse",
    operation_id="get_events_sse",
    summary="Subscribe to Events (SSE)",
    description="Server-sent events: the events after `offset`, then the new ones as they come. "
    + SSE_FRAMES
    + " A reconnect with `Last-Event-ID` resumes after that event.",
    responses={200: {"description": "A `text/event-stream` of events"}},
    openapi_extra={
        **query("EventsQuery", exclude=("limit",), offset=OFFSET, include_raw=INCLUDE_RAW),
        "parameters": [LAST_EVENT_ID],
    },
)
async def get_events_sse(session_id: SessionId, request: Request) -> EventSourceResponse:
    query = Query(request)
    offset = query.integer("offset") or 0
    query.integer("limit")  # accepted and ignored, as legacy
    include_raw = query.include_raw()
    session = deps.manager(request).get(path_param(session_id))
    # Improvement over legacy (which ignored it): EventSource reconnects resume after the last id.
    last_event_id = request.headers.get("last-event-id", "").strip()
    if last_event_id.isascii() and last_event_id.isdigit():
        offset = max(offset, int(last_event_id))
    return _sse(request, session.log, offset, include_raw, stop_at_terminal=False)


@router.post(
    "/v1/sessions/{session_id}/messages/stream",
    operation_id="post_message_stream",
    summary="Send Message (Streaming)",
    description="Starts a turn with the message and streams its events as server-sent events until the turn "
    "ends or waits for a reply. " + SSE_FRAMES,
    responses={200: {"description": "A `text/event-stream` of the turn's events"}, **problems(e404="No such session")},
    openapi_extra=operation(body=json_request("MessageRequest"), **query("TurnStreamQuery", include_raw=INCLUDE_RAW)),
)
async def post_message_stream(session_id: SessionId, request: Request) -> EventSourceResponse:
    include_raw = Query(request).include_raw()
    sid = path_param(session_id)
    session = deps.manager(request).get(sid)
    # The cursor is taken before sending: nothing of this turn can be missed, no history is replayed.
    after = session.log.last_sequence
    turn_id = await accept_message(request, sid)
    return _sse(request, session.log, after, include_raw, stop_at_terminal=True, turn_id=turn_id)
