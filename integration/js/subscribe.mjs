// subscribe.mjs follows a watch resource with the official TypeScript MCP
// SDK client: node subscribe.mjs URL TOKEN TRANSPORT (http or sse)
// BASE WRITER_TOKEN. It subscribes to device 7's readings, ingests a
// reading of device 8 and then one of device 7 through lakegate's REST
// ingest (BASE/data/iot/readings, as WRITER_TOKEN), and prints one JSON
// line: the resource read, the URIs notified (within 10 s of the second
// ingest), and how long after that ingest the first notice came. Any
// protocol error exits 1.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { SSEClientTransport } from "@modelcontextprotocol/sdk/client/sse.js";
import { ResourceUpdatedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";

const [url, token, kind, base, writer] = process.argv.slice(2);
const headers = { Authorization: `Bearer ${token}` };
const transport =
  kind === "sse"
    ? new SSEClientTransport(new URL(url), {
        requestInit: { headers },
        eventSourceInit: { fetch: (u, init) => fetch(u, { ...init, headers: { ...init?.headers, ...headers } }) },
      })
    : new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
const client = new Client({ name: "lakegate-ts-subscribe", version: "1.0.0" });
await client.connect(transport);

const out = { subscribe: client.getServerCapabilities()?.resources?.subscribe ?? false, notified: [] };
const filters = encodeURIComponent(JSON.stringify([{ column: "device_id", op: "=", value: 7 }]));
const uri = `lakegate://watch/iot/readings?columns=id,device_id&filters=${filters}`;
out.uri = uri;
const read = await client.readResource({ uri });
out.readRows = JSON.parse(read.contents[0].text).rows.length;

let firstAt;
client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => {
  firstAt ??= Date.now();
  out.notified.push(n.params.uri);
});
await client.subscribeResource({ uri });

const ingest = async (id, device) => {
  const res = await fetch(`${base}/data/iot/readings`, {
    method: "POST",
    headers: { Authorization: `Bearer ${writer}`, "Content-Type": "application/json" },
    body: JSON.stringify([{ id, device_id: device, ts: "2031-01-01T00:00:00Z", temperature: 20, humidity: 40, status: "ok" }]),
  });
  if (!res.ok) throw new Error(`ingest: ${res.status} ${await res.text()}`);
};
// Ids past every row there: the tail follows the key.
const id = Date.now() * 10;
await ingest(id, 8);
await new Promise((r) => setTimeout(r, 300));
const ingestedAt = Date.now();
await ingest(id + 1, 7);
for (let i = 0; i < 100 && firstAt === undefined; i++) await new Promise((r) => setTimeout(r, 100));
out.afterMs = firstAt === undefined ? null : firstAt - ingestedAt;
await client.unsubscribeResource({ uri });
await client.close();
console.log(JSON.stringify(out));
