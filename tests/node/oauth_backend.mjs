// An HTTP MCP server that, like most SaaS MCP servers, authorizes each user with OAuth: it takes
// only access tokens its authorization server (the tests' oidc-provider) signed for it (RFC 8707
// audience), says where that server is (RFC 9728 metadata, and `WWW-Authenticate` on a 401),
// and demands a wider scope for writing (`403` with `error="insufficient_scope"`).
//
//   node oauth_backend.mjs PORT ISSUER
//
// Its tool list needs no token (a gateway lists it before anyone signs in); a call does.
// Tools: `whoami` (notes:read) answers the token's subject and scope; `write_note` (notes:write)
// keeps a note under the subject. POST /test/revoke makes every token issued so far a 401, as a
// revoked grant would be; POST /test/refuse-all makes every token a 401 from then on; GET /test/seen says how many calls came with a token, and the last
// subject, and how many distinct tokens came. Prints "listening" on stderr once it accepts connections.
import { createServer } from "node:http";
import { createRemoteJWKSet, jwtVerify } from "jose";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { z } from "zod";

const port = Number(process.argv[2]);
const issuer = process.argv[3];
const origin = `http://127.0.0.1:${port}`;
const resource = `${origin}/mcp`;
const metadataUrl = `${origin}/.well-known/oauth-protected-resource/mcp`;
const keys = createRemoteJWKSet(new URL(`${issuer}/jwks`));
const notes = new Map();
let revokedBefore = 0;
let refuseAll = false;
let seen = 0;
let lastSubject = null;
let lastClient = null;
const tokensSeen = new Set();

function mcpServer(claims) {
  const server = new McpServer({ name: "notes", version: "1.0.0" });
  server.registerTool("whoami", {
    description: "Who the token is for, and its scope",
    inputSchema: {},
    annotations: { readOnlyHint: true },
  }, async () => ({ content: [{ type: "text", text: JSON.stringify({ sub: claims.sub, scope: claims.scope }) }] }));
  server.registerTool("write_note", {
    description: "Keep a note for the token's subject (needs notes:write)",
    inputSchema: { text: z.string() },
    annotations: { readOnlyHint: false },
  }, async ({ text }) => {
    const mine = notes.get(claims.sub) ?? [];
    mine.push(text);
    notes.set(claims.sub, mine);
    return { content: [{ type: "text", text: JSON.stringify({ sub: claims.sub, notes: mine.length }) }] };
  });
  return server;
}

function challenge(res, status, error, scope) {
  const parts = [`resource_metadata="${metadataUrl}"`];
  if (error) parts.push(`error="${error}"`);
  if (scope) parts.push(`scope="${scope}"`);
  res.writeHead(status, { "www-authenticate": `Bearer ${parts.join(", ")}`, "content-type": "application/json" });
  res.end(JSON.stringify({ error: error ?? "unauthorized" }));
}

async function readBody(req) {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  const text = Buffer.concat(chunks).toString();
  return text ? JSON.parse(text) : undefined;
}

const http = createServer(async (req, res) => {
  if (req.url === "/.well-known/oauth-protected-resource/mcp" || req.url === "/.well-known/oauth-protected-resource") {
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify({
      resource,
      authorization_servers: [issuer],
      scopes_supported: ["notes:read", "notes:write"],
      bearer_methods_supported: ["header"],
    }));
    return;
  }
  if (req.url === "/test/refuse-all" && req.method === "POST") {
    refuseAll = true;
    res.end("{}");
    return;
  }
  if (req.url === "/test/revoke" && req.method === "POST") {
    revokedBefore = Math.floor(Date.now() / 1000) + 1;
    res.end("{}");
    return;
  }
  if (req.url === "/test/seen") {
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify({ seen, last_subject: lastSubject, last_client: lastClient, tokens: tokensSeen.size, notes: Object.fromEntries(notes) }));
    return;
  }
  if (!req.url.startsWith("/mcp")) {
    res.writeHead(404);
    res.end();
    return;
  }
  const body = req.method === "POST" ? await readBody(req) : undefined;
  const calls = [].concat(body ?? []);
  const calling = calls.some((m) => m?.method === "tools/call");
  const header = req.headers.authorization ?? "";
  // Its tool list is public (a gateway lists it before anyone signs in); a call needs a token.
  let claims = {};
  if (header.startsWith("Bearer ")) {
    try {
      ({ payload: claims } = await jwtVerify(header.slice(7), keys, { issuer, audience: resource }));
    } catch {
      return challenge(res, 401, "invalid_token");
    }
    if ((claims.iat ?? 0) < revokedBefore || refuseAll) return challenge(res, 401, "invalid_token");
  } else if (calling) {
    return challenge(res, 401);
  }
  if (calling) {
    const scopes = String(claims.scope ?? "").split(" ");
    if (!scopes.includes("notes:read")) return challenge(res, 403, "insufficient_scope", "notes:read");
    if (calls.some((m) => m.params?.name === "write_note") && !scopes.includes("notes:write")) {
      return challenge(res, 403, "insufficient_scope", "notes:read notes:write");
    }
    seen += 1;
    lastSubject = claims.sub;
    lastClient = claims.client_id ?? null;
    if (tokensSeen.size < 10000) tokensSeen.add(claims.jti);
  }
  const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
  await mcpServer(claims).connect(transport);
  await transport.handleRequest(req, res, body);
});

http.listen(port, "127.0.0.1", () => console.error("listening"));
