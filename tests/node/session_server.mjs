// A streamable HTTP MCP server on 2025-11-25 sessions, built on the TypeScript SDK, that answers
// a session it does not know with 404, as the spec says a server must (server-everything
// answers 400). Its `echo` tool says which session served it. Usage: node session_server.mjs PORT
// (prints "listening" on stderr once it accepts connections).
import { createServer } from "node:http";
import { randomUUID } from "node:crypto";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { isInitializeRequest } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";

const sessions = new Map();

function mcpServer(sessionOf) {
  const server = new McpServer({ name: "session-server", version: "1.0.0" });
  server.tool("echo", "Echo the text back, with the session that served it", { text: z.string() },
    async ({ text }) => ({ content: [{ type: "text", text: `${text} (session ${sessionOf()})` }] }));
  return server;
}

async function readBody(req) {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  const text = Buffer.concat(chunks).toString();
  return text ? JSON.parse(text) : undefined;
}

const http = createServer(async (req, res) => {
  const id = req.headers["mcp-session-id"];
  const body = req.method === "POST" ? await readBody(req) : undefined;
  let transport = id ? sessions.get(id) : undefined;
  if (id && !transport) {
    res.writeHead(404, { "content-type": "application/json" });
    res.end(JSON.stringify({ jsonrpc: "2.0", error: { code: -32001, message: "Session not found" }, id: null }));
    return;
  }
  if (!transport) {
    if (req.method !== "POST" || !isInitializeRequest(body)) {
      res.writeHead(400, { "content-type": "application/json" });
      res.end(JSON.stringify({ jsonrpc: "2.0", error: { code: -32000, message: "initialize first" }, id: null }));
      return;
    }
    transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (sid) => sessions.set(sid, transport),
    });
    transport.onclose = () => sessions.delete(transport.sessionId);
    await mcpServer(() => transport.sessionId).connect(transport);
  }
  await transport.handleRequest(req, res, body);
});

http.listen(Number(process.argv[2]), "127.0.0.1", () => console.error("listening"));
