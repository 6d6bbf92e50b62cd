// The swarm hub's tools and hooks for pi, written by `swarm connect --harness pi`.
// Re-running `swarm connect` replaces this file: keep your own extensions in other files.
//
// pi has no MCP client by design, so this extension is one: it lists the hub's MCP tools
// (POST <hub>/mcp, stateless JSON-RPC) when pi starts and registers each as a pi tool named
// like Claude Code's (`mcp__agent-swarm__<tool>`), so the same prompts work. It also runs
// `swarm hook <event>` where Claude Code would: session start and each prompt (who the agent
// is, its unread mail), before a tool call (a cancelled task blocks it), after a tool call
// (urgent mail), and when the agent stops.
//
// Where the hub is, read when pi starts: MCP_BASE_URL, API_KEY, AGENT_ID and
// SWARM_SESSION_TASK_ID from the environment (a runner sets them), else what
// `swarm connect` was given (SWARM_CONNECT below).
import { spawn } from "node:child_process";

const SWARM_CONNECT = __SWARM_CONNECT__;

const PREFIX = `mcp__${SWARM_CONNECT.server}__`;
// Claude Code's own limit for a hook; ours answer within about two seconds.
const HOOK_TIMEOUT_MS = 10_000;

function env(name: string): string {
  return (process.env[name] ?? "").trim();
}

function hub() {
  const baseUrl = (env("MCP_BASE_URL") || SWARM_CONNECT.url).replace(/\/+$/, "");
  const key = SWARM_CONNECT.agentToken || env("API_KEY") || SWARM_CONNECT.apiKey;
  const agentId = env("AGENT_ID") || SWARM_CONNECT.agentId;
  const headers: Record<string, string> = {
    "content-type": "application/json",
    accept: "application/json, text/event-stream",
  };
  if (key) headers.authorization = `Bearer ${key}`;
  if (agentId) headers["x-agent-id"] = agentId;
  const sessionTask = env("SWARM_SESSION_TASK_ID");
  if (sessionTask) headers["x-task-id"] = sessionTask;
  return { baseUrl, key, agentId, headers };
}

type Hub = ReturnType<typeof hub>;

let rpcId = 0;

// One JSON-RPC request to the hub's /mcp; its result, or an Error saying what went wrong.
async function rpc(target: Hub, method: string, params: unknown, signal?: AbortSignal): Promise<any> {
  const response = await fetch(`${target.baseUrl}/mcp`, {
    method: "POST",
    headers: target.headers,
    body: JSON.stringify({ jsonrpc: "2.0", id: ++rpcId, method, params }),
    signal,
  });
  const text = await response.text();
  if (!response.ok) {
    throw new Error(`the swarm hub answered ${method} with HTTP ${response.status}: ${text.slice(0, 500)}`);
  }
  // A Streamable HTTP server may answer as server-sent events: the reply is the last `data:`.
  const data = (response.headers.get("content-type") ?? "").includes("text/event-stream")
    ? text.split("\n").filter((line) => line.startsWith("data:")).map((line) => line.slice(5)).pop() ?? ""
    : text;
  const message = JSON.parse(data);
  if (message.error) throw new Error(`the swarm hub refused ${method}: ${message.error.message}`);
  return message.result;
}

async function listTools(target: Hub): Promise<any[]> {
  await rpc(target, "initialize", {
    protocolVersion: "2025-06-18",
    capabilities: {},
    clientInfo: { name: "swarm-pi-extension", version: SWARM_CONNECT.version },
  });
  const tools: any[] = [];
  let cursor: string | undefined;
  do {
    const page = await rpc(target, "tools/list", cursor ? { cursor } : {});
    tools.push(...(page.tools ?? []));
    cursor = page.nextCursor;
  } while (cursor);
  return tools;
}

// pi validates arguments against the schema itself: a plain JSON Schema object, without the
// dialect marker its validator does not need.
function parameters(schema: any): any {
  const { $schema: _dialect, ...rest } = schema ?? {};
  return { type: "object", properties: {}, ...rest };
}

function resultText(result: any): string {
  const texts = (result?.content ?? [])
    .filter((block: any) => block?.type === "text")
    .map((block: any) => block.text as string);
  if (texts.length > 0) return texts.join("\n");
  return JSON.stringify(result?.structuredContent ?? result ?? {});
}

interface HookAnswer {
  code: number;
  context: string;
  stderr: string;
}

// `swarm hook <event>` with the event as Claude Code would give it on stdin. A hook that cannot
// run says nothing: it never fails the agent.
function runHook(target: Hub, event: string, input: Record<string, unknown>): Promise<HookAnswer> {
  return new Promise((resolve) => {
    const hookEnv: Record<string, string | undefined> = { ...process.env, MCP_BASE_URL: target.baseUrl };
    if (target.key) hookEnv.API_KEY = target.key;
    if (target.agentId) hookEnv.AGENT_ID = target.agentId;
    let child;
    try {
      child = spawn(SWARM_CONNECT.hookCommand, ["hook", event], {
        env: hookEnv,
        stdio: ["pipe", "pipe", "pipe"],
        timeout: HOOK_TIMEOUT_MS,
      });
    } catch {
      resolve({ code: 0, context: "", stderr: "" });
      return;
    }
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk) => (stdout += chunk));
    child.stderr.on("data", (chunk) => (stderr += chunk));
    child.on("error", () => resolve({ code: 0, context: "", stderr: "" }));
    child.on("close", (code) => {
      let context = "";
      try {
        const answer = JSON.parse(stdout.trim() || "{}");
        context = answer?.hookSpecificOutput?.additionalContext ?? answer?.systemMessage ?? "";
      } catch {
        // Not JSON: nothing for the agent.
      }
      resolve({ code: code ?? 0, context, stderr: stderr.trim() });
    });
    child.stdin.on("error", () => {});
    child.stdin.end(JSON.stringify({ hook_event_name: event, ...input }));
  });
}

export default async function (pi: any) {
  const target = hub();
  let unavailable = "";
  try {
    for (const tool of await listTools(target)) {
      pi.registerTool({
        name: `${PREFIX}${tool.name}`,
        label: tool.title ?? tool.name,
        description: tool.description ?? tool.name,
        parameters: parameters(tool.inputSchema),
        async execute(_callId: string, params: unknown, signal?: AbortSignal) {
          const result = await rpc(target, "tools/call", { name: tool.name, arguments: params ?? {} }, signal);
          const text = resultText(result);
          // pi marks a tool result as an error when the tool throws.
          if (result?.isError) throw new Error(text);
          return { content: [{ type: "text", text }], details: result?.structuredContent ?? {} };
        },
      });
    }
  } catch (error) {
    unavailable = `The swarm hub's tools (${PREFIX}*) are unavailable: ${(error as Error).message}`;
    console.error(`agent-swarm: ${unavailable}`);
  }

  const common = (ctx: any) => ({ session_id: ctx.sessionManager?.getSessionId?.() ?? "", cwd: ctx.cwd });
  let sessionContext = "";
  let sessionStarted = false;

  pi.on("session_start", async (_event: any, ctx: any) => {
    sessionStarted = true;
    sessionContext = (await runHook(target, "session-start", common(ctx))).context;
  });

  pi.on("before_agent_start", async (event: any, ctx: any) => {
    const answer = await runHook(target, "user-prompt-submit", { ...common(ctx), prompt: event.prompt ?? "" });
    const parts = [unavailable, sessionStarted ? sessionContext : "", answer.context];
    sessionContext = "";
    if (answer.code === 2) {
      // Claude Code blocks the prompt; pi cannot, so the agent is told to stop at once.
      parts.push(`Do not work on this prompt: ${answer.stderr || "the swarm hub blocked it"}`);
    }
    const context = parts.filter((part) => part).join("\n\n");
    if (!context) return undefined;
    // Into the system prompt, where Claude Code puts a hook's context: not a prompt of its own.
    return { systemPrompt: `${event.systemPrompt}\n\n${context}` };
  });

  pi.on("tool_call", async (event: any, ctx: any) => {
    const answer = await runHook(target, "pre-tool-use", {
      ...common(ctx),
      tool_name: event.toolName,
      tool_input: event.input,
    });
    if (answer.code === 2) return { block: true, reason: answer.stderr || "blocked by the swarm hub" };
    return undefined;
  });

  pi.on("tool_result", async (event: any, ctx: any) => {
    const answer = await runHook(target, "post-tool-use", { ...common(ctx), tool_name: event.toolName });
    if (!answer.context) return undefined;
    return { content: [...(event.content ?? []), { type: "text", text: answer.context }] };
  });

  // Not awaited here: pi prints its own `agent_end` event only once every handler is done, and
  // its print mode exits as soon as the prompt is, so a slow handler loses that line. pi awaits
  // `session_shutdown` before it exits: the hook ends there.
  let stopping: Promise<void> = Promise.resolve();
  pi.on("agent_end", (_event: any, ctx: any) => {
    stopping = runHook(target, "stop", common(ctx)).then((answer) => {
      if (answer.context) console.error(`agent-swarm: ${answer.context}`);
    });
  });
  pi.on("session_shutdown", async () => {
    await stopping;
  });
}
