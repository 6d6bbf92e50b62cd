// Agents: the list, and one agent's detail (its tasks, heartbeat, rename, profile).

import { api, withQuery } from '../api.js';
import { agentSpend, readCosts } from '../costs.js';
import { agentLink, agentsById, ago, badge, clip, errorBox, fill, form, h, table, taskLink } from '../ui.js';

const TASKS_LIMIT = 50;

export function mount(root, route) {
  return route.parts[1] ? mountDetail(root, route.parts[1]) : mountList(root);
}

function mountList(root) {
  const body = h('div');
  fill(root, h('h1', {}, 'Agents'), body);
  async function load() {
    try {
      const [{ agents }, reported] = await Promise.all([api('/api/agents'), api('/api/agents/credential-status')]);
      const byId = agentsById(agents);
      // The reference 1.135 runner's credential report (PUT /api/agents/:id/credential-status).
      const credentials = new Map(reported.agents.map((entry) => [entry.agentId, entry]));
      fill(body, table([
        ['Name', (agent) => [agentLink(agent.id, byId), agent.isLead ? ' ♛' : '']],
        // Why it stopped taking work, as its runner said (cleared when it takes work).
        ['Status', (agent) => [badge(agent.status),
          agent.statusReason ? h('div', { class: 'muted status-reason' }, clip(agent.statusReason, 120)) : '']],
        ['Credentials', (agent) => credentialCell(credentials.get(agent.id))],
        ['Capacity', (agent) => `${agent.capacity.current} / ${agent.capacity.max}`],
        ['Role', (agent) => agent.role || ''],
        ['Capabilities', (agent) => agent.capabilities.join(', ')],
        ['Last seen', (agent) => ago(agent.lastUpdatedAt)],
      ], agents, { empty: 'No agent has joined yet.' }));
    } catch (error) {
      fill(body, errorBox(error));
    }
  }
  load();
  return {
    onChange(changes) {
      if (changes.some((change) => ['agent', 'external', 'resync'].includes(change.kind))) load();
    },
  };
}

// Ready, or what the runner waits for; nothing when its runner never reported.
function credentialCell(entry) {
  if (!entry) return '';
  const when = h('div', { class: 'muted' }, ago(entry.lastCheckedAt));
  if (entry.ready === true) return h('span', { class: 'credentials-ready', title: 'credentials ready' }, 'ready', when);
  const missing = entry.missing.length ? `missing: ${entry.missing.join(', ')}` : 'not ready';
  return h('span', { class: 'credentials-missing' }, clip(missing, 120), when);
}

function mountDetail(root, id) {
  const header = h('div');
  const current = h('div', { id: 'agent-current' });
  const profile = h('div');
  const tasks = h('div');
  const events = h('div');
  // What it is doing first; its name and profile are edited rarely, so folded.
  const edit = h('details', { id: 'agent-edit' }, h('summary', {}, 'Edit name and profile'), profile);
  fill(root, header, h('h2', {}, 'Working on'), current, h('h2', {}, 'Tasks'), tasks, h('h2', {}, 'Events'), events,
    h('h2', {}, 'Settings'), edit);
  let editing = false;

  async function load() {
    try {
      const [agent, list, logs, all, costs, budgets, held, offers] = await Promise.all([
        api(`/api/agents/${encodeURIComponent(id)}`),
        api(withQuery('/api/tasks', { agentId: id, limit: TASKS_LIMIT })),
        api(withQuery('/api/logs', { agentId: id, limit: 20 })),
        api('/api/agents'),
        readCosts(),
        api('/api/budgets'),
        api(withQuery('/api/tasks', { agentId: id, status: 'in_progress,paused,pending', limit: TASKS_LIMIT })),
        // Offers it is deciding on (reviewing) are its own too, though not yet assigned.
        api(withQuery('/api/tasks', { status: 'offered,reviewing', limit: 1000 })),
      ]);
      const byId = agentsById(all.agents);
      fill(header,
        h('p', { class: 'crumbs' }, h('a', { href: '#/agents' }, 'Agents'), ' / '),
        h('h1', {}, agent.name, agent.isLead ? ' ♛' : '', ' ', badge(agent.status)),
        h('dl', { class: 'facts' },
          h('dt', {}, 'Id'), h('dd', {}, h('code', {}, agent.id)),
          ...(agent.statusReason
            ? [h('dt', {}, 'Stopped because'), h('dd', { class: 'status-reason' }, agent.statusReason)]
            : []),
          h('dt', {}, 'Capacity'), h('dd', {}, `${agent.capacity.current} in progress of ${agent.capacity.max}`),
          h('dt', {}, 'Spend'), h('dd', { id: 'agent-spend' }, agentSpend(costs, budgets.budgets, agent.id)),
          h('dt', {}, 'Last heartbeat'), h('dd', {}, ago(agent.lastUpdatedAt)),
          h('dt', {}, 'Joined'), h('dd', {}, ago(agent.createdAt)),
          h('dt', {}, 'Role'), h('dd', {}, agent.role || '-'),
          h('dt', {}, 'Description'), h('dd', {}, agent.description || '-'),
          h('dt', {}, 'Capabilities'), h('dd', {}, agent.capabilities.join(', ') || '-')));
      // Do not wipe a form someone is typing in because the agent heartbeated.
      if (!editing) fill(profile, editForms(agent, load));
      const doing = [...held.tasks, ...offers.tasks.filter((task) => task.offeredTo === id)];
      fill(current, table([
        ['Task', (task) => taskLink(task.id, clip(task.task, 90))],
        ['Status', (task) => badge(task.status)],
        ['Since', (task) => ago(task.lastUpdatedAt)],
      ], doing, { empty: 'Nothing: no task in progress, paused, pending or offered to it.' }));
      fill(tasks,
        h('p', { class: 'muted' }, `${list.total} task(s)`, list.total > TASKS_LIMIT ? `, newest ${TASKS_LIMIT} shown: ` : '',
          list.total > TASKS_LIMIT ? h('a', { href: `#/tasks?agentId=${id}` }, 'all of them') : ''),
        table([
          ['Task', (task) => taskLink(task.id, clip(task.task, 90))],
          ['Status', (task) => badge(task.status)],
          ['Updated', (task) => ago(task.lastUpdatedAt)],
        ], list.tasks, { empty: 'No tasks.' }));
      fill(events, table([
        ['When', (event) => ago(event.createdAt)],
        ['Event', (event) => event.eventType],
        ['Task', (event) => (event.taskId ? taskLink(event.taskId) : '')],
        ['Change', (event) => [event.oldValue, event.newValue].filter(Boolean).join(' → ')],
        ['By', (event) => agentLink(event.agentId, byId)],
      ], logs.logs, { empty: 'No events.' }));
    } catch (error) {
      fill(header, errorBox(error));
    }
  }

  function editForms(agent, reload) {
    const track = (element) => {
      element.addEventListener('focusin', () => { editing = true; });
      element.addEventListener('focusout', () => { editing = false; });
      return element;
    };
    return h('div', { class: 'forms' },
      track(form({ class: 'card', id: 'rename-form' }, [
        h('h3', {}, 'Rename'),
        h('label', {}, 'Name ', h('input', { name: 'name', value: agent.name, required: true })),
        h('button', { type: 'submit' }, 'Rename'),
      ], async (data) => {
        await api(`/api/agents/${encodeURIComponent(agent.id)}/name`, { method: 'PUT', body: { name: data.get('name') } });
        editing = false;
        await reload();
      })),
      track(form({ class: 'card', id: 'profile-form' }, [
        h('h3', {}, 'Profile'),
        h('label', {}, 'Role ', h('input', { name: 'role', value: agent.role || '' })),
        h('label', {}, 'Description ', h('input', { name: 'description', value: agent.description || '' })),
        h('label', {}, 'Capabilities (comma-separated) ', h('input', { name: 'capabilities', value: agent.capabilities.join(', ') })),
        h('button', { type: 'submit' }, 'Save profile'),
      ], async (data) => {
        const capabilities = String(data.get('capabilities')).split(',').map((item) => item.trim()).filter(Boolean);
        await api(`/api/agents/${encodeURIComponent(agent.id)}/profile`, {
          method: 'PUT',
          body: { role: data.get('role'), description: data.get('description'), capabilities },
        });
        editing = false;
        await reload();
      })));
  }

  load();
  return {
    onChange(changes) {
      if (changes.some((change) => ['agent', 'task', 'external', 'resync'].includes(change.kind))) load();
    },
  };
}
