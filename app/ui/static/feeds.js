// The other ways the legacy inspector followed a session, besides the SSE stream (stream.js):
// polling `GET .../events` from the last sequence, and the turn stream of `POST .../messages/stream`,
// which carries the events of the turn a message starts. And copying text to the clipboard.

import { parseFrame, splitFrames } from "./stream.js";

const POLL_MS = 500;
const POLL_LIMIT = 200;

/** Polls the events page by page after the last sequence; same handlers as EventStream. */
export class PollingFeed {
  constructor(api, sessionId, { includeRaw = false, onEvents, onState, onError, intervalMs = POLL_MS }) {
    this.api = api;
    this.sessionId = sessionId;
    this.includeRaw = includeRaw;
    this.onEvents = onEvents;
    this.onState = onState;
    this.onError = onError;
    this.intervalMs = intervalMs;
    this.lastSequence = 0;
    this.stopped = true;
    this.timer = null;
    this.controller = null;
  }

  start() {
    this.stopped = false;
    this.onState("polling", `every ${this.intervalMs} ms`);
    this.poll();
  }

  stop() {
    this.stopped = true;
    clearTimeout(this.timer);
    if (this.controller) this.controller.abort();
    this.controller = null;
  }

  async poll() {
    if (this.stopped) return;
    const controller = new AbortController();
    this.controller = controller;
    const query = { offset: this.lastSequence, limit: POLL_LIMIT };
    if (this.includeRaw) query.include_raw = "true";
    let page;
    try {
      // Not in the request log: one line every half second would push everything else out.
      page = await this.api.request("GET", `/v1/sessions/${encodeURIComponent(this.sessionId)}/events`, {
        query,
        signal: controller.signal,
        log: false,
      });
    } catch (error) {
      if (this.stopped || error.name === "AbortError") return;
      if (error.status >= 400 && error.status < 500) {
        this.onState("stopped", error.message);
        this.onError(error);
        return;
      }
      this.onState("polling", `retrying: ${error.message}`);
      this.timer = setTimeout(() => this.poll(), this.intervalMs * 4);
      return;
    }
    if (this.stopped) return;
    const fresh = ((page && page.events) || []).filter((e) => typeof e.sequence === "number" && e.sequence > this.lastSequence);
    if (fresh.length) {
      this.lastSequence = fresh[fresh.length - 1].sequence;
      this.onEvents(fresh);
    }
    // More than one page waiting: the next one at once.
    this.timer = setTimeout(() => this.poll(), page && page.hasMore ? 0 : this.intervalMs);
  }
}

/**
 * Sends a message with `POST .../messages/stream` and hands over the events of its turn as they
 * come, until the server closes the stream (after the turn's end or a request for a person).
 */
export async function streamTurn(api, sessionId, message, { includeRaw = false, signal, onEvents }) {
  const query = includeRaw ? { include_raw: "true" } : {};
  const response = await api.request("POST", `/v1/sessions/${encodeURIComponent(sessionId)}/messages/stream`, {
    query,
    json: { message },
    headers: { Accept: "text/event-stream" },
    raw: true,
    signal,
  });
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    const [frames, rest] = splitFrames(buffer);
    buffer = rest;
    const batch = [];
    for (const frame of frames) {
      const { data } = parseFrame(frame);
      if (data === null) continue;
      try {
        batch.push(JSON.parse(data));
      } catch {
        // not an event frame
      }
    }
    if (batch.length) onEvents(batch);
  }
}

/** Puts text on the clipboard: the Clipboard API, else a selected text area and the copy command. */
export async function copyText(text) {
  if (navigator.clipboard && window.isSecureContext) {
    try {
      await navigator.clipboard.writeText(text);
      return true;
    } catch {
      // refused (no permission): the fallback below
    }
  }
  const area = document.createElement("textarea");
  area.value = text;
  area.setAttribute("readonly", "");
  area.style.position = "fixed";
  area.style.opacity = "0";
  document.body.append(area);
  area.select();
  let ok = false;
  try {
    ok = document.execCommand("copy");
  } catch {
    ok = false;
  }
  area.remove();
  return ok;
}
