"""A session's lifecycle: its phases, the steps allowed between them, and how an ended one ended."""

from __future__ import annotations

import enum
from typing import Literal

from app.acp.process import ExitInfo
from app.errors import AgentProcessExited, BridgeError, InvalidRequest

EndReason = Literal["terminated", "error"]


class Phase(enum.Enum):
    STARTING = "starting"  # spawning the agent, handshake
    RUNNING = "running"  # takes messages
    ENDING = "ending"  # refuses messages; pending requests answered, agent being stopped
    ENDED = "ended"  # agent stopped (or restored from an earlier run)
    # Restored from a run that stopped while it was live: no agent until the next message
    # starts it again (``recovery``).
    SUSPENDED = "suspended"


# The lifecycle's allowed steps; ``Session._set_phase`` refuses any other. A step to the same phase
# is always allowed (an end noticed twice).
TRANSITIONS: dict[Phase, frozenset[Phase]] = {
    # Started; or built from an earlier run's record (suspended or ended); or stopped during start.
    Phase.STARTING: frozenset({Phase.RUNNING, Phase.SUSPENDED, Phase.ENDED, Phase.ENDING}),
    Phase.RUNNING: frozenset({Phase.ENDING}),
    # Its agent started again; found ended after all, or it cannot start again; terminated, shut down.
    Phase.SUSPENDED: frozenset({Phase.RUNNING, Phase.ENDED, Phase.ENDING}),
    Phase.ENDING: frozenset({Phase.ENDED}),
    Phase.ENDED: frozenset(),
}


def ended_error(agent: str, reason: EndReason | None, exit_info: ExitInfo | None, stderr: str | None) -> BridgeError:
    """What a request for the agent of an ended session gets: legacy's 400 after a terminate, its
    500 ``agent_process_exited`` otherwise."""
    if reason == "terminated":
        return InvalidRequest("session terminated")
    return AgentProcessExited(agent, exit_info.code if exit_info else None, stderr)
