// A session's live events: fetch() with a streaming body reader (an EventSource cannot send the
// Authorization header), resumed with Last-Event-ID after a drop. Each sequence is delivered once,
// in order.

const RETRY_MIN_MS = 250;
const RETRY_MAX_MS = 5000;

/** Split an SSE text buffer into complete frames; returns [frames, rest]. */
export function splitFrames(buffer) {
  const frames = [];
  let text = buffer.replace(/\r\n?/g, "\n");
  let cut = text.indexOf("\n\n");
  while (cut !== -1) {
    frames.push(text.slice(0, cut));
    text = text.slice(cut + 2);
    cut = text.indexOf("\n\n");
  }
  return [frames, text];
}

/** One frame's `id` and joined `data` lines (comments and other fields ignored). */
export function parseFrame(frame) {
  let id = null;
  const data = [];
  for (const line of frame.split("\n")) {
    if (!line || line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "id") id = value;
    else if (field === "data") data.push(value);
  }
  return { id, data: data.length ? data.join("\n") : null };
}

export class EventStream {
  /**
   * @param api       the Api (base URL and headers)
   * @param sessionId the session to follow
   * @param handlers  { onEvents(events[]), onState(state, detail), onError(error) }
   */
  constructor(api, sessionId, { includeRaw = false, onEvents, onState, onError }) {
    this.api = api;
    this.sessionId = sessionId;
    this.includeRaw = includeRaw;
    this.onEvents = onEvents;
    this.onState = onState;
    this.onError = onError;
    this.lastSequence = 0;
    this.controller = null;
    this.stopped = false;
    this.connects = 0;
    this.retryMs = RETRY_MIN_MS;
    this.timer = null;
  }

  start() {
    this.stopped = false;
    this.connect();
  }

  stop() {
    this.stopped = true;
    clearTimeout(this.timer);
    if (this.controller) this.controller.abort();
    this.controller = null;
  }

  scheduleRetry(reason) {
    if (this.stopped) return;
    this.onState("reconnecting", reason);
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.connect(), this.retryMs);
    this.retryMs = Math.min(this.retryMs * 2, RETRY_MAX_MS);
  }

  async connect() {
    if (this.stopped) return;
    const controller = new AbortController();
    this.controller = controller;
    this.connects += 1;
    const path = `/v1/sessions/${encodeURIComponent(this.sessionId)}/events/sse`;
    const query = { offset: this.lastSequence };
    if (this.includeRaw) query.include_raw = "true";
    const headers = { Accept: "text/event-stream" };
    if (this.lastSequence > 0) headers["Last-Event-ID"] = String(this.lastSequence);
    this.onState(this.connects === 1 ? "connecting" : "resuming", `after #${this.lastSequence}`);
    let response;
    try {
      response = await this.api.request("GET", path, { query, headers, raw: true, signal: controller.signal });
    } catch (error) {
      if (this.stopped || error.name === "AbortError") return;
      // A 4xx will not get better by retrying (unknown session, bad token): say so and stop.
      if (error.status >= 400 && error.status < 500) {
        this.onState("stopped", error.message);
        this.onError(error);
        return;
      }
      this.scheduleRetry(error.message);
      return;
    }
    this.onState("live", `after #${this.lastSequence}`);
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        this.retryMs = RETRY_MIN_MS;
        buffer += decoder.decode(value, { stream: true });
        const [frames, rest] = splitFrames(buffer);
        buffer = rest;
        const batch = [];
        for (const frame of frames) {
          const { data } = parseFrame(frame);
          if (data === null) continue;
          let event;
          try {
            event = JSON.parse(data);
          } catch {
            continue; // not an event frame
          }
          // A resumed stream may repeat what was delivered: each sequence exactly once.
          if (typeof event.sequence !== "number" || event.sequence <= this.lastSequence) continue;
          this.lastSequence = event.sequence;
          batch.push(event);
        }
        if (batch.length) this.onEvents(batch);
      }
    } catch (error) {
      if (this.stopped || error.name === "AbortError") return;
      this.scheduleRetry(`stream dropped: ${error.message}`);
      return;
    }
    if (!this.stopped) this.scheduleRetry("stream closed by the server");
  }
}
