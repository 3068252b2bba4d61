// The conversation of a session, built from its universal events, and its DOM.

import { el, formatTime } from "./dom.js";

const NOTE_TYPES = new Set([
  "session.started",
  "session.ended",
  "error",
  "agent.unparsed",
  "permission.resolved",
  "question.resolved",
]);

/** What the events say so far: items in order, pending prompts, turn and session state. */
export class Timeline {
  constructor() {
    this.entries = new Map(); // key -> entry
    this.order = [];
    this.permissions = new Map(); // permission_id -> data, while requested
    this.questions = new Map(); // question_id -> data, while requested
    this.runningTurns = new Set();
    // Turns that asked a person and have shown nothing since: legacy's mock ended a turn that way,
    // with no turn.ended; what the agent shows next (or turn.ended) settles it.
    this.askingTurns = new Set();
    this.ended = null;
    this.eventCount = 0;
  }

  upsertItem(item, event) {
    let entry = this.entries.get(item.item_id);
    if (!entry) {
      entry = { key: item.item_id, kind: "item", item, deltaText: "", time: event.time, sequence: event.sequence };
      this.entries.set(entry.key, entry);
      this.order.push(entry.key);
    } else {
      entry.item = item;
    }
    return entry;
  }

  /** Applies one event; returns the keys of the entries it changed. */
  apply(event) {
    this.eventCount += 1;
    const data = event.data || {};
    const changed = [];
    if (this.askingTurns.size && (event.type.startsWith("item.") || event.type === "turn.ended")) {
      for (const id of this.askingTurns) this.runningTurns.add(id);
      this.askingTurns.clear();
    }
    switch (event.type) {
      case "item.started":
      case "item.completed": {
        if (!data.item || !data.item.item_id) break;
        const entry = this.upsertItem(data.item, event);
        if (event.type === "item.completed") entry.deltaText = "";
        changed.push(entry.key);
        break;
      }
      case "item.delta": {
        if (!data.item_id) break;
        let entry = this.entries.get(data.item_id);
        if (!entry) {
          const stub = {
            item_id: data.item_id,
            native_item_id: data.native_item_id ?? null,
            parent_id: null,
            kind: "message",
            role: "assistant",
            content: [],
            status: "in_progress",
          };
          entry = this.upsertItem(stub, event);
        }
        entry.deltaText += data.delta || "";
        changed.push(entry.key);
        break;
      }
      case "turn.started":
        // One turn runs at a time: one that never recorded its end is over when the next starts.
        this.runningTurns.clear();
        this.askingTurns.clear();
        if (data.turn_id) this.runningTurns.add(data.turn_id);
        break;
      case "turn.ended":
        if (data.turn_id) this.runningTurns.delete(data.turn_id);
        else this.runningTurns.clear();
        break;
      case "permission.requested":
        if (data.permission_id) this.permissions.set(data.permission_id, data);
        this.pauseTurns();
        break;
      case "question.requested":
        if (data.question_id) this.questions.set(data.question_id, data);
        this.pauseTurns();
        break;
      default:
        break;
    }
    if (event.type === "permission.resolved") this.permissions.delete(data.permission_id);
    if (event.type === "question.resolved") this.questions.delete(data.question_id);
    if (event.type === "session.ended") {
      this.ended = data;
      this.runningTurns.clear();
      this.permissions.clear();
      this.questions.clear();
    }
    if (NOTE_TYPES.has(event.type)) {
      const entry = { key: event.event_id || `seq-${event.sequence}`, kind: "note", event, time: event.time };
      this.entries.set(entry.key, entry);
      this.order.push(entry.key);
      changed.push(entry.key);
    }
    return changed;
  }

  pauseTurns() {
    for (const id of this.runningTurns) this.askingTurns.add(id);
    this.runningTurns.clear();
  }

  get state() {
    if (this.ended) return "ended";
    if (this.permissions.size || this.questions.size) return "waiting for you";
    if (this.runningTurns.size) return "running";
    return "idle";
  }
}

// ---- rendering --------------------------------------------------------------------------------

const ROLE_NAMES = { user: "You", assistant: "Agent", tool: "Tool", system: "System" };

function prettyJson(text) {
  if (typeof text !== "string") return JSON.stringify(text, null, 2);
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;
  }
}

/** A unified diff with its added, removed and hunk lines marked. */
export function renderDiff(diff) {
  const pre = el("pre", { class: "diff", tabindex: "0", "aria-label": "Diff" });
  for (const line of diff.replace(/\n$/, "").split("\n")) {
    let cls = "ctx";
    if (line.startsWith("+++") || line.startsWith("---") || line.startsWith("diff ") || line.startsWith("index ")) {
      cls = "meta";
    } else if (line.startsWith("+")) cls = "add";
    else if (line.startsWith("-")) cls = "del";
    else if (line.startsWith("@@")) cls = "hunk";
    else if (/^(new|deleted) file mode|^rename (from|to)|^similarity/.test(line)) cls = "meta";
    pre.append(el("span", { class: `line ${cls}` }, line), "\n");
  }
  return pre;
}

function renderPlan(json) {
  const list = el("ol", { class: "plan" });
  for (const entry of json.entries) {
    // An agent's plan may hold anything: a null or a string is shown as an empty or plain step.
    const step = entry && typeof entry === "object" ? entry : { content: entry == null ? "" : String(entry) };
    const status = String(step.status || "pending");
    const mark = status === "completed" ? "✓" : status === "in_progress" ? "▸" : "○";
    list.append(
      el(
        "li",
        { class: `plan-step ${status}` },
        el("span", { class: "mark", "aria-hidden": "true" }, mark),
        ` ${step.content ?? ""} `,
        el("span", { class: "muted" }, `(${status.replace("_", " ")}${step.priority ? `, ${step.priority}` : ""})`),
      ),
    );
  }
  return list;
}

function renderPart(part) {
  switch (part.type) {
    case "text":
      return el("div", { class: "text" }, part.text ?? "");
    case "reasoning":
      return el(
        "details",
        { class: "reasoning" },
        el("summary", {}, `Reasoning${part.visibility && part.visibility !== "public" ? ` (${part.visibility})` : ""}`),
        el("div", { class: "text" }, part.text ?? ""),
      );
    case "tool_call":
      return el(
        "div",
        { class: "tool-call" },
        el("div", {}, el("code", { class: "tool-name" }, part.name ?? "tool"), el("span", { class: "muted" }, ` ${part.call_id ?? ""}`)),
        part.arguments ? el("pre", { class: "args" }, prettyJson(part.arguments)) : null,
      );
    case "tool_result":
      return el(
        "div",
        { class: "tool-result" },
        part.output ? el("pre", { class: "output" }, part.output) : el("span", { class: "muted" }, "no output"),
      );
    case "file_ref":
      return el(
        "div",
        { class: "file-ref" },
        el("div", {}, el("code", {}, part.path ?? ""), " ", el("span", { class: "pill subtle" }, part.action ?? "")),
        part.diff ? renderDiff(part.diff) : null,
      );
    case "status":
      return el("div", { class: "status-part" }, el("strong", {}, part.label ?? "status"), part.detail ? ` ${part.detail}` : "");
    case "json":
      if (part.json && Array.isArray(part.json.entries)) return renderPlan(part.json);
      return el("details", { class: "json" }, el("summary", {}, "JSON"), el("pre", {}, JSON.stringify(part.json, null, 2)));
    case "image":
      return el("div", { class: "image-part" }, el("span", { class: "pill subtle" }, "image"), " ", el("code", {}, part.path ?? ""), part.mime ? ` (${part.mime})` : "");
    default:
      return el("details", { class: "json" }, el("summary", {}, part.type ?? "part"), el("pre", {}, JSON.stringify(part, null, 2)));
  }
}

function noteContent(event) {
  const data = event.data || {};
  switch (event.type) {
    case "session.started": {
      const meta = data.metadata || {};
      const bits = ["agent", "agentMode", "model", "variant", "permissionMode"]
        .filter((key) => meta[key])
        .map((key) => `${key} ${meta[key]}`);
      return ["Session started", bits.join(" · "), "info"];
    }
    case "session.ended":
      return ["Session ended", [data.reason, data.terminated_by && `by ${data.terminated_by}`, data.message].filter(Boolean).join(" · "), "info"];
    case "error":
      return [data.code ? `Error ${data.code}` : "Error", data.message ?? "", "error"];
    case "agent.unparsed":
      return ["Agent output not understood", `${data.location ?? ""}: ${data.error ?? ""}`, "error"];
    case "permission.resolved":
      return [`Permission ${data.permission_id}`, `${data.action ?? ""}: ${data.status}`, "info"];
    case "question.resolved":
      return [
        `Question ${data.question_id}`,
        `${data.prompt ?? ""} → ${data.status}${data.response ? `: ${data.response}` : ""}`,
        "info",
      ];
    default:
      return [event.type, "", "info"];
  }
}

export function renderEntry(entry) {
  if (entry.kind === "note") {
    const [title, detail, severity] = noteContent(entry.event);
    return el(
      "article",
      {
        "data-testid": "chat-item",
        "data-role": "system",
        "data-kind": entry.event.type,
        class: `chat-item note ${severity}`,
      },
      el("strong", {}, title),
      detail ? el("span", {}, ` ${detail}`) : null,
      el("time", { datetime: entry.time }, formatTime(entry.time)),
    );
  }
  const item = entry.item;
  const role = item.role || (item.kind === "tool_result" ? "tool" : "assistant");
  const parts = item.content || [];
  const status = item.status || "in_progress";
  const head = el(
    "header",
    { class: "item-head" },
    el("span", { class: "who" }, ROLE_NAMES[role] || role),
    item.kind !== "message" ? el("span", { class: "kind" }, item.kind.replace("_", " ")) : null,
    status !== "completed" ? el("span", { class: `pill ${status === "failed" ? "danger" : "accent"}` }, status.replace("_", " ")) : null,
    el("time", { datetime: entry.time }, formatTime(entry.time)),
  );
  const body = el("div", { class: "parts" });
  if (parts.length) {
    for (const part of parts) body.append(renderPart(part));
  } else if (entry.deltaText) {
    body.append(el("div", { class: "text" }, entry.deltaText));
  } else if (status === "in_progress") {
    body.append(el("span", { class: "typing muted", "aria-label": "in progress" }, "…"));
  }
  return el(
    "article",
    {
      "data-testid": "chat-item",
      "data-role": role,
      "data-kind": item.kind,
      "data-item-id": item.item_id,
      "data-status": status,
      class: `chat-item role-${role} kind-${item.kind}`,
    },
    head,
    body,
  );
}

/** An entry the page cannot render is still shown (its JSON), and never stops the ones after it. */
function renderSafely(entry) {
  try {
    return renderEntry(entry);
  } catch (error) {
    console.error("inspector: cannot render an entry", error);
    const what = entry.kind === "note" ? entry.event : entry.item;
    return el(
      "article",
      { "data-testid": "chat-item", "data-kind": "render-error", class: "chat-item note error" },
      el("strong", {}, "Not shown as it should be"),
      el("span", {}, ` ${error && error.message ? error.message : String(error)}`),
      el("details", { class: "json" }, el("summary", {}, "JSON"), el("pre", {}, JSON.stringify(what, null, 2))),
    );
  }
}

/** Keeps a container in step with a Timeline: re-renders only the entries that changed. */
export class ChatView {
  constructor(container) {
    this.container = container;
    this.nodes = new Map();
    this.lastChild = new Map(); // item key -> last node shown under it (tool results after calls)
    // Follow the newest entry unless the reader scrolled up; kept across resizes (prompts coming and
    // going change the conversation's height without a scroll of the reader's).
    this.follow = true;
    this.autoTop = 0;
    container.addEventListener("scroll", () => {
      if (container.scrollHeight - container.scrollTop - container.clientHeight < 40) this.follow = true;
      else if (container.scrollTop < this.autoTop - 2) this.follow = false; // the reader scrolled up
    });
    new ResizeObserver(() => this.stick()).observe(container);
  }

  stick() {
    if (!this.follow) return;
    this.container.scrollTop = this.container.scrollHeight;
    this.autoTop = this.container.scrollTop;
  }

  reset() {
    this.follow = true;
    this.autoTop = 0;
    this.nodes.clear();
    this.lastChild.clear();
    this.container.replaceChildren();
  }

  update(timeline, keys) {
    for (const key of new Set(keys)) {
      const entry = timeline.entries.get(key);
      if (!entry) continue;
      const node = renderSafely(entry);
      const old = this.nodes.get(key);
      if (old) {
        // Keep open <details> open across updates.
        const open = [...old.querySelectorAll("details")].map((d) => d.open);
        node.querySelectorAll("details").forEach((d, i) => {
          if (open[i]) d.open = true;
        });
        old.replaceWith(node);
        for (const [parent, last] of this.lastChild) if (last === old) this.lastChild.set(parent, node);
      } else {
        const parentId = entry.kind === "item" ? entry.item.parent_id : null;
        const anchor = parentId ? this.lastChild.get(parentId) || this.nodes.get(parentId) : null;
        if (anchor && anchor.isConnected) {
          anchor.after(node);
          this.lastChild.set(parentId, node);
        } else {
          this.container.append(node);
        }
      }
      this.nodes.set(key, node);
    }
    this.stick();
  }
}
