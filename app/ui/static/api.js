// The connection (server, token, extra headers) and every call to the API, logged.

const STORAGE_KEY = "acp-rest-bridge.inspector.connection";

/** A failed API call: the ProblemDetails title and detail when the server sent them. */
export class ApiError extends Error {
  constructor(status, title, detail, problem) {
    super(detail ? `${title}: ${detail}` : title);
    this.name = "ApiError";
    this.status = status;
    this.title = title;
    this.detail = detail;
    this.problem = problem;
  }
}

function parseHeaders(text) {
  if (!text) return {};
  const value = JSON.parse(text);
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw new Error("headers must be a JSON object");
  }
  const out = {};
  for (const [key, v] of Object.entries(value)) out[key] = String(v);
  return out;
}

/** The origin of a server URL ("" for this page's own server); a URL that cannot be read is its own key. */
export function originOf(url) {
  try {
    return new URL(url || location.origin, location.href).origin;
  } catch {
    return String(url);
  }
}

function readSaved() {
  let saved = {};
  try {
    saved = JSON.parse(sessionStorage.getItem(STORAGE_KEY) || "{}") || {};
  } catch {
    saved = {};
  }
  const credentials = {};
  if (saved.credentials && typeof saved.credentials === "object") {
    for (const [origin, entry] of Object.entries(saved.credentials)) {
      if (entry && typeof entry === "object") credentials[origin] = entry;
    }
  } else if (typeof saved.token === "string" || (saved.headers && typeof saved.headers === "object")) {
    // Kept by an earlier page, which had one token for whatever server it pointed at: it is the
    // token of the server it pointed at then.
    credentials[originOf(typeof saved.url === "string" ? saved.url : "")] = { token: saved.token, headers: saved.headers };
  }
  return { url: typeof saved.url === "string" ? saved.url : "", credentials };
}

/** The token and extra headers kept for one server origin. */
function credentialsFor(credentials, origin) {
  const entry = credentials[origin] || {};
  return {
    token: typeof entry.token === "string" ? entry.token : "",
    headers: entry.headers && typeof entry.headers === "object" ? entry.headers : {},
  };
}

/**
 * The connection for this tab: the query string of buildInspectorUrl (`?token=T&headers=JSON`, and
 * `url=` for a server on another origin) wins, else what this tab kept. The token is then removed
 * from the address bar so it does not stay in the history or get shared with a copied link.
 *
 * A token (and the extra headers) belongs to the server origin it was given for, and is kept and
 * sent for that origin only: `?url=<other server>` in a tab holding a token sends the other server
 * none. `?token=` without `url=` is for this page's own server, as buildInspectorUrl means it.
 */
export function loadConnection() {
  const saved = readSaved();
  const params = new URLSearchParams(location.search);
  let url = saved.url;
  if (params.has("url")) url = (params.get("url") || "").trim();
  else if (params.has("token") || params.has("headers")) url = "";
  const origin = originOf(url);
  const conn = { url, origin, credentials: saved.credentials, ...credentialsFor(saved.credentials, origin) };
  let warning = null;
  if (params.has("token")) conn.token = params.get("token") || "";
  if (params.has("headers")) {
    try {
      conn.headers = parseHeaders(params.get("headers"));
    } catch (error) {
      warning = `The headers parameter is not a JSON object of strings (${error.message}); it was ignored.`;
    }
  }
  saveConnection(conn);
  if (params.has("token") || params.has("headers") || params.has("url")) {
    for (const key of ["token", "headers", "url"]) params.delete(key);
    const query = params.toString();
    history.replaceState(history.state, "", location.pathname + (query ? `?${query}` : "") + location.hash);
  }
  return { conn, warning };
}

/**
 * Keeps the connection: its URL, and its token and headers under the origin of that URL. A token
 * still the one of the origin the connection had (the form's URL changed, its token did not) is
 * not carried to the new origin.
 */
export function saveConnection(conn) {
  const credentials = { ...(conn.credentials || {}) };
  const origin = originOf(conn.url);
  if (conn.origin && origin !== conn.origin) {
    const before = credentialsFor(credentials, conn.origin);
    const kept = credentialsFor(credentials, origin);
    if (conn.token === before.token) conn.token = kept.token;
    if (JSON.stringify(conn.headers || {}) === JSON.stringify(before.headers)) conn.headers = kept.headers;
  }
  credentials[origin] = { token: conn.token || "", headers: conn.headers || {} };
  conn.origin = origin;
  conn.credentials = credentials;
  sessionStorage.setItem(STORAGE_KEY, JSON.stringify({ url: conn.url || "", credentials }));
}

export { parseHeaders };

function shellQuote(text) {
  return `'${String(text).replace(/'/g, "'\\''")}'`;
}

export class Api {
  constructor(conn, onLog) {
    this.conn = conn;
    this.onLog = onLog;
    this.nextLogId = 1;
  }

  get base() {
    return (this.conn.url || location.origin).replace(/\/+$/, "");
  }

  /** What a request to `url` carries: the token and extra headers only on their own origin. */
  headers(extra = {}, url = this.base) {
    if (originOf(url) !== this.conn.origin) return { ...extra };
    const out = { ...this.conn.headers };
    if (this.conn.token) out.Authorization = `Bearer ${this.conn.token}`;
    return { ...out, ...extra };
  }

  url(path, query) {
    const url = new URL(this.base + path);
    for (const [key, value] of Object.entries(query || {})) {
      if (value !== undefined && value !== null && value !== "") url.searchParams.set(key, String(value));
    }
    return url.toString();
  }

  curl(method, url, headers, body) {
    const parts = ["curl", "-sS"];
    if (method !== "GET") parts.push("-X", method);
    for (const [key, value] of Object.entries(headers)) {
      const shown = key.toLowerCase() === "authorization" ? "Bearer $TOKEN" : value;
      parts.push("-H", shellQuote(`${key}: ${shown}`));
    }
    if (typeof body === "string") parts.push("--data-raw", shellQuote(body));
    else if (body) parts.push("--data-binary", "@FILE");
    parts.push(shellQuote(url));
    return parts.join(" ");
  }

  /**
   * One API call. Resolves to the parsed JSON (or null for an empty answer, or the Response itself
   * with `raw`); rejects with an ApiError carrying the ProblemDetails title and detail.
   */
  async request(method, path, { query, json, body, headers, raw, signal, log = true } = {}) {
    const url = this.url(path, query);
    const extra = { ...(headers || {}) };
    let payload = body;
    if (json !== undefined) {
      payload = JSON.stringify(json);
      extra["Content-Type"] = "application/json";
    }
    const sent = this.headers(extra, url);
    const entry = {
      id: this.nextLogId++,
      time: new Date(),
      method,
      url,
      status: null,
      ms: null,
      error: null,
      curl: this.curl(method, url, sent, payload),
    };
    const started = performance.now();
    if (log) this.onLog(entry);
    let response;
    try {
      response = await fetch(url, { method, headers: sent, body: payload, signal, cache: "no-store" });
    } catch (error) {
      entry.ms = Math.round(performance.now() - started);
      entry.error = error.name === "AbortError" ? "aborted" : error.message;
      if (log) this.onLog(entry);
      if (error.name === "AbortError") throw error;
      throw new ApiError(0, "Network error", `${method} ${path}: ${error.message}`);
    }
    entry.status = response.status;
    entry.ms = Math.round(performance.now() - started);
    if (log) this.onLog(entry);
    if (!response.ok) throw await problemFrom(response, method, path);
    if (raw) return response;
    const text = await response.text();
    if (!text) return null;
    try {
      return JSON.parse(text);
    } catch {
      return text;
    }
  }
}

/** The ProblemDetails of an error answer (or its status and text when it is not one). */
export async function problemFrom(response, method, path) {
  let text = "";
  try {
    text = await response.text();
  } catch {
    text = "";
  }
  try {
    const problem = JSON.parse(text);
    if (problem && typeof problem === "object" && (problem.title || problem.detail)) {
      return new ApiError(response.status, problem.title || `HTTP ${response.status}`, problem.detail || "", problem);
    }
  } catch {
    // not JSON: shown as text below
  }
  const detail = text.trim().split("\n")[0] || `${method} ${path}`;
  return new ApiError(response.status, `HTTP ${response.status} ${response.statusText}`.trim(), detail);
}
