// The server under test of the conformance harness (xy-testbins::interop,
// xy-daemon/tests/conformance.rs): the tools, resources and prompts the
// conformance suite's server scenarios call, on the official TypeScript
// SDK's low-level `Server`. `--stdio` serves it on stdin/stdout (behind
// xy); `--port N` serves it over streamable HTTP with the SDK's own
// transport, one session per `initialize` (the reference).
import http from 'node:http';
import { randomUUID } from 'node:crypto';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import {
  CallToolRequestSchema,
  CompleteRequestSchema,
  GetPromptRequestSchema,
  ListPromptsRequestSchema,
  ListResourceTemplatesRequestSchema,
  ListResourcesRequestSchema,
  ListToolsRequestSchema,
  ReadResourceRequestSchema,
  SetLevelRequestSchema,
  SubscribeRequestSchema,
  UnsubscribeRequestSchema,
  ErrorCode,
  McpError
} from '@modelcontextprotocol/sdk/types.js';

// A 1×1 PNG and a tiny WAV: content the image/audio scenarios check the shape of.
const PNG =
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==';
const WAV = 'UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQAAAAA=';

const empty = { type: 'object', properties: {} };
const tools = [
  { name: 'test_simple_text', description: 'Returns one text item', inputSchema: empty },
  { name: 'test_image_content', description: 'Returns an image', inputSchema: empty },
  { name: 'test_audio_content', description: 'Returns audio', inputSchema: empty },
  { name: 'test_embedded_resource', description: 'Returns an embedded resource', inputSchema: empty },
  { name: 'test_multiple_content_types', description: 'Returns text, image and a resource', inputSchema: empty },
  { name: 'test_tool_with_logging', description: 'Logs three messages while it runs', inputSchema: empty },
  { name: 'test_tool_with_progress', description: 'Reports progress three times', inputSchema: empty },
  { name: 'test_error_handling', description: 'Always fails', inputSchema: empty },
  {
    name: 'test_sampling',
    description: 'Asks the client for a completion',
    inputSchema: { type: 'object', properties: { prompt: { type: 'string' } }, required: ['prompt'] }
  },
  {
    name: 'test_elicitation',
    description: 'Asks the user through the client',
    inputSchema: { type: 'object', properties: { message: { type: 'string' } }, required: ['message'] }
  }
];

const text = (t) => ({ content: [{ type: 'text', text: t }] });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function build() {
  const server = new Server(
    { name: 'xy-conformance-server', version: '1.0.0' },
    {
      capabilities: {
        tools: { listChanged: true },
        resources: { subscribe: true, listChanged: true },
        prompts: { listChanged: true },
        logging: {},
        completions: {}
      }
    }
  );
  const log = (extra, data) =>
    extra.sendNotification({ method: 'notifications/message', params: { level: 'info', data } });

  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools }));
  server.setRequestHandler(CallToolRequestSchema, async (req, extra) => {
    const args = req.params.arguments ?? {};
    switch (req.params.name) {
      case 'test_simple_text':
        return text('This is a simple text response for testing.');
      case 'test_image_content':
        return { content: [{ type: 'image', data: PNG, mimeType: 'image/png' }] };
      case 'test_audio_content':
        return { content: [{ type: 'audio', data: WAV, mimeType: 'audio/wav' }] };
      case 'test_embedded_resource':
        return {
          content: [
            {
              type: 'resource',
              resource: { uri: 'test://embedded-resource', mimeType: 'text/plain', text: 'This is an embedded resource content.' }
            }
          ]
        };
      case 'test_multiple_content_types':
        return {
          content: [
            { type: 'text', text: 'Multiple content types test:' },
            { type: 'image', data: PNG, mimeType: 'image/png' },
            {
              type: 'resource',
              resource: { uri: 'test://mixed-content-resource', mimeType: 'application/json', text: '{"test":"data","value":123}' }
            }
          ]
        };
      case 'test_tool_with_logging':
        for (const m of ['Tool execution started', 'Tool processing data', 'Tool execution completed']) {
          await log(extra, m);
          await sleep(20);
        }
        return text('Tool with logging executed successfully');
      case 'test_tool_with_progress': {
        const token = req.params._meta?.progressToken ?? 0;
        for (const progress of [0, 50, 100]) {
          await extra.sendNotification({
            method: 'notifications/progress',
            params: { progressToken: token, progress, total: 100, message: `Completed step ${progress} of 100` }
          });
          await sleep(20);
        }
        return text(String(token));
      }
      case 'test_error_handling':
        return { isError: true, content: [{ type: 'text', text: 'This tool intentionally returns an error for testing' }] };
      case 'test_sampling': {
        try {
          const r = await server.createMessage({
            messages: [{ role: 'user', content: { type: 'text', text: String(args.prompt ?? '') } }],
            maxTokens: 100
          });
          return text(`LLM response: ${r.content?.text ?? 'No response'}`);
        } catch (e) {
          return text(`Sampling not supported or error: ${e.message}`);
        }
      }
      case 'test_elicitation': {
        try {
          const r = await server.elicitInput({
            message: String(args.message ?? ''),
            requestedSchema: {
              type: 'object',
              properties: { response: { type: 'string', description: "User's response" } },
              required: ['response']
            }
          });
          return text(`User response: action=${r.action}, content=${JSON.stringify(r.content ?? {})}`);
        } catch (e) {
          return text(`Elicitation not supported or error: ${e.message}`);
        }
      }
      default:
        throw new McpError(ErrorCode.InvalidParams, `Unknown tool: ${req.params.name}`);
    }
  });

  const resources = {
    'test://static-text': { name: 'static-text', mimeType: 'text/plain', text: 'This is the content of the static text resource.' },
    'test://static-binary': { name: 'static-binary', mimeType: 'image/png', blob: PNG },
    'test://watched-resource': { name: 'watched-resource', mimeType: 'text/plain', text: 'Watched resource content' }
  };
  server.setRequestHandler(ListResourcesRequestSchema, async () => ({
    resources: Object.entries(resources).map(([uri, r]) => ({ uri, name: r.name, mimeType: r.mimeType }))
  }));
  server.setRequestHandler(ListResourceTemplatesRequestSchema, async () => ({
    resourceTemplates: [{ uriTemplate: 'test://template/{id}/data', name: 'template', mimeType: 'application/json' }]
  }));
  server.setRequestHandler(ReadResourceRequestSchema, async (req) => {
    const uri = req.params.uri;
    const r = resources[uri];
    if (r) {
      const { name: _, ...content } = r;
      return { contents: [{ uri, ...content }] };
    }
    const m = /^test:\/\/template\/([^/]+)\/data$/.exec(uri);
    if (m) {
      const id = m[1];
      return {
        contents: [{ uri, mimeType: 'application/json', text: JSON.stringify({ id, templateTest: true, data: `Data for ID: ${id}` }) }]
      };
    }
    throw new McpError(-32002, `Resource not found: ${uri}`);
  });
  server.setRequestHandler(SubscribeRequestSchema, async () => ({}));
  server.setRequestHandler(UnsubscribeRequestSchema, async () => ({}));

  const prompts = [
    { name: 'test_simple_prompt', description: 'No arguments' },
    {
      name: 'test_prompt_with_arguments',
      description: 'Two arguments',
      arguments: [
        { name: 'arg1', required: true },
        { name: 'arg2', required: true }
      ]
    },
    { name: 'test_prompt_with_embedded_resource', description: 'Embeds a resource', arguments: [{ name: 'resourceUri', required: true }] },
    { name: 'test_prompt_with_image', description: 'Includes an image' }
  ];
  server.setRequestHandler(ListPromptsRequestSchema, async () => ({ prompts }));
  server.setRequestHandler(GetPromptRequestSchema, async (req) => {
    const a = req.params.arguments ?? {};
    const user = (content) => ({ role: 'user', content });
    switch (req.params.name) {
      case 'test_simple_prompt':
        return { messages: [user({ type: 'text', text: 'This is a simple prompt for testing.' })] };
      case 'test_prompt_with_arguments':
        return { messages: [user({ type: 'text', text: `Prompt with arguments: arg1='${a.arg1}', arg2='${a.arg2}'` })] };
      case 'test_prompt_with_embedded_resource':
        return {
          messages: [
            user({ type: 'resource', resource: { uri: a.resourceUri, mimeType: 'text/plain', text: 'Embedded resource content for testing.' } }),
            user({ type: 'text', text: 'Please process the embedded resource above.' })
          ]
        };
      case 'test_prompt_with_image':
        return {
          messages: [user({ type: 'image', data: PNG, mimeType: 'image/png' }), user({ type: 'text', text: 'Please analyze the image above.' })]
        };
      default:
        throw new McpError(ErrorCode.InvalidParams, `Unknown prompt: ${req.params.name}`);
    }
  });
  server.setRequestHandler(SetLevelRequestSchema, async () => ({}));
  server.setRequestHandler(CompleteRequestSchema, async () => ({ completion: { values: [], total: 0, hasMore: false } }));
  return server;
}

const argv = process.argv.slice(2);
if (argv.includes('--stdio')) {
  await build().connect(new StdioServerTransport());
} else {
  const port = Number(argv[argv.indexOf('--port') + 1]);
  const sessions = new Map();
  http
    .createServer(async (req, res) => {
      const chunks = [];
      for await (const c of req) chunks.push(c);
      const raw = Buffer.concat(chunks).toString();
      let body;
      try {
        body = raw ? JSON.parse(raw) : undefined;
      } catch {
        body = undefined;
      }
      const sid = req.headers['mcp-session-id'];
      let transport = sid ? sessions.get(sid) : undefined;
      if (!transport) {
        transport = new StreamableHTTPServerTransport({
          sessionIdGenerator: () => randomUUID(),
          onsessioninitialized: (id) => sessions.set(id, transport)
        });
        transport.onclose = () => transport.sessionId && sessions.delete(transport.sessionId);
        await build().connect(transport);
      }
      await transport.handleRequest(req, res, body);
    })
    .listen(port, '127.0.0.1', () => process.stderr.write(`conformance server on 127.0.0.1:${port}\n`));
}
