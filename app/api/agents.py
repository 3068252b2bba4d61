from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response
from starlette.responses import JSONResponse

from app.agents.registry import AgentSpec
from app.legacy.models import AgentInstallRequest, AgentListResponse, AgentModelsResponse, AgentModesResponse
from app.sessions.model_probe import agent_models

from . import deps
from .parsing import json_body, path_param

router = APIRouter()


def agent_info(spec: AgentSpec, request: Request) -> dict[str, Any]:
    info: dict[str, Any] = {
        "id": spec.id,
        "installed": spec.installed,
        "credentialsAvailable": spec.credentials_available(),
    }
    if spec.is_mock:
        info["version"] = "builtin"
    elif spec.version is not None:
        info["version"] = spec.version
    if spec.is_mock:
        placeholder = deps.registry(request).mock_placeholder()
        if placeholder is not None and placeholder.exists():
            info["path"] = str(placeholder)
    else:
        path = spec.resolved_path()
        if path is not None:
            info["path"] = path
    info["capabilities"] = dict(spec.capabilities)
    if spec.capabilities.get("sharedProcess"):
        info["serverStatus"] = {"status": "stopped", "restartCount": 0}
    return info


@router.get("/v1/agents", operation_id="list_agents", responses={200: {"model": AgentListResponse}})
async def list_agents(request: Request) -> JSONResponse:
    return JSONResponse({"agents": [agent_info(spec, request) for spec in deps.registry(request).all()]})


@router.post("/v1/agents/{agent}/install", operation_id="install_agent", status_code=204)
async def install_agent(agent: str, request: Request) -> Response:
    body = await json_body(request, AgentInstallRequest)
    registry = deps.registry(request)
    await registry.install(registry.get(path_param(agent)), reinstall=bool(body.reinstall))
    return Response(status_code=204)


@router.get("/v1/agents/{agent}/modes", operation_id="get_agent_modes", responses={200: {"model": AgentModesResponse}})
async def get_agent_modes(agent: str, request: Request) -> JSONResponse:
    spec = deps.registry(request).get(path_param(agent))
    if spec.modes is None and spec.profile.modes_are_agent_modes:
        await agent_models(spec, deps.settings(request))  # one start of the agent tells both
    return JSONResponse({"modes": spec.modes_response()})


@router.get(
    "/v1/agents/{agent}/models", operation_id="get_agent_models", responses={200: {"model": AgentModelsResponse}}
)
async def get_agent_models(agent: str, request: Request) -> JSONResponse:
    spec = deps.registry(request).get(path_param(agent))
    return JSONResponse(await agent_models(spec, deps.settings(request)))
