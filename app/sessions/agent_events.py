"""Legacy events an agent reports through ``sandbox-agent`` extension notifications."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from app.translate.extensions import ERROR_NOTIFICATION

from .services import on_notification

if TYPE_CHECKING:
    from .session import Session


@on_notification(ERROR_NOTIFICATION)
def _agent_error(session: Session, message: dict[str, Any]) -> None:
    session.record(session.translator.agent_error(message.get("params"), message))
