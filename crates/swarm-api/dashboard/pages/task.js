// One task: its fields, output, steering, history, cost and session log.

import { api } from '../api.js';
import { agentLink, agentsById, ago, badge, errorBox, FINISHED, fill, form, h, oneLine, shortId, table } from '../ui.js';
import { renderSessionLog } from '../session-log.js';
import { taskActions } from '../actions.js';

export function mountTask(root, id) {
  const header = h('div');
  const outcome = h('div');
  const actions = h('div');
  const cost = h('div', { id: 'task-cost' });
  const history = h('div', { id: 'task-history' });
  const log = h('div', { id: 'session-log' });
  const steerBox = h('div');
  const steering = h('div', { id: 'task-steering' });
  fill(root, header, outcome, actions, h('h2', {}, 'Steering'), steerBox, steering,
    h('h2', {}, 'Cost'), cost, h('h2', {}, 'Session log'), log, h('h2', {}, 'History'), history);
  let shownStatus = null;
  let shownFinished = null;
  let shownLines = -1;

  async function load() {
    try {
      const path = `/api/tasks/${encodeURIComponent(id)}`;
      const [task, sessionLogs, costs, agents, steered] = await Promise.all([
        api(path),
        api(`${path}/session-logs`),
        api(`/api/session-costs?taskId=${encodeURIComponent(id)}`),
        api('/api/agents'),
        api(`${path}/steering-messages`),
      ]);
      const byId = agentsById(agents.agents);
      fill(header,
        h('p', { class: 'crumbs' }, h('a', { href: '#/tasks' }, 'Tasks'), ' / ', h('code', {}, id)),
        // A webhook's whole prompt is no heading: its first line, cut at a word; the
        // whole text follows under it when there is more.
        h('h1', { class: 'task-title' }, badge(task.status), ' ', h('span', { id: 'task-heading', title: task.task }, oneLine(task.task))),
        oneLine(task.task) === task.task.trim() ? h('span', { id: 'task-text', hidden: true }, task.task)
          : h('pre', { id: 'task-text', class: 'task-full' }, task.task),
        h('dl', { class: 'facts' },
          h('dt', {}, 'Agent'), h('dd', {}, agentLink(task.agentId, byId)),
          task.offeredTo ? [h('dt', {}, 'Offered to'), h('dd', {}, agentLink(task.offeredTo, byId))] : '',
          h('dt', {}, 'Created by'), h('dd', {}, task.creatorAgentId ? agentLink(task.creatorAgentId, byId) : 'the operator'),
          h('dt', {}, 'Source'), h('dd', {}, task.source),
          h('dt', {}, 'Priority'), h('dd', {}, task.priority),
          task.tags?.length ? [h('dt', {}, 'Tags'), h('dd', {}, task.tags.join(', '))] : '',
          task.dependsOn?.length ? [h('dt', {}, 'Depends on'), h('dd', {}, task.dependsOn.map((dep) => h('a', { href: `#/tasks/${dep}` }, shortId(dep), ' ')))] : '',
          h('dt', {}, 'Created'), h('dd', {}, ago(task.createdAt)),
          h('dt', {}, 'Updated'), h('dd', {}, ago(task.lastUpdatedAt)),
          task.finishedAt ? [h('dt', {}, 'Finished'), h('dd', {}, ago(task.finishedAt))] : '',
          // What a reference runner reported: its session and how full the model's context is.
          task.provider || task.model ? [h('dt', {}, 'Session'), h('dd', {}, [task.provider, task.model].filter(Boolean).join(' '))] : '',
          task.contextUsage?.length ? [h('dt', {}, 'Context'), h('dd', { id: 'task-context' }, contextText(task.contextUsage[0]))] : '',
          // Evidence of shipped work (issue 47): the pull and merge requests the agent reported.
          task.pullRequestUrls?.length ? [h('dt', {}, 'Pull requests'), h('dd', { id: 'task-pull-requests' },
            task.pullRequestUrls.filter((url) => /^https?:\/\//.test(url)).map((url) => h('div', {}, h('a', { href: url, target: '_blank', rel: 'noopener noreferrer' }, url))))] : ''));
      fill(outcome,
        task.progress ? h('div', { class: 'note' }, h('h3', {}, 'Progress'), h('pre', {}, task.progress)) : '',
        task.output ? h('div', { class: 'note ok' }, h('h3', {}, 'Output'), h('pre', { id: 'task-output' }, task.output)) : '',
        task.failureReason ? h('div', { class: 'note bad' }, h('h3', {}, 'Failure'), h('pre', {}, task.failureReason)) : '');
      // The hand-on buttons depend on the holder being gone, not only on the status.
      const holderId = ['offered', 'reviewing'].includes(task.status) ? task.offeredTo : task.agentId;
      const holder = holderId ? byId.get(holderId) : null;
      // Rebuilt only when something they depend on changed: keeps an open confirmation.
      const shown = JSON.stringify([task.status, task.priority, task.task, holder?.status,
        agents.agents.map((agent) => [agent.id, agent.name, agent.status])]);
      if (shownStatus !== shown) {
        shownStatus = shown;
        fill(actions, taskActions(task, agents.agents, { reload: load, open: (other) => { location.hash = `#/tasks/${other}`; } }));
      }
      // The box keeps what is being typed: rebuilt only when the task finishes.
      const finished = FINISHED.includes(task.status);
      if (shownFinished !== finished) {
        shownFinished = finished;
        fill(steerBox, steerForm(id, finished, load));
      }
      fill(steering, table([
        ['When', (message) => ago(message.createdAt)],
        ['Mode', (message) => message.mode],
        ['Status', (message) => (message.promotedTaskId
          ? ['follow-up ', h('a', { href: `#/tasks/${message.promotedTaskId}` }, shortId(message.promotedTaskId))]
          : message.status)],
        ['From', (message) => (message.createdByAgentId ? agentLink(message.createdByAgentId, byId) : 'the operator')],
        ['Message', (message) => message.message],
      ], steered.messages, { empty: 'No steering sent.' }));
      fill(cost, costSummary(costs.costs));
      // Re-render the log only when it grew: keeps open <details> open while live.
      if (sessionLogs.logs.length !== shownLines) {
        shownLines = sessionLogs.logs.length;
        fill(log, renderSessionLog(sessionLogs.logs));
      }
      fill(history, table([
        ['When', (event) => ago(event.createdAt)],
        ['Event', (event) => event.eventType],
        ['Change', (event) => [event.oldValue, event.newValue].filter(Boolean).join(' → ')],
        ['By', (event) => agentLink(event.agentId, byId)],
      ], task.logs, { empty: 'No history.' }));
    } catch (error) {
      fill(header, errorBox(error));
    }
  }

  load();
  return {
    onChange(changes) {
      if (changes.some((change) => change.taskId === id || change.kind === 'resync' || change.kind === 'external')) load();
    },
  };
}

// Words for the agent working the task (POST /api/tasks/:id/steer): at its next tool call
// or when its turn ends; for a finished task, a follow-up task for the same agent.
function steerForm(id, finished, reload) {
  return form({ class: 'inline', id: 'steer-task' }, [
    h('textarea', { name: 'message', rows: 2, cols: 60, required: true,
      placeholder: finished ? 'the task is finished: this becomes a follow-up task for its agent' : 'words for the agent working this task' }),
    finished ? '' : h('select', { name: 'mode' },
      h('option', { value: 'queue' }, 'when its turn ends'),
      h('option', { value: 'steer' }, 'at its next tool call')),
    h('button', { type: 'submit' }, finished ? 'Send as follow-up' : 'Steer'),
  ], async (data, element) => {
    const message = String(data.get('message') || '').trim();
    const mode = String(data.get('mode') || 'queue');
    await api(`/api/tasks/${encodeURIComponent(id)}/steer`, { method: 'POST', body: { message, mode, source: 'ui' } });
    element.reset();
    await reload();
  });
}

function costSummary(costs) {
  if (!costs.length) return h('p', { class: 'empty' }, 'No cost reported.');
  const sum = (field) => costs.reduce((total, cost) => total + (cost[field] || 0), 0);
  const usd = sum('totalCostUsd');
  return h('div', {},
    h('p', { class: 'cost' }, h('strong', {}, `$${usd.toFixed(4)}`),
      ` over ${costs.length} run(s): ${sum('inputTokens')} input, ${sum('outputTokens')} output, ${sum('cacheReadTokens')} cache-read tokens, ${sum('numTurns')} turn(s)`),
    table([
      ['Session', (cost) => h('code', {}, cost.sessionId)],
      ['Model', (cost) => cost.model || ''],
      ['USD', (cost) => cost.totalCostUsd.toFixed(4)],
      ['Tokens in / out', (cost) => `${cost.inputTokens ?? '-'} / ${cost.outputTokens ?? '-'}`],
      ['Duration', (cost) => (cost.durationMs == null ? '' : `${(cost.durationMs / 1000).toFixed(1)} s`)],
      ['Error', (cost) => (cost.isError ? 'yes' : '')],
      ['When', (cost) => ago(cost.createdAt)],
    ], costs));
}

// The newest context-usage snapshot as a person reads it: "62 % (124,000 of 200,000 tokens)".
function contextText(snapshot) {
  const used = snapshot.contextUsedTokens, total = snapshot.contextTotalTokens;
  const percent = snapshot.contextPercent ?? (used != null && total ? (100 * used) / total : null);
  const tokens = used != null && total ? ` (${Math.round(used).toLocaleString()} of ${Math.round(total).toLocaleString()} tokens)` : '';
  return percent != null ? `${Math.round(percent)} %${tokens}` : (snapshot.eventType ?? 'reported');
}
