// Starts a server the way the legacy TypeScript SDK's spawn mode does (SandboxAgent.start()):
// the binary is the first of SANDBOX_AGENT_BIN (if the path exists), the legacy CLI's platform
// package resolved from the working directory, `sandbox-agent` on PATH; it runs
// `<bin> server --host 127.0.0.1 --port P --token T` with this process's environment, waits for
// /v1/health, creates a mock session, then stops the server with SIGTERM.
// Prints one JSON line: {binary, created, exit}.
import { spawn } from "node:child_process";
import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";

const [port, token] = process.argv.slice(2);

function fromEnv() {
  const value = process.env.SANDBOX_AGENT_BIN;
  if (!value) return null;
  const resolved = path.resolve(value);
  return fs.existsSync(resolved) ? resolved : null;
}

function fromCliPackage() {
  const pkg = `@sandbox-agent/cli-${process.platform}-${process.arch}`;
  try {
    const require = createRequire(path.join(process.cwd(), "index.js"));
    const resolved = path.join(path.dirname(require.resolve(`${pkg}/package.json`)), "bin", "sandbox-agent");
    return fs.existsSync(resolved) ? resolved : null;
  } catch {
    return null;
  }
}

function fromPath() {
  for (const dir of (process.env.PATH ?? "").split(":").filter(Boolean)) {
    const resolved = path.join(dir, "sandbox-agent");
    if (fs.existsSync(resolved)) return resolved;
  }
  return null;
}

const binary = fromEnv() ?? fromCliPackage() ?? fromPath();
if (!binary) {
  console.log(JSON.stringify({ binary: null }));
  process.exit(0);
}
const child = spawn(binary, ["server", "--host", "127.0.0.1", "--port", port, "--token", token], {
  stdio: ["ignore", "inherit", "inherit"],
  env: { ...process.env },
});
const exited = new Promise((resolve) => child.once("exit", (code, signal) => resolve({ code, signal })));
const base = `http://127.0.0.1:${port}`;
const headers = { Authorization: `Bearer ${token}`, "content-type": "application/json" };
let created = null;
const deadline = Date.now() + 30_000;
while (Date.now() < deadline && child.exitCode === null) {
  try {
    const health = await fetch(`${base}/v1/health`, { headers });
    if (health.ok) {
      const response = await fetch(`${base}/v1/sessions/sdk`, { method: "POST", headers, body: '{"agent":"mock"}' });
      created = { status: response.status, body: await response.json() };
      break;
    }
  } catch {}
  await new Promise((resolve) => setTimeout(resolve, 100));
}
if (child.exitCode === null) child.kill("SIGTERM");
const timer = setTimeout(() => child.kill("SIGKILL"), 15_000);
const exit = await exited;
clearTimeout(timer);
console.log(JSON.stringify({ binary, created, exit }));
