// An agent session's output, readable: Claude Code's stream-json lines (assistant text,
// tool calls with their input folded, tool results, the final result) and Codex's
// `exec --json` events. Any line that is not one of those is shown raw.

import { h } from './ui.js';

const FOLD_OVER = 400;

/** `logs`: the hub's session log lines of a task, in order. */
export function renderSessionLog(logs) {
  if (!logs.length) return h('p', { class: 'empty' }, 'No session output yet.');
  const runs = [];
  let run = null;
  for (const log of logs) {
    if (!run || run.sessionId !== log.sessionId || run.iteration !== log.iteration) {
      run = { sessionId: log.sessionId, iteration: log.iteration, cli: log.cli, lines: [] };
      runs.push(run);
    }
    run.lines.push(log.content);
  }
  return runs.map((each) => h('section', { class: 'run' },
    h('h3', {}, `Session ${each.sessionId}, run ${each.iteration}`, each.cli ? ` (${each.cli})` : ''),
    h('ol', { class: 'log' }, each.lines.map(renderLine))));
}

export function renderLine(text) {
  let line;
  try {
    line = JSON.parse(text);
  } catch {
    return raw(text);
  }
  if (!line || typeof line !== 'object' || Array.isArray(line)) return raw(text);
  const rendered = claude(line) ?? codex(line) ?? runner(line);
  return rendered ?? raw(text);
}

function entry(kind, label, ...body) {
  return h('li', { class: `entry ${kind}` }, h('span', { class: 'label' }, label), h('div', { class: 'body' }, body));
}

function raw(text) {
  return entry('raw', 'raw', h('pre', {}, text));
}

/** Long text folded behind a summary line. */
function folded(summary, text) {
  const value = typeof text === 'string' ? text : JSON.stringify(text, null, 2);
  return h('details', {}, h('summary', {}, summary), h('pre', {}, value));
}

function prose(text) {
  const value = String(text ?? '');
  return value.length > FOLD_OVER ? folded(`${value.slice(0, 120)}…`, value) : h('p', { class: 'prose' }, value);
}

function claude(line) {
  switch (line.type) {
    case 'system':
      return entry('system', 'session', line.subtype === 'init'
        ? `started${line.model ? ` · model ${line.model}` : ''}${line.session_id ? ` · ${line.session_id}` : ''}`
        : `${line.subtype || 'system'}`);
    case 'assistant':
      return contentEntries('assistant', line.message?.content);
    case 'user':
      return contentEntries('user', line.message?.content);
    case 'result': {
      const facts = [
        line.total_cost_usd != null ? `$${Number(line.total_cost_usd).toFixed(4)}` : '',
        line.num_turns != null ? `${line.num_turns} turn(s)` : '',
        line.duration_ms != null ? `${(line.duration_ms / 1000).toFixed(1)} s` : '',
      ].filter(Boolean).join(' · ');
      return entry(line.is_error ? 'result bad' : 'result ok', line.is_error ? 'result (error)' : 'result',
        prose(line.result ?? line.subtype ?? ''), facts ? h('p', { class: 'muted' }, facts) : '');
    }
    default:
      return null;
  }
}

/** A message's content: a string, or blocks of text, tool_use, tool_result, thinking. */
function contentEntries(role, content) {
  if (typeof content === 'string') return entry(role, role === 'assistant' ? 'agent' : 'user', prose(content));
  if (!Array.isArray(content)) return null;
  const parts = content.map((block) => {
    switch (block?.type) {
      case 'text':
        return prose(block.text);
      case 'thinking':
        return folded('thinking…', block.thinking ?? '');
      case 'tool_use':
        return h('div', { class: 'tool-call' }, h('strong', {}, `▶ ${block.name}`), ' ', folded('input', block.input ?? {}));
      case 'tool_result': {
        const text = Array.isArray(block.content)
          ? block.content.map((part) => (part?.type === 'text' ? part.text : JSON.stringify(part))).join('\n')
          : String(block.content ?? '');
        const summary = `${block.is_error ? '✗ error' : '◀ result'}: ${text.split('\n')[0].slice(0, 100)}`;
        return h('div', { class: `tool-result${block.is_error ? ' bad' : ''}` }, folded(summary, text));
      }
      default:
        return folded(block?.type || 'block', block);
    }
  });
  const label = role === 'assistant' ? 'agent' : content.some((block) => block?.type === 'tool_result') ? 'tool' : 'user';
  return entry(role, label, parts);
}

function codex(line) {
  switch (line.type) {
    case 'thread.started':
      return entry('system', 'session', `started · ${line.thread_id ?? ''}`);
    case 'turn.started':
      return entry('system', 'turn', 'started');
    case 'turn.completed':
      return entry('result ok', 'turn', `completed${usage(line.usage)}`);
    case 'turn.failed':
      return entry('result bad', 'turn', `failed: ${line.error?.message ?? ''}${usage(line.usage)}`);
    case 'error':
      return entry('result bad', 'error', prose(line.message ?? ''));
    case 'item.started':
    case 'item.updated':
    case 'item.completed':
      return codexItem(line.item, line.type.slice(5));
    default:
      return null;
  }
}

function usage(tokens) {
  if (!tokens) return '';
  return ` · ${tokens.input_tokens ?? 0} in / ${tokens.output_tokens ?? 0} out tokens`;
}

function codexItem(item, phase) {
  if (!item) return null;
  switch (item.type) {
    case 'agent_message':
      return entry('assistant', 'agent', prose(item.text));
    case 'reasoning':
      return entry('assistant', 'thinking', folded('reasoning…', item.text ?? ''));
    case 'command_execution':
      return entry('tool', phase === 'completed' ? 'command' : 'command…',
        h('div', { class: 'tool-call' }, h('code', {}, item.command ?? ''),
          item.exit_code != null ? ` → exit ${item.exit_code}` : ''),
        item.aggregated_output ? folded('output', item.aggregated_output) : '');
    case 'mcp_tool_call':
      return entry('tool', 'tool', h('strong', {}, `▶ ${item.server ?? ''}/${item.tool ?? ''}`), ' ',
        folded('details', item));
    case 'file_change':
      return entry('tool', 'files', (item.changes ?? []).map((change) => h('div', {}, `${change.kind ?? ''} ${change.path ?? ''}`)));
    default:
      return entry('tool', item.type ?? 'item', folded(phase, item));
  }
}

/** What the runner itself writes around the agent's output. */
function runner(line) {
  if (line.type === 'stderr') return entry('raw', 'stderr', h('pre', {}, line.content ?? ''));
  if (typeof line.type === 'string' && line.type.endsWith('_metadata')) {
    return entry('system', 'run', `${line.trigger ?? ''} ${line.taskId ?? ''}`, line.prompt ? folded('prompt', line.prompt) : '');
  }
  return null;
}
