// The peer of sandgate's concurrency benchmark: @utcp/code-mode behind a stdio MCP server with
// one tool, `call_tool_chain({ code })`, over the same backend sandgate serves (server-everything
// over stdio, started by @utcp/mcp). Tools are reached as `ev.everything_<tool_name>`.
//
//   node code_mode_server.mjs <path to server-everything's dist/index.js>
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { z } from 'zod';
import { CodeModeUtcpClient } from '@utcp/code-mode';
import '@utcp/mcp';

// UTCP logs to stdout, which is the protocol here.
console.log = (...args) => console.error(...args);
console.info = (...args) => console.error(...args);

const everything = process.argv[2];
const client = await CodeModeUtcpClient.create();
await client.registerManual({
  name: 'ev',
  call_template_type: 'mcp',
  config: { mcpServers: { everything: { transport: 'stdio', command: process.execPath, args: [everything, 'stdio'] } } },
});

const server = new McpServer({ name: 'utcp-code-mode-peer', version: '1.2.12' });
server.registerTool(
  'call_tool_chain',
  { description: 'Runs TypeScript with the tools in reach', inputSchema: { code: z.string() } },
  async ({ code }) => {
    const { result, logs } = await client.callToolChain(code, 30000);
    return { content: [{ type: 'text', text: JSON.stringify({ result, logs }) }] };
  },
);
await server.connect(new StdioServerTransport());
