// The connect screen: shown instead of the inspector while the server cannot be reached or
// refuses the token (a missing or wrong token answers 401 everywhere but /v1/health), as the
// legacy inspector did before it connected.

import { ApiError, saveConnection } from "./api.js";
import { $ } from "./dom.js";

/**
 * Checks that the API answers with this connection: health (public), then a call that needs the
 * token. Resolves to null when connected, else to the reason to show.
 */
export async function probeConnection(api) {
  try {
    await api.request("GET", "/v1/health");
  } catch (error) {
    return { title: `Cannot reach ${api.base}`, detail: error instanceof ApiError ? error.detail || error.title : String(error) };
  }
  try {
    await api.request("GET", "/v1/sessions");
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) return unauthorized(api, error);
    // Anything else is not about the connection: the page shows it where it happens.
  }
  return null;
}

export function unauthorized(api, error) {
  const what = api.conn.token ? "The server refused this token" : "The server needs a token";
  const problem = error instanceof ApiError ? [error.title, error.detail].filter(Boolean).join(": ") : String(error);
  return { title: what, detail: problem };
}

/** Shows the connect screen with the reason; Connect keeps the new settings and starts again. */
export function showConnectScreen(conn, reason) {
  const screen = $("connect-screen");
  $("connect-url").value = conn.url || "";
  $("connect-token").value = conn.token || "";
  $("connect-title").textContent = reason.title;
  $("connect-detail").textContent = reason.detail || "";
  $("app-main").hidden = true;
  screen.hidden = false;
  const badge = $("server-status");
  badge.textContent = `not connected · ${reason.title}`;
  badge.className = "pill danger";
  badge.dataset.connected = "false";
  $(conn.token ? "connect-token" : "connect-url").focus();
  if (!screen.dataset.wired) {
    screen.dataset.wired = "true";
    $("connect-form").addEventListener("submit", (event) => {
      event.preventDefault();
      conn.url = $("connect-url").value.trim();
      conn.token = $("connect-token").value;
      saveConnection(conn);
      location.reload();
    });
  }
}

export function isConnectScreenShown() {
  return !$("connect-screen").hidden;
}
