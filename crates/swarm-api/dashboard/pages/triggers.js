// Triggers: what turns a schedule, a webhook or a click into a task, when each fires
// next, and the two things people do with them: fire one now, enable or disable it.
// Both are the REST calls any client makes (POST /api/triggers/:name/fire, PATCH).

import { api } from '../api.js';
import { agentLink, agentsById, ago, badge, errorBox, fill, h, shortId, table } from '../ui.js';

function when(trigger) {
  switch (trigger.type) {
    case 'cron': return `${trigger.schedule} (${trigger.timezone})`;
    case 'interval': return `every ${trigger.intervalMs / 1000} s`;
    case 'once': return trigger.runAt ? `at ${new Date(trigger.runAt).toLocaleString()}` : 'once';
    case 'webhook':
    case 'github': return trigger.webhookPath || 'webhook';
    default: return 'by hand';
  }
}

function target(trigger, byId) {
  if (trigger.target === 'pool' || trigger.target === 'lead') return trigger.target;
  return agentLink(trigger.target, byId);
}

export function mount(root) {
  const body = h('div', { id: 'trigger-list' });
  const notice = h('p', { id: 'trigger-notice', class: 'muted', role: 'status' });
  fill(root, h('h1', {}, 'Triggers'), notice, body);

  async function act(path, options, done) {
    notice.classList.remove('error');
    try {
      const answer = await api(path, options);
      notice.textContent = done(answer);
      await load();
    } catch (error) {
      notice.textContent = error.message || String(error);
      notice.classList.add('error');
    }
  }

  function fireButton(trigger) {
    const button = h('button', { type: 'button', class: 'fire', 'data-trigger': trigger.name }, 'Fire now');
    button.addEventListener('click', () => act(
      `/api/triggers/${encodeURIComponent(trigger.name)}/fire`, { method: 'POST', body: {} },
      (answer) => `${trigger.name} fired: task ${shortId(answer.task.id)} created.`));
    return button;
  }

  function toggleButton(trigger) {
    const label = trigger.enabled ? 'Disable' : 'Enable';
    const button = h('button', { type: 'button', class: 'toggle', 'data-trigger': trigger.name }, label);
    button.addEventListener('click', () => act(
      `/api/triggers/${encodeURIComponent(trigger.name)}`, { method: 'PATCH', body: { enabled: !trigger.enabled } },
      () => `${trigger.name} ${trigger.enabled ? 'disabled' : 'enabled'}.`));
    return button;
  }

  async function load() {
    try {
      const [{ triggers }, { agents }] = await Promise.all([api('/api/triggers'), api('/api/agents')]);
      const byId = agentsById(agents);
      fill(body, table([
        ['Name', (trigger) => [h('strong', {}, trigger.name), trigger.description ? h('div', { class: 'muted' }, trigger.description) : '']],
        ['Type', (trigger) => trigger.type],
        ['When', (trigger) => when(trigger)],
        ['For', (trigger) => target(trigger, byId)],
        ['Session', (trigger) => trigger.sessionMode],
        ['State', (trigger) => badge(trigger.enabled ? 'enabled' : 'disabled')],
        ['Last run', (trigger) => ago(trigger.lastRunAt)],
        ['Runs', (trigger) => String(trigger.runCount)],
        ['Next run', (trigger) => trigger.nextRunAt ? new Date(trigger.nextRunAt).toLocaleString() : '-'],
        ['', (trigger) => [fireButton(trigger), ' ', toggleButton(trigger)]],
      ], triggers, {
        empty: 'No triggers yet: create one with `swarm trigger create`, POST /api/triggers or create-schedule.',
        rowAttributes: (trigger) => ({ 'data-name': trigger.name }),
      }));
    } catch (error) {
      fill(body, errorBox(error));
    }
  }

  load();
  return {
    onChange(changes) {
      // A firing creates a task; a scheduled one changes the trigger's last and next run.
      if (changes.some((change) => ['task', 'external', 'resync'].includes(change.kind))) load();
    },
  };
}
