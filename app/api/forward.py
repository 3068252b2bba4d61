"""Requests for a session's agent reach the bridge that runs it (a fleet: ``app/sessions/fleet.py``).

A route that must reach the agent (messages, messages/stream, permission and question replies,
terminate) asks ``forward`` first: when another bridge runs the session, the request goes there as
it came (path, query, body, the client's credentials, which the fleet shares) and its answer,
streamed for SSE, comes back. A runner that cannot be reached is waited for until its lease
expires; then this bridge takes the session over and the request is served here.
"""

from __future__ import annotations

import logging

from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from app.errors import StreamError

from . import deps

log = logging.getLogger("acp_rest_bridge.fleet")

# Set on a forwarded request: the bridge receiving it never forwards it again.
FORWARDED = "x-acp-bridge-forwarded"
_HOP = {b"host", b"content-length", b"transfer-encoding", b"connection", b"keep-alive", b"accept-encoding"}
_BACK = {"content-type", "cache-control", "x-accel-buffering"}


async def forward(request: Request, session_id: str) -> Response | None:
    """The runner's answer when another bridge runs the session; None: serve it here."""
    fleet = deps.manager(request).fleet
    if fleet is None:
        return None
    target = await fleet.route(session_id, forwarded=FORWARDED in request.headers)
    if target is None:
        return None
    import httpx

    body = await request.body()
    path = request.scope.get("raw_path") or request.url.path.encode()
    query = request.scope.get("query_string") or b""
    url = target + path.decode("latin-1") + ("?" + query.decode("latin-1") if query else "")
    headers = [(k, v) for k, v in request.scope["headers"] if k.lower() not in _HOP]
    headers.append((FORWARDED.encode(), fleet.url.encode()))
    client: httpx.AsyncClient = fleet.client
    try:
        upstream = await client.send(
            client.build_request(request.method, url, headers=headers, content=body), stream=True
        )
    except httpx.ConnectError as exc:
        log.warning("session %s: the bridge at %s cannot be reached (%s)", session_id, target, exc)
        # Died? Its lease runs out within lease_seconds: then this bridge runs the session.
        owner = await fleet.wait_for_lease(session_id)
        if owner is None:
            return None
        raise StreamError(f"the bridge at {owner} that runs session {session_id} cannot be reached") from exc
    except httpx.HTTPError as exc:
        raise StreamError(f"forwarding to the bridge at {target} failed: {exc}") from exc
    back = {k: v for k, v in upstream.headers.items() if k.lower() in _BACK}
    if upstream.headers.get("content-type", "").startswith("text/event-stream"):
        return StreamingResponse(
            upstream.aiter_raw(),
            status_code=upstream.status_code,
            headers=back,
            background=BackgroundTask(upstream.aclose),
        )
    try:
        content = await upstream.aread()
    finally:
        await upstream.aclose()
    return Response(content, status_code=upstream.status_code, headers=back)
