// reload.mjs follows a tools.json reload with the official TypeScript MCP
// SDK client: node reload.mjs URL TOKEN
// It connects over Streamable HTTP, prints {"tools": [...]} (one line),
// waits up to 60 s for notifications/tools/list_changed, then prints the
// tools listed again and exits. Any protocol error exits 1.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ToolListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";

const [url, token] = process.argv.slice(2);
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
const client = new Client({ name: "lakegate-ts-reload", version: "1.0.0" });
let changed;
const notified = new Promise((resolve) => (changed = resolve));
client.setNotificationHandler(ToolListChangedNotificationSchema, () => changed());
await client.connect(transport);

const names = async () => (await client.listTools()).tools.map((t) => t.name).sort();
console.log(JSON.stringify({ tools: await names(), listChanged: client.getServerCapabilities()?.tools?.listChanged ?? false }));

const timeout = setTimeout(() => {
  console.error("no notifications/tools/list_changed within 60 s");
  process.exit(1);
}, 60_000);
await notified;
clearTimeout(timeout);
console.log(JSON.stringify({ tools: await names() }));
await client.close();
