"""The bridge's ACP client connection to one agent process.

Request correlation and dispatch are the official SDK's (``acp.Connection``, given a message-level
transport, its public ``Connection(handler, transport)`` form); writing is its ``MessageSender``.
The transport here reads the agent's stdout itself, so that every message the agent sends is
handed to the session *in wire order, before* the SDK dispatches it to a task: the SDK runs each
notification in its own task, so this is the only place where update order is still known.
Raw messages are kept that way too (the typed layer drops unknown variants and fields).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import logging
from collections import deque
from collections.abc import Awaitable
from pathlib import Path
from typing import Any, Protocol, cast

from pydantic import ValidationError

from app.tracing import Tracing

from .process import STDOUT_LINE_LIMIT, AgentProcess
from .sdk import PROTOCOL_VERSION, Connection, MessageSender, RequestError, TaskSupervisor
from .shapes import InitializeResult
from .transcript import AGENT_TO_CLIENT, CLIENT_TO_AGENT, TranscriptWriter

log = logging.getLogger("acp_rest_bridge.acp")

# How much of an over-long stdout line is kept for its agent.unparsed event.
LONG_LINE_HEAD = 64 * 1024

CLIENT_INFO = {"name": "acp-rest-bridge", "title": "ACP REST bridge", "version": "0.1.0"}

# ACP `$/cancel_request`: tells the agent that the bridge no longer waits for one of its requests.
CANCEL_REQUEST = "$/cancel_request"

# The JSON-RPC ids of the requests a task sends (the SDK numbers them itself; ``OutgoingRequest``).
_SENT_IDS: contextvars.ContextVar[list[Any] | None] = contextvars.ContextVar("acp_bridge_sent_ids", default=None)


class AgentObserver(Protocol):
    """What the session layer provides to a connection."""

    def on_incoming(self, message: dict[str, Any]) -> Awaitable[None] | None:
        """Every JSON-RPC message from the agent, in wire order. Must not await; it may return an
        awaitable (bounded in time) that finishes handling the message: the next message is read
        only once it is done (a file read for an exact diff)."""

    def on_unparsed_line(self, line: bytes, error: str) -> None:
        """A stdout line that is not a JSON-RPC message."""

    def on_outgoing(self, message: dict[str, Any]) -> None:
        """Every message the bridge sends to the agent, just before it is written."""

    async def handle_request(self, method: str, params: Any, request_id: Any) -> Any:
        """Answer an agent->client request; raise ``RequestError`` to answer an error."""


class WireMessage(dict[str, Any]):
    """A JSON-RPC message from the agent with the JSON text it arrived as (``json_text``).

    The event log keeps that text as the raw payload of the events made from the message, instead
    of serialising the dict again for every event (the hot path of a streaming agent).
    """

    __slots__ = ("json_text",)
    json_text: str


# The C scanner and the whitespace pattern json.loads itself uses (not in the typeshed stubs).
_scan_once = json.JSONDecoder().scan_once  # type: ignore[attr-defined]
_WHITESPACE = json.decoder.WHITESPACE  # type: ignore[attr-defined]


def parse_json(text: str) -> Any:
    """``json.loads`` of one line, without its layers of wrappers (this runs for every message
    of a streaming agent). Same values, same errors."""
    start = _WHITESPACE.match(text).end() if text[:1].isspace() else 0
    try:
        value, end = _scan_once(text, start)
    except StopIteration as exc:
        raise json.JSONDecodeError("Expecting value", text, exc.value) from None
    if end != len(text):
        end = _WHITESPACE.match(text, end).end()
        if end != len(text):
            raise json.JSONDecodeError("Extra data", text, end)
    return value


def _preview(message: Any) -> str:
    try:
        return json.dumps(message, ensure_ascii=False, default=repr)[:200]
    except Exception:
        return repr(message)[:200]


def _encode(message: Any) -> bytes:
    text = getattr(message, "json_text", None)
    return (text if isinstance(text, str) else _preview(message)).encode("utf-8", "replace")


class ObservedTransport:
    """The SDK's transport protocol (``send``, ``receive``, ``close``) over the agent's stdout and
    stdin: newline-delimited JSON, as the SDK's own stdio transport frames it."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        sender: MessageSender,
        observer: AgentObserver,
        line_limit: int = STDOUT_LINE_LIMIT,
    ) -> None:
        self._reader = reader
        self._sender = sender
        self._observer = observer
        self._batch: deque[dict[str, Any]] = deque()
        self._lines: deque[bytes] = deque()
        self._partial: list[bytes] = []
        self._partial_size = 0
        self.line_limit = line_limit
        self._skipped = 0  # bytes of an over-long line skipped so far (0: none)
        self._skipped_head = b""
        self.eof = asyncio.Event()
        # Wire transcript, when enabled: written before the message is handled or sent.
        self.transcript: TranscriptWriter | None = None
        # What the observer still does with the message just delivered (awaited before the next).
        self._held: Awaitable[None] | None = None

    async def _next_line(self) -> bytes | None:
        """The next stdout line (without its newline); None at EOF. Reads whatever the pipe holds
        and splits it at once: a burst of notifications costs one await per read, not per line.
        A line longer than ``line_limit`` is not kept: its start is reported as unparsed and the
        rest is skipped as it arrives, so memory stays bounded whatever the agent writes."""
        while not self._lines:
            chunk = await self._reader.read(1 << 16)
            if not chunk:
                line = self._end_partial(b"")
                self._partial.clear()
                return line if line else None
            lines = chunk.split(b"\n")
            if len(lines) == 1:
                self._add_partial(chunk)  # part of a long line
                continue
            first = self._end_partial(lines[0])
            last = lines.pop()
            if first is None:
                del lines[0]
            else:
                lines[0] = first
            if last:
                self._add_partial(last)
            self._lines.extend(lines)
        return self._lines.popleft()

    def _add_partial(self, data: bytes) -> None:
        if self._skipped:
            self._skipped += len(data)
            return
        self._partial.append(data)
        self._partial_size += len(data)
        if self._partial_size > self.line_limit:
            self._skipped = self._partial_size
            self._skipped_head = b"".join(self._partial)[:LONG_LINE_HEAD]
            self._partial.clear()
            self._partial_size = 0

    def _end_partial(self, tail: bytes) -> bytes | None:
        """The line the pending pieces and ``tail`` make; None when it was over the limit."""
        if not self._partial and not self._skipped:
            if len(tail) <= self.line_limit:
                return tail
            self._skipped, self._skipped_head = 0, tail[:LONG_LINE_HEAD]
        self._add_partial(tail)
        if not self._skipped:
            line = b"".join(self._partial)
            self._partial.clear()
            self._partial_size = 0
            return line
        size, head = max(self._skipped, len(tail)), self._skipped_head
        self._skipped, self._skipped_head = 0, b""
        self._unparsed(head, f"line of {size} bytes is over the limit of {self.line_limit} bytes: cut")
        return None

    async def receive(self) -> dict[str, Any] | None:
        while True:
            if self._batch:
                message = self._batch.popleft()
                needed = self._deliver(message)
                if self._held is not None:
                    await self._finish(message)
                if needed:
                    return message
                continue
            line = self._lines.popleft() if self._lines else await self._next_line()
            if line is None:
                self.eof.set()
                return None
            line = line.strip()
            if not line:
                continue
            try:
                text: str | None = line.decode("utf-8")
            except UnicodeDecodeError:
                text = None  # json.loads still reads UTF-16 and UTF-32
            try:
                message = json.loads(line) if text is None else parse_json(text)
            except (ValueError, RecursionError) as exc:
                self._unparsed(line, f"invalid JSON: {exc}")
                continue
            if isinstance(message, list):  # ACP v2 allows JSON-RPC batches; the SDK would drop the link
                for entry in message:
                    if isinstance(entry, dict):
                        self._batch.append(entry)
                    else:
                        self._unparsed(json.dumps(entry).encode(), "batch entry is not an object")
                continue
            if not isinstance(message, dict):
                self._unparsed(line, "JSON-RPC message is not an object")
                continue
            message = WireMessage(message)
            # A CR (legal JSON whitespace) would end an SSE line: such a message is serialised anew.
            if text is not None and "\r" not in text:
                message.json_text = text
            needed = self._deliver(message)
            if self._held is not None:
                await self._finish(message)
            if needed:
                return message

    def _deliver(self, message: dict[str, Any]) -> bool:
        """Hand the message to the observer; True if the SDK needs it too. Notifications are the
        observer's alone (the SDK would only spawn a task per notification to call a no-op)."""
        if self.transcript is not None:
            self.transcript.write(AGENT_TO_CLIENT, message)
        try:
            self._held = self._observer.on_incoming(message)
        except Exception as exc:
            # The receive loop is the SDK's: an exception here would end it silently and the session
            # would hang. The message is recorded as unparsed instead, and the loop goes on.
            log.exception("handling a message from the agent failed: %.200s", _preview(message))
            self._unparsed(_encode(message), f"the bridge failed to handle this message: {type(exc).__name__}: {exc}")
        return "id" in message or "method" not in message

    async def _finish(self, message: dict[str, Any]) -> None:
        """The rest of the observer's handling of ``message``, before the next message is read."""
        held, self._held = self._held, None
        try:
            await cast(Awaitable[None], held)
        except Exception as exc:
            log.exception("handling a message from the agent failed: %.200s", _preview(message))
            self._unparsed(_encode(message), f"the bridge failed to handle this message: {type(exc).__name__}: {exc}")

    def _unparsed(self, line: bytes, error: str) -> None:
        try:
            self._observer.on_unparsed_line(line, error)
        except Exception:
            log.exception("recording an unparsed agent line failed (%s)", error)

    async def send(self, message: dict[str, Any]) -> None:
        sent = _SENT_IDS.get()
        if sent is not None and "method" in message and "id" in message:
            sent.append(message["id"])
        if self.transcript is not None:
            # Before the write: the agent's answer may be read before `send` returns.
            self.transcript.write(CLIENT_TO_AGENT, message)
        # Before the write too: the answer to a request may be read before the write returns.
        try:
            self._observer.on_outgoing(message)
        except Exception:
            log.exception("observing a message to the agent failed: %.200s", _preview(message))
        await self._sender.send(message)

    async def close(self) -> None:
        await self._sender.close()


class AgentConnection:
    def __init__(self, process: AgentProcess, observer: AgentObserver, tracing: Tracing | None = None) -> None:
        self.process = process
        self.tracing = tracing  # on: a span per request, its context in the request's `_meta`
        self._observer = observer
        self._supervisor = TaskSupervisor(source="acp-rest-bridge.connection")
        sender = MessageSender(process.stdin, self._supervisor)
        self.transport = ObservedTransport(
            process.stdout,
            sender,
            _Correlator(observer, self),
            getattr(process, "stdout_line_limit", STDOUT_LINE_LIMIT),
        )
        self._request_ids: dict[int, Any] = {}
        self.conn = Connection(self._dispatch, self.transport)
        self.agent_capabilities: dict[str, Any] = {}
        self.agent_info: dict[str, Any] = {}
        self.protocol_version: Any = None
        self.initialize_result: InitializeResult = {}

    # ---- client -> agent -----------------------------------------------------------------
    async def initialize(self, client_capabilities: dict[str, Any]) -> dict[str, Any]:
        result = await self.request(
            "initialize",
            {
                "protocolVersion": PROTOCOL_VERSION,
                "clientCapabilities": client_capabilities,
                "clientInfo": CLIENT_INFO,
            },
        )
        result = result if isinstance(result, dict) else {}
        self.initialize_result = cast(InitializeResult, result)
        self.protocol_version = result.get("protocolVersion")
        caps = result.get("agentCapabilities")
        self.agent_capabilities = caps if isinstance(caps, dict) else {}
        info = result.get("agentInfo")
        self.agent_info = info if isinstance(info, dict) else {}
        return result

    async def request(self, method: str, params: dict[str, Any], timeout: float | None = None) -> Any:
        """Send a request and wait for its answer (at most ``timeout`` seconds). A request given up
        (timeout, cancelled task) is withdrawn with `$/cancel_request`. Traced (a span, its context
        in ``_meta``) when tracing is on."""
        if self.tracing is None:
            return await self._answer(method, params, timeout)
        with self.tracing.client_span(method, params) as traced:
            return await self._answer(method, traced, timeout)

    async def _answer(self, method: str, params: dict[str, Any], timeout: float | None) -> Any:
        call = self.start_request(method, params)
        try:
            return await call.result(timeout)
        except TimeoutError:
            await call.withdraw()
            raise
        except asyncio.CancelledError:
            call.abandon()
            raise

    def start_request(self, method: str, params: dict[str, Any]) -> OutgoingRequest:
        sent: list[Any] = []
        token = _SENT_IDS.set(sent)
        try:  # the task copies the context now: its send records the id in ``sent``
            task = asyncio.ensure_future(self.conn.send_request(method, params))
        finally:
            _SENT_IDS.reset(token)
        return OutgoingRequest(self, method, task, sent)

    def session_capability(self, name: str) -> bool:
        """Whether the agent offers ``sessionCapabilities.<name>`` (an object means yes)."""
        caps = self.agent_capabilities.get("sessionCapabilities")
        return isinstance(caps, dict) and isinstance(caps.get(name), dict)

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        await self.conn.send_notification(method, params)

    def send_later(self, method: str, params: dict[str, Any]) -> None:
        """A notification sent from a task of its own (callable where awaiting is not possible)."""

        async def send() -> None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.conn.send_notification(method, params), 2.0)

        coroutine = send()
        try:
            self._supervisor.create(coroutine, name=f"acp-rest-bridge.notify.{method}")
        except RuntimeError:  # the connection is closed: nobody to tell
            coroutine.close()

    def record_transcript(self, directory: Path, session_id: str) -> None:
        """Write every message of this connection, both ways, to ``<directory>/<session id>.jsonl``."""
        self.transport.transcript = TranscriptWriter.open(directory.expanduser(), session_id)

    async def close_transcript(self) -> None:
        writer, self.transport.transcript = self.transport.transcript, None
        if writer is not None:
            await writer.aclose()

    @property
    def prompt_capabilities(self) -> dict[str, Any]:
        caps = self.agent_capabilities.get("promptCapabilities")
        return caps if isinstance(caps, dict) else {}

    async def close(self) -> None:
        await self.conn.close()
        await self._supervisor.shutdown()

    # ---- agent -> client -----------------------------------------------------------------
    def _remember_request(self, message: dict[str, Any]) -> None:
        params = message.get("params")
        if isinstance(params, dict):
            # The SDK hands the handler the same params object; its identity links the two.
            self._request_ids[id(params)] = message.get("id")

    async def _dispatch(self, method: str, params: Any, is_notification: bool) -> Any:
        if is_notification:
            return None  # handled in order by the observer already
        request_id = self._request_ids.pop(id(params), None) if isinstance(params, dict) else None
        try:
            return await self._observer.handle_request(method, params, request_id)
        except (RequestError, ValidationError, asyncio.CancelledError):
            raise  # answered by the SDK as the ACP error they stand for
        except Exception as exc:
            # Logged here with its traceback (the SDK logs through the root logger only); the agent
            # gets an internal error with the cause and the session goes on.
            log.exception("client service %s failed (request id %r)", method, request_id)
            raise RequestError.internal_error({"details": f"{type(exc).__name__}: {exc}"}) from exc


class OutgoingRequest:
    """A request the bridge sent to the agent, which it may give up on (``abandon``)."""

    def __init__(self, connection: AgentConnection, method: str, task: asyncio.Future[Any], sent: list[Any]) -> None:
        self.connection = connection
        self.method = method
        self.task = task
        self._sent = sent
        self.abandoned = False
        # An answer nobody waits for any more is still read (no "exception never retrieved").
        task.add_done_callback(lambda done: done.cancelled() or done.exception())

    @property
    def request_id(self) -> Any:
        return self._sent[0] if self._sent else None

    async def result(self, timeout: float | None = None) -> Any:
        # Shielded: a timeout or a cancelled caller leaves the request pending, to be withdrawn.
        return await asyncio.wait_for(asyncio.shield(self.task), timeout)

    def _give_up(self) -> bool:
        if self.abandoned or self.task.done() or not self._sent:
            return False
        self.abandoned = True
        log.info("withdrawing %s (request %r) with %s", self.method, self.request_id, CANCEL_REQUEST)
        return True

    async def withdraw(self) -> None:
        """ACP `$/cancel_request`: the agent may stop working on it; it still answers it (with its
        result or -32800), which ends the pending call. Sent once, only while it is unanswered."""
        if self._give_up():
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.connection.notify(CANCEL_REQUEST, {"requestId": self.request_id}), 2.0)

    def abandon(self) -> None:
        """``withdraw`` from a task that is being cancelled (the notice is sent by a task of its own)."""
        if self._give_up():
            self.connection.send_later(CANCEL_REQUEST, {"requestId": self.request_id})

    async def settled(self, timeout: float) -> None:
        """Wait (at most ``timeout``) for the agent's answer to an abandoned request."""
        with contextlib.suppress(Exception, asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.shield(self.task), timeout)


class _Correlator:
    """Forwards to the session observer and records request ids for the dispatcher."""

    def __init__(self, observer: AgentObserver, connection: AgentConnection) -> None:
        self._observer = observer
        self._connection = connection

    def on_incoming(self, message: dict[str, Any]) -> Awaitable[None] | None:
        if "method" in message and "id" in message:
            self._connection._remember_request(message)
        return self._observer.on_incoming(message)

    def on_unparsed_line(self, line: bytes, error: str) -> None:
        self._observer.on_unparsed_line(line, error)

    def on_outgoing(self, message: dict[str, Any]) -> None:
        self._observer.on_outgoing(message)

    async def handle_request(self, method: str, params: Any, request_id: Any) -> Any:
        return await self._observer.handle_request(method, params, request_id)


__all__ = ["AgentConnection", "AgentObserver", "RequestError"]
