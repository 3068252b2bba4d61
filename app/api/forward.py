"""Requests for a session's agent or files reach the bridge that runs it (a fleet: ``app/sessions/fleet.py``).

A route that must reach the agent (messages, messages/stream, permission and question replies,
terminate) and every ``/v1/fs`` route given a ``session_id`` ask ``forward`` first: when another bridge
runs the session, the request goes there as it came and its answer comes back, both streamed (an
upload is not held here; a download or SSE is passed on as it arrives). The runner applies its own
limits and confinement to it, as to any request.

- The address is the runner's as a bridge advertised it (``Fleet.route`` forwards to no other); the
  path is the received one, segment by segment: a ``.`` or ``..`` segment (a session named ``.``) is
  sent percent-encoded, so that no HTTP library folds it into another route on the way.
- The client's credentials go along (the fleet shares one token). Its browser headers do not
  (``Origin``, ``Referer``, ``Sec-Fetch-*``): this bridge judged them already, and the runner would
  judge them against its own address, which the page never had.
- A runner that cannot be reached is waited for until its lease expires; then this bridge takes the
  session over and the request is served here.
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
_DROPPED = {
    b"host",
    b"transfer-encoding",
    b"connection",
    b"keep-alive",
    b"accept-encoding",
    b"te",
    b"upgrade",
    b"origin",
    b"referer",
}
_BACK = {"content-type", "content-length", "cache-control", "x-accel-buffering", "content-disposition"}
# Answers up to this size come back in one piece; larger ones and SSE are streamed.
WHOLE = 256 * 1024


def upstream_path(raw_path: bytes) -> str:
    """The received path, its segments as they came, with dot segments percent-encoded."""
    segments = raw_path.decode("latin-1").split("/")
    return "/".join(s.replace(".", "%2E") if s in (".", "..") else s for s in segments)


async def forward(request: Request, session_id: str, *, files: bool = False) -> Response | None:
    """The runner's answer when another bridge runs the session; None: serve it here."""
    fleet = deps.manager(request).fleet
    if fleet is None:
        return None
    target = await fleet.route(session_id, forwarded=FORWARDED in request.headers, files=files)
    if target is None:
        return None
    import httpx

    scope = request.scope
    query = scope.get("query_string") or b""
    path = upstream_path(scope.get("raw_path") or request.url.path.encode())
    url = target + path + ("?" + query.decode("latin-1") if query else "")
    headers = [
        (k, v) for k, v in scope["headers"] if k.lower() not in _DROPPED and not k.lower().startswith(b"sec-fetch-")
    ]
    headers.append((FORWARDED.encode(), fleet.url.encode()))
    names = {k.lower() for k, _ in scope["headers"]}
    # The body streams through: with its length when the client gave one (the runner refuses an
    # oversized one at once), chunked otherwise.
    has_body = b"transfer-encoding" in names or request.headers.get("content-length", "0") != "0"
    client: httpx.AsyncClient = fleet.client
    try:
        upstream = await client.send(
            client.build_request(request.method, url, headers=headers, content=request.stream() if has_body else None),
            stream=True,
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
    length = upstream.headers.get("content-length")
    streamed = upstream.headers.get("content-type", "").startswith("text/event-stream") or (
        upstream.status_code not in (204, 304) and (length is None or not length.isdigit() or int(length) > WHOLE)
    )
    if streamed:
        return StreamingResponse(
            upstream.aiter_raw(),
            status_code=upstream.status_code,
            headers=back,
            background=BackgroundTask(upstream.aclose),
        )
    try:
        content = await upstream.aread()
    except httpx.HTTPError as exc:
        raise StreamError(f"the answer of the bridge at {target} broke off: {exc}") from exc
    finally:
        await upstream.aclose()
    back.pop("content-length", None)
    return Response(content, status_code=upstream.status_code, headers=back)
