"""``/docs``: Swagger UI over ``/openapi.json``, only when ``ACP_BRIDGE_DOCS`` is on, with its scripts
and styles served from the ``swagger-ui-bundle`` package (the ``docs`` extra), never from a CDN:
a page in the API's origin runs with whatever access the API gives it."""

from __future__ import annotations

from fastapi import FastAPI
from starlette.responses import HTMLResponse
from starlette.staticfiles import StaticFiles

ASSETS = "/docs/assets"
# The browser enforces it too: this origin only (the page's one inline script starts Swagger UI).
CSP = (
    "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; frame-ancestors 'none'"
)


# Why /docs cannot be served; the server says it in one line before it starts (app/main.py).
MISSING = (
    "ACP_BRIDGE_DOCS is on, but Swagger UI for /docs needs the docs extra, which is not installed: "
    "pip install swagger-ui-bundle (in a clone: pip install -e '.[docs]'), or unset ACP_BRIDGE_DOCS"
)


def missing() -> str | None:
    """Why /docs cannot be served here (its package is not installed), or None."""
    try:
        import swagger_ui_bundle  # type: ignore[import-untyped]  # noqa: F401
    except ImportError:
        return MISSING
    return None


def install(app: FastAPI) -> None:
    try:
        import swagger_ui_bundle
    except ImportError as exc:
        raise RuntimeError(MISSING) from exc
    from fastapi.openapi.docs import get_swagger_ui_html

    app.mount(ASSETS, StaticFiles(directory=swagger_ui_bundle.swagger_ui_path), name="docs-assets")

    @app.get("/docs", include_in_schema=False)
    async def swagger_ui() -> HTMLResponse:
        page = get_swagger_ui_html(
            openapi_url="/openapi.json",
            title=f"{app.title} - Swagger UI",
            swagger_js_url=f"{ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{ASSETS}/favicon-32x32.png",
            swagger_ui_parameters={"validatorUrl": None},  # no online validator badge
        )
        page.headers["content-security-policy"] = CSP
        return page
