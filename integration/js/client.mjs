// client.mjs drives lakegate with the official TypeScript MCP SDK client:
// node client.mjs URL sse|http TOKEN ARGS_JSON
// It initializes, lists and calls every tool (arguments from ARGS_JSON by
// tool name, {} otherwise), lists and reads resources, lists and gets
// prompts, and prints one JSON summary on stdout. Any protocol error exits 1.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { SSEClientTransport } from "@modelcontextprotocol/sdk/client/sse.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, kind, token, argsJSON] = process.argv.slice(2);
const toolArgs = JSON.parse(argsJSON || "{}");
const headers = { Authorization: `Bearer ${token}` };
const transport =
  kind === "sse"
    ? new SSEClientTransport(new URL(url), {
        requestInit: { headers },
        eventSourceInit: {
          fetch: (u, init) => fetch(u, { ...init, headers: { ...(init?.headers || {}), ...headers } }),
        },
      })
    : new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });

const client = new Client({ name: "lakegate-ts-it", version: "1.0.0" });
await client.connect(transport);
const summary = {
  server: client.getServerVersion()?.name,
  protocol: transport.protocolVersion ?? null,
  tools: {},
  resources: [],
  prompts: {},
};

const { tools } = await client.listTools();
for (const tool of tools) {
  const res = await client.callTool({ name: tool.name, arguments: toolArgs[tool.name] ?? {} });
  summary.tools[tool.name] = { isError: !!res.isError, structured: res.structuredContent !== undefined };
}

const { resources } = await client.listResources();
for (const r of resources.slice(0, 5)) {
  const read = await client.readResource({ uri: r.uri });
  summary.resources.push({ uri: r.uri, bytes: read.contents[0]?.text?.length ?? 0 });
}
const { resourceTemplates } = await client.listResourceTemplates();
summary.templates = resourceTemplates.map((t) => t.uriTemplate);

const { prompts } = await client.listPrompts();
const promptArgs = { database: toolArgs.list_tables?.database ?? "iot", table: toolArgs.describe_table?.table ?? "readings" };
for (const p of prompts) {
  const args = {};
  for (const a of p.arguments ?? []) args[a.name] = promptArgs[a.name];
  const got = await client.getPrompt({ name: p.name, arguments: args });
  summary.prompts[p.name] = got.messages.length;
}
const done = await client.complete({
  ref: { type: "ref/prompt", name: "analyze_table" },
  argument: { name: "table", value: "dev" },
  context: { arguments: { database: promptArgs.database } },
});
summary.completion = done.completion.values;

await client.close();
console.log(JSON.stringify(summary));
