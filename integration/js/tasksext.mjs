// tasksext.mjs drives the MCP Tasks extension of the 2026-07-28 revision
// (io.modelcontextprotocol/tasks, SEP-2663) with its official requester,
// @modelcontextprotocol/ext-tasks, over a modern-era client of the
// TypeScript MCP SDK v2: node tasksext.mjs URL TOKEN. The requester sends
// its task requests through a raw JSON-RPC dispatcher (the package asks
// its host for one). It prints one JSON line: the extension the server
// declared, how a quick call and an export were answered (immediately or
// as a task, the task's updates and outcome), what a cancelled task came
// to, and the error of a task the caller does not own. Any other error
// exits 1.
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { createTaskSessionFromClient } from "@modelcontextprotocol/ext-tasks/client";

const [url, token, otherToken] = process.argv.slice(2);
const clientInfo = { name: "lakegate-ts-tasksext", version: "1.0.0" };
const client = new Client(clientInfo, { versionNegotiation: { mode: "auto" } });
await client.connect(
  new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }),
);

let nextId = 1;
// rawDispatch posts one JSON-RPC request as a 2026-07-28 client does.
const dispatchAs = (bearer) => async (request, options = {}) => {
  const body = { jsonrpc: "2.0", id: nextId++, ...request };
  const res = await fetch(url, {
    method: "POST",
    headers: {
      Authorization: `Bearer ${bearer}`,
      "Content-Type": "application/json",
      Accept: "application/json, text/event-stream",
      "MCP-Protocol-Version": "2026-07-28",
      "Mcp-Method": request.method,
      ...(request.method === "tools/call" ? { "Mcp-Name": request.params.name } : {}),
    },
    body: JSON.stringify(body),
    signal: options.signal,
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`HTTP ${res.status}: ${text}`);
  // A JSON body, or an event stream whose last message is the answer.
  let msg;
  if ((res.headers.get("content-type") ?? "").startsWith("text/event-stream")) {
    const data = text.split("\n").filter((l) => l.startsWith("data: ")).map((l) => JSON.parse(l.slice(6)));
    msg = data.find((m) => m.id === body.id);
  } else {
    msg = JSON.parse(text);
  }
  if (msg === undefined) throw new Error(`no answer to ${request.method}: ${text}`);
  return msg.error !== undefined ? { kind: "error", error: msg.error } : { kind: "result", result: msg.result };
};
const framing = { protocolVersion: "2026-07-28", clientInfo, clientCapabilities: {} };
const session = createTaskSessionFromClient(client, { endpointId: "lakegate", rawDispatch: dispatchAs(token), v2RequestFraming: framing });

const out = {
  era: client.getProtocolEra(),
  extension: client.getServerCapabilities()?.extensions?.["io.modelcontextprotocol/tasks"] ?? null,
};
const text = (result) => result?.content?.find((c) => c.type === "text")?.text ?? "";

// A quick call answers at once.
const quick = await session.callTool("run_sql", { database: "iot", sql: "SELECT count(*) AS n FROM readings" });
const q = await quick.settle();
out.quick = { kind: quick.kind, status: q.outcome.status, text: text(q.outcome.result) };

// An export is a job from its start: the call answers with its task,
// which runs to its end.
const exp = await session.callTool("run_sql", { database: "iot", sql: "SELECT id, device_id FROM readings ORDER BY id", export: true });
out.export = { kind: exp.kind, taskId: exp.handle?.taskId ?? null, updates: [] };
for await (const u of exp.updates()) {
  if (u.type === "task") out.export.updates.push(u.task.status);
  if (u.type === "outcome") {
    out.export.status = u.outcome.status;
    out.export.structured = u.outcome.result?.structuredContent ?? null;
  }
}

// Another subject does not find the task.
const stranger = await dispatchAs(otherToken)({ method: "tasks/get", params: { taskId: out.export.taskId } });
out.strangerError = stranger.kind === "error" ? stranger.error.message : null;

// A task without end, cancelled.
const slow =
  "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1000000000) " +
  "SELECT x, (SELECT sum(y) FROM generate_series(1, 20000 + x % 2) y) FROM c";
const endless = await session.callTool("run_sql", { database: "iot", sql: slow, export: true });
out.endless = { kind: endless.kind };
await endless.cancel();
const after = await dispatchAs(token)({ method: "tasks/get", params: { taskId: endless.handle.taskId } });
for (let i = 0; i < 50 && after.result?.status === "working"; i++) {
  await new Promise((r) => setTimeout(r, 100));
  Object.assign(after, await dispatchAs(token)({ method: "tasks/get", params: { taskId: endless.handle.taskId } }));
}
out.endless.status = after.result?.status ?? null;

await session.close();
await client.close();
console.log(JSON.stringify(out));
