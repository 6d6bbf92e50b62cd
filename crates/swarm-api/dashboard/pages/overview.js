// Overview: who is up and what each is doing, tasks by status, the latest events.
// Four small requests, none of which grows with the number of tasks in the hub.

import { api } from '../api.js';
import { agentLink, agentsById, ago, badge, clip, errorBox, fill, h, table, TASK_STATUSES, taskLink } from '../ui.js';

const WORKING_LIMIT = 100;
const EVENTS_LIMIT = 25;

export function mount(root) {
  const counts = h('div', { class: 'counts', id: 'task-counts' });
  const agents = h('div', { id: 'overview-agents' });
  const events = h('div', { id: 'overview-events' });
  fill(root,
    h('h1', {}, 'Overview'),
    h('h2', {}, 'Tasks'), counts,
    h('h2', {}, 'Agents'), agents,
    h('h2', {}, 'Recent events'), events);

  async function load() {
    try {
      const [stats, agentList, working, logs] = await Promise.all([
        api('/api/stats'),
        api('/api/agents'),
        api(`/api/tasks?status=in_progress&limit=${WORKING_LIMIT}`),
        api(`/api/logs?limit=${EVENTS_LIMIT}`),
      ]);
      const byId = agentsById(agentList.agents);
      fill(counts,
        h('a', { class: 'count total', href: '#/tasks' }, h('strong', {}, stats.tasks.total), 'all'),
        TASK_STATUSES.map((status) => h('a', { class: `count status-${status}`, href: `#/tasks?status=${status}`, dataset: { status } },
          h('strong', {}, stats.tasks[status] ?? 0), status.replace('_', ' '))));
      const current = new Map();
      for (const task of working.tasks) {
        if (!current.has(task.agentId)) current.set(task.agentId, []);
        current.get(task.agentId).push(task);
      }
      fill(agents, table([
        ['Agent', (agent) => [agentLink(agent.id, byId), agent.isLead ? h('span', { class: 'lead', title: 'lead' }, ' ♛') : '']],
        ['Status', (agent) => badge(agent.status)],
        ['Capacity', (agent) => `${agent.capacity.current} / ${agent.capacity.max}`],
        ['Working on', (agent) => (current.get(agent.id) || []).map((task) => h('div', {}, taskLink(task.id, clip(task.task, 80))))],
        ['Last seen', (agent) => ago(agent.lastUpdatedAt)],
      ], agentList.agents, { empty: 'No agent has joined yet. Start one with swarm worker.', rowAttributes: (agent) => ({ dataset: { agentId: agent.id } }) }));
      fill(events, table([
        ['When', (event) => ago(event.createdAt)],
        ['Event', (event) => event.eventType],
        ['Agent', (event) => agentLink(event.agentId, byId)],
        ['Task', (event) => (event.taskId ? taskLink(event.taskId) : '')],
        ['Change', (event) => [event.oldValue, event.newValue].filter(Boolean).join(' → ')],
      ], logs.logs, { empty: 'No events yet.' }));
    } catch (error) {
      fill(events, errorBox(error));
    }
  }

  load();
  // Every change writes the event log, so any change is worth a re-read here, but for
  // session output (log lines, costs), which the overview does not show.
  return {
    onChange(changes) {
      if (changes.some((change) => change.kind !== 'sessionOutput')) load();
    },
  };
}
