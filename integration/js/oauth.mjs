// oauth.mjs follows MCP authorization discovery with the official
// TypeScript SDK: node oauth.mjs BASE_URL CLIENT_ID CLIENT_SECRET
// For /mcp and /mcp/sse it sends a request without a token, reads the
// 401's WWW-Authenticate, loads the protected resource metadata it points
// to and the metadata of the first authorization server named there (the
// SDK's own discovery functions). Then it connects over both transports
// with the SDK's ClientCredentialsProvider, which runs the whole flow by
// itself (401 → metadata → token request with the resource → retry), and
// calls a tool. It prints one JSON summary on stdout; any failure exits 1.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { SSEClientTransport } from "@modelcontextprotocol/sdk/client/sse.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  extractWWWAuthenticateParams,
  discoverOAuthProtectedResourceMetadata,
  discoverAuthorizationServerMetadata,
} from "@modelcontextprotocol/sdk/client/auth.js";
import { ClientCredentialsProvider } from "@modelcontextprotocol/sdk/client/auth-extensions.js";

const [base, clientId, clientSecret] = process.argv.slice(2);
const summary = { discovery: {}, connect: {} };

const initialize = JSON.stringify({
  jsonrpc: "2.0",
  id: 1,
  method: "initialize",
  params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "lakegate-oauth-it", version: "1.0.0" } },
});

for (const path of ["/mcp", "/mcp/sse"]) {
  const url = new URL(base + path);
  const res =
    path === "/mcp"
      ? await fetch(url, {
          method: "POST",
          headers: { "Content-Type": "application/json", Accept: "application/json, text/event-stream" },
          body: initialize,
        })
      : await fetch(url, { headers: { Accept: "text/event-stream" } });
  await res.body?.cancel();
  const { resourceMetadataUrl } = extractWWWAuthenticateParams(res);
  const prm = await discoverOAuthProtectedResourceMetadata(url, { resourceMetadataUrl });
  const as = await discoverAuthorizationServerMetadata(prm.authorization_servers[0]);
  summary.discovery[path] = {
    status: res.status,
    resource_metadata: resourceMetadataUrl?.href ?? null,
    resource: prm.resource,
    authorization_servers: prm.authorization_servers,
    bearer_methods_supported: prm.bearer_methods_supported,
    issuer: as?.issuer ?? null,
    token_endpoint: as?.token_endpoint ?? null,
  };
}

for (const [path, Transport] of [
  ["/mcp", StreamableHTTPClientTransport],
  ["/mcp/sse", SSEClientTransport],
]) {
  const authProvider = new ClientCredentialsProvider({ clientId, clientSecret });
  const transport = new Transport(new URL(base + path), { authProvider });
  const client = new Client({ name: "lakegate-oauth-it", version: "1.0.0" });
  await client.connect(transport);
  const res = await client.callTool({ name: "run_sql", arguments: { database: "iot", sql: "SELECT count(*) AS n FROM devices" } });
  summary.connect[path] = {
    server: client.getServerVersion()?.name,
    isError: !!res.isError,
    text: res.content?.[0]?.text ?? "",
    token: !!authProvider.tokens()?.access_token,
  };
  await client.close();
}

console.log(JSON.stringify(summary));
process.exit(0);
