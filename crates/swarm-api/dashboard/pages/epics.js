// Epics: each goal with its progress (percent of its tasks completed, counted by the
// hub from the tasks' statuses), its task counts and its tasks; and the services agents
// registered. Read-only: epics are changed by the lead (MCP) or through /api/epics.

import { api } from '../api.js';
import { epicSpend, readCosts } from '../costs.js';
import { agentLink, agentsById, ago, badge, errorBox, fill, h, oneLine, table, taskLink } from '../ui.js';

// The counts of every status of the epic's tasks, so they add up to its total (the
// hub's taskStats counts only completed, failed, in_progress and pending).
const WAITING = ['backlog', 'unassigned', 'offered', 'reviewing', 'pending'];

function progress(epic, tasks) {
  const count = (statuses) => tasks.filter((task) => statuses.includes(task.status)).length;
  const parts = [
    [count(['completed']), 'done'], [count(['in_progress']), 'in progress'], [count(['paused']), 'paused'],
    [count(WAITING), 'waiting'], [count(['failed']), 'failed'], [count(['cancelled']), 'cancelled'],
  ].filter(([n]) => n > 0).map(([n, what]) => `${n} ${what}`);
  return h('div', { class: 'epic-progress' },
    h('progress', { max: '100', value: String(epic.progress) }),
    h('span', { class: 'epic-percent' }, `${epic.progress}%`),
    h('div', { class: 'muted epic-counts' }, `${count(['completed'])} of ${tasks.length} done`
      + (parts.length ? `: ${parts.join(', ')}` : '')));
}

export function mount(root) {
  const list = h('div', { id: 'epic-list' });
  const services = h('div', { id: 'service-list' });
  fill(root, h('h1', {}, 'Epics'), list, h('h2', {}, 'Services'), services);

  // The hub lists exactly the tasks its counts describe, in one snapshot.
  const tasksOf = async (epic) => (await api(`/api/epics/${epic.id}`)).tasks;
  const taskList = (tasks) => (tasks.length
    ? h('ul', { class: 'epic-tasks' }, tasks.map((task) => h('li', {}, badge(task.status), ' ', taskLink(task.id, oneLine(task.task, 80)))))
    : h('span', { class: 'muted' }, 'no tasks'));

  async function load() {
    try {
      const [{ epics }, { agents }, registry, costs] = await Promise.all([
        api('/api/epics'), api('/api/agents'), api('/api/services'), readCosts()]);
      const byId = agentsById(agents);
      const tasks = new Map(await Promise.all(epics.map(async (epic) => [epic.id, await tasksOf(epic)])));
      fill(list, table([
        ['Epic', (epic) => [h('strong', {}, epic.name), h('div', { class: 'muted' }, epic.goal)]],
        ['Status', (epic) => badge(epic.status)],
        ['Progress', (epic) => progress(epic, tasks.get(epic.id))],
        ['Tasks', (epic) => taskList(tasks.get(epic.id))],
        ['Spend', (epic) => epicSpend(costs, epic.id)],
        ['Lead', (epic) => agentLink(epic.leadAgentId, byId)],
        ['Priority', (epic) => String(epic.priority)],
        ['Updated', (epic) => ago(epic.lastUpdatedAt)],
      ], epics, {
        empty: 'No epics yet: the lead creates them with create-epic, or POST /api/epics.',
        rowAttributes: (epic) => ({ 'data-id': epic.id, 'data-name': epic.name }),
      }));
      fill(services, table([
        ['Service', (service) => [h('strong', {}, service.name),
          service.description ? h('div', { class: 'muted' }, service.description) : '']],
        ['Agent', (service) => agentLink(service.agentId, byId)],
        ['Status', (service) => badge(service.status)],
        ['Port', (service) => String(service.port)],
        ['Script', (service) => h('code', {}, [service.interpreter, service.script].filter(Boolean).join(' '))],
        ['Updated', (service) => ago(service.lastUpdatedAt)],
      ], registry.services, {
        empty: 'No services registered: agents register theirs with register-service.',
        rowAttributes: (service) => ({ 'data-id': service.id }),
      }));
    } catch (error) {
      fill(list, errorBox(error));
    }
  }

  load();
  return {
    onChange(changes) {
      // A task's status moves its epic's progress; epics and services announce themselves.
      if (changes.some((change) => ['epic', 'service', 'task', 'external', 'resync'].includes(change.kind))) load();
    },
  };
}
