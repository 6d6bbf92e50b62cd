// Epics: each goal with its progress (percent of its tasks completed, counted by the
// hub from the tasks' statuses), its task counts and its tasks; and the services agents
// registered. Read-only: epics are changed by the lead (MCP) or through /api/epics.

import { api } from '../api.js';
import { epicSpend, readCosts } from '../costs.js';
import { agentLink, agentsById, ago, badge, errorBox, fill, h, table, taskLink } from '../ui.js';

function progress(epic) {
  const stats = epic.taskStats;
  return h('div', { class: 'epic-progress' },
    h('progress', { max: '100', value: String(epic.progress) }),
    h('span', { class: 'epic-percent' }, `${epic.progress}%`),
    h('div', { class: 'muted' }, `${stats.completed} of ${stats.total} done, ${stats.failed} failed, `
      + `${stats.inProgress} in progress, ${stats.pending} pending`));
}

export function mount(root) {
  const list = h('div', { id: 'epic-list' });
  const services = h('div', { id: 'service-list' });
  fill(root, h('h1', {}, 'Epics'), list, h('h2', {}, 'Services'), services);

  async function tasksOf(epic) {
    const detail = await api(`/api/epics/${epic.id}`);
    if (!detail.tasks.length) return h('span', { class: 'muted' }, 'no tasks');
    return h('ul', { class: 'epic-tasks' }, detail.tasks.map((task) =>
      h('li', {}, badge(task.status), ' ', taskLink(task.id, task.task.slice(0, 80)))));
  }

  async function load() {
    try {
      const [{ epics }, { agents }, registry, costs] = await Promise.all([
        api('/api/epics'), api('/api/agents'), api('/api/services'), readCosts()]);
      const byId = agentsById(agents);
      const tasks = new Map(await Promise.all(epics.map(async (epic) => [epic.id, await tasksOf(epic)])));
      fill(list, table([
        ['Epic', (epic) => [h('strong', {}, epic.name), h('div', { class: 'muted' }, epic.goal)]],
        ['Status', (epic) => badge(epic.status)],
        ['Progress', (epic) => progress(epic)],
        ['Tasks', (epic) => tasks.get(epic.id)],
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
