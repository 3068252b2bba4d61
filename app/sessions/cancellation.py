"""`$/cancel_request` from the agent: it no longer needs the answer to one of its requests.

ACP still wants that request answered; a waiting request gets its cancel result at once (a
permission ``cancelled``, an elicitation ``cancel``), and its feature records what happened.
"""

from __future__ import annotations

from typing import Any

from . import services
from .session import Session


@services.on_notification("$/cancel_request")
def cancel_request(session: Session, message: dict[str, Any]) -> None:
    params = message.get("params")
    if not isinstance(params, dict) or "requestId" not in params:
        session.record(session.translator.unparsed("$/cancel_request without requestId", "$/cancel_request", message))
        return
    request_id = params["requestId"]
    for key, pending in list(session.pending.items()):
        if pending.request_id == request_id:
            session.cancel_one(key)
