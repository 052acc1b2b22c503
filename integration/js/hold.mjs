// hold.mjs opens a legacy SSE session with the official TypeScript MCP SDK
// and holds it until the server ends it: node hold.mjs URL TOKEN
// It calls list_databases once and prints "ready". When the server ends
// the event stream (the SDK's EventSource reports it as an error and would
// reconnect), it closes the client, prints "closed" from onclose and exits
// 0. Any other failure, or no end within 60 s, exits 1.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { SSEClientTransport } from "@modelcontextprotocol/sdk/client/sse.js";

const [url, token] = process.argv.slice(2);
const headers = { Authorization: `Bearer ${token}` };
const transport = new SSEClientTransport(new URL(url), {
  requestInit: { headers },
  eventSourceInit: {
    fetch: (u, init) => fetch(u, { ...init, headers: { ...(init?.headers || {}), ...headers } }),
  },
});
const client = new Client({ name: "lakegate-hold", version: "1.0.0" });

let ready = false;
client.onclose = () => {
  console.log("closed");
  process.exit(0);
};
client.onerror = (err) => {
  if (!ready) return; // connect and the call report their own errors
  console.error(`stream ended: ${err.message}`);
  void client.close();
};
setTimeout(() => {
  console.error("the session was not closed within 60 s");
  process.exit(1);
}, 60_000);

try {
  await client.connect(transport);
  const res = await client.callTool({ name: "list_databases", arguments: {} });
  if (res.isError) throw new Error(`list_databases: ${JSON.stringify(res.content)}`);
} catch (err) {
  console.error(err);
  process.exit(1);
}
ready = true;
console.log("ready");
