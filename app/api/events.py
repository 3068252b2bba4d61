"""Events: JSON pages, the SSE follow stream, and the per-turn messages/stream."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Path, Request
from starlette.responses import Response, StreamingResponse

from app.events.log import SessionEventLog
from app.legacy.models import EventsResponse

from . import deps
from .forward import forward
from .openapi import ADDITION, json_request, operation, problems, query
from .parsing import Query, path_param
from .routing import BridgeRoute
from .sessions import accept_message
from .sse import EventStream, frames

__all__ = ["frames", "router"]

router = APIRouter(tags=["sessions"], route_class=BridgeRoute)
SessionId = Annotated[str, Path(description="Session id")]


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
    log = (await deps.manager(request).lookup(path_param(session_id))).log
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


def _sse(
    request: Request,
    log: SessionEventLog,
    after: int,
    include_raw: bool,
    *,
    stop_at_terminal: bool,
    turn_id: str | None = None,
) -> EventStream:
    settings = deps.settings(request)
    return EventStream(
        log,
        after,
        include_raw,
        stop_at_terminal=stop_at_terminal,
        turn_id=turn_id,
        keepalive=settings.sse_keepalive,
        send_timeout=settings.sse_send_timeout,
        stopping=deps.stopping(request),
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
async def get_events_sse(session_id: SessionId, request: Request) -> EventStream:
    query = Query(request)
    offset = query.integer("offset") or 0
    query.integer("limit")  # accepted and ignored, as legacy
    include_raw = query.include_raw()
    session = await deps.manager(request).lookup(path_param(session_id))
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
async def post_message_stream(session_id: SessionId, request: Request) -> Response:
    include_raw = Query(request).include_raw()
    sid = path_param(session_id)
    if (forwarded := await forward(request, sid)) is not None:
        return forwarded
    session = deps.manager(request).get(sid)
    # The cursor is taken before sending: nothing of this turn can be missed, no history is replayed.
    after = session.log.last_sequence
    turn_id = await accept_message(request, sid)
    return _sse(request, session.log, after, include_raw, stop_at_terminal=True, turn_id=turn_id)
