"""The inspector page at ``/ui/``: public static files (they hold no data; the API under /v1 keeps its
token). Not part of the legacy OpenAPI document."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

from fastapi import FastAPI, Request
from starlette.responses import RedirectResponse, Response
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

from app.ui import STATIC_DIR

# Scripts and styles only from the page itself; any API origin, since `?url=` may name another server.
# The page never parses HTML: with Trusted Types required and no policy allowed, the browser refuses
# any string given to an HTML sink (innerHTML and the like).
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "
    "connect-src *; frame-ancestors 'none'; base-uri 'none'; form-action 'none'; "
    "require-trusted-types-for 'script'; trusted-types 'none'"
)


class _InspectorFiles(StaticFiles):
    async def get_response(self, path: str, scope: Scope) -> Response:
        response = await super().get_response(path, scope)
        location = response.headers.get("location")
        if location is not None:
            # Starlette redirects a folder to its slash form as an absolute URL made from the
            # request's Host; the path alone goes to the same place without echoing it.
            target = urlsplit(location)
            response.headers["location"] = urlunsplit(("", "", "/" + target.path.lstrip("/"), target.query, ""))
        response.headers["content-security-policy"] = CSP
        response.headers["x-content-type-options"] = "nosniff"
        response.headers["referrer-policy"] = "no-referrer"  # the query string may carry the token
        # Always revalidated (cheap with the ETag), so an upgraded server never serves stale modules.
        response.headers["cache-control"] = "no-cache"
        return response


def install(app: FastAPI) -> None:
    @app.get("/ui", include_in_schema=False)
    async def ui_redirect(request: Request) -> RedirectResponse:
        query = request.url.query
        return RedirectResponse("/ui/" + (f"?{query}" if query else ""), status_code=308)

    app.mount("/ui", _InspectorFiles(directory=STATIC_DIR, html=True), name="ui")
