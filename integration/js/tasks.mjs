// tasks.mjs drives the MCP Tasks extension (2025-11-25) with the official
// TypeScript MCP SDK client's experimental tasks: node tasks.mjs URL TOKEN
// TRANSPORT (http or sse). It prints one JSON line: the capability and a
// tool's task support the server declared, the messages of a task-backed
// run_sql call (taskCreated, taskStatus..., result), the task ids
// tasks/list shows, and what a cancelled task came to. Any protocol error
// exits 1.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { SSEClientTransport } from "@modelcontextprotocol/sdk/client/sse.js";
import { CallToolResultSchema } from "@modelcontextprotocol/sdk/types.js";

const [url, token, kind] = process.argv.slice(2);
const headers = { Authorization: `Bearer ${token}` };
const transport =
  kind === "sse"
    ? new SSEClientTransport(new URL(url), {
        requestInit: { headers },
        eventSourceInit: { fetch: (u, init) => fetch(u, { ...init, headers: { ...init?.headers, ...headers } }) },
      })
    : new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
const client = new Client({ name: "lakegate-ts-tasks", version: "1.0.0" });
await client.connect(transport);

const out = { capability: client.getServerCapabilities()?.tasks ?? null };
const tools = (await client.listTools()).tools;
out.runSQLTaskSupport = tools.find((t) => t.name === "run_sql")?.execution?.taskSupport ?? null;

// A task-backed call to its result.
out.messages = [];
const stream = client.experimental.tasks.callToolStream(
  { name: "run_sql", arguments: { database: "iot", sql: "SELECT count(*) AS n FROM readings" } },
  CallToolResultSchema,
  { task: { ttl: 60000 } },
);
for await (const m of stream) {
  if (m.type === "taskCreated") {
    out.taskId = m.task.taskId;
    out.ttl = m.task.ttl;
  }
  if (m.type === "result") out.text = m.result.content?.[0]?.text ?? "";
  if (m.type === "error") out.error = String(m.error);
  out.messages.push(m.type === "taskStatus" ? `taskStatus:${m.task.status}` : m.type);
}
out.listed = (await client.experimental.tasks.listTasks()).tasks.map((t) => t.taskId);

// A task without end, cancelled.
const slow =
  "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1000000000) " +
  "SELECT x, (SELECT sum(y) FROM generate_series(1, 20000 + x % 2) y) FROM c";
const endless = client.experimental.tasks.callToolStream(
  { name: "run_sql", arguments: { database: "iot", sql: slow, export: true } },
  CallToolResultSchema,
  { task: { ttl: 60000 } },
);
for await (const m of endless) {
  if (m.type === "taskCreated") {
    const cancelled = await client.experimental.tasks.cancelTask(m.task.taskId);
    out.cancelledStatus = cancelled.status;
  }
  if (m.type === "error") out.cancelledError = String(m.error);
  if (m.type === "result") out.cancelledResult = true;
}
console.log(JSON.stringify(out));
await client.close();
