"""The page's own modules, run in Chromium on made-up input: the SSE frame parser and the
conversation built from events (what the mock does not send: deltas-only messages, stray deltas)."""

from __future__ import annotations

from typing import Any

from tests.browser.conftest import Page
from tests.support import Bridge

FRAMES = """async () => {
  const { splitFrames, parseFrame } = await import("/ui/stream.js");
  let buffer = "";
  const out = [];
  // CRLF, a comment, an id, a multi-line data field, cut at awkward places.
  const chunks = [
    ": keep-alive\\r\\n\\r\\nid: 7\\r\\nda",
    "ta: {\\"a\\":\\r\\ndata: 1}\\r\\n",
    "\\r\\nid: 8\\ndata: x\\n\\n",
    "id: 9\\n",
  ];
  for (const chunk of chunks) {
    buffer += chunk;
    const [frames, rest] = splitFrames(buffer);
    buffer = rest;
    out.push(...frames.map(parseFrame));
  }
  return { out, rest: buffer };
}"""

TIMELINE = """async () => {
  const { Timeline, ChatView } = await import("/ui/timeline.js");
  const timeline = new Timeline();
  const container = document.createElement("div");
  document.body.append(container);
  const view = new ChatView(container);
  const item = (id, status, content, extra = {}) => ({
    item_id: id, native_item_id: null, parent_id: null, kind: "message", role: "assistant",
    content, status, ...extra,
  });
  let sequence = 0;
  const apply = (type, data) => {
    sequence += 1;
    view.update(timeline, timeline.apply({ event_id: `evt_${sequence}`, sequence, type, data,
      time: "2026-01-01T00:00:00Z", source: "agent", synthetic: false }));
    const nodes = [...container.querySelectorAll("[data-testid=chat-item]")];
    return nodes.map((n) => [n.dataset.kind, n.dataset.status || "", n.innerText]);
  };
  const steps = [];
  steps.push(apply("turn.started", { turn_id: "t1" }));
  steps.push(apply("item.started", { item: item("a", "in_progress", []) }));
  steps.push(apply("item.delta", { item_id: "a", delta: "Hel" }));
  steps.push(apply("item.delta", { item_id: "a", delta: "lo" }));
  const state1 = timeline.state;
  const hello = [{ type: "text", text: "Hello" }, { type: "reasoning", text: "because", visibility: "public" }];
  steps.push(apply("item.completed", { item: item("a", "completed", hello) }));
  steps.push(apply("item.delta", { item_id: "b", delta: "stray" }));
  const call = [{ type: "tool_call", name: "edit", arguments: "{}", call_id: "c1" }];
  steps.push(apply("item.started", { item: item("c", "in_progress", call, { kind: "tool_call" }) }));
  steps.push(apply("item.started", { item: item("m", "completed", [{ type: "text", text: "between" }]) }));
  const output = [{ type: "tool_result", call_id: "c1", output: "done" }];
  const resultOf = { kind: "tool_result", role: "tool", parent_id: "c" };
  steps.push(apply("item.completed", { item: item("r", "completed", output, resultOf) }));
  steps.push(apply("permission.requested", { permission_id: "p1", action: "edit", status: "requested" }));
  const state2 = timeline.state;
  steps.push(apply("permission.resolved", { permission_id: "p1", action: "edit", status: "accept" }));
  steps.push(apply("turn.ended", { turn_id: "t1" }));
  const state3 = timeline.state;
  // A turn that ends asking (legacy's mock: no turn.ended): idle once answered ...
  apply("turn.started", { turn_id: "t2" });
  apply("permission.requested", { permission_id: "p2", action: "edit", status: "requested" });
  apply("permission.resolved", { permission_id: "p2", action: "edit", status: "accept" });
  const state4 = timeline.state;
  // ... and running again when the agent goes on after the reply.
  apply("turn.started", { turn_id: "t3" });
  apply("permission.requested", { permission_id: "p3", action: "edit", status: "requested" });
  apply("permission.resolved", { permission_id: "p3", action: "edit", status: "accept" });
  apply("item.started", { item: item("z", "in_progress", []) });
  const state5 = timeline.state;
  apply("turn.ended", { turn_id: "t3" });
  const state6 = timeline.state;
  const reasoningOpen = container.querySelector("details.reasoning").open;
  return { steps, states: [state1, state2, state3, state4, state5, state6], reasoningOpen };
}"""


def test_sse_frames_are_parsed_across_chunks(ui: Page, bridge: Bridge) -> None:
    ui.page.goto(bridge.url + "/ui/")
    result: dict[str, Any] = ui.page.evaluate(FRAMES)
    assert result["out"] == [
        {"id": None, "data": None},
        {"id": "7", "data": '{"a":\n1}'},
        {"id": "8", "data": "x"},
    ]
    assert result["rest"] == "id: 9\n"


def test_conversation_from_deltas_and_items(ui: Page, bridge: Bridge) -> None:
    ui.page.goto(bridge.url + "/ui/")
    result: dict[str, Any] = ui.page.evaluate(TIMELINE)
    steps = result["steps"]
    assert steps[0] == []
    assert steps[1][0][:2] == ["message", "in_progress"]
    assert steps[2][0][2].endswith("Hel") and steps[3][0][2].endswith("Hello")
    completed = steps[4][0]
    assert completed[1] == "completed" and "Hello" in completed[2] and "Reasoning" in completed[2]
    assert "because" not in completed[2]  # folded
    assert result["reasoningOpen"] is False
    assert steps[5][-1][2].endswith("stray")  # a delta without its start is still shown
    # The tool result sits under its call, before the message that came in between.
    assert [s[0] for s in steps[8]] == ["message", "message", "tool_call", "tool_result", "message"]
    assert steps[8][3][2].endswith("done")
    assert steps[10][-1][0] == "permission.resolved"
    assert result["states"] == ["running", "waiting for you", "idle", "idle", "running", "idle"]
    assert not ui.console.errors


HOSTILE_PARTS = """async () => {
  const { Timeline, ChatView } = await import("/ui/timeline.js");
  const timeline = new Timeline();
  const container = document.createElement("div");
  document.body.append(container);
  const view = new ChatView(container);
  const item = (id, kind, content) => ({
    item_id: id, native_item_id: null, parent_id: null, kind, role: "assistant", content, status: "completed",
  });
  let sequence = 0;
  const apply = (type, data) => {
    sequence += 1;
    view.update(timeline, timeline.apply({ event_id: `evt_${sequence}`, sequence, type, data,
      time: "2026-01-01T00:00:00Z", source: "agent", synthetic: false }));
  };
  // An agent's plan with a null entry (and a string one), then its reply.
  const plan = { entries: [null, "loose", { content: "Write it", status: "in_progress" }] };
  apply("item.completed", { item: item("plan", "status", [{ type: "json", json: plan }]) });
  apply("item.completed", { item: item("reply", "message", [{ type: "text", text: "Here is the reply" }]) });
  // A part the page cannot render at all, then another reply.
  apply("item.completed", { item: item("odd", "message", [null]) });
  apply("item.completed", { item: item("after", "message", [{ type: "text", text: "Still shown" }]) });
  return [...container.querySelectorAll("[data-testid=chat-item]")].map((n) => [n.dataset.kind, n.innerText]);
}"""


def test_a_render_error_never_hides_the_events_after_it(ui: Page, bridge: Bridge) -> None:
    ui.page.goto(bridge.url + "/ui/")
    shown: list[list[str]] = ui.page.evaluate(HOSTILE_PARTS)
    assert [kind for kind, _ in shown] == ["status", "message", "render-error", "message"]
    assert "loose" in shown[0][1] and "Write it" in shown[0][1]
    assert "Here is the reply" in shown[1][1]
    assert "Still shown" in shown[3][1]
