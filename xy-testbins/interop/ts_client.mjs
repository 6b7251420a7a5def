// The official TypeScript client SDK (v2, `@modelcontextprotocol/client`)
// against one streamable HTTP URL, in each of its ways to pick an era:
// `legacy` (2025 `initialize`), `auto` (`server/discover` first) and a pin
// of 2026-07-28. Per mode it lists the tools and calls one, printing one
// JSON line; it resolves the SDK from the directory this file sits in.
//
//   node ts_client.mjs URL TOOL
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";

const [, , url, tool] = process.argv;
for (const mode of ["legacy", "auto", { pin: "2026-07-28" }]) {
  const name = typeof mode === "string" ? mode : `pin ${mode.pin}`;
  const c = new Client({ name: "xy-ts-client", version: "1" }, { versionNegotiation: { mode } });
  await c.connect(new StreamableHTTPClientTransport(new URL(url)));
  const tools = (await c.listTools()).tools.map((t) => t.name).sort();
  const r = await c.callTool({ name: tool, arguments: { text: `ts ${name}` } });
  const text = r.content.filter((x) => x.type === "text").map((x) => x.text);
  console.log(JSON.stringify({
    mode: name, era: c.getProtocolEra(), version: c.getNegotiatedProtocolVersion(), tools, text,
  }));
  await c.close();
}
