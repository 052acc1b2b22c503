// cycles.mjs opens and leaves many Streamable HTTP sessions under one token
// with the official TypeScript MCP SDK, as clients do in practice:
// node cycles.mjs URL TOKEN N call|check
//   call:  connect, call list_databases, close() (which sends no DELETE)
//   check: connect, list the tools, close(): a health check such as
//          `claude mcp list`
// It prints one JSON line: {"ok": n, "failed": n, "first_error": "..."}.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, token, n, mode] = process.argv.slice(2);
const summary = { ok: 0, failed: 0, first_error: null };
for (let i = 0; i < Number(n); i++) {
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
  const client = new Client({ name: `lakegate-cycle-${i}`, version: "1.0.0" });
  try {
    await client.connect(transport);
    if (mode === "call") {
      const res = await client.callTool({ name: "list_databases", arguments: {} });
      if (res.isError) throw new Error(`list_databases: ${JSON.stringify(res.content)}`);
    } else {
      const { tools } = await client.listTools();
      if (tools.length === 0) throw new Error("no tools");
    }
    summary.ok++;
  } catch (err) {
    summary.failed++;
    summary.first_error ??= `cycle ${i + 1}: ${err.message}`;
  } finally {
    await client.close();
  }
}
console.log(JSON.stringify(summary));
