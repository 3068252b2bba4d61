// The inspector page: wiring of the views to the API.

import { Api, ApiError, loadConnection, parseHeaders, saveConnection } from "./api.js";
import { isConnectScreenShown, probeConnection, showConnectScreen, unauthorized } from "./connect.js";
import { clearCreateExtras, createExtras, setupCreateExtras } from "./create-extras.js";
import { $, el, formatBytes, formatDateTime, formatTime } from "./dom.js";
import { copyText, PollingFeed, streamTurn } from "./feeds.js";
import { EventStream } from "./stream.js";
import { ChatView, Timeline } from "./timeline.js";

const REQUEST_LOG_LIMIT = 300;
const EVENT_ROWS_LIMIT = 5000;
const SESSIONS_POLL_MS = 10000;

const state = {
  api: null,
  agents: [],
  sessions: [],
  sessionId: null,
  timeline: new Timeline(),
  stream: null,
  eventTypes: new Set(),
  fs: { dir: ".", absolute: null },
  installing: new Map(), // agent id -> {started, error}
  models: [], // of the agent picked in the create form
  // How the selected session's events are followed (the legacy inspector's switch): "sse",
  // "poll", or "turn" (only the events of the turns this page starts); paused: not at all.
  mode: "sse",
  paused: false,
  lastSequence: 0, // the newest event shown: every feed resumes after it
  events: [], // what "Copy JSON" copies (the rows shown)
};

let chatView;

// ---- errors -------------------------------------------------------------------------------------
function showError(error, context) {
  // A refused token is the connection's problem, not one call's: back to the connect screen.
  if (error instanceof ApiError && error.status === 401) {
    showConnectScreen(state.api.conn, unauthorized(state.api, error));
    return;
  }
  const banner = $("error-banner");
  let title = "Error";
  let detail = error && error.message ? error.message : String(error);
  if (error instanceof ApiError) {
    title = error.title;
    detail = error.detail;
  }
  $("error-title").textContent = context ? `${context}: ${title}` : title;
  $("error-detail").textContent = detail || "";
  banner.hidden = false;
}

function clearError() {
  $("error-banner").hidden = true;
}

/** Runs an action, showing what went wrong in the error banner; never swallowed. */
async function attempt(context, action) {
  try {
    return await action();
  } catch (error) {
    if (error && error.name === "AbortError") return undefined;
    showError(error, context);
    return undefined;
  }
}

// ---- request log --------------------------------------------------------------------------------
const logNodes = new Map();

function logRequest(entry) {
  const list = $("request-log");
  const status = entry.error ? entry.error : entry.status === null ? "…" : String(entry.status);
  const ok = entry.status !== null && entry.status < 400 && !entry.error;
  const curl = el("pre", { class: "curl" }, entry.curl);
  const copy = el("button", { type: "button", class: "ghost small" }, "Copy curl");
  copy.addEventListener("click", async () => {
    try {
      await navigator.clipboard.writeText(entry.curl);
      copy.textContent = "Copied";
    } catch {
      copy.textContent = "Select the text to copy";
    }
  });
  const node = el(
    "li",
    { class: "request" },
    el(
      "details",
      {},
      el(
        "summary",
        {},
        el("time", {}, formatTime(entry.time)),
        el("span", { class: "method" }, entry.method),
        el("span", { class: `pill ${entry.status === null && !entry.error ? "subtle" : ok ? "success" : "danger"}` }, status),
        el("span", { class: "path mono" }, entry.url.replace(state.api.base, "")),
        entry.ms !== null ? el("span", { class: "muted" }, `${entry.ms} ms`) : null,
      ),
      curl,
      copy,
    ),
  );
  const old = logNodes.get(entry.id);
  if (old) {
    node.querySelector("details").open = old.querySelector("details").open;
    old.replaceWith(node);
  } else {
    list.prepend(node);
    while (list.children.length > REQUEST_LOG_LIMIT) {
      const last = list.lastElementChild;
      for (const [id, n] of logNodes) if (n === last) logNodes.delete(id);
      last.remove();
    }
  }
  logNodes.set(entry.id, node);
}

// ---- connection -------------------------------------------------------------------------------
function fillConnectionForm(conn) {
  $("conn-url").value = conn.url || "";
  $("conn-token").value = conn.token || "";
  $("conn-headers").value = Object.keys(conn.headers || {}).length ? JSON.stringify(conn.headers) : "";
}

/** Connected when the server answers and takes the token; else the connect screen. */
async function checkConnection() {
  const reason = await probeConnection(state.api);
  if (reason) {
    showConnectScreen(state.api.conn, reason);
    return false;
  }
  const badge = $("server-status");
  badge.textContent = `connected · ${state.api.base}${state.api.conn.token ? " · token" : ""}`;
  badge.className = "pill success";
  badge.dataset.connected = "true";
  return true;
}

// ---- agents -------------------------------------------------------------------------------------
async function loadAgents() {
  const result = await attempt("Agents", () => state.api.request("GET", "/v1/agents"));
  if (!result) return;
  state.agents = result.agents || [];
  const select = $("agent-select");
  const previous = select.value;
  select.replaceChildren(
    ...state.agents.map((agent) =>
      el("option", { value: agent.id }, `${agent.id}${agent.installed ? "" : " (not installed)"}`),
    ),
  );
  const preferred = state.agents.find((a) => a.id === previous) || state.agents.find((a) => a.id === "mock" && a.installed) || state.agents.find((a) => a.installed) || state.agents[0];
  if (preferred) select.value = preferred.id;
  if (preferred && preferred.id !== previous) await loadAgentOptions(preferred.id);
  renderAgentCards();
}

function option(value, label) {
  return el("option", { value }, label);
}

async function loadAgentOptions(agentId) {
  const agent = state.agents.find((a) => a.id === agentId);
  const modeSelect = $("agent-mode");
  const modelSelect = $("model");
  modeSelect.replaceChildren(option("", "agent default"));
  modelSelect.replaceChildren(option("", "agent default"));
  state.models = [];
  updateVariants();
  if (!agent) return;
  const path = `/v1/agents/${encodeURIComponent(agentId)}`;
  const [modes, models] = await Promise.all([
    attempt(`Modes of ${agentId}`, () => state.api.request("GET", `${path}/modes`)),
    attempt(`Models of ${agentId}`, () => state.api.request("GET", `${path}/models`)),
  ]);
  if ($("agent-select").value !== agentId) return;
  for (const mode of (modes && modes.modes) || []) {
    modeSelect.append(option(mode.id, mode.name && mode.name !== mode.id ? `${mode.name} (${mode.id})` : mode.id));
  }
  state.models = (models && models.models) || [];
  for (const model of state.models) {
    const label = model.name && model.name !== model.id ? `${model.name} (${model.id})` : model.id;
    modelSelect.append(option(model.id, models.defaultModel === model.id ? `${label} · default` : label));
  }
  updateVariants();
}

function updateVariants() {
  const select = $("variant");
  const model = state.models.find((m) => m.id === $("model").value);
  select.replaceChildren(option("", "default"));
  for (const variant of (model && model.variants) || []) {
    select.append(option(variant, model.defaultVariant === variant ? `${variant} · default` : variant));
  }
}

function renderAgentCards() {
  const cards = $("agent-cards");
  cards.replaceChildren(
    ...state.agents.map((agent) => {
      const install = state.installing.get(agent.id);
      const caps = Object.entries(agent.capabilities || {});
      const button = el(
        "button",
        { type: "button", class: "small", disabled: install && install.running },
        install && install.running ? `Installing… ${Math.round((Date.now() - install.started) / 1000)} s` : agent.installed ? "Reinstall" : "Install",
      );
      button.addEventListener("click", () => installAgent(agent));
      return el(
        "article",
        { class: "card", "data-agent-id": agent.id, "aria-label": `Agent ${agent.id}` },
        el(
          "div",
          { class: "row wrap" },
          el("h3", {}, agent.id),
          el("span", { class: `pill ${agent.installed ? "success" : "danger"}` }, agent.installed ? "installed" : "not installed"),
          el("span", { class: `pill ${agent.credentialsAvailable ? "success" : "warning"}` }, agent.credentialsAvailable ? "credentials" : "no credentials"),
          agent.serverStatus ? el("span", { class: "pill subtle" }, `server ${agent.serverStatus.status}`) : null,
        ),
        el("p", { class: "muted" }, agent.version ? `version ${agent.version}` : "version unknown", agent.path ? el("span", { class: "mono" }, ` · ${agent.path}`) : null),
        el(
          "ul",
          { class: "caps", "aria-label": "Capabilities" },
          ...caps.map(([name, on]) => el("li", { class: `cap ${on ? "on" : "off"}`, title: on ? "supported" : "not supported" }, `${on ? "✓" : "✗"} ${name}`)),
        ),
        el("div", { class: "row" }, button, install && install.message ? el("span", { class: "muted", role: "status" }, install.message) : null),
        install && install.error ? el("pre", { class: "install-error", role: "alert" }, install.error) : null,
      );
    }),
  );
}

async function installAgent(agent) {
  const record = { running: true, started: Date.now(), error: null, message: "" };
  state.installing.set(agent.id, record);
  const ticker = setInterval(renderAgentCards, 1000);
  renderAgentCards();
  try {
    await state.api.request("POST", `/v1/agents/${encodeURIComponent(agent.id)}/install`, { json: { reinstall: agent.installed } });
    record.message = `installed in ${Math.round((Date.now() - record.started) / 1000)} s`;
  } catch (error) {
    const stderr = error.problem && error.problem.details && error.problem.details.stderr;
    record.error = [error.message, stderr].filter(Boolean).join("\n\n");
    showError(error, `Install ${agent.id}`);
  } finally {
    record.running = false;
    clearInterval(ticker);
  }
  await loadAgents();
}

// ---- sessions -----------------------------------------------------------------------------------
async function loadSessions() {
  const result = await attempt("Sessions", () => state.api.request("GET", "/v1/sessions"));
  if (!result) return;
  state.sessions = result.sessions || [];
  renderSessions();
  updateSessionControls();
}

function sessionStatus(info) {
  if (info.ended) return "ended"; // also a session restored after a restart: no session.ended event
  if (info.sessionId === state.sessionId && state.timeline.eventCount) return state.timeline.state;
  return "active";
}

/** The selected session's state: what its events say, or ended when the server says so. */
function currentState() {
  const info = state.sessions.find((s) => s.sessionId === state.sessionId);
  return info && info.ended ? "ended" : state.timeline.state;
}

function renderSessions() {
  const list = $("session-list");
  const sessions = [...state.sessions].sort((a, b) => (b.createdAt || 0) - (a.createdAt || 0));
  if (!sessions.length) {
    list.replaceChildren(el("li", { class: "muted empty" }, "No sessions yet."));
    return;
  }
  list.replaceChildren(
    ...sessions.map((info) => {
      const current = info.sessionId === state.sessionId;
      const status = sessionStatus(info);
      const count = current ? Math.max(info.eventCount, state.timeline.eventCount) : info.eventCount;
      const button = el(
        "button",
        {
          type: "button",
          class: "session-item",
          "data-testid": "session-item",
          "data-session-id": info.sessionId,
          "data-status": status,
          "aria-current": current ? "true" : null,
        },
        el("span", { class: "row" }, el("strong", { class: "sid" }, info.sessionId), el("span", { class: `pill ${status === "ended" ? "subtle" : "success"}` }, status)),
        el("span", { class: "muted small" }, `${info.agent}${info.title ? ` · ${info.title}` : ""} · ${count} events`),
        el("span", { class: "muted small" }, `created ${formatDateTime(info.createdAt)} · updated ${formatDateTime(info.updatedAt)}`),
      );
      button.addEventListener("click", () => selectSession(info.sessionId));
      return el("li", {}, button);
    }),
  );
}

function newSessionId() {
  const bytes = crypto.getRandomValues(new Uint8Array(4));
  return `s-${[...bytes].map((b) => b.toString(16).padStart(2, "0")).join("")}`;
}

async function createSession(event) {
  event.preventDefault();
  const agent = $("agent-select").value;
  if (!agent) {
    showError(new Error("No agent to create a session with."), "New session");
    return;
  }
  const id = $("session-id-input").value.trim() || newSessionId();
  let body;
  try {
    body = { agent, ...createExtras() };
  } catch (error) {
    showError(error, "New session");
    return;
  }
  for (const [field, input] of [["agentMode", "agent-mode"], ["permissionMode", "permission-mode"], ["model", "model"], ["variant", "variant"], ["title", "session-title"]]) {
    const value = $(input).value.trim();
    if (value) body[field] = value;
  }
  const button = $("new-session");
  button.disabled = true;
  button.textContent = "Creating…";
  try {
    const created = await attempt("New session", () => state.api.request("POST", `/v1/sessions/${encodeURIComponent(id)}`, { json: body }));
    if (created) {
      clearError();
      $("session-id-input").value = "";
      clearCreateExtras();
      await loadSessions();
      selectSession(id);
      $("message-input").focus();
    }
  } finally {
    button.disabled = false;
    button.textContent = "Create session";
  }
}

async function terminateSession() {
  const id = state.sessionId;
  if (!id) return;
  $("terminate").disabled = true;
  const done = await attempt("Terminate", () => state.api.request("POST", `/v1/sessions/${encodeURIComponent(id)}/terminate`));
  if (done === undefined) $("terminate").disabled = false;
  await loadSessions();
}

function selectSession(id) {
  if (state.stream) state.stream.stop();
  state.stream = null;
  state.sessionId = id;
  state.timeline = new Timeline();
  state.eventTypes = new Set();
  state.lastSequence = 0;
  state.events = [];
  chatView.reset();
  $("event-list").replaceChildren();
  $("event-filter").replaceChildren(option("", "all"));
  $("prompts").replaceChildren();
  const hash = id ? `#session=${encodeURIComponent(id)}` : "";
  if (location.hash !== hash) history.replaceState(history.state, "", location.pathname + location.search + hash);
  $("chat-heading").textContent = id ? `Session ${id}` : "No session selected";
  document.title = id ? `${id} · Inspector · acp-rest-bridge` : "Inspector · acp-rest-bridge";
  if (!id) {
    chatView.container.append(el("p", { class: "empty muted" }, "Create or pick a session to see its conversation."));
  } else {
    startStream();
  }
  if ($("fs-in-session").checked) state.fs = { dir: ".", absolute: null };
  updateSessionControls();
  renderSessions();
}

function showStreamState(name, detail) {
  const badge = $("stream-state");
  badge.textContent = name === "live" ? "live" : `${name}${detail ? ` (${detail})` : ""}`;
  badge.dataset.state = name;
}

/** Follows the selected session as the mode says, after the newest event shown. */
function startStream() {
  if (state.stream) state.stream.stop();
  state.stream = null;
  if (!state.sessionId) return;
  if (state.paused) {
    showStreamState("paused", `after #${state.lastSequence}`);
    return;
  }
  if (state.mode === "turn") {
    showStreamState("turn stream", "events of the messages sent here");
    return;
  }
  const Feed = state.mode === "poll" ? PollingFeed : EventStream;
  const stream = new Feed(state.api, state.sessionId, {
    includeRaw: $("include-raw").checked,
    onEvents: (events) => {
      if (state.stream === stream) applyEvents(events);
    },
    onState: (name, detail) => {
      if (state.stream === stream) showStreamState(name, detail);
    },
    onError: (error) => {
      if (state.stream === stream) showError(error, "Events");
    },
  });
  stream.lastSequence = state.lastSequence;
  state.stream = stream;
  stream.start();
}

function setPaused(paused) {
  state.paused = paused;
  const button = $("stream-pause");
  button.textContent = paused ? "Resume" : "Pause";
  button.setAttribute("aria-pressed", String(paused));
  startStream();
}

async function copyEvents() {
  const button = $("events-copy");
  const ok = await copyText(JSON.stringify(state.events, null, 2));
  button.textContent = ok ? `Copied ${state.events.length}` : "Copy failed";
  setTimeout(() => {
    button.textContent = "Copy JSON";
  }, 2000);
}

/** Empties the event list (and what Copy JSON copies); new events keep coming after it. */
function clearEvents() {
  state.events = [];
  $("event-list").replaceChildren();
  updateEventCount();
}

function updateEventCount() {
  const shown = $("event-list").children.length;
  const total = state.timeline.eventCount;
  $("event-count").textContent = shown < total ? `${total} events, ${shown} shown` : `${shown} events`;
}

function restartStream() {
  const id = state.sessionId;
  if (id) selectSession(id);
}

function applyEvents(incoming) {
  // Each sequence once, whichever feed brought it (a mode switch, a turn stream beside a feed).
  const events = incoming.filter((e) => typeof e.sequence === "number" && e.sequence > state.lastSequence);
  if (!events.length) return;
  state.lastSequence = events[events.length - 1].sequence;
  state.events.push(...events);
  if (state.events.length > EVENT_ROWS_LIMIT) state.events.splice(0, state.events.length - EVENT_ROWS_LIMIT);
  const changed = [];
  let promptsChanged = false;
  const list = $("event-list");
  const filter = $("event-filter").value;
  const fragment = document.createDocumentFragment();
  for (const event of events) {
    try {
      changed.push(...state.timeline.apply(event));
    } catch (error) {
      console.error("inspector: cannot apply an event to the conversation", error); // still listed below
    }
    if (event.type.startsWith("permission.") || event.type.startsWith("question.") || event.type === "session.ended") promptsChanged = true;
    fragment.append(renderEventRow(event, filter));
    if (!state.eventTypes.has(event.type)) {
      state.eventTypes.add(event.type);
      const select = $("event-filter");
      const options = [...state.eventTypes].sort();
      const current = select.value;
      select.replaceChildren(option("", "all"), ...options.map((t) => option(t, t)));
      select.value = current;
    }
  }
  list.append(fragment);
  // The newest rows only: a session of a million events must not make the page a million nodes.
  let dropped = list.children.length - EVENT_ROWS_LIMIT;
  while (dropped-- > 0) list.firstElementChild.remove();
  updateEventCount();
  chatView.update(state.timeline, changed);
  if (promptsChanged) renderPrompts();
  updateSessionControls();
  const info = state.sessions.find((s) => s.sessionId === state.sessionId);
  if (info) {
    if (state.timeline.ended) info.ended = true;
    const last = Date.parse(events[events.length - 1].time);
    if (!Number.isNaN(last) && last > (info.updatedAt || 0)) info.updatedAt = last;
  }
  renderSessions();
}

function renderEventRow(event, filter) {
  const details = el(
    "details",
    {},
    el(
      "summary",
      {},
      el("span", { class: "seq" }, `#${event.sequence}`),
      el("span", { class: "type" }, event.type),
      el("span", { class: "muted" }, eventSummary(event)),
      el("time", { datetime: event.time }, formatTime(event.time)),
    ),
  );
  // The JSON is laid out when the row is opened: a long session stays cheap to show.
  details.addEventListener("toggle", () => {
    if (details.open && !details.querySelector("pre")) details.append(el("pre", { class: "json" }, JSON.stringify(event, null, 2)));
  });
  return el(
    "li",
    { "data-testid": "event", "data-type": event.type, "data-sequence": event.sequence, hidden: Boolean(filter) && filter !== event.type },
    details,
  );
}

/** A few words on what the event is about, for its row. */
function eventSummary(event) {
  const data = event.data || {};
  const bits = [];
  if (data.item) bits.push(data.item.kind, data.item.role, data.item.item_id);
  else if (data.item_id) bits.push(data.item_id);
  if (data.permission_id) bits.push(data.permission_id, data.status);
  if (data.question_id) bits.push(data.question_id, data.status);
  if (data.turn_id) bits.push(data.turn_id);
  if (event.type === "error" || event.type === "session.ended") bits.push(data.code || data.reason);
  bits.push(event.synthetic ? `${event.source}, synthetic` : event.source);
  return bits.filter(Boolean).join(" · ");
}

function applyEventFilter() {
  const filter = $("event-filter").value;
  for (const row of $("event-list").children) row.hidden = Boolean(filter) && row.dataset.type !== filter;
}

function updateSessionControls() {
  const current = currentState();
  const active = Boolean(state.sessionId) && current !== "ended";
  $("message-input").disabled = !active;
  $("send").disabled = !active;
  $("terminate").disabled = !active;
  const badge = $("session-state");
  badge.textContent = state.sessionId ? current : "";
  badge.className = `pill ${current === "ended" ? "subtle" : current === "waiting for you" ? "warning" : "success"}`;
  badge.hidden = !state.sessionId;
}

// ---- prompts ------------------------------------------------------------------------------------
function renderPrompts() {
  const container = $("prompts");
  const nodes = [];
  for (const [id, data] of state.timeline.permissions) nodes.push(renderPermission(id, data));
  for (const [id, data] of state.timeline.questions) nodes.push(renderQuestion(id, data));
  // Keep a prompt the user is working in (focus, selection) as it is.
  const keep = new Map([...container.children].map((n) => [n.dataset.promptKey, n]));
  const next = nodes.map((n) => keep.get(n.dataset.promptKey) || n);
  container.replaceChildren(...next);
}

function permissionSummary(data) {
  const meta = data.metadata || {};
  return meta.title || meta.command || meta.path || (meta.input ? JSON.stringify(meta.input) : "");
}

function renderPermission(id, data) {
  const headingId = `perm-${cssId(id)}`;
  const buttons = [
    ["once", "Allow once", "permission-once", "primary"],
    ["always", "Always allow", "permission-always", ""],
    ["reject", "Reject", "permission-reject", "danger"],
  ].map(([reply, label, testid, cls]) => {
    const button = el("button", { type: "button", "data-testid": testid, class: cls }, label);
    button.addEventListener("click", () => replyPermission(id, reply, node));
    return button;
  });
  const node = el(
    "section",
    { class: "prompt permission", "data-testid": "permission-prompt", "data-permission-id": id, "data-prompt-key": `p:${id}`, "aria-labelledby": headingId },
    el("h3", { id: headingId }, "Permission requested: ", el("code", {}, data.action || "action")),
    el("p", {}, permissionSummary(data)),
    el("p", { class: "muted small" }, `id ${id}`),
    el("div", { class: "row wrap" }, ...buttons),
  );
  return node;
}

function renderQuestion(id, data) {
  const headingId = `q-${cssId(id)}`;
  const options = data.options || [];
  let answer;
  if (options.length) {
    answer = el(
      "fieldset",
      { class: "choices" },
      el("legend", { class: "visually-hidden" }, "Answer"),
      ...options.map((choice, index) =>
        el(
          "label",
          { class: "check" },
          el("input", { type: "radio", name: `answer-${cssId(id)}`, value: choice, "data-testid": "question-answer", checked: index === 0 }),
          ` ${choice}`,
        ),
      ),
    );
  } else {
    answer = el("label", {}, "Answer ", el("input", { type: "text", "data-testid": "question-answer", autocomplete: "off" }));
  }
  const form = el(
    "form",
    { class: "stack" },
    answer,
    el(
      "div",
      { class: "row wrap" },
      el("button", { type: "submit", "data-testid": "question-submit", class: "primary" }, "Answer"),
      el("button", { type: "button", "data-testid": "question-reject", class: "danger" }, "Reject"),
    ),
  );
  const node = el(
    "section",
    { class: "prompt question", "data-testid": "question-prompt", "data-question-id": id, "data-prompt-key": `q:${id}`, "aria-labelledby": headingId },
    el("h3", { id: headingId }, "Question: ", data.prompt || ""),
    el("p", { class: "muted small" }, `id ${id}`),
    form,
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const chosen = options.length ? form.querySelector("input[type=radio]:checked") : form.querySelector("input[type=text]");
    const value = chosen ? chosen.value : "";
    replyQuestion(id, { answers: [value ? [value] : []] }, node);
  });
  form.querySelector("[data-testid=question-reject]").addEventListener("click", () => replyQuestion(id, null, node));
  return node;
}

function cssId(text) {
  return String(text).replace(/[^A-Za-z0-9_-]/g, "_");
}

function setBusy(node, busy) {
  for (const control of node.querySelectorAll("button, input")) control.disabled = busy;
  node.classList.toggle("busy", busy);
}

async function replyPermission(id, reply, node) {
  setBusy(node, true);
  const path = `/v1/sessions/${encodeURIComponent(state.sessionId)}/permissions/${encodeURIComponent(id)}/reply`;
  const ok = await attempt(`Permission ${id}`, async () => {
    await state.api.request("POST", path, { json: { reply } });
    return true;
  });
  // The prompt goes away with its permission.resolved event; on an error it can be tried again.
  if (!ok) setBusy(node, false);
}

async function replyQuestion(id, body, node) {
  setBusy(node, true);
  const base = `/v1/sessions/${encodeURIComponent(state.sessionId)}/questions/${encodeURIComponent(id)}`;
  const ok = await attempt(`Question ${id}`, async () => {
    if (body) await state.api.request("POST", `${base}/reply`, { json: body });
    else await state.api.request("POST", `${base}/reject`);
    return true;
  });
  if (!ok) setBusy(node, false);
}

// ---- composer -----------------------------------------------------------------------------------
async function sendMessage(event) {
  event.preventDefault();
  const input = $("message-input");
  const message = input.value;
  if (!message.trim() || !state.sessionId) return;
  $("send").disabled = true;
  const sessionId = state.sessionId;
  const ok = await attempt("Send", async () => {
    if (state.mode === "turn") {
      // The turn stream: the events come with the answer, until the turn ends or asks.
      const pending = streamTurn(state.api, sessionId, message, {
        includeRaw: $("include-raw").checked,
        onEvents: (events) => {
          if (state.sessionId === sessionId) applyEvents(events);
        },
      });
      if (input.value === message) input.value = "";
      await pending;
    } else {
      await state.api.request("POST", `/v1/sessions/${encodeURIComponent(sessionId)}/messages`, { json: { message } });
    }
    return true;
  });
  if (ok) {
    if (input.value === message) input.value = "";
    clearError();
  }
  updateSessionControls();
  input.focus();
}

// ---- files --------------------------------------------------------------------------------------
function fsQuery(path) {
  const query = { path };
  if ($("fs-in-session").checked && state.sessionId) query.session_id = state.sessionId;
  return query;
}

function parentOf(path) {
  const trimmed = path.replace(/\/+$/, "");
  const cut = trimmed.lastIndexOf("/");
  if (cut <= 0) return "/";
  return trimmed.slice(0, cut);
}

async function listFiles(path) {
  const target = path ?? $("fs-path").value.trim() ?? ".";
  const entries = await attempt("Files", () => state.api.request("GET", "/v1/fs/entries", { query: fsQuery(target || ".") }));
  if (!entries) return;
  state.fs.dir = target || ".";
  $("fs-path").value = state.fs.dir;
  if (entries.length) state.fs.absolute = parentOf(entries[0].path);
  else if (state.fs.dir.startsWith("/")) state.fs.absolute = state.fs.dir;
  else state.fs.absolute = null;
  $("fs-where").textContent = state.fs.absolute || state.fs.dir;
  entries.sort((a, b) => (a.entryType === b.entryType ? a.name.localeCompare(b.name) : a.entryType === "directory" ? -1 : 1));
  $("fs-entries").replaceChildren(
    ...entries.map((entry) => {
      const isDir = entry.entryType === "directory";
      const action = el("button", { type: "button", class: "ghost small link" }, isDir ? `${entry.name}/` : entry.name);
      action.setAttribute("aria-label", isDir ? `Open directory ${entry.name}` : `Download ${entry.name}`);
      action.addEventListener("click", () => (isDir ? listFiles(entry.path) : downloadFile(entry)));
      return el(
        "li",
        { "data-testid": "fs-entry", "data-path": entry.path, "data-entry-type": entry.entryType, class: isDir ? "dir" : "file" },
        el("span", { class: `pill subtle ${isDir ? "dir" : "file"}` }, isDir ? "dir" : "file"),
        action,
        el("span", { class: "muted small" }, isDir ? "" : formatBytes(entry.size)),
        el("span", { class: "muted small" }, entry.modified ? formatDateTime(entry.modified) : ""),
      );
    }),
  );
  if (!entries.length) $("fs-entries").append(el("li", { class: "muted" }, "empty directory"));
}

async function downloadFile(entry) {
  await attempt(`Download ${entry.name}`, async () => {
    const response = await state.api.request("GET", "/v1/fs/file", { query: { path: entry.path }, raw: true });
    const blob = await response.blob();
    const url = URL.createObjectURL(blob);
    const link = el("a", { href: url, download: entry.name, hidden: true });
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(url), 60000);
  });
}

async function uploadFiles(event) {
  event.preventDefault();
  const files = [...$("fs-upload").files];
  if (!files.length) return;
  const dir = state.fs.absolute || state.fs.dir || ".";
  for (const file of files) {
    const path = `${dir.replace(/\/+$/, "")}/${file.name}`;
    const ok = await attempt(`Upload ${file.name}`, async () => {
      await state.api.request("PUT", "/v1/fs/file", {
        query: state.fs.absolute ? { path } : fsQuery(path),
        body: file,
        headers: { "Content-Type": "application/octet-stream" },
      });
      return true;
    });
    if (!ok) break;
  }
  $("fs-upload").value = "";
  await listFiles(state.fs.absolute || state.fs.dir);
}

// ---- tabs ---------------------------------------------------------------------------------------
function setupTabs() {
  const tabs = [...document.querySelectorAll("[role=tab]")];
  const select = (tab, focus) => {
    for (const other of tabs) {
      const selected = other === tab;
      other.setAttribute("aria-selected", String(selected));
      other.tabIndex = selected ? 0 : -1;
      $(other.getAttribute("aria-controls")).hidden = !selected;
    }
    if (focus) tab.focus();
    if (tab.id === "tab-files" && !$("fs-entries").children.length) listFiles(state.fs.dir);
  };
  tabs.forEach((tab, index) => {
    tab.addEventListener("click", () => select(tab, false));
    tab.addEventListener("keydown", (event) => {
      const step = { ArrowRight: 1, ArrowLeft: -1 }[event.key];
      if (step) select(tabs[(index + step + tabs.length) % tabs.length], true);
      if (event.key === "Home") select(tabs[0], true);
      if (event.key === "End") select(tabs[tabs.length - 1], true);
    });
  });
}

// ---- start --------------------------------------------------------------------------------------
function sessionFromHash() {
  const match = location.hash.match(/^#session=(.+)$/);
  return match ? decodeURIComponent(match[1]) : null;
}

async function main() {
  const { conn, warning } = loadConnection();
  state.api = new Api(conn, logRequest);
  chatView = new ChatView($("chat"));
  fillConnectionForm(conn);
  if (warning) showError(new Error(warning), "Connection");

  $("error-close").addEventListener("click", clearError);
  $("create-form").addEventListener("submit", createSession);
  $("agent-select").addEventListener("change", () => loadAgentOptions($("agent-select").value));
  $("model").addEventListener("change", updateVariants);
  $("sessions-refresh").addEventListener("click", loadSessions);
  $("agents-refresh").addEventListener("click", loadAgents);
  $("terminate").addEventListener("click", terminateSession);
  $("composer-form").addEventListener("submit", sendMessage);
  $("message-input").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      $("composer-form").requestSubmit();
    }
  });
  $("event-filter").addEventListener("change", applyEventFilter);
  $("include-raw").addEventListener("change", restartStream);
  $("stream-mode").addEventListener("change", () => {
    state.mode = $("stream-mode").value;
    startStream();
  });
  $("stream-pause").addEventListener("click", () => setPaused(!state.paused));
  $("events-copy").addEventListener("click", copyEvents);
  $("events-clear").addEventListener("click", clearEvents);
  setupCreateExtras();
  $("fs-form").addEventListener("submit", (event) => {
    event.preventDefault();
    listFiles($("fs-path").value.trim() || ".");
  });
  $("fs-up").addEventListener("click", () => {
    if (state.fs.absolute) listFiles(parentOf(state.fs.absolute));
  });
  $("fs-upload-form").addEventListener("submit", uploadFiles);
  $("requests-clear").addEventListener("click", () => {
    logNodes.clear();
    $("request-log").replaceChildren();
  });
  $("connection-form").addEventListener("submit", (event) => {
    event.preventDefault();
    try {
      conn.url = $("conn-url").value.trim();
      conn.token = $("conn-token").value;
      conn.headers = parseHeaders($("conn-headers").value.trim());
    } catch (error) {
      showError(error, "Extra headers");
      return;
    }
    saveConnection(conn);
    location.reload();
  });
  setupTabs();
  window.addEventListener("hashchange", () => {
    const id = sessionFromHash();
    if (id !== state.sessionId) selectSession(id);
  });

  if (!(await checkConnection())) {
    document.body.dataset.ready = "true";
    return;
  }
  await Promise.all([loadAgents(), loadSessions()]);
  if (isConnectScreenShown()) {
    document.body.dataset.ready = "true";
    return;
  }
  const initial = sessionFromHash();
  if (initial) selectSession(initial);
  setInterval(() => {
    if (document.visibilityState === "visible") loadSessions();
  }, SESSIONS_POLL_MS);
  document.body.dataset.ready = "true";
}

main().catch((error) => showError(error, "Inspector"));
