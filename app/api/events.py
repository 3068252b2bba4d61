"""Events: JSON pages, the SSE follow stream, and the per-turn messages/stream."""

from __future__ import annotations

from collections.abc import AsyncIterator

from fastapi import APIRouter, Request
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.responses import Response

from app.events.log import Subscription
from app.legacy.models import EventsResponse
from app.translate.drafts import TERMINAL_TYPES

from . import deps
from .parsing import Query, path_param
from .sessions import accept_message

router = APIRouter()

SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


@router.get("/v1/sessions/{session_id}/events", operation_id="get_events", responses={200: {"model": EventsResponse}})
async def get_events(session_id: str, request: Request) -> Response:
    query = Query(request)
    offset = query.integer("offset") or 0
    limit = query.integer("limit")
    include_raw = query.include_raw()
    session = deps.manager(request).get(path_param(session_id))
    events, has_more = session.log.page(offset, limit)
    body = (
        '{"events":['
        + ",".join(e.render(include_raw) for e in events)
        + '],"hasMore":'
        + ("true" if has_more else "false")
        + "}"
    )
    return Response(body, media_type="application/json")


def _frame(event_json: str, sequence: int) -> ServerSentEvent:
    return ServerSentEvent(data=event_json, id=str(sequence), sep="\n")


async def _follow(sub: Subscription, include_raw: bool, *, stop_at_terminal: bool) -> AsyncIterator[ServerSentEvent]:
    try:
        async for event in sub:
            yield _frame(event.render(include_raw), event.sequence)
            if stop_at_terminal and event.type in TERMINAL_TYPES:
                return
    finally:
        sub.close()


def _keepalive() -> ServerSentEvent:
    return ServerSentEvent(comment="keep-alive", sep="\n")


def _sse(request: Request, stream: AsyncIterator[ServerSentEvent]) -> EventSourceResponse:
    settings = deps.settings(request)
    return EventSourceResponse(
        stream,
        headers=SSE_HEADERS,
        sep="\n",
        ping=settings.sse_keepalive or None,
        ping_message_factory=_keepalive,
        send_timeout=settings.sse_send_timeout or None,
    )


@router.get("/v1/sessions/{session_id}/events/sse", operation_id="get_events_sse")
async def get_events_sse(session_id: str, request: Request) -> EventSourceResponse:
    query = Query(request)
    offset = query.integer("offset") or 0
    query.integer("limit")  # accepted and ignored, as legacy
    include_raw = query.include_raw()
    session = deps.manager(request).get(path_param(session_id))
    last_event_id = request.headers.get("last-event-id", "").strip()
    if last_event_id.isdigit():
        offset = max(offset, int(last_event_id))
    sub = session.log.subscribe(offset)
    return _sse(request, _follow(sub, include_raw, stop_at_terminal=False))


@router.post("/v1/sessions/{session_id}/messages/stream", operation_id="post_message_stream")
async def post_message_stream(session_id: str, request: Request) -> EventSourceResponse:
    include_raw = Query(request).include_raw()
    sid = path_param(session_id)
    session = deps.manager(request).get(sid)
    # Subscribe before sending: nothing of this turn can be missed, and no history is replayed.
    sub = session.log.subscribe(session.log.last_sequence)
    try:
        await accept_message(request, sid)
    except BaseException:
        sub.close()
        raise
    return _sse(request, _follow(sub, include_raw, stop_at_terminal=True))
