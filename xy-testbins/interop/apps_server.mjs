// An MCP Apps and Skills server written with the official SDKs, for xy's
// interop tests: `@modelcontextprotocol/ext-apps`' `registerAppTool` and
// `registerAppResource` for 2 apps, `@modelcontextprotocol/server`'s
// SEP-2640 `loadSkills` for the skills under DIR/skills, served over stdio
// (`serveStdio`, both eras) or streamable HTTP (`createMcpHandler`).
//
// node apps_server.mjs --dir DIR [--era both|2026] [--http PORT]
//
// `--era 2026` refuses a 2025 opening (the SDK's `legacy: "reject"`).
//
// DIR/apps/<app>.html is the app's HTML (read at every read, so a test can
// change it), DIR/apps/<app>.csp its CSP (JSON), DIR/apps/<app>.visibility
// the `_meta.ui.visibility` of its `<app>_poll` helper (default ["app"]).
import { readFileSync, existsSync } from "node:fs";
import { createServer } from "node:http";
import { join } from "node:path";
import { McpServer, createMcpHandler } from "@modelcontextprotocol/server";
import { serveStdio } from "@modelcontextprotocol/server/stdio";
import { loadSkills } from "@modelcontextprotocol/server/ext/skills/node";
import {
  registerAppTool,
  registerAppResource,
  RESOURCE_MIME_TYPE,
} from "@modelcontextprotocol/ext-apps/server";

const argv = process.argv.slice(2);
const arg = (name) => {
  const i = argv.indexOf(name);
  return i < 0 ? undefined : argv[i + 1];
};
const dir = arg("--dir");
if (!dir) {
  process.stderr.write("usage: apps_server.mjs --dir DIR [--era both|2026] [--http PORT]\n");
  process.exit(2);
}
const httpPort = arg("--http");
const legacy = arg("--era") === "2026" ? "reject" : undefined;
const opt = (p) => (existsSync(join(dir, p)) ? readFileSync(join(dir, p), "utf8") : undefined);

const skills = await loadSkills(join(dir, "skills"));

function build() {
  const server = new McpServer(
    { name: "xy-interop-apps", version: "1.0.0" },
    { capabilities: { tools: {}, resources: {} } },
  );
  skills.attach(server);
  for (const app of ["clock", "chart"]) {
    const uri = `ui://${app}/view.html`;
    registerAppResource(server, `${app} view`, uri, { description: `The ${app} app.` }, async () => {
      const csp = opt(`apps/${app}.csp`);
      const content = { uri, mimeType: RESOURCE_MIME_TYPE, text: opt(`apps/${app}.html`) ?? "" };
      if (csp) content._meta = { ui: { csp: JSON.parse(csp) } };
      return { contents: [content] };
    });
    registerAppTool(
      server,
      `show_${app}`,
      {
        description: `Shows the ${app} app.`,
        _meta: { ui: { resourceUri: uri } },
      },
      async () => ({ content: [{ type: "text", text: `${app} shown` }] }),
    );
    const visibility = JSON.parse(opt(`apps/${app}.visibility`) ?? '["app"]');
    registerAppTool(
      server,
      `${app}_poll`,
      {
        description: `Refreshes the ${app} app's data (called by the app).`,
        _meta: { ui: { resourceUri: uri, visibility } },
      },
      async () => ({ content: [{ type: "text", text: `${app} data` }] }),
    );
  }
  return server;
}

if (httpPort === undefined) {
  serveStdio(build, legacy ? { legacy } : {});
} else {
  const handler = createMcpHandler(build, legacy ? { legacy } : {});
  createServer(async (req, res) => {
    const chunks = [];
    for await (const c of req) chunks.push(c);
    const body = Buffer.concat(chunks);
    const request = new Request(`http://127.0.0.1:${httpPort}${req.url}`, {
      method: req.method,
      headers: req.headers,
      body: req.method === "GET" || req.method === "HEAD" ? undefined : body,
    });
    const response = await handler.fetch(request);
    res.writeHead(response.status, Object.fromEntries(response.headers));
    if (response.body) {
      for await (const chunk of response.body) res.write(chunk);
    }
    res.end();
  }).listen(Number(httpPort), "127.0.0.1");
}
