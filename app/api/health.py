from __future__ import annotations

from fastapi import APIRouter
from starlette.responses import JSONResponse

from app.legacy.models import HealthResponse

from .routing import BridgeRoute

router = APIRouter(route_class=BridgeRoute)


@router.get(
    "/v1/health",
    operation_id="get_health",
    tags=["meta"],
    summary="Health Check",
    description='Answers `{"status":"ok"}` while the server runs; never needs the token.',
    responses={200: {"model": HealthResponse, "description": "The server is up"}},
)
async def get_health() -> JSONResponse:
    return JSONResponse({"status": "ok"})
