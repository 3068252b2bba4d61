// The MCP servers and skill sources of a new session (CreateSessionRequest `mcp` and `skills`), as
// the legacy inspector offered them at create.

import { $, el } from "./dom.js";

const MCP_EXAMPLE = JSON.stringify({ type: "local", command: "npx", args: ["@modelcontextprotocol/server-everything"] }, null, 2);
const SKILL_TYPES = ["github", "local", "git"];

let counter = 0;

function removeButton(label, row) {
  const button = el("button", { type: "button", class: "ghost small danger", "aria-label": label }, "Remove");
  button.addEventListener("click", () => row.remove());
  return button;
}

function addMcpServer(name = "everything", config = MCP_EXAMPLE) {
  counter += 1;
  const row = el("li", { class: "extra stack", "data-testid": "mcp-server" });
  row.append(
    el("label", {}, "Name ", el("input", { name: `mcp-name-${counter}`, class: "mcp-name", value: name, autocomplete: "off", spellcheck: "false" })),
    el(
      "label",
      {},
      "Config (JSON object) ",
      el("textarea", { name: `mcp-config-${counter}`, class: "mcp-config mono", rows: "4", spellcheck: "false" }, config),
    ),
    removeButton("Remove this MCP server", row),
  );
  $("mcp-list").append(row);
  row.querySelector(".mcp-name").focus();
}

function addSkillSource() {
  counter += 1;
  const row = el("li", { class: "extra stack", "data-testid": "skill-source" });
  const type = el("select", { name: `skill-type-${counter}`, class: "skill-type" }, ...SKILL_TYPES.map((t) => el("option", { value: t }, t)));
  row.append(
    el("label", {}, "Type ", type),
    el("label", {}, "Source ", el("input", { name: `skill-source-${counter}`, class: "skill-source", autocomplete: "off", spellcheck: "false", placeholder: "owner/repo, a path or a git URL" })),
    el("label", {}, "Skills (comma-separated, optional) ", el("input", { name: `skill-filter-${counter}`, class: "skill-filter", autocomplete: "off", spellcheck: "false" })),
    el("label", {}, "Ref (optional) ", el("input", { name: `skill-ref-${counter}`, class: "skill-ref", autocomplete: "off", spellcheck: "false" })),
    el("label", {}, "Subpath (optional) ", el("input", { name: `skill-subpath-${counter}`, class: "skill-subpath", autocomplete: "off", spellcheck: "false" })),
    removeButton("Remove this skill source", row),
  );
  $("skill-list").append(row);
  row.querySelector(".skill-source").focus();
}

export function setupCreateExtras() {
  $("mcp-add").addEventListener("click", () => addMcpServer());
  $("skill-add").addEventListener("click", addSkillSource);
}

/** The `mcp` and `skills` fields of the create request; throws an Error naming what is wrong. */
export function createExtras() {
  const extras = {};
  const servers = [...$("mcp-list").querySelectorAll("[data-testid=mcp-server]")];
  if (servers.length) {
    const mcp = {};
    for (const row of servers) {
      const name = row.querySelector(".mcp-name").value.trim();
      if (!name) throw new Error("an MCP server needs a name");
      if (name in mcp) throw new Error(`MCP server ${name} is listed twice`);
      let config;
      try {
        config = JSON.parse(row.querySelector(".mcp-config").value);
      } catch (error) {
        throw new Error(`MCP server ${name}: the config is not JSON (${error.message})`);
      }
      if (config === null || typeof config !== "object" || Array.isArray(config)) {
        throw new Error(`MCP server ${name}: the config must be a JSON object`);
      }
      mcp[name] = config;
    }
    extras.mcp = mcp;
  }
  const rows = [...$("skill-list").querySelectorAll("[data-testid=skill-source]")];
  if (rows.length) {
    const sources = rows.map((row) => {
      const source = { type: row.querySelector(".skill-type").value, source: row.querySelector(".skill-source").value.trim() };
      if (!source.source) throw new Error("a skill source needs its source");
      const skills = row.querySelector(".skill-filter").value.split(",").map((s) => s.trim()).filter(Boolean);
      if (skills.length) source.skills = skills;
      const ref = row.querySelector(".skill-ref").value.trim();
      if (ref) source.ref = ref;
      const subpath = row.querySelector(".skill-subpath").value.trim();
      if (subpath) source.subpath = subpath;
      return source;
    });
    extras.skills = { sources };
  }
  return extras;
}

/** After a create: the form starts empty again. */
export function clearCreateExtras() {
  $("mcp-list").replaceChildren();
  $("skill-list").replaceChildren();
}
