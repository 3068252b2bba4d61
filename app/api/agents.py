from __future__ import annotations

import asyncio
import os
from typing import Annotated, Any

from fastapi import APIRouter, Path, Request, Response
from starlette.responses import JSONResponse

from app.agents.node import known_version, version_of
from app.agents.registry import AgentSpec
from app.errors import InvalidRequest
from app.legacy.models import AgentInstallRequest, AgentListResponse, AgentModelsResponse, AgentModesResponse
from app.sessions.model_probe import agent_models

from . import deps
from .openapi import json_request, operation, problems
from .parsing import json_body, path_param
from .routing import BridgeRoute

router = APIRouter(tags=["agents"], route_class=BridgeRoute)
# Where /v1/agents says what comes from the ACP registry's catalog (the list's date, an agent's entry).
CATALOG_META = "sandbox-agent/acpRegistry"
AgentId = Annotated[str, Path(description="Agent id")]


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
            if spec.command and len(spec.command) > 1 and os.path.basename(path) == "node":
                # An adapter started with the bridge's own Node.js (it needs a newer one).
                info["path"] = spec.command[1]
            # Which Node.js runs it (an npm adapter): the system's, or the bridge's own.
            node = spec.node_program()
            if node is not None:
                info["node"] = node
                version = known_version(node)
                if version is not None:
                    info["nodeVersion"] = version
        # Which copy runs (the bridge's install or one on PATH), and the one it hides.
        if spec.source is not None and path is not None:
            info["source"] = spec.source
        if spec.hidden_copy is not None:
            info["hiddenCopy"] = dict(spec.hidden_copy)
    info["capabilities"] = dict(spec.capabilities)
    if spec.capabilities.get("sharedProcess"):
        info["serverStatus"] = {"status": "stopped", "restartCount": 0}
    if spec.catalog_entry is not None:
        entry = spec.catalog_entry
        listed = {"name": entry.name, "version": entry.version, "distribution": entry.distribution}
        info["_meta"] = {CATALOG_META: listed}
    return info


@router.get(
    "/v1/agents",
    operation_id="list_agents",
    summary="List Agents",
    description="Every agent the server knows, installed or not, with its capabilities.",
    responses={200: {"model": AgentListResponse, "description": "The agents"}},
)
async def list_agents(request: Request) -> JSONResponse:
    registry = deps.registry(request)
    # Every agent resolved (PATH lookups, installs, versions, credentials) is kept a moment: a
    # client polling the list, or many asking at once, costs one resolution (RESOLVE_TTL).
    agents = registry.listing()
    if agents is None:
        specs = registry.all()
        nodes = {node for spec in specs if (node := spec.node_program()) is not None}
        await asyncio.gather(*(version_of(node) for node in nodes))  # asked once per program, then known
        agents = [agent_info(spec, request) for spec in specs]
        registry.keep_listing(agents)
    body: dict[str, Any] = {"agents": agents}
    if registry.catalog is not None:
        registry.refresh_catalog()  # when first asked, then hourly, in the background
        body["_meta"] = {CATALOG_META: registry.catalog.info()}
    return JSONResponse(body)


@router.post(
    "/v1/agents/{agent}/install",
    operation_id="install_agent",
    status_code=204,
    summary="Install Agent",
    description=(
        "Installs the agent's ACP adapter (npm): the newest version tested with the bridge, or "
        "`agentVersion` (any published version, or `latest`). `reinstall` installs it again (an update)."
    ),
    responses={
        204: {"description": "Installed"},
        **problems(e400="Invalid request", e404="No such agent", e500="The install failed"),
    },
    openapi_extra=operation(body=json_request("AgentInstallRequest")),
)
async def install_agent(agent: AgentId, request: Request) -> Response:
    body = await json_body(request, AgentInstallRequest)
    registry = deps.registry(request)
    spec = registry.get(path_param(agent))
    # An addition to the legacy body (read beside it, the contract's schema unchanged): the version.
    raw = await request.json()
    version = raw.get("agentVersion") if isinstance(raw, dict) else None
    if version is not None and (not isinstance(version, str) or not version.strip()):
        raise InvalidRequest("agentVersion must be a version string (e.g. 2.6.0 or latest)")
    await registry.install(spec, version, reinstall=bool(body.reinstall))
    return Response(status_code=204)


@router.get(
    "/v1/agents/{agent}/modes",
    operation_id="get_agent_modes",
    summary="List Agent Modes",
    description="The agent's modes (`agentMode` of a session).",
    responses={200: {"model": AgentModesResponse, "description": "The modes"}, **problems(e400="Invalid request")},
)
async def get_agent_modes(agent: AgentId, request: Request) -> JSONResponse:
    spec = deps.registry(request).get(path_param(agent))
    if spec.modes is None and spec.profile.modes_are_agent_modes:
        await agent_models(spec, deps.settings(request), deps.manager(request).processes)  # one start tells both
    return JSONResponse({"modes": spec.modes_response()})


@router.get(
    "/v1/agents/{agent}/models",
    operation_id="get_agent_models",
    summary="List Agent Models",
    description="The models the agent offers (`model` of a session).",
    responses={200: {"model": AgentModelsResponse, "description": "The models"}, **problems(e404="No such agent")},
)
async def get_agent_models(agent: AgentId, request: Request) -> JSONResponse:
    spec = deps.registry(request).get(path_param(agent))
    return JSONResponse(await agent_models(spec, deps.settings(request), deps.manager(request).processes))
